/* SPDX-License-Identifier: MIT */
/* What every command that reads a database shares: opening it, dead spools first, and escaping. */
#pragma once

#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "utf8.h"

/*
 * Imports the spools of processes that are gone into db_path. Returns the number of spool files
 * imported (0 when there is no spool folder), or a negative errno after saying in one line why it
 * could not. quiet: say nothing when nothing was imported.
 */
int p2pg_cli_import_dead_spools(const char *db_path, bool quiet);

/*
 * Opens db_path read-only for a command that reads it, after importing its dead spools (a failed
 * import is one line on stderr, then the command goes on with what the database holds). A missing
 * database is one line on stderr. Returns 0 or a negative errno (the command then exits 2).
 */
int p2pg_cli_open_read(const char *db_path, sqlite3 **ret_db);

/*
 * Watches every SQLite call of the command for a damaged database (SQLite's error log: corruption,
 * a file that is not a database, an I/O error), whichever query meets it first: most readers stop
 * at the first row that fails, and what they read before would pass for the whole. Call before
 * any other SQLite call of the process.
 */
void p2pg_cli_watch_damage(void);
/* SQLite's words for the first damage seen since the watch began, or NULL. */
const char *p2pg_cli_damage(void);

bool p2pg_cli_has_table(sqlite3 *db, const char *table);
bool p2pg_cli_has_column(sqlite3 *db, const char *table, const char *column);

/* text as a JSON string literal, quotes included; NULL as null. */
/* text as a JSON string (null for NULL); a byte that begins no well-formed UTF-8 sequence is
 * written as U+FFFD. */
void p2pg_cli_json_string(FILE *out, const char *text);
/*
 * Each row of sql as a JSON object keyed by its column names (integers as they are, reals with 17
 * digits, NULL as null, anything else as a string), in an array; each object starts a line of its
 * own after `indent` spaces. Returns 0, or -EIO having written nothing when sql cannot be prepared.
 */
int p2pg_cli_json_rows(sqlite3 *db, FILE *out, const char *sql, int indent);
/* text with HTML's special characters escaped; NULL as nothing. */
void p2pg_cli_html_text(FILE *out, const char *text);

/* Column text or NULL. */
const char *p2pg_cli_col(sqlite3_stmt *st, int col);

/*
 * Says that arg is not an option of cmd ("p2pguard CMD: unknown option ARG") and returns 2,
 * the exit status of a usage error.
 */
int p2pg_cli_unknown_option(const char *cmd, const char *arg);

/*
 * Restricts every later query of db to the processes whose ids are in temp.chosen (a temporary
 * table the caller made): each table with a process_id column, and processes, get a temporary
 * view of the same name that keeps only their rows. Returns 0 or -EIO after saying why.
 */
int p2pg_cli_restrict(sqlite3 *db);

/* Column text copied (the caller frees it), or NULL for NULL or when memory runs out. */
char *p2pg_cli_col_dup(sqlite3_stmt *st, int col);
/* Column integer, or null_value for NULL. */
int p2pg_cli_col_int_or(sqlite3_stmt *st, int col, int null_value);
/* The first column of sql's first row, or 0 when there is none or sql cannot run. */
int64_t p2pg_cli_scalar(sqlite3 *db, const char *sql);

/* The database a command works on: its argument, else P2PGUARD_DB, else p2pguard.db. */
const char *p2pg_cli_db_path(const char *arg);
