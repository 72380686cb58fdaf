/* SPDX-License-Identifier: MIT */
/*
 * The rule set as a table next to the recorded failures, so that a query over the log can join a
 * failure's rule id to its title and advice without the rules folder at hand.
 */
#include "p2pguard/rules.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "cleanup.h"

static int errno_from_sqlite(int rc)
{
	switch (rc & 0xff) {
	case SQLITE_NOMEM:
		return -ENOMEM;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return -EBUSY;
	case SQLITE_READONLY:
		return -EROFS;
	default:
		return -EIO;
	}
}

/* "[217,704]": SQLite's JSON functions (json_each) can take the list apart. */
static void codes_json(const struct p2pg_rule *rule, char *buf, size_t len)
{
	const int *codes = NULL;
	size_t n = p2pg_rule_codes(rule, &codes), pos = 0;

	pos += (size_t)snprintf(buf, len, "[");
	for (size_t k = 0; k < n && pos < len; k++)
		pos += (size_t)snprintf(buf + pos, len - pos, "%s%d", k ? "," : "", codes[k]);
	if (pos < len)
		snprintf(buf + pos, len - pos, "]");
}

static int bind_text(sqlite3_stmt *st, int index, const char *text)
{
	if (!text)
		return sqlite3_bind_null(st, index);
	return sqlite3_bind_text(st, index, text, -1, SQLITE_STATIC);
}

static int create_tables(sqlite3 *db)
{
	return sqlite3_exec(db,
			    "CREATE TABLE IF NOT EXISTS rules("
			    "id TEXT PRIMARY KEY, title TEXT, error_codes TEXT, root_cause TEXT, "
			    "advice TEXT, doc_url TEXT, confidence REAL, json TEXT);"
			    "CREATE TABLE IF NOT EXISTS rule_sets(fingerprint INTEGER PRIMARY KEY, "
			    "rules INTEGER)",
			    NULL, NULL, NULL);
}

static int insert_all(sqlite3 *db, const struct p2pg_ruleset *rs)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	int rc =
	    sqlite3_prepare_v2(db,
			       "INSERT OR REPLACE INTO rules(id, title, error_codes, root_cause, "
			       "advice, doc_url, confidence, json) VALUES (?1, ?2, ?3, ?4, ?5, ?6, "
			       "?7, ?8)",
			       -1, &st, NULL);
	if (rc != SQLITE_OK)
		return rc;

	for (size_t k = 0; k < p2pg_ruleset_count(rs); k++) {
		const struct p2pg_rule *rule = p2pg_ruleset_at(rs, k);
		char codes[512];

		codes_json(rule, codes, sizeof(codes));
		if ((rc = bind_text(st, 1, p2pg_rule_id(rule))) != SQLITE_OK ||
		    (rc = bind_text(st, 2, p2pg_rule_title(rule))) != SQLITE_OK ||
		    (rc = bind_text(st, 3, codes)) != SQLITE_OK ||
		    (rc = bind_text(st, 4, p2pg_rule_root_cause(rule))) != SQLITE_OK ||
		    (rc = bind_text(st, 5, p2pg_rule_advice(rule))) != SQLITE_OK ||
		    (rc = bind_text(st, 6, p2pg_rule_doc_url(rule))) != SQLITE_OK ||
		    (rc = sqlite3_bind_double(st, 7, p2pg_rule_confidence(rule))) != SQLITE_OK ||
		    (rc = bind_text(st, 8, p2pg_rule_json(rule))) != SQLITE_OK)
			return rc;
		rc = sqlite3_step(st);
		if (rc != SQLITE_DONE)
			return rc;
		sqlite3_reset(st);
		sqlite3_clear_bindings(st);
	}
	return SQLITE_OK;
}

/* FNV-1a over every rule's id and JSON text: the same set gives the same number. */
static uint64_t fingerprint(const struct p2pg_ruleset *rs)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t k = 0; k < p2pg_ruleset_count(rs); k++) {
		const struct p2pg_rule *rule = p2pg_ruleset_at(rs, k);
		const char *parts[2] = {p2pg_rule_id(rule), p2pg_rule_json(rule)};
		for (int j = 0; j < 2; j++) {
			for (const char *c = parts[j] ? parts[j] : ""; *c; c++)
				h = (h ^ (unsigned char)*c) * 0x100000001b3ull;
			h = (h ^ 0xff) * 0x100000001b3ull; /* between fields, never in text */
		}
	}
	return h;
}

/* Whether this set was written to the database already and its rows are still there: every
 * process that opens the database would otherwise write all of it again (1.5 MiB of pages with the
 * built-in rules, which a database on a nearly full disk cannot take). */
static int written_already(sqlite3 *db, uint64_t fp, bool *yes)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	*yes = false;
	int rc = sqlite3_prepare_v2(db,
				    "SELECT 1 FROM rule_sets WHERE fingerprint = ?1 AND "
				    "(SELECT count(*) FROM rules) >= rules",
				    -1, &st, NULL);
	if (rc != SQLITE_OK)
		return rc;
	sqlite3_bind_int64(st, 1, (sqlite3_int64)fp);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		*yes = true;
	else if (rc != SQLITE_DONE)
		return rc;
	return SQLITE_OK;
}

static int note_written(sqlite3 *db, const struct p2pg_ruleset *rs, uint64_t fp)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(
	    db, "INSERT OR REPLACE INTO rule_sets(fingerprint, rules) VALUES (?1, ?2)", -1, &st,
	    NULL);
	if (rc != SQLITE_OK)
		return rc;
	sqlite3_bind_int64(st, 1, (sqlite3_int64)fp);
	sqlite3_bind_int64(st, 2, (sqlite3_int64)p2pg_ruleset_count(rs));
	rc = sqlite3_step(st);
	return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

int p2pg_rules_write_sqlite(sqlite3 *db, const struct p2pg_ruleset *rs)
{
	int rc;

	if (!db || !rs)
		return -EINVAL;
	/* A savepoint rather than BEGIN: it nests inside a transaction the caller may hold. */
	rc = sqlite3_exec(db, "SAVEPOINT p2pg_rules", NULL, NULL, NULL);
	if (rc != SQLITE_OK)
		return errno_from_sqlite(rc);
	uint64_t fp = fingerprint(rs);
	bool done = false;
	rc = create_tables(db);
	if (rc == SQLITE_OK)
		rc = written_already(db, fp, &done);
	if (rc == SQLITE_OK && !done) {
		rc = insert_all(db, rs);
		if (rc == SQLITE_OK)
			rc = note_written(db, rs, fp);
	}
	if (rc != SQLITE_OK) {
		sqlite3_exec(db, "ROLLBACK TO p2pg_rules", NULL, NULL, NULL);
		sqlite3_exec(db, "RELEASE p2pg_rules", NULL, NULL, NULL);
		return errno_from_sqlite(rc);
	}
	rc = sqlite3_exec(db, "RELEASE p2pg_rules", NULL, NULL, NULL);
	if (rc != SQLITE_OK) {
		sqlite3_exec(db, "ROLLBACK TO p2pg_rules", NULL, NULL, NULL);
		sqlite3_exec(db, "RELEASE p2pg_rules", NULL, NULL, NULL);
		return errno_from_sqlite(rc);
	}
	return 0;
}
