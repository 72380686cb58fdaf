/* SPDX-License-Identifier: MIT */
/*
 * The rules next to the recorded failures, so that a query over the log can join a failure's rule
 * id to its title and advice without the rules folder at hand: the entries the database's rows
 * name, and which rule sets diagnosed them.
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

static int insert_rule(sqlite3_stmt *st, const struct p2pg_rule *rule)
{
	char codes[512];
	int rc;

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
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* verb: "INSERT OR REPLACE" (the set's text wins) or "INSERT OR IGNORE" (a row another process
 * wrote in the meantime stays). */
static int prepare_insert(sqlite3 *db, const char *verb, sqlite3_stmt **st)
{
	char sql[256];
	snprintf(sql, sizeof(sql),
		 "%s INTO rules(id, title, error_codes, root_cause, advice, doc_url, "
		 "confidence, json) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
		 verb);
	return sqlite3_prepare_v2(db, sql, -1, st, NULL);
}

static int insert_all(sqlite3 *db, const struct p2pg_ruleset *rs)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	int rc = prepare_insert(db, "INSERT OR REPLACE", &st);
	for (size_t k = 0; rc == SQLITE_OK && k < p2pg_ruleset_count(rs); k++)
		rc = insert_rule(st, p2pg_ruleset_at(rs, k));
	return rc;
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

/* Runs body(db, arg) in a savepoint: all of it or nothing, inside a caller's transaction too. */
static int in_savepoint(sqlite3 *db, int (*body)(sqlite3 *, void *), void *arg)
{
	int rc = sqlite3_exec(db, "SAVEPOINT p2pg_rules", NULL, NULL, NULL);
	if (rc != SQLITE_OK)
		return errno_from_sqlite(rc);
	rc = body(db, arg);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(db, "RELEASE p2pg_rules", NULL, NULL, NULL);
	if (rc != SQLITE_OK) {
		sqlite3_exec(db, "ROLLBACK TO p2pg_rules", NULL, NULL, NULL);
		sqlite3_exec(db, "RELEASE p2pg_rules", NULL, NULL, NULL);
		return errno_from_sqlite(rc);
	}
	return 0;
}

static int write_all(sqlite3 *db, void *rs)
{
	int rc = create_tables(db);
	return rc == SQLITE_OK ? insert_all(db, rs) : rc;
}

int p2pg_rules_write_sqlite(sqlite3 *db, const struct p2pg_ruleset *rs)
{
	if (!db || !rs)
		return -EINVAL;
	return in_savepoint(db, write_all, (void *)rs);
}

static int note_set(sqlite3 *db, void *rs)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	int rc = create_tables(db);
	if (rc == SQLITE_OK)
		rc =
		    sqlite3_prepare_v2(db,
				       "INSERT OR IGNORE INTO rule_sets(fingerprint, rules) VALUES "
				       "(?1, ?2)",
				       -1, &st, NULL);
	if (rc != SQLITE_OK)
		return rc;
	sqlite3_bind_int64(st, 1, (sqlite3_int64)fingerprint(rs));
	sqlite3_bind_int64(st, 2, (sqlite3_int64)p2pg_ruleset_count(rs));
	rc = sqlite3_step(st);
	return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

int p2pg_rules_note_set_sqlite(sqlite3 *db, const struct p2pg_ruleset *rs)
{
	if (!db || !rs)
		return -EINVAL;
	return in_savepoint(db, note_set, (void *)rs);
}

/* The tables whose rows carry a rule_id, in the order of struct p2pg_rules_named's marks. */
static const char *const naming_tables[P2PG_RULES_NAMING_TABLES] = {"failures", "stalls",
								    "nccl_stalls"};

/* Rules one call writes at most; a table with more missing keeps its mark for the next call. */
#define NAMED_BATCH 64

struct named_batch {
	const struct p2pg_rule *rules[NAMED_BATCH];
	size_t n;
};

static bool batch_has(const struct named_batch *b, const struct p2pg_rule *rule)
{
	for (size_t k = 0; k < b->n; k++)
		if (b->rules[k] == rule)
			return true;
	return false;
}

/* The largest rowid of table, or -1 when the table is missing (a database of an older guard, a
 * caller's own). */
static sqlite3_int64 last_rowid(sqlite3 *db, const char *table)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	char sql[96];
	snprintf(sql, sizeof(sql), "SELECT coalesce(max(rowid), 0) FROM \"%s\"", table);
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK ||
	    sqlite3_step(st) != SQLITE_ROW)
		return -1;
	return sqlite3_column_int64(st, 0);
}

/* Adds to b the rules of rs that rows (after, upto] of table name and the rules table lacks.
 * Returns SQLITE_OK, SQLITE_FULL when b filled up before the last of them, or SQLite's error. */
static int collect_missing(sqlite3 *db, const struct p2pg_ruleset *rs, const char *table,
			   sqlite3_int64 after, sqlite3_int64 upto, struct named_batch *b)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	char sql[256];
	snprintf(sql, sizeof(sql),
		 "SELECT DISTINCT rule_id FROM \"%s\" WHERE rowid > ?1 AND rowid <= ?2 AND "
		 "rule_id IS NOT NULL AND rule_id NOT IN (SELECT id FROM rules)",
		 table);
	int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
	if (rc != SQLITE_OK)
		return rc;
	sqlite3_bind_int64(st, 1, after);
	sqlite3_bind_int64(st, 2, upto);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *id = (const char *)sqlite3_column_text(st, 0);
		/* A rule of another process's own folder: that process writes it. */
		const struct p2pg_rule *rule = id ? p2pg_ruleset_find(rs, id) : NULL;
		if (!rule || batch_has(b, rule))
			continue;
		if (b->n == NAMED_BATCH)
			return SQLITE_FULL;
		b->rules[b->n++] = rule;
	}
	return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static int insert_batch(sqlite3 *db, void *arg)
{
	const struct named_batch *b = arg;
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	int rc = prepare_insert(db, "INSERT OR IGNORE", &st);
	for (size_t k = 0; rc == SQLITE_OK && k < b->n; k++)
		rc = insert_rule(st, b->rules[k]);
	return rc;
}

int p2pg_rules_write_named_sqlite(sqlite3 *db, const struct p2pg_ruleset *rs,
				  struct p2pg_rules_named *named)
{
	if (!db || !rs || !named)
		return -EINVAL;
	int rc = create_tables(db);
	if (rc != SQLITE_OK)
		return errno_from_sqlite(rc);

	struct named_batch batch = {.n = 0};
	long long upto[P2PG_RULES_NAMING_TABLES];
	for (size_t t = 0; t < P2PG_RULES_NAMING_TABLES; t++) {
		upto[t] = named->upto[t];
		sqlite3_int64 last = last_rowid(db, naming_tables[t]);
		if (last <= named->upto[t])
			continue; /* nothing new (or no such table) */
		rc = collect_missing(db, rs, naming_tables[t], named->upto[t], last, &batch);
		if (rc == SQLITE_FULL)
			continue; /* this table is read again next time */
		if (rc != SQLITE_OK)
			return errno_from_sqlite(rc);
		upto[t] = last;
	}
	if (batch.n > 0) {
		int r = in_savepoint(db, insert_batch, &batch);
		if (r < 0)
			return r;
	}
	memcpy(named->upto, upto, sizeof(upto));
	return (int)batch.n;
}
