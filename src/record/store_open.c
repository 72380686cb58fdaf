/* SPDX-License-Identifier: MIT */
/* Opening a database: the schema, and the columns added to it since a database may have been made.
 */
#include "store.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cleanup.h"

static bool has_column(sqlite3 *db, const char *table, const char *column)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	char sql[128];
	snprintf(sql, sizeof(sql), "SELECT %s FROM %s LIMIT 0", column, table);
	return sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK;
}

/* Columns added to the schema after a database may have been made: CREATE TABLE IF NOT EXISTS
 * leaves an existing table as it was. */
static int add_missing_columns(sqlite3 *db, char **msg)
{
	static const struct {
		const char *table, *column, *type;
	} added[] = {
	    {"crashes", "python_stack", "TEXT"},
	    {"processes", "records_invalid", "INTEGER NOT NULL DEFAULT 0"},
	    /* the `p2pguard run` that started the process (P2PGUARD_RUN_ID), NULL otherwise */
	    {"processes", "run_id", "TEXT"},
	};
	for (size_t k = 0; k < sizeof(added) / sizeof(added[0]); k++) {
		if (has_column(db, added[k].table, added[k].column))
			continue;
		char sql[160];
		snprintf(sql, sizeof(sql), "ALTER TABLE %s ADD COLUMN %s %s", added[k].table,
			 added[k].column, added[k].type);
		int rc = sqlite3_exec(db, sql, NULL, NULL, msg);
		/* Another process may have added it meanwhile. */
		if (rc != SQLITE_OK && !has_column(db, added[k].table, added[k].column))
			return rc;
		if (rc != SQLITE_OK) {
			sqlite3_free(*msg);
			*msg = NULL;
		}
	}
	return SQLITE_OK;
}

/* The schema's definition of a view as SQLite keeps it ("CREATE VIEW name AS ..." without IF NOT
 * EXISTS, up to the statement's end); NULL when the schema has no such view. Caller frees. */
static char *schema_view(const char *name)
{
	static const char head[] = "CREATE VIEW IF NOT EXISTS ";
	size_t name_len = strlen(name);
	for (const char *p = strstr(p2pg_schema_sql, head); p; p = strstr(p + 1, head)) {
		const char *at = p + sizeof(head) - 1;
		if (strncmp(at, name, name_len) != 0 || at[name_len] != ' ')
			continue;
		/* A view's text holds no semicolon (the schema's views are written so). */
		const char *end = strchr(at, ';');
		if (!end)
			return NULL;
		return sqlite3_mprintf("CREATE VIEW %.*s", (int)(end - at), at);
	}
	return NULL;
}

/*
 * Views are definitions, not data: a database made by an earlier version keeps its views, which
 * CREATE VIEW IF NOT EXISTS leaves alone. A view whose stored text is not the schema's is
 * replaced, in a transaction that looks again (another process may have replaced it meanwhile).
 * A database locked by another process keeps the old view until a later open; never fatal.
 */
static void refresh_views(sqlite3 *db)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(db, "SELECT name, sql FROM sqlite_master WHERE type = 'view'", -1,
			       &st, NULL) != SQLITE_OK)
		return;
	char stale[8][64];
	int nstale = 0;
	while (sqlite3_step(st) == SQLITE_ROW && nstale < 8) {
		const char *name = (const char *)sqlite3_column_text(st, 0);
		const char *sql = (const char *)sqlite3_column_text(st, 1);
		char *want = name ? schema_view(name) : NULL;
		if (want && sql && strcmp(want, sql) != 0 && strlen(name) < sizeof(stale[0]))
			snprintf(stale[nstale++], sizeof(stale[0]), "%s", name);
		sqlite3_free(want);
	}
	sqlite3_finalize(st);
	st = NULL;
	if (!nstale || sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
		return;
	bool ok = true;
	for (int k = 0; k < nstale && ok; k++) {
		char *want = schema_view(stale[k]);
		char *drop = sqlite3_mprintf("DROP VIEW IF EXISTS \"%w\"", stale[k]);
		_cleanup_sqlite_stmt_ sqlite3_stmt *now = NULL;
		bool differs = true;
		if (sqlite3_prepare_v2(db, "SELECT sql FROM sqlite_master WHERE name = ?1", -1,
				       &now, NULL) == SQLITE_OK) {
			sqlite3_bind_text(now, 1, stale[k], -1, SQLITE_STATIC);
			const char *sql = sqlite3_step(now) == SQLITE_ROW
					      ? (const char *)sqlite3_column_text(now, 0)
					      : NULL;
			differs = !sql || !want || strcmp(sql, want) != 0;
		}
		if (differs)
			ok = want && drop &&
			     sqlite3_exec(db, drop, NULL, NULL, NULL) == SQLITE_OK &&
			     sqlite3_exec(db, want, NULL, NULL, NULL) == SQLITE_OK;
		sqlite3_free(want);
		sqlite3_free(drop);
	}
	sqlite3_exec(db, ok ? "COMMIT" : "ROLLBACK", NULL, NULL, NULL);
}

int p2pg_store_open(const char *path, sqlite3 **ret_db, char *err, size_t err_len)
{
	return p2pg_store_open_wait(path, ret_db, err, err_len, 10000);
}

int p2pg_store_open_wait(const char *path, sqlite3 **ret_db, char *err, size_t err_len, int busy_ms)
{
	/* A folder, a FIFO, a device: nothing a database can live in, said as such (SQLite's own
	 * answer for a FIFO is "disk I/O error"), and never opened (a device's open can act). */
	struct stat st;
	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
		snprintf(err, err_len, "not a regular file");
		return -EINVAL;
	}
	sqlite3 *db = NULL;
	int rc = sqlite3_open_v2(
	    path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK) {
		snprintf(err, err_len, "%s", db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
		sqlite3_close(db);
		return -EIO;
	}
	sqlite3_busy_timeout(db, busy_ms);
	char *msg = NULL;
	/* WAL lets ranks write while a user reads; NORMAL sync is durable against process death,
	 * which is what the guard promises (the spool covers the rest). 16 KiB pages (for a new
	 * database; an existing one keeps its own): the transfers table only ever grows at its end,
	 * and fewer, larger pages cut the B-tree's per-page work in the drainer by 5-10%. */
	rc = sqlite3_exec(db,
			  "PRAGMA page_size=16384; PRAGMA journal_mode=WAL; PRAGMA "
			  "synchronous=NORMAL; PRAGMA foreign_keys=OFF;",
			  NULL, NULL, &msg);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(db, p2pg_schema_sql, NULL, NULL, &msg);
	if (rc == SQLITE_OK)
		rc = add_missing_columns(db, &msg);
	if (rc == SQLITE_OK)
		refresh_views(db);
	if (rc != SQLITE_OK) {
		snprintf(err, err_len, "%s", msg ? msg : sqlite3_errstr(rc));
		sqlite3_free(msg);
		sqlite3_close(db);
		return rc == SQLITE_BUSY ? -EBUSY : -EIO;
	}
	*ret_db = db;
	return 0;
}
