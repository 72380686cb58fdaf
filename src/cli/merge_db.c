/* SPDX-License-Identifier: MIT */
/*
 * The merge of one database into another. Every name that comes from the input is written into SQL
 * quoted as an identifier ("%w": a double quote doubled); nothing of the input's own SQL is run.
 */
#include "merge_db.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cleanup.h"
#include "dbread.h"

static void say(const char *what, const char *why)
{
	fprintf(stderr, "p2pguard merge: %s: %s\n", what, why);
}

/* Runs exactly one statement: SQL made here never holds two, so text that would (a name that
 * ended a statement and began another) is refused rather than run. */
static int run(sqlite3 *db, const char *sql, const char *what)
{
	if (!sql) {
		say(what, "out of memory");
		return -ENOMEM;
	}
	sqlite3_stmt *st = NULL;
	const char *tail = NULL;
	int rc = sqlite3_prepare_v2(db, sql, -1, &st, &tail);
	if (rc == SQLITE_OK && tail && tail[strspn(tail, " \t\n;")] != '\0') {
		sqlite3_finalize(st);
		say(what, "refused: more than one statement");
		return -EINVAL;
	}
	if (rc == SQLITE_OK) {
		while ((rc = sqlite3_step(st)) == SQLITE_ROW)
			;
		if (rc == SQLITE_DONE)
			rc = SQLITE_OK;
	}
	if (rc != SQLITE_OK)
		say(what, sqlite3_errmsg(db));
	sqlite3_finalize(st);
	return rc == SQLITE_OK ? 0 : -EIO;
}

/* Runs SQL made with sqlite3_str (freed). */
static int run_str(sqlite3 *db, sqlite3_str *str, const char *what)
{
	char *sql = sqlite3_str_finish(str);
	int r = run(db, sql, what);
	sqlite3_free(sql);
	return r;
}

/* The affinity of a declared type, by SQLite's own rules (datatype3.html, 3.1): the type an input
 * declares is reduced to it, so that no text of the input's lands in the output's schema. */
static const char *affinity(const char *type)
{
	if (!type || !*type)
		return "BLOB";
	if (strcasestr(type, "INT"))
		return "INTEGER";
	if (strcasestr(type, "CHAR") || strcasestr(type, "CLOB") || strcasestr(type, "TEXT"))
		return "TEXT";
	if (strcasestr(type, "BLOB"))
		return "BLOB";
	if (strcasestr(type, "REAL") || strcasestr(type, "FLOA") || strcasestr(type, "DOUB"))
		return "REAL";
	return "NUMERIC";
}

struct columns {
	char **names;
	int n;
	bool process, serial, seq;
};

static void columns_free(struct columns *c)
{
	for (int k = 0; k < c->n; k++)
		free(c->names[k]);
	free(c->names);
	memset(c, 0, sizeof(*c));
}

/* The input's unique constraints and indexes on plain columns, as UNIQUE (...) clauses: what makes
 * a merge repeated later add nothing to a table of the input's. */
static void unique_clauses(sqlite3 *db, const char *table, sqlite3_str *out)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *idx = NULL, *cols = NULL;
	if (sqlite3_prepare_v2(db,
			       "SELECT name FROM pragma_index_list(?1, 'src') WHERE \"unique\" AND "
			       "origin != 'pk'",
			       -1, &idx, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db,
			       "SELECT cid, name FROM pragma_index_info(?1, 'src') ORDER BY seqno",
			       -1, &cols, NULL) != SQLITE_OK)
		return;
	sqlite3_bind_text(idx, 1, table, -1, SQLITE_STATIC);
	while (sqlite3_step(idx) == SQLITE_ROW) {
		sqlite3_reset(cols);
		sqlite3_bind_text(cols, 1, p2pg_cli_col(idx, 0), -1, SQLITE_TRANSIENT);
		sqlite3_str *clause = sqlite3_str_new(db);
		int n = 0;
		bool plain = true;
		while (sqlite3_step(cols) == SQLITE_ROW) {
			if (sqlite3_column_int(cols, 0) < 0 || !p2pg_cli_col(cols, 1))
				plain = false; /* an expression or the rowid: not a column list */
			else
				sqlite3_str_appendf(clause, "%s\"%w\"", n++ ? ", " : "",
						    p2pg_cli_col(cols, 1));
		}
		char *list = sqlite3_str_finish(clause);
		if (plain && n > 0 && list)
			sqlite3_str_appendf(out, ", UNIQUE (%s)", list);
		sqlite3_free(list);
	}
}

/* main.table made from src.table's columns: names, affinities, primary key, unique constraints. */
static int create_table(sqlite3 *db, const char *table)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(
		db, "SELECT name, type, pk FROM pragma_table_info(?1, 'src') ORDER BY cid", -1, &st,
		NULL) != SQLITE_OK)
		return -EIO;
	sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
	sqlite3_str *sql = sqlite3_str_new(db), *key = sqlite3_str_new(db);
	sqlite3_str_appendf(sql, "CREATE TABLE main.\"%w\" (", table);
	int n = 0, keys = 0;
	/* Key columns in the key's order (pk is their position in it). */
	char *key_names[64] = {0};
	while (sqlite3_step(st) == SQLITE_ROW) {
		const char *name = p2pg_cli_col(st, 0) ?: "";
		sqlite3_str_appendf(sql, "%s\"%w\" %s", n++ ? ", " : "", name,
				    affinity(p2pg_cli_col(st, 1)));
		int pk = sqlite3_column_int(st, 2);
		if (pk > 0 && pk <= 64 && !key_names[pk - 1]) {
			key_names[pk - 1] = sqlite3_mprintf("%w", name);
			keys++;
		}
	}
	for (int k = 0, w = 0; k < 64 && w < keys; k++)
		if (key_names[k])
			sqlite3_str_appendf(key, "%s\"%s\"", w++ ? ", " : "", key_names[k]);
	for (int k = 0; k < 64; k++)
		sqlite3_free(key_names[k]);
	char *key_text = sqlite3_str_finish(key);
	if (keys > 0 && key_text)
		sqlite3_str_appendf(sql, ", PRIMARY KEY (%s)", key_text);
	sqlite3_free(key_text);
	unique_clauses(db, table, sql);
	sqlite3_str_appendf(sql, ")");
	if (n == 0) {
		sqlite3_free(sqlite3_str_finish(sql));
		return 0;
	}
	return run_str(db, sql, table);
}

/*
 * Gives main.table every column src.table has (inputs from a newer guard may have more: a new
 * table is created, a new column added, with the input's names and their affinity), then lists
 * the columns both have, id left out. Returns the number of columns, or a negative errno.
 */
static int common_columns(sqlite3 *db, const char *table, struct columns *c)
{
	memset(c, 0, sizeof(*c));
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(
		db, "SELECT 1 FROM main.sqlite_master WHERE type = 'table' AND name = ?1", -1, &st,
		NULL) != SQLITE_OK)
		return -EIO;
	sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
	bool exists = sqlite3_step(st) == SQLITE_ROW;
	sqlite3_finalize(st);
	st = NULL;
	if (!exists && create_table(db, table) < 0)
		return -EIO;

	if (sqlite3_prepare_v2(
		db,
		"SELECT s.name, s.type, m.name IS NOT NULL FROM pragma_table_info(?1, "
		"'src') s LEFT JOIN pragma_table_info(?1, 'main') m ON m.name = "
		"s.name ORDER BY s.cid",
		-1, &st, NULL) != SQLITE_OK)
		return -EIO;
	sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
	while (sqlite3_step(st) == SQLITE_ROW) {
		const char *name = p2pg_cli_col(st, 0) ?: "";
		if (!sqlite3_column_int(st, 2)) {
			sqlite3_str *alter = sqlite3_str_new(db);
			sqlite3_str_appendf(alter, "ALTER TABLE main.\"%w\" ADD COLUMN \"%w\" %s",
					    table, name, affinity(p2pg_cli_col(st, 1)));
			if (run_str(db, alter, table) < 0) {
				columns_free(c);
				return -EIO;
			}
		}
		if (strcmp(name, "id") == 0)
			continue;
		char **more = realloc(c->names, (size_t)(c->n + 1) * sizeof(*more));
		if (!more || !(more[c->n] = strdup(name))) {
			c->names = more ? more : c->names;
			columns_free(c);
			return -ENOMEM;
		}
		c->names = more;
		c->n++;
		c->process |= strcmp(name, "process_id") == 0;
		c->serial |= strcmp(name, "thread_serial") == 0;
		c->seq |= strcmp(name, "seq") == 0;
	}
	return c->n;
}

/*
 * Columns that hold the id of a row of another table (schema.sql's REFERENCES, processes aside).
 * The output numbers its rows itself, so such a column is re-keyed through the row it names, found
 * again in the output by what identifies a record in every table: its process, ring and place in
 * the ring. A row whose target is not in the input gets `missing` (the column may not be NULL).
 */
struct id_reference {
	const char *table, *column, *target, *missing;
};

static const struct id_reference id_references[] = {
    {"stalls", "transfer_id", "transfers", "-s.\"transfer_id\""},
    {"nccl_stalls", "op_id", "nccl_ops", "NULL"},
};

static const struct id_reference *id_reference_of(const char *table)
{
	for (size_t k = 0; k < sizeof(id_references) / sizeof(id_references[0]); k++)
		if (strcmp(id_references[k].table, table) == 0)
			return &id_references[k];
	return NULL;
}

static bool has_record_keys(sqlite3 *db, const char *schema, const char *table)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(db,
			       "SELECT count(*) FROM pragma_table_info(?1, ?2) WHERE name IN "
			       "('thread_serial', 'seq')",
			       -1, &st, NULL) != SQLITE_OK)
		return false;
	sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, schema, -1, SQLITE_STATIC);
	return sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int(st, 0) == 2;
}

/* temp.idmap (made with temp.pmap): the input's id of each row the table names -> that row's id in
 * the output (merged already: the tables that name others are merged last). */
static int build_id_map(sqlite3 *db, const struct id_reference *ref)
{
	int r = run(db, "DELETE FROM temp.idmap", ref->table);
	if (r < 0 || !has_record_keys(db, "src", ref->target) ||
	    !has_record_keys(db, "main", ref->target))
		return r;
	sqlite3_str *sql = sqlite3_str_new(db);
	sqlite3_str_appendf(
	    sql,
	    "INSERT OR IGNORE INTO temp.idmap SELECT s.id, d.id FROM src.\"%w\" s "
	    "JOIN temp.pmap m ON m.old = s.process_id JOIN main.\"%w\" d ON "
	    "d.process_id = m.new AND d.thread_serial = s.thread_serial AND d.seq = "
	    "s.seq WHERE s.id IN (SELECT \"%w\" FROM src.\"%w\")",
	    ref->target, ref->target, ref->column, ref->table);
	return run_str(db, sql, ref->table);
}

/* The column list, each quoted; with prefix "s." and process_id as the new id when rekey, and the
 * column of ref (if any) through temp.idmap. */
static void column_list(sqlite3_str *sql, const struct columns *c, bool rekey,
			const struct id_reference *ref)
{
	for (int k = 0; k < c->n; k++) {
		const char *sep = k ? ", " : "";
		if (rekey && strcmp(c->names[k], "process_id") == 0)
			sqlite3_str_appendf(sql, "%sm.new", sep);
		else if (rekey && ref && strcmp(c->names[k], ref->column) == 0)
			sqlite3_str_appendf(
			    sql,
			    "%scoalesce((SELECT i.new FROM temp.idmap i WHERE i.old "
			    "= s.\"%w\"), %s)",
			    sep, ref->column, ref->missing);
		else
			sqlite3_str_appendf(sql, "%s%s\"%w\"", sep, rekey ? "s." : "", c->names[k]);
	}
}

static int merge_table(sqlite3 *db, const char *table)
{
	struct columns c;
	int n = common_columns(db, table, &c);
	if (n <= 0)
		return n;
	int r;
	bool rows = c.serial && c.seq;
	bool counters = c.process && !rows && strcmp(table, "transfer_summary") == 0;
	const struct id_reference *ref = c.process ? id_reference_of(table) : NULL;
	if (ref && (r = build_id_map(db, ref)) < 0) {
		columns_free(&c);
		return r;
	}
	sqlite3_str *sql = sqlite3_str_new(db);
	sqlite3_str_appendf(sql, "INSERT %s INTO main.\"%w\" (", counters ? "" : "OR IGNORE",
			    table);
	column_list(sql, &c, false, NULL);
	sqlite3_str_appendf(sql, ") SELECT ");
	if (!c.process) {
		column_list(sql, &c, false, NULL);
		sqlite3_str_appendf(sql, " FROM src.\"%w\"", table);
		r = run_str(db, sql, table);
		columns_free(&c);
		return r;
	}
	/* The same columns with the process re-keyed. */
	column_list(sql, &c, true, ref);
	sqlite3_str_appendf(sql, " FROM src.\"%w\" s JOIN temp.pmap m ON m.old = s.process_id ",
			    table);
	if (rows) {
		/* Rows of a process already merged come in only if new (a later copy of a live
		 * database): a row is (process, thread_serial, seq) in every table that has them.
		 * The keys already there are indexed aside: the tables have no such index. */
		sqlite3_str *have = sqlite3_str_new(db);
		sqlite3_str_appendf(
		    have,
		    "INSERT OR IGNORE INTO temp.have SELECT d.process_id, "
		    "coalesce(d.thread_serial, -1), coalesce(d.seq, -1) FROM "
		    "main.\"%w\" d WHERE d.process_id IN (SELECT new FROM temp.pmap "
		    "WHERE NOT fresh)",
		    table);
		if ((r = run(db, "DELETE FROM temp.have", table)) < 0 ||
		    (r = run_str(db, have, table)) < 0) {
			sqlite3_free(sqlite3_str_finish(sql));
			columns_free(&c);
			return r;
		}
		sqlite3_str_appendf(sql,
				    "WHERE m.fresh OR NOT EXISTS (SELECT 1 FROM temp.have h "
				    "WHERE h.process_id = m.new AND h.thread_serial = "
				    "coalesce(s.thread_serial, -1) AND h.seq = coalesce(s.seq, "
				    "-1))");
	} else if (counters) {
		/* Counters of a process: the later copy holds the larger count. */
		sqlite3_str_appendf(
		    sql, "WHERE true ON CONFLICT DO UPDATE SET count = max(count, excluded.count), "
			 "bytes = max(bytes, excluded.bytes), failures = max(failures, "
			 "excluded.failures), host_ns_total = max(host_ns_total, "
			 "excluded.host_ns_total), host_ns_hist = CASE WHEN excluded.count > count "
			 "THEN excluded.host_ns_hist ELSE host_ns_hist END");
	} else {
		sqlite3_str_appendf(sql, "WHERE m.fresh");
	}
	r = run_str(db, sql, table);
	columns_free(&c);
	return r;
}

void p2pg_merge_prepare(sqlite3 *db)
{
	/* One input at a time, and nothing else: an input can make no ATTACH run, but should text
	 * of its ever be run, it could attach nothing either. */
	sqlite3_limit(db, SQLITE_LIMIT_ATTACHED, 1);
	sqlite3_db_config(db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, NULL);
	sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, NULL);
}

/* Every table of the input but the import watermarks, which belong to the input's spools, and its
 * virtual tables (their modules are code) with the tables they keep their data in. */
int p2pg_merge_database(sqlite3 *db, const char *in_path, int *ret_processes, int *ret_new)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	int r;

	if (sqlite3_prepare_v2(db, "ATTACH DATABASE ?1 AS src", -1, &st, NULL) != SQLITE_OK)
		return -EIO;
	sqlite3_bind_text(st, 1, in_path, -1, SQLITE_STATIC);
	if (sqlite3_step(st) != SQLITE_DONE) {
		fprintf(stderr, "p2pguard merge: cannot open %s: %s\n", in_path,
			sqlite3_errmsg(db));
		return -EIO;
	}
	sqlite3_finalize(st);
	st = NULL;
	if (run(db, "SELECT boot_id, pid, started_ns FROM src.processes LIMIT 1", in_path) < 0) {
		run(db, "DETACH DATABASE src", in_path);
		return -EINVAL;
	}
	r = run(db, "BEGIN IMMEDIATE", "begin");
	if (r < 0)
		goto detach;
	static const char *const setup[] = {
	    "DROP TABLE IF EXISTS temp.pmap",
	    "CREATE TEMP TABLE pmap (old INTEGER PRIMARY KEY, new INTEGER, fresh INTEGER)",
	    "CREATE TEMP TABLE IF NOT EXISTS have (process_id INTEGER, thread_serial INTEGER, seq "
	    "INTEGER, PRIMARY KEY (process_id, thread_serial, seq)) WITHOUT ROWID",
	    "CREATE TEMP TABLE IF NOT EXISTS idmap (old INTEGER PRIMARY KEY, new INTEGER)",
	    "INSERT INTO temp.pmap SELECT s.id, NULL, NOT EXISTS (SELECT 1 FROM main.processes m "
	    "WHERE m.boot_id = s.boot_id AND m.pid = s.pid AND m.started_ns = s.started_ns) "
	    "FROM src.processes s",
	};
	for (size_t k = 0; r >= 0 && k < sizeof(setup) / sizeof(setup[0]); k++)
		r = run(db, setup[k], "processes");
	if (r >= 0)
		r = merge_table(db, "processes");
	if (r >= 0)
		r = run(db,
			"UPDATE temp.pmap SET new = (SELECT m.id FROM main.processes m JOIN "
			"src.processes s ON m.boot_id = s.boot_id AND m.pid = s.pid AND "
			"m.started_ns = s.started_ns WHERE s.id = temp.pmap.old)",
			"processes");
	if (r >= 0 &&
	    sqlite3_prepare_v2(
		db,
		"SELECT t.name FROM src.sqlite_master t WHERE t.type = 'table' AND t.name NOT "
		"LIKE 'sqlite\\_%' ESCAPE '\\' AND t.name NOT IN ('processes', 'spool_progress') "
		"AND coalesce(t.sql, '') NOT LIKE 'CREATE VIRTUAL%' AND NOT EXISTS (SELECT 1 FROM "
		"src.sqlite_master v WHERE v.type = 'table' AND coalesce(v.sql, '') LIKE 'CREATE "
		"VIRTUAL%' AND substr(t.name, 1, length(v.name) + 1) = v.name || '_') ORDER BY "
		"t.name IN ('stalls', 'nccl_stalls'), t.name", /* id_references: targets first */
		-1, &st, NULL) != SQLITE_OK)
		r = -EIO;
	while (r >= 0 && sqlite3_step(st) == SQLITE_ROW) {
		char *table = strdup(p2pg_cli_col(st, 0) ?: "");
		r = table ? merge_table(db, table) : -ENOMEM;
		free(table);
	}
	sqlite3_finalize(st);
	st = NULL;
	if (r >= 0 &&
	    sqlite3_prepare_v2(db, "SELECT count(*), coalesce(sum(fresh), 0) FROM temp.pmap", -1,
			       &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW) {
		*ret_processes = sqlite3_column_int(st, 0);
		*ret_new = sqlite3_column_int(st, 1);
	}
	sqlite3_finalize(st);
	st = NULL;
	if (r >= 0)
		r = run(db, "COMMIT", "commit");
	else
		run(db, "ROLLBACK", "rollback");
detach:
	run(db, "DETACH DATABASE src", in_path);
	return r;
}
