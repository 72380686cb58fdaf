/* SPDX-License-Identifier: MIT */
/*
 * The import of mapping records (src/record/mapping_record.h): a row each; a count for a process's
 * own memory; an end and the mapping it ends linked by their id whichever is imported first (they
 * may sit in two threads' rings); a dropped reference linking nothing; a damaged record no row.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "api.h"
#include "mapping_record.h"
#include "spool.h"
#include "spool_ring.h"
#include "store.h"
#include "tap.h"

static long long one(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *st = NULL;
	long long v = -1;
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_type(st, 0) == SQLITE_NULL ? -2 : sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

/* The spool being written (a ring's slots get their disk blocks as it fills). */
static struct p2pg_spool_layout *writing;
static int writing_fd = -1;

static void put(struct p2pg_spool_thread *t, unsigned event, uint64_t started, int32_t id,
		uint32_t bits, int owner, int accessor)
{
	struct p2pg_record r = {.started_ns = started,
				.host_ns = 100,
				.bytes = 4096,
				.stream = 0x7000,
				.api = P2PG_API_cuMemMap,
				.kind = P2PG_REC_MAPPING,
				.path = (uint8_t)event,
				.src_device = (int16_t)owner,
				.dst_device = (int16_t)accessor,
				.flags = (P2PG_MAP_HANDLE_POSIX_FD << P2PG_MAP_HANDLE_SHIFT) | bits,
				.value = id};
	if (event == P2PG_MAP_END)
		r.api = P2PG_API_cuMemUnmap;
	p2pg_spool_put(writing, writing_fd, t, &r);
}

int main(void)
{
	char dir[] = "/tmp/p2pg-unit-XXXXXX";
	if (!mkdtemp(dir))
		return 2;
	char db_path[256], spool_dir[256], spool_path[512];
	snprintf(db_path, sizeof(db_path), "%s/t.db", dir);
	p2pg_spool_dir_for(db_path, spool_dir, sizeof(spool_dir));
	sqlite3 *db = NULL;
	char err[256];
	CHECK(p2pg_store_open(db_path, &db, err, sizeof(err)) == 0, "open creates the schema");
	struct p2pg_process_info info = {
	    .hostname = "unit", .rank = -1, .local_rank = -1, .mode = "observe"};
	int fd = -1;
	struct p2pg_spool_layout *spool =
	    p2pg_spool_create(spool_dir, &info, &fd, spool_path, sizeof(spool_path), NULL, 0);
	writing = spool;
	writing_fd = fd;
	struct p2pg_spool_thread *a = p2pg_spool_claim_thread(spool, fd, 11);
	struct p2pg_spool_thread *b = p2pg_spool_claim_thread(spool, fd, 12);
	struct p2pg_importer im;
	p2pg_importer_init(&im, P2PG_RECORD_ALL);

	/* The end first (ring a), its mapping later (ring b). */
	put(a, P2PG_MAP_END, 2000, 5, P2PG_MAP_F_CROSS_PROCESS, 0, 1);
	CHECK(p2pg_store_import(db, spool, &im, false) == 1, "the end alone is a row");
	put(b, P2PG_MAP_MAP, 1000, 5, P2PG_MAP_F_CROSS_PROCESS, 0, -1);
	CHECK(p2pg_store_import(db, spool, &im, false) == 1, "then its mapping");
	CHECK(one(db, "SELECT ended_ns FROM peer_mappings WHERE event = 'map'") == 2000,
	      "the mapping imported after its end takes the end's start as ended_ns");
	CHECK(one(db, "SELECT ended_by = 'cuMemUnmap' FROM peer_mappings WHERE event = 'map'") == 1,
	      "and names it");

	/* The usual order, in one pass. */
	put(a, P2PG_MAP_ACCESS, 3000, 6, 0, 0, 1);
	put(b, P2PG_MAP_END, 4000, 6, 0, 0, 1);
	CHECK(p2pg_store_import(db, spool, &im, false) == 2, "an access and its end");
	CHECK(one(db, "SELECT ended_ns FROM peer_mappings WHERE event = 'access'") == 4000,
	      "the access ended by the unmap");
	CHECK(one(db, "SELECT is_peer FROM peer_mappings WHERE event = 'access'") == 1,
	      "owner 0, accessor 1: a peer mapping");
	CHECK(one(db, "SELECT is_peer FROM peer_mappings WHERE event = 'map'") == -2,
	      "no accessor: is_peer NULL");

	/* A dropped reference ends nothing. */
	put(a, P2PG_MAP_IMPORT, 5000, 7, P2PG_MAP_F_CROSS_PROCESS, 0, 1);
	put(a, P2PG_MAP_END, 6000, 7, P2PG_MAP_F_CROSS_PROCESS | P2PG_MAP_F_PARTIAL, 0, 1);
	CHECK(p2pg_store_import(db, spool, &im, false) == 2, "an open and a close of one of two");
	CHECK(one(db, "SELECT ended_ns FROM peer_mappings WHERE event = 'import'") == -2,
	      "the partial close leaves the mapping live");
	CHECK(one(db, "SELECT count(*) FROM peer_mappings WHERE event = 'unref'") == 1,
	      "and is an unref row");

	/* Counted: no row. */
	for (int k = 0; k < 3; k++)
		put(a, P2PG_MAP_MAP, 7000 + k, 0, P2PG_MAP_F_COUNTED, 2, -1);
	CHECK(p2pg_store_import(db, spool, &im, false) == 0, "counted records write no row");
	CHECK(one(db, "SELECT calls FROM mapping_counts WHERE api = 'cuMemMap' AND device = 2") ==
		  3,
	      "three counted");
	CHECK(one(db, "SELECT bytes FROM mapping_counts WHERE api = 'cuMemMap' AND device = 2") ==
		  3 * 4096,
	      "with their bytes");

	/* Damage: an unknown event. */
	put(a, 9, 8000, 0, 0, 0, 0);
	long long before = one(db, "SELECT count(*) FROM peer_mappings");
	p2pg_store_import(db, spool, &im, false);
	CHECK(one(db, "SELECT count(*) FROM peer_mappings") == before &&
		  one(db, "SELECT records_invalid FROM processes") == 1,
	      "a mapping record of an unknown event is counted as invalid, not a row");

	/* Imported again from scratch (recovery): nothing twice. */
	struct p2pg_importer again;
	p2pg_importer_init(&again, P2PG_RECORD_ALL);
	again.process_id = im.process_id;
	before = one(db, "SELECT count(*) FROM peer_mappings");
	p2pg_store_import(db, spool, &again, true);
	CHECK(one(db, "SELECT count(*) FROM peer_mappings") == before &&
		  one(db, "SELECT calls FROM mapping_counts WHERE device = 2") == 3,
	      "a repeated import adds no row and counts nothing twice");

	sqlite3_close(db);
	munmap(spool, P2PG_SPOOL_MAP_SIZE);
	close(fd);
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		return 2;
	return TAP_DONE();
}
