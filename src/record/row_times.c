/* SPDX-License-Identifier: MIT */
#include "row_times.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cleanup.h"
#include "spool.h"
#include "spool_blob.h"
#include "store-private.h"

bool p2pg_row_times_add(struct p2pg_spool_blob *blob, int64_t row, uint32_t serial, uint64_t seq,
			uint64_t gpu_ns)
{
	char field[96];
	int n = snprintf(field, sizeof(field), "%" PRId64 " %" PRIu32 " %" PRIu64 " %" PRIu64, row,
			 serial, seq, gpu_ns);
	if (n < 0 || (size_t)n + 1 > sizeof(blob->text) - blob->length)
		return false;
	p2pg_spool_blob_add(blob, field);
	return true;
}

struct row_time {
	int64_t row;
	uint32_t serial;
	uint64_t seq, gpu_ns;
};

/* Strict: exactly the form p2pg_row_times_add writes, every number within what its column holds. */
static bool parse(const char *field, struct row_time *t)
{
	uint64_t row, serial, seq, gpu_ns;
	if (sscanf(field, "%" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64, &row, &serial, &seq,
		   &gpu_ns) != 4)
		return false;
	if (row == 0 || row > INT64_MAX || serial == 0 || serial > UINT32_MAX || seq > INT64_MAX ||
	    gpu_ns == 0 || gpu_ns > INT64_MAX)
		return false;
	char again[96];
	snprintf(again, sizeof(again), "%" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64, row, serial,
		 seq, gpu_ns);
	if (strcmp(again, field) != 0) /* signs, spaces, leading zeros, trailing text */
		return false;
	*t = (struct row_time){(int64_t)row, (uint32_t)serial, seq, gpu_ns};
	return true;
}

bool p2pg_row_times_valid(const struct p2pg_spool_blob *blob)
{
	uint32_t pos = 0;
	const char *field;
	struct row_time t;
	while ((field = p2pg_store_blob_next_field(blob, &pos)))
		if (!parse(field, &t))
			return false;
	return pos > 0;
}

int p2pg_row_times_import(sqlite3 *db, int64_t process_id, const struct p2pg_spool_blob *blob)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(db,
			       "UPDATE transfers SET gpu_ns = ?1 WHERE id = ?2 AND process_id = ?3 "
			       "AND thread_serial = ?4 AND seq = ?5 AND gpu_ns IS NULL",
			       -1, &st, NULL) != SQLITE_OK)
		return -EIO;
	uint32_t pos = 0;
	const char *field;
	while ((field = p2pg_store_blob_next_field(blob, &pos))) {
		struct row_time t;
		if (!parse(field, &t))
			continue;
		sqlite3_reset(st);
		sqlite3_bind_int64(st, 1, (int64_t)t.gpu_ns);
		sqlite3_bind_int64(st, 2, t.row);
		sqlite3_bind_int64(st, 3, process_id);
		sqlite3_bind_int64(st, 4, t.serial);
		sqlite3_bind_int64(st, 5, (int64_t)t.seq);
		if (sqlite3_step(st) != SQLITE_DONE)
			return -EIO;
	}
	return 0;
}
