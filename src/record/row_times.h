/* SPDX-License-Identifier: MIT */
/*
 * GPU times of rows already in the database that the database could not take at the exit (another
 * rank held its lock): kept in a blob of the spool (P2PG_BLOB_ROW_TIMES), one text field per row,
 * "ROW SERIAL SEQ GPU_NS" in decimal, and written into their rows by whoever imports the spool. A
 * row is named by its id and by the record it came from, so a time never lands in another row (a
 * database replaced in between holds other rows under the same ids).
 */
#pragma once

#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>

#include "p2pguard/spool.h"

/* Adds one row's time to a blob being filled; false when the blob has no room for it. */
bool p2pg_row_times_add(struct p2pg_spool_blob *blob, int64_t row, uint32_t serial, uint64_t seq,
			uint64_t gpu_ns);
/* Whether every field of the blob is a time a writer can have left. */
bool p2pg_row_times_valid(const struct p2pg_spool_blob *blob);
/* Writes the times into the rows of process_id they name that have none yet: 0, or -EIO. */
int p2pg_row_times_import(sqlite3 *db, int64_t process_id, const struct p2pg_spool_blob *blob);
