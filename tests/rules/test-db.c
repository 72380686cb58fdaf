/* SPDX-License-Identifier: MIT */
/* The rules table: created when missing, rows replaced on the next write, one savepoint that
 * also nests in a caller's transaction; written with the rules the database's rows name. */
#include <errno.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "p2pguard/rules.h"
#include "rules-test.h"

static const char *entry(const char *id, const char *title)
{
	static char buf[2][1024];
	static int next;
	char *out = buf[next++ % 2];
	snprintf(out, sizeof(buf[0]),
		 "{\"id\": \"%s\", \"signature\": \"%s\", \"root_cause\": \"r\", \"codes\": [217, "
		 "704], \"match\": {\"status\": [217]}, \"official_doc_url\": \"https://x\", "
		 "\"confidence\": 0.75, \"workarounds\": [{\"action\": \"low\", \"success_rate\": "
		 "0.2}, {\"action\": \"high\", \"how\": \"h\", \"success_rate\": 0.9}], "
		 "\"examples\": {\"matches\": [{}], \"near_misses\": [{}]}}",
		 id, title);
	return out;
}

static int ids_named(sqlite3 *db, const char *like)
{
	sqlite3_stmt *st;
	int n = -1;
	if (sqlite3_prepare_v2(db, "SELECT count(*) FROM rules WHERE id LIKE ?1", -1, &st, NULL) ==
		SQLITE_OK &&
	    sqlite3_bind_text(st, 1, like, -1, SQLITE_STATIC) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	return n;
}

static int count_rows(sqlite3 *db)
{
	return ids_named(db, "%");
}

static void test_write(void)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	struct p2pg_ruleset *rs = p2pg_ruleset_new();
	const char *a = entry("t/a", "first");

	check_int(sqlite3_open(":memory:", &db), SQLITE_OK);
	check_int(p2pg_ruleset_add_text(rs, "a.json", a, strlen(a), NULL, NULL), 0);
	check_int(p2pg_rules_write_sqlite(db, rs), 0);
	check_int(count_rows(db), 1);

	check_int(sqlite3_prepare_v2(db,
				     "SELECT id, title, error_codes, root_cause, advice, doc_url, "
				     "confidence, json FROM rules",
				     -1, &st, NULL),
		  SQLITE_OK);
	check_int(sqlite3_step(st), SQLITE_ROW);
	check_str((const char *)sqlite3_column_text(st, 0), "t/a");
	check_str((const char *)sqlite3_column_text(st, 1), "first");
	check_str((const char *)sqlite3_column_text(st, 2), "[217,704]");
	check_str((const char *)sqlite3_column_text(st, 3), "r");
	/* Best first. */
	check_str((const char *)sqlite3_column_text(st, 4),
		  "high (90% success): h\nlow (20% success)");
	check_str((const char *)sqlite3_column_text(st, 5), "https://x");
	check(sqlite3_column_double(st, 6) == 0.75);
	check_str((const char *)sqlite3_column_text(st, 7), a);
	sqlite3_finalize(st);

	/* Again, with a changed title, inside the caller's transaction: replaced, not added. */
	p2pg_ruleset_free(rs);
	rs = p2pg_ruleset_new();
	const char *b = entry("t/a", "second");
	check_int(p2pg_ruleset_add_text(rs, "a.json", b, strlen(b), NULL, NULL), 0);
	check_int(sqlite3_exec(db, "BEGIN", NULL, NULL, NULL), SQLITE_OK);
	check_int(p2pg_rules_write_sqlite(db, rs), 0);
	check_int(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
	check_int(count_rows(db), 1);
	check_int(sqlite3_prepare_v2(db, "SELECT title FROM rules", -1, &st, NULL), SQLITE_OK);
	check_int(sqlite3_step(st), SQLITE_ROW);
	check_str((const char *)sqlite3_column_text(st, 0), "second");
	sqlite3_finalize(st);

	/* The codes are a JSON array SQLite can take apart. */
	check_int(sqlite3_prepare_v2(db,
				     "SELECT count(*) FROM rules, json_each(rules.error_codes) "
				     "WHERE json_each.value = 704",
				     -1, &st, NULL),
		  SQLITE_OK);
	check_int(sqlite3_step(st), SQLITE_ROW);
	check_int(sqlite3_column_int(st, 0), 1);
	sqlite3_finalize(st);

	check_int(p2pg_rules_write_sqlite(NULL, rs), -EINVAL);
	check_int(p2pg_rules_write_sqlite(db, NULL), -EINVAL);
	p2pg_ruleset_free(rs);
	sqlite3_close(db);
}

static void test_readonly(void)
{
	sqlite3 *db;
	struct p2pg_ruleset *rs = p2pg_ruleset_new();
	const char *a = entry("t/a", "first");
	check_int(p2pg_ruleset_add_text(rs, "a.json", a, strlen(a), NULL, NULL), 0);
	char path[] = "/tmp/p2pg-rules-db-XXXXXX";
	int fd = mkstemp(path);
	check(fd >= 0);
	close(fd);
	check_int(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	check_int(p2pg_rules_write_sqlite(db, rs), -EROFS);
	sqlite3_close(db);
	unlink(path);
	p2pg_ruleset_free(rs);
}

static void exec(sqlite3 *db, const char *sql)
{
	check_int(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
}

static void test_named(void)
{
	sqlite3 *db;
	struct p2pg_ruleset *rs = p2pg_ruleset_new();
	const char *ids[] = {"t/a", "t/b", "t/c"};
	for (size_t k = 0; k < 3; k++) {
		const char *text = entry(ids[k], ids[k]);
		check_int(p2pg_ruleset_add_text(rs, "x.json", text, strlen(text), NULL, NULL), 0);
	}
	check_int(sqlite3_open(":memory:", &db), SQLITE_OK);
	/* Only failures: a database without the other naming tables is read all the same. */
	exec(db, "CREATE TABLE failures(id INTEGER PRIMARY KEY, rule_id TEXT)");
	struct p2pg_rules_named marks = {{0}};

	check_int(p2pg_rules_write_named_sqlite(db, rs, &marks), 0);
	check_int(count_rows(db), 0);

	/* One rule named twice, one no rule of the set has (another process's folder), none. */
	exec(db, "INSERT INTO failures(rule_id) VALUES ('t/a'), ('t/a'), ('site/x'), (NULL)");
	check_int(p2pg_rules_write_named_sqlite(db, rs, &marks), 1);
	check_int(count_rows(db), 1);
	check_int(ids_named(db, "t/a"), 1);
	check(marks.upto[0] == 4);

	/* Rows already read are not read again: a row deleted since is not written back. */
	exec(db, "DELETE FROM rules");
	check_int(p2pg_rules_write_named_sqlite(db, rs, &marks), 0);
	check_int(count_rows(db), 0);
	exec(db, "INSERT INTO failures(rule_id) VALUES ('t/b')");
	check_int(p2pg_rules_write_named_sqlite(db, rs, &marks), 1);
	check_int(ids_named(db, "t/b"), 1);

	/* A reader from the start (another process) writes what is missing, and keeps a row that is
	 * there: INSERT OR IGNORE, the rowid unchanged. */
	struct p2pg_rules_named fresh = {{0}};
	check_int(p2pg_rules_write_named_sqlite(db, rs, &fresh), 1);
	check_int(ids_named(db, "t/%"), 2);

	/* Stalls name rules too. */
	exec(db, "CREATE TABLE stalls(id INTEGER PRIMARY KEY, rule_id TEXT)");
	exec(db, "INSERT INTO stalls(rule_id) VALUES ('t/c')");
	check_int(p2pg_rules_write_named_sqlite(db, rs, &marks), 1);
	check_int(ids_named(db, "t/c"), 1);

	check_int(p2pg_rules_write_named_sqlite(NULL, rs, &marks), -EINVAL);
	check_int(p2pg_rules_write_named_sqlite(db, NULL, &marks), -EINVAL);
	check_int(p2pg_rules_write_named_sqlite(db, rs, NULL), -EINVAL);
	p2pg_ruleset_free(rs);
	sqlite3_close(db);
}

/* More missing rules than one call writes: the rest come with the next call, none is skipped. */
static void test_named_batches(void)
{
	sqlite3 *db;
	struct p2pg_ruleset *rs = p2pg_ruleset_new();
	char id[32];
	check_int(sqlite3_open(":memory:", &db), SQLITE_OK);
	exec(db, "CREATE TABLE failures(id INTEGER PRIMARY KEY, rule_id TEXT)");
	for (int k = 0; k < 100; k++) {
		snprintf(id, sizeof(id), "t/r%d", k);
		const char *text = entry(id, id);
		check_int(p2pg_ruleset_add_text(rs, "x.json", text, strlen(text), NULL, NULL), 0);
		char sql[96];
		snprintf(sql, sizeof(sql), "INSERT INTO failures(rule_id) VALUES ('%s')", id);
		exec(db, sql);
	}
	struct p2pg_rules_named marks = {{0}};
	int first = p2pg_rules_write_named_sqlite(db, rs, &marks);
	check(first > 0 && first < 100);
	check_int(p2pg_rules_write_named_sqlite(db, rs, &marks), 100 - first);
	check_int(count_rows(db), 100);
	check_int(p2pg_rules_write_named_sqlite(db, rs, &marks), 0);
	p2pg_ruleset_free(rs);
	sqlite3_close(db);
}

/* The set that diagnosed the rows: one row per set, however often noted. */
static void test_note_set(void)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	struct p2pg_ruleset *rs = p2pg_ruleset_new();
	const char *a = entry("t/a", "first");
	check_int(p2pg_ruleset_add_text(rs, "a.json", a, strlen(a), NULL, NULL), 0);
	check_int(sqlite3_open(":memory:", &db), SQLITE_OK);
	check_int(p2pg_rules_note_set_sqlite(db, rs), 0);
	check_int(p2pg_rules_note_set_sqlite(db, rs), 0);
	check_int(
	    sqlite3_prepare_v2(db, "SELECT count(*), max(rules) FROM rule_sets", -1, &st, NULL),
	    SQLITE_OK);
	check_int(sqlite3_step(st), SQLITE_ROW);
	check_int(sqlite3_column_int(st, 0), 1);
	check_int(sqlite3_column_int(st, 1), 1);
	sqlite3_finalize(st);
	check_int(count_rows(db), 0);
	check_int(p2pg_rules_note_set_sqlite(NULL, rs), -EINVAL);
	p2pg_ruleset_free(rs);
	sqlite3_close(db);
}

int main(void)
{
	RUN(test_write);
	RUN(test_readonly);
	RUN(test_named);
	RUN(test_named_batches);
	RUN(test_note_set);
	return test_failures ? 1 : 0;
}
