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

/* Views whose definition changed: dropped when they lack their new column, so that the schema's
 * CREATE VIEW IF NOT EXISTS makes them anew. peer_bandwidth before 0.2 divided asynchronous copies'
 * bytes by their enqueue time. */
static int replace_outdated_views(sqlite3 *db, char **msg)
{
	static const struct {
		const char *view, *marker;
	} views[] = {{"peer_bandwidth", "untimed"}};
	for (size_t k = 0; k < sizeof(views) / sizeof(views[0]); k++) {
		_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
		if (sqlite3_prepare_v2(
			db, "SELECT sql FROM sqlite_master WHERE type = 'view' AND name = ?1", -1,
			&st, NULL) != SQLITE_OK)
			return SQLITE_ERROR;
		sqlite3_bind_text(st, 1, views[k].view, -1, SQLITE_STATIC);
		if (sqlite3_step(st) != SQLITE_ROW)
			continue;
		const char *sql = (const char *)sqlite3_column_text(st, 0);
		if (sql && strstr(sql, views[k].marker))
			continue;
		char drop[96];
		snprintf(drop, sizeof(drop), "DROP VIEW IF EXISTS %s", views[k].view);
		int rc = sqlite3_exec(db, drop, NULL, NULL, msg);
		if (rc != SQLITE_OK)
			return rc;
	}
	return SQLITE_OK;
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
		rc = replace_outdated_views(db, &msg);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(db, p2pg_schema_sql, NULL, NULL, &msg);
	if (rc == SQLITE_OK)
		rc = add_missing_columns(db, &msg);
	if (rc != SQLITE_OK) {
		snprintf(err, err_len, "%s", msg ? msg : sqlite3_errstr(rc));
		sqlite3_free(msg);
		sqlite3_close(db);
		return rc == SQLITE_BUSY ? -EBUSY : -EIO;
	}
	*ret_db = db;
	return 0;
}
