/* SPDX-License-Identifier: MIT */
/*
 * A transfer's row after its import: the copy's GPU time once its events or CUPTI tell it, and its
 * stalls row when it has not finished in time. drainer_timing.c decides when, in transactions of
 * its own, apart from a spool's import (store_import.c).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cleanup.h"
#include "store.h"

int p2pg_store_set_gpu_ns(sqlite3 *db, int64_t row, uint64_t gpu_ns)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(db, "UPDATE transfers SET gpu_ns=?1 WHERE id=?2", -1, &st, NULL) !=
	    SQLITE_OK)
		return -EIO;
	sqlite3_bind_int64(st, 1, (int64_t)gpu_ns);
	sqlite3_bind_int64(st, 2, row);
	return sqlite3_step(st) == SQLITE_DONE ? 0 : -EIO;
}

int p2pg_store_add_stall(sqlite3 *db, int64_t row, uint64_t now_ns, unsigned stall_s,
			 const char *rule_id, const char *diagnosis, const char *advice)
{
	/*
	 * Untimed copies cannot be watched one by one, but a stream runs in order: the copies
	 * enqueued on the same stream after its last one known finished, and before this one, are
	 * unfinished too. Their count goes into the evidence.
	 */
	_cleanup_sqlite_stmt_ sqlite3_stmt *q = NULL;
	if (sqlite3_prepare_v2(
		db,
		"SELECT t.path, t.started_ns, (SELECT count(*) FROM transfers u WHERE "
		"u.process_id = t.process_id AND u.stream IS t.stream AND u.id < t.id AND "
		"COALESCE(u.gpu_ns, 0) = 0 AND u.started_ns > COALESCE((SELECT max(v.started_ns) "
		"FROM transfers v WHERE v.process_id = t.process_id AND v.stream IS t.stream AND "
		"v.id < t.id AND v.gpu_ns > 0), 0)) FROM transfers t WHERE t.id = ?1",
		-1, &q, NULL) != SQLITE_OK)
		return -EIO;
	sqlite3_bind_int64(q, 1, row);
	if (sqlite3_step(q) != SQLITE_ROW)
		return -ENOENT;
	const char *path = (const char *)sqlite3_column_text(q, 0);
	int64_t started = sqlite3_column_int64(q, 1);
	int64_t earlier = sqlite3_column_int64(q, 2);
	char evidence[256];
	snprintf(evidence, sizeof(evidence),
		 "{\"stall_s\": %u, \"waited_s\": %.1f, \"path\": \"%s\", "
		 "\"earlier_unfinished_untimed_on_stream\": %lld, \"peer_access_enabled\": %s}",
		 stall_s, (double)((int64_t)now_ns - started) / 1e9, path ? path : "",
		 (long long)earlier, path && strcmp(path, "p2p") == 0 ? "true" : "false");

	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(
		db,
		"INSERT OR IGNORE INTO stalls (process_id, transfer_id, thread_id, api, "
		"src_device, "
		"dst_device, bytes, stream, path, started_ns, waited_ns, evidence, rule_id, "
		"diagnosis, advice) SELECT process_id, id, thread_id, api, src_device, dst_device, "
		"bytes, stream, path, started_ns, ?2 - started_ns, ?3, ?4, ?5, ?6 FROM transfers "
		"WHERE id = ?1",
		-1, &st, NULL) != SQLITE_OK)
		return -EIO;
	sqlite3_bind_int64(st, 1, row);
	sqlite3_bind_int64(st, 2, (int64_t)now_ns);
	sqlite3_bind_text(st, 3, evidence, -1, SQLITE_TRANSIENT);
	if (rule_id)
		sqlite3_bind_text(st, 4, rule_id, -1, SQLITE_STATIC);
	if (diagnosis)
		sqlite3_bind_text(st, 5, diagnosis, -1, SQLITE_STATIC);
	if (advice)
		sqlite3_bind_text(st, 6, advice, -1, SQLITE_STATIC);
	if (sqlite3_step(st) != SQLITE_DONE)
		return -EIO;
	return sqlite3_changes(db) > 0 ? 1 : 0;
}
