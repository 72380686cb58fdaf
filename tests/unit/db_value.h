/* SPDX-License-Identifier: MIT */
/* The first column of a query's first row, -1 when there is none: the unit tests' and the fuzz
 * targets' look at a database. */
#pragma once

#include <sqlite3.h>

static inline long long one(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *st = NULL;
	long long v = -1;
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}
