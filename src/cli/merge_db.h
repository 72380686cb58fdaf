/* SPDX-License-Identifier: MIT */
/*
 * One database's processes and rows added to another (`p2pguard merge`). The input is data, never
 * code: its table and column names are quoted wherever they appear, its own SQL text (CREATE TABLE
 * statements, defaults, types) is never run, and only one statement at a time is.
 */
#pragma once

#include <sqlite3.h>

/*
 * Makes db (the output, opened by p2pg_store_open) ready to merge into: it may attach one database
 * at a time and trusts no function of an input's schema. Call once after opening.
 */
void p2pg_merge_prepare(sqlite3 *db);

/*
 * Adds the processes of the database at in_path, with all their rows re-keyed, to db, in one
 * transaction; a process already there (same boot, pid and start) is not added twice, only its
 * new rows. Tables and columns the input has and db lacks are created with the input's names and
 * column affinities, keys and unique constraints (never with its SQL text). ret_processes: the
 * input's processes; ret_new: those not in db before. Returns 0, or a negative errno after one
 * line on stderr: -EINVAL when in_path is not a p2pguard database.
 */
int p2pg_merge_database(sqlite3 *db, const char *in_path, int *ret_processes, int *ret_new);
