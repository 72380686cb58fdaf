/* SPDX-License-Identifier: MIT */
/* Opening a database: what is not ours refused, the schema, and the migration of a database made by
 * an earlier release. */
#include "store.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cleanup.h"
#include "clock.h"
#include "safe_path.h"

static bool has_column(sqlite3 *db, const char *table, const char *column)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	char sql[128];
	snprintf(sql, sizeof(sql), "SELECT %s FROM %s LIMIT 0", column, table);
	return sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK;
}

/* Columns added to the schema after a database may have been made: CREATE TABLE IF NOT EXISTS
 * leaves an existing table as it was. With the tables the schema adds, this is the migration from
 * schema 1 (0.1) to 2 (this release). */
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

/* What a database holds before anything is written to it. */
struct found {
	int objects;	    /* tables, views, indexes: 0 for an empty (or new) database */
	int version;	    /* PRAGMA user_version */
	unsigned app;	    /* PRAGMA application_id */
	bool our_processes; /* a processes table keyed as ours */
};

static int look(sqlite3 *db, struct found *f, char *err, size_t err_len)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(
	    db,
	    "SELECT (SELECT count(*) FROM main.sqlite_master), (SELECT user_version FROM "
	    "pragma_user_version), (SELECT application_id FROM pragma_application_id), (SELECT "
	    "count(*) FROM pragma_table_info('processes') WHERE name IN ('boot_id', 'pid', "
	    "'started_ns')) = 3",
	    -1, &st, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc != SQLITE_ROW) {
		snprintf(err, err_len, "%s", sqlite3_errmsg(db));
		return rc == SQLITE_BUSY ? -EBUSY : -EIO;
	}
	f->objects = sqlite3_column_int(st, 0);
	f->version = sqlite3_column_int(st, 1);
	f->app = (unsigned)sqlite3_column_int(st, 2);
	f->our_processes = sqlite3_column_int(st, 3);
	return 0;
}

/* Ours to write: empty, or made by this release's schema or an earlier one. Another program's
 * database, or a newer p2pguard's, is left exactly as it is. */
static int refuse_unless_ours(const struct found *f, char *err, size_t err_len)
{
	if (f->objects == 0)
		return 0;
	if (f->app != 0 && f->app != P2PG_APPLICATION_ID) {
		snprintf(
		    err, err_len,
		    "not a p2pguard database (application_id 0x%08x is another program's); left "
		    "as it is",
		    f->app);
		return -EPERM;
	}
	if (f->version < 1 || !f->our_processes) {
		snprintf(
		    err, err_len,
		    "not a p2pguard database (its tables are another program's); left as it is");
		return -EPERM;
	}
	if (f->version > P2PG_SCHEMA_VERSION) {
		snprintf(
		    err, err_len,
		    "made by a newer p2pguard (schema %d; this one writes schema %d); left as it "
		    "is: use that p2pguard with it",
		    f->version, P2PG_SCHEMA_VERSION);
		return -EPERM;
	}
	return 0;
}

/* SQLite reads a name that starts with "file:" as a URI (with this Debian build's USE_URI): a name
 * is a file's name here, always. */
static const char *literal(const char *path, char *buf, size_t len)
{
	if (strncmp(path, "file:", 5) != 0)
		return path;
	snprintf(buf, len, "./%s", path);
	return buf;
}

int p2pg_store_check(const char *path, char *err, size_t err_len)
{
	char buf[PATH_MAX + 8];
	sqlite3 *db = NULL;
	int rc = sqlite3_open_v2(literal(path, buf, sizeof(buf)), &db, SQLITE_OPEN_READONLY, NULL);
	if (rc != SQLITE_OK) {
		snprintf(err, err_len, "%s", db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
		sqlite3_close(db);
		return -EIO;
	}
	sqlite3_busy_timeout(db, 2000);
	struct found f;
	int r = look(db, &f, err, err_len);
	if (r == 0)
		r = refuse_unless_ours(&f, err, err_len);
	sqlite3_close(db);
	return r;
}

int p2pg_store_open(const char *path, sqlite3 **ret_db, char *err, size_t err_len)
{
	return p2pg_store_open_wait(path, ret_db, err, err_len, 10000);
}

struct busy_wait {
	uint64_t deadline_ns;
	int busy_ms;
	bool (*give_up)(void *);
	void *arg;
};

/* SQLite's own busy timeout, in steps of a millisecond, asking give_up between them. */
static int busy_poll(void *userdata, int count)
{
	struct busy_wait *w = userdata;
	uint64_t now = p2pg_now_ns();
	if (count == 0)
		w->deadline_ns = now + (uint64_t)w->busy_ms * 1000000u;
	if (now >= w->deadline_ns || w->give_up(w->arg))
		return 0;
	struct timespec step = {0, 1000000};
	nanosleep(&step, NULL);
	return 1;
}

int p2pg_store_open_wait(const char *path, sqlite3 **ret_db, char *err, size_t err_len, int busy_ms)
{
	return p2pg_store_open_until(path, ret_db, err, err_len, busy_ms, NULL, NULL);
}

int p2pg_store_open_until(const char *path, sqlite3 **ret_db, char *err, size_t err_len,
			  int busy_ms, bool (*give_up)(void *), void *arg)
{
	/* A folder, a FIFO, a device: nothing a database can live in, said as such (SQLite's own
	 * answer for a FIFO is "disk I/O error"), and never opened (a device's open can act). */
	struct stat st;
	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
		snprintf(err, err_len, "not a regular file");
		return -EINVAL;
	}
	/* A link or a file another user planted on the way is refused before SQLite follows or
	 * fills it (safe_path.h). */
	int r = p2pg_path_check(path, true, err, err_len);
	if (r < 0)
		return r;
	char buf[PATH_MAX + 8];
	sqlite3 *db = NULL;
	int rc =
	    sqlite3_open_v2(literal(path, buf, sizeof(buf)), &db,
			    SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK) {
		snprintf(err, err_len, "%s", db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
		sqlite3_close(db);
		return -EIO;
	}
	struct busy_wait wait = {.busy_ms = busy_ms, .give_up = give_up, .arg = arg};
	if (give_up)
		sqlite3_busy_handler(db, busy_poll, &wait);
	else
		sqlite3_busy_timeout(db, busy_ms);
	/* A database's own schema runs no function with side effects (its views and triggers are
	 * not to be trusted: anyone who could write the file could have added them). */
	sqlite3_db_config(db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, NULL);
	sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, NULL);
	/* Checked again now that SQLite holds it open: a link planted meanwhile is caught before
	 * anything is written. */
	struct found found;
	r = p2pg_path_check(path, true, err, err_len);
	if (r == 0)
		r = look(db, &found, err, err_len);
	if (r == 0)
		r = refuse_unless_ours(&found, err, err_len);
	if (r < 0) {
		sqlite3_close(db);
		return r;
	}
	char *msg = NULL;
	/* WAL lets ranks write while a user reads; NORMAL sync is durable against process death,
	 * which is what the guard promises (the spool covers the rest). 16 KiB pages (for a new
	 * database; an existing one keeps its own): the transfers table only ever grows at its end,
	 * and fewer, larger pages cut the B-tree's per-page work in the drainer by 5-10%. */
	rc = sqlite3_exec(db,
			  "PRAGMA page_size=16384; PRAGMA journal_mode=WAL; PRAGMA "
			  "synchronous=NORMAL; PRAGMA foreign_keys=OFF;",
			  NULL, NULL, &msg);
	/* The schema and the migration in one transaction, after a second look under its lock
	 * (another process may have filled the file meanwhile). */
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, &msg);
	bool began = rc == SQLITE_OK;
	if (began && (r = look(db, &found, err, err_len)) == 0)
		r = refuse_unless_ours(&found, err, err_len);
	if (r < 0) {
		sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
		sqlite3_close(db);
		return r;
	}
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(db, p2pg_schema_sql, NULL, NULL, &msg);
	if (rc == SQLITE_OK)
		rc = add_missing_columns(db, &msg);
	if (rc == SQLITE_OK && found.app == 0) {
		char sql[64];
		snprintf(sql, sizeof(sql), "PRAGMA application_id = %d", (int)P2PG_APPLICATION_ID);
		rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
	}
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(db, "COMMIT", NULL, NULL, &msg);
	/* Views whose definition changed since the database was made: replaced in a transaction
	 * of their own (never fatal). */
	if (rc == SQLITE_OK)
		refresh_views(db);
	if (rc != SQLITE_OK) {
		snprintf(err, err_len, "%s", msg ? msg : sqlite3_errmsg(db));
		sqlite3_free(msg);
		if (began)
			sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
		sqlite3_close(db);
		return rc == SQLITE_BUSY ? -EBUSY : -EIO;
	}
	sqlite3_busy_timeout(db, busy_ms); /* wait's handler is not to outlive this call */
	*ret_db = db;
	return 0;
}
