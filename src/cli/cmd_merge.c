/* SPDX-License-Identifier: MIT */
/*
 * p2pguard merge OUT.db IN.db...: one database from the databases of many nodes or ranks. A
 * process is keyed by (boot_id, pid, started_ns) as in every database, so merging the same input
 * twice adds nothing; its rows follow it under its new id, hostname and rank kept.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "cli.h"
#include "dbread.h"
#include "store.h"

struct sql {
	char *text;
	size_t len;
	FILE *f;
};

static int exec(sqlite3 *db, const char *sql, const char *what)
{
	char *err = NULL;
	if (sqlite3_exec(db, sql, NULL, NULL, &err) == SQLITE_OK)
		return 0;
	fprintf(stderr, "p2pguard merge: %s: %s\n", what, err ? err : sqlite3_errmsg(db));
	sqlite3_free(err);
	return -EIO;
}

/*
 * Gives main.table every column src.table has (inputs from a newer guard may have more: a new
 * table is created as the input declares it, a new column added), then writes the columns both
 * have, id left out, into cols. Returns the number of columns, or a negative errno.
 */
static int common_columns(sqlite3 *db, const char *table, char *cols, size_t len, bool *has_process,
			  bool *has_serial)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(db,
			       "SELECT sql FROM src.sqlite_master WHERE type = 'table' AND "
			       "name = ?1 AND NOT EXISTS (SELECT 1 FROM main.sqlite_master "
			       "WHERE type = 'table' AND name = ?1)",
			       -1, &st, NULL) != SQLITE_OK)
		return -EIO;
	sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW && exec(db, p2pg_cli_col(st, 0), table) < 0)
		return -EIO;
	sqlite3_finalize(st);
	st = NULL;

	if (sqlite3_prepare_v2(
		db,
		"SELECT s.name, s.type, m.name IS NOT NULL FROM pragma_table_info(?1, "
		"'src') s LEFT JOIN pragma_table_info(?1, 'main') m ON m.name = "
		"s.name ORDER BY s.cid",
		-1, &st, NULL) != SQLITE_OK)
		return -EIO;
	sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
	int n = 0;
	size_t used = 0;
	bool serial = false, seq = false;
	*has_process = false;
	cols[0] = '\0';
	while (sqlite3_step(st) == SQLITE_ROW) {
		const char *name = p2pg_cli_col(st, 0), *type = p2pg_cli_col(st, 1) ?: "";
		if (!sqlite3_column_int(st, 2)) {
			char alter[512];
			snprintf(alter, sizeof(alter),
				 "ALTER TABLE main.\"%s\" ADD COLUMN \"%s\" %s", table, name, type);
			if (exec(db, alter, table) < 0)
				return -EIO;
		}
		if (strcmp(name, "id") == 0)
			continue;
		*has_process |= strcmp(name, "process_id") == 0;
		serial |= strcmp(name, "thread_serial") == 0;
		seq |= strcmp(name, "seq") == 0;
		int w = snprintf(cols + used, len - used, "%s\"%s\"", n ? ", " : "", name);
		if (w < 0 || (size_t)w >= len - used)
			return -ENAMETOOLONG;
		used += (size_t)w;
		n++;
	}
	*has_serial = serial && seq;
	return n;
}

static int merge_table(sqlite3 *db, const char *table)
{
	char cols[4096], sel[4200], sql[12288];
	bool has_process, has_serial;
	int n = common_columns(db, table, cols, sizeof(cols), &has_process, &has_serial);
	if (n <= 0)
		return n;
	if (!has_process) {
		snprintf(sql, sizeof(sql),
			 "INSERT OR IGNORE INTO main.\"%s\" (%s) SELECT %s FROM src.\"%s\"", table,
			 cols, cols, table);
		return exec(db, sql, table);
	}
	/* The same columns with the process re-keyed. */
	size_t used = 0;
	for (char *p = cols; *p;) {
		size_t w = strcspn(p, ",");
		int k = strncmp(p, "\"process_id\"", 12) == 0
			    ? snprintf(sel + used, sizeof(sel) - used, "m.new")
			    : snprintf(sel + used, sizeof(sel) - used, "s.%.*s", (int)w, p);
		used += (size_t)k;
		p += w;
		if (*p == ',') {
			used += (size_t)snprintf(sel + used, sizeof(sel) - used, ", ");
			p += 2;
		}
	}
	if (has_serial) {
		/* Rows of a process already merged come in only if new (a later copy of a live
		 * database): a row is (process, thread_serial, seq) in every table that has them.
		 * The keys already there are indexed aside: the tables have no such index. */
		snprintf(sql, sizeof(sql),
			 "DELETE FROM temp.have; INSERT OR IGNORE INTO have SELECT d.process_id, "
			 "coalesce(d.thread_serial, -1), coalesce(d.seq, -1) FROM main.\"%s\" d "
			 "WHERE d.process_id IN (SELECT new FROM pmap WHERE NOT fresh)",
			 table);
		if (exec(db, sql, table) < 0)
			return -EIO;
		snprintf(
		    sql, sizeof(sql),
		    "INSERT OR IGNORE INTO main.\"%s\" (%s) SELECT %s FROM src.\"%s\" s JOIN "
		    "pmap m ON m.old = s.process_id WHERE m.fresh OR NOT EXISTS (SELECT 1 FROM "
		    "have h WHERE h.process_id = m.new AND h.thread_serial = "
		    "coalesce(s.thread_serial, -1) AND h.seq = coalesce(s.seq, -1))",
		    table, cols, sel, table);
	} else if (strcmp(table, "transfer_summary") == 0)
		/* Counters of a process: the later copy holds the larger count. */
		snprintf(sql, sizeof(sql),
			 "INSERT INTO main.\"%s\" (%s) SELECT %s FROM src.\"%s\" s JOIN pmap m ON "
			 "m.old = s.process_id WHERE true ON CONFLICT DO UPDATE SET count = "
			 "max(count, excluded.count), bytes = max(bytes, excluded.bytes), failures "
			 "= max(failures, excluded.failures), host_ns_total = max(host_ns_total, "
			 "excluded.host_ns_total), host_ns_hist = CASE WHEN excluded.count > count "
			 "THEN excluded.host_ns_hist ELSE host_ns_hist END",
			 table, cols, sel, table);
	else
		snprintf(sql, sizeof(sql),
			 "INSERT OR IGNORE INTO main.\"%s\" (%s) SELECT %s FROM src.\"%s\" s JOIN "
			 "pmap m ON m.old = s.process_id WHERE m.fresh",
			 table, cols, sel, table);
	return exec(db, sql, table);
}

/* Every table of the input but the import watermarks, which belong to the input's spools. */
static int merge_one(sqlite3 *db, const char *in, int *ret_processes, int *ret_new)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	int r;

	if (sqlite3_prepare_v2(db, "ATTACH DATABASE ?1 AS src", -1, &st, NULL) != SQLITE_OK)
		return -EIO;
	sqlite3_bind_text(st, 1, in, -1, SQLITE_STATIC);
	if (sqlite3_step(st) != SQLITE_DONE) {
		fprintf(stderr, "p2pguard merge: cannot open %s: %s\n", in, sqlite3_errmsg(db));
		return -EIO;
	}
	sqlite3_finalize(st);
	st = NULL;
	if (exec(db, "SELECT 1 FROM src.processes LIMIT 1", in) < 0) {
		exec(db, "DETACH DATABASE src", in);
		return -EINVAL;
	}
	r = exec(db, "BEGIN IMMEDIATE", "begin");
	if (r < 0)
		goto detach;
	r = exec(
	    db,
	    "DROP TABLE IF EXISTS temp.pmap;"
	    "CREATE TEMP TABLE pmap (old INTEGER PRIMARY KEY, new INTEGER, fresh INTEGER);"
	    "CREATE TEMP TABLE IF NOT EXISTS have (process_id INTEGER, thread_serial INTEGER, seq "
	    "INTEGER, PRIMARY KEY "
	    "(process_id, thread_serial, seq)) WITHOUT ROWID;"
	    "INSERT INTO pmap SELECT s.id, NULL, NOT EXISTS (SELECT 1 FROM main.processes m "
	    "WHERE m.boot_id = s.boot_id AND m.pid = s.pid AND m.started_ns = s.started_ns) "
	    "FROM src.processes s",
	    "processes");
	if (r >= 0)
		r = merge_table(db, "processes");
	if (r >= 0)
		r = exec(db,
			 "UPDATE pmap SET new = (SELECT m.id FROM main.processes m JOIN "
			 "src.processes s ON m.boot_id = s.boot_id AND m.pid = s.pid AND "
			 "m.started_ns = s.started_ns WHERE s.id = pmap.old)",
			 "processes");
	if (r >= 0 &&
	    sqlite3_prepare_v2(db,
			       "SELECT name FROM src.sqlite_master WHERE type = 'table' "
			       "AND name NOT LIKE 'sqlite_%' AND name NOT IN ('processes', "
			       "'spool_progress') ORDER BY name",
			       -1, &st, NULL) != SQLITE_OK)
		r = -EIO;
	while (r >= 0 && sqlite3_step(st) == SQLITE_ROW) {
		char table[128];
		snprintf(table, sizeof(table), "%s", p2pg_cli_col(st, 0));
		r = merge_table(db, table);
	}
	sqlite3_finalize(st);
	st = NULL;
	if (r >= 0 &&
	    sqlite3_prepare_v2(db, "SELECT count(*), sum(fresh) FROM pmap", -1, &st, NULL) ==
		SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW) {
		*ret_processes = sqlite3_column_int(st, 0);
		*ret_new = sqlite3_column_int(st, 1);
	}
	sqlite3_finalize(st);
	st = NULL;
	if (r >= 0)
		r = exec(db, "COMMIT", "commit");
	else
		exec(db, "ROLLBACK", "rollback");
detach:
	exec(db, "DETACH DATABASE src", in);
	return r;
}

static void usage(FILE *out)
{
	fputs("Usage: p2pguard merge OUT.db IN.db...\n"
	      "\n"
	      "Adds the processes of each input database (nodes, ranks) to OUT.db, created if\n"
	      "needed, with all their rows; hostname and rank kept. A process already in OUT.db\n"
	      "(same boot, pid and start time) is not added twice, so merging again adds only\n"
	      "what is new. Each input's dead spools are imported into it first.\n",
	      out);
}

int p2pg_cmd_merge(int argc, char **argv)
{
	int first = 1;
	for (int k = 1; k < argc; k++) {
		if (strcmp(argv[k], "--help") == 0 || strcmp(argv[k], "-h") == 0) {
			usage(stdout);
			return 0;
		}
		if (strcmp(argv[k], "--") == 0) {
			first = k + 1;
			break;
		}
		if (argv[k][0] == '-')
			return p2pg_cli_unknown_option("merge", argv[k]);
	}
	if (argc - first < 2) {
		fprintf(stderr, "Usage: p2pguard merge OUT.db IN.db...\n");
		return 2;
	}
	const char *out_path = argv[first];
	char out_real[PATH_MAX];
	bool out_exists = realpath(out_path, out_real) != NULL;
	for (int k = first + 1; k < argc; k++) {
		char in_real[PATH_MAX];
		if (!realpath(argv[k], in_real)) {
			fprintf(stderr, "p2pguard: no database at %s\n", argv[k]);
			return 2;
		}
		if (out_exists && strcmp(in_real, out_real) == 0) {
			fprintf(stderr, "p2pguard merge: %s is the output itself\n", argv[k]);
			return 2;
		}
	}
	if (out_exists)
		(void)p2pg_cli_import_dead_spools(out_path, true);
	_cleanup_sqlite_ sqlite3 *db = NULL;
	char err[256];
	if (p2pg_store_open(out_path, &db, err, sizeof(err)) < 0) {
		fprintf(stderr, "p2pguard merge: cannot open %s: %s\n", out_path, err);
		return 2;
	}
	int total = 0, added = 0, failed = 0;
	for (int k = first + 1; k < argc; k++) {
		int n = 0, fresh = 0;
		(void)p2pg_cli_import_dead_spools(argv[k], true);
		if (merge_one(db, argv[k], &n, &fresh) < 0) {
			fprintf(stderr, "p2pguard merge: %s not merged\n", argv[k]);
			failed++;
			continue;
		}
		total += n;
		added += fresh;
	}
	printf("merged %d database%s into %s: %d process%s, %d new\n", argc - first - 1 - failed,
	       argc - first - 1 - failed == 1 ? "" : "s", out_path, total, total == 1 ? "" : "es",
	       added);
	return failed ? 2 : 0;
}
