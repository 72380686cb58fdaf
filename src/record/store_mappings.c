/* SPDX-License-Identifier: MIT */
/*
 * The import of mapping records (src/record/mapping_record.h): a peer_mappings row each, or a
 * count in mapping_counts for a process's own memory on its own device. An end and the mapping it
 * ends may sit in different rings, so either can be imported first: the end fills in the
 * mapping's ended_ns if it is there, and a mapping looks for its end when it comes in.
 */
#include <errno.h>

#include "api.h"
#include "mapping_record.h"
#include "store-private.h"

static int prepare(sqlite3 *db, struct p2pg_mapping_import *mi)
{
	if (mi->insert)
		return 0;
	if (sqlite3_prepare_v2(
		db,
		"INSERT INTO peer_mappings (process_id, thread_id, api, event, status, "
		"accessor_device, owner_device, is_peer, cross_process, bytes, address, "
		"handle_type, flags, mapping_id, started_ns, host_ns, thread_serial, seq) VALUES "
		"(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18)",
		-1, &mi->insert, NULL) != SQLITE_OK ||
	    /* Each record's bytes fit a signed column, their sum need not: past it SQLite's sum
	     * would turn into a float. Only damage can get there; the count stops at the most
	     * the column holds. */
	    sqlite3_prepare_v2(db,
			       "INSERT INTO mapping_counts (process_id, api, device, calls, bytes) "
			       "VALUES (?1,?2,?3,1,?4) ON CONFLICT (process_id, api, device) DO "
			       "UPDATE SET calls = calls + 1, bytes = CASE WHEN bytes > "
			       "9223372036854775807 - excluded.bytes THEN 9223372036854775807 ELSE "
			       "bytes + excluded.bytes END",
			       -1, &mi->count, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db,
			       "UPDATE peer_mappings SET ended_ns = ?3, ended_by = ?4 WHERE "
			       "process_id = ?1 AND mapping_id = ?2 AND event NOT IN ('end', "
			       "'unref') AND ended_ns IS NULL",
			       -1, &mi->end, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db,
			       "UPDATE peer_mappings SET (ended_ns, ended_by) = (SELECT "
			       "e.started_ns, e.api FROM peer_mappings e WHERE e.process_id = ?1 "
			       "AND e.mapping_id = ?2 AND e.event = 'end' AND e.status = 0 ORDER "
			       "BY e.started_ns LIMIT 1) WHERE id = ?3 AND EXISTS (SELECT 1 FROM "
			       "peer_mappings e WHERE e.process_id = ?1 AND e.mapping_id = ?2 AND "
			       "e.event = 'end' AND e.status = 0)",
			       -1, &mi->start, NULL) != SQLITE_OK) {
		p2pg_store_mapping_finish(mi);
		return -EIO;
	}
	return 0;
}

void p2pg_store_mapping_finish(struct p2pg_mapping_import *mi)
{
	sqlite3_finalize(mi->insert);
	sqlite3_finalize(mi->count);
	sqlite3_finalize(mi->end);
	sqlite3_finalize(mi->start);
	*mi = (struct p2pg_mapping_import){0};
}

static void bind_device(sqlite3_stmt *st, int index, int device)
{
	if (device >= 0)
		sqlite3_bind_int(st, index, device);
	else
		sqlite3_bind_null(st, index);
}

static int count(struct p2pg_mapping_import *mi, int64_t process_id, const struct p2pg_record *r)
{
	sqlite3_stmt *st = mi->count;
	sqlite3_reset(st);
	sqlite3_bind_int64(st, 1, process_id);
	sqlite3_bind_text(st, 2, p2pg_api_name(r->api), -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 3, r->src_device >= 0 ? r->src_device : -1);
	sqlite3_bind_int64(st, 4, (int64_t)r->bytes);
	return sqlite3_step(st) == SQLITE_DONE ? 0 : -EIO;
}

int p2pg_store_mapping(sqlite3 *db, struct p2pg_mapping_import *mi, int64_t process_id,
		       uint32_t serial, uint64_t seq, const struct p2pg_record *r)
{
	if (prepare(db, mi) < 0)
		return -EIO;
	if (r->flags & P2PG_MAP_F_COUNTED)
		return count(mi, process_id, r);

	bool end = r->path == P2PG_MAP_END;
	bool partial = end && (r->flags & P2PG_MAP_F_PARTIAL);
	int owner = r->src_device, accessor = r->dst_device;
	sqlite3_stmt *st = mi->insert;
	sqlite3_reset(st);
	sqlite3_bind_int64(st, 1, process_id);
	sqlite3_bind_int64(st, 2, r->tid);
	sqlite3_bind_text(st, 3, p2pg_api_name(r->api), -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 4, partial ? "unref" : p2pg_map_event_name(r->path), -1,
			  SQLITE_STATIC);
	sqlite3_bind_int(st, 5, r->status);
	bind_device(st, 6, accessor);
	bind_device(st, 7, owner);
	if (owner >= 0 && accessor >= 0)
		sqlite3_bind_int(st, 8, owner != accessor);
	else
		sqlite3_bind_null(st, 8);
	sqlite3_bind_int(st, 9, (r->flags & P2PG_MAP_F_CROSS_PROCESS) != 0);
	sqlite3_bind_int64(st, 10, (int64_t)r->bytes);
	if (r->stream)
		sqlite3_bind_int64(st, 11, (int64_t)r->stream);
	else
		sqlite3_bind_null(st, 11);
	const char *type = p2pg_map_handle_name(p2pg_map_handle_type(r->flags));
	if (type)
		sqlite3_bind_text(st, 12, type, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, 12);
	sqlite3_bind_int64(st, 13, r->flags & P2PG_MAP_CALL_FLAGS);
	if (r->value > 0)
		sqlite3_bind_int64(st, 14, r->value);
	else
		sqlite3_bind_null(st, 14);
	sqlite3_bind_int64(st, 15, (int64_t)r->started_ns);
	sqlite3_bind_int64(st, 16, (int64_t)r->host_ns);
	sqlite3_bind_int64(st, 17, serial);
	sqlite3_bind_int64(st, 18, (int64_t)seq);
	if (sqlite3_step(st) != SQLITE_DONE)
		return -EIO;
	if (r->value <= 0 || r->status != 0 || partial)
		return 1;

	/* Link the end and what it ends, whichever came in first. */
	st = end ? mi->end : mi->start;
	sqlite3_reset(st);
	sqlite3_bind_int64(st, 1, process_id);
	sqlite3_bind_int64(st, 2, r->value);
	if (end) {
		sqlite3_bind_int64(st, 3, (int64_t)r->started_ns);
		sqlite3_bind_text(st, 4, p2pg_api_name(r->api), -1, SQLITE_STATIC);
	} else {
		sqlite3_bind_int64(st, 3, sqlite3_last_insert_rowid(db));
	}
	return sqlite3_step(st) == SQLITE_DONE ? 1 : -EIO;
}
