/* SPDX-License-Identifier: MIT */
/*
 * The spool and its import: every published record becomes exactly one row, however often an
 * import is repeated or restarted (the watermark lives in the database); failures and crashes come
 * through; summary mode aggregates; a full ring folds successes into overflow aggregates, keeps
 * room for failures, and drops and counts only when that is full too.
 */
#include <errno.h>
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "spool.h"
#include "spool_ring.h"
#include "spool_blob.h"
#include "store.h"
#include "db_value.h"
#include "tap.h"

static int timed_calls, timed_rows, timed_without_row;

static void count_timed(void *userdata, const struct p2pg_pending_timing *t)
{
	(void)userdata;
	timed_calls++;
	if (t->row > 0)
		timed_rows++;
	else
		timed_without_row++;
}

/* The spool being written, for the publishing helpers: a ring's slots get their disk blocks as it
 * fills. */
static struct p2pg_spool_layout *writing;
static int writing_fd = -1;

static void publish_timed(struct p2pg_spool_thread *t, int n)
{
	for (int k = 0; k < n; k++) {
		struct p2pg_record r = {.host_ns = 1000,
					.bytes = 256,
					.api = 5,
					.kind = P2PG_REC_TRANSFER,
					.path = P2PG_PATH_P2P,
					.flags = P2PG_REC_F_TIMED,
					.value = k,
					.src_device = 0,
					.dst_device = 1};
		p2pg_spool_put(writing, writing_fd, t, &r);
	}
}

static void publish(struct p2pg_spool_thread *t, int n, int status)
{
	for (int k = 0; k < n; k++) {
		struct p2pg_record r = {.started_ns = (uint64_t)k,
					.host_ns = 1000 + (uint64_t)k,
					.bytes = 4096,
					.api = 5,
					.kind = P2PG_REC_TRANSFER,
					.path = P2PG_PATH_P2P,
					.status = status,
					.src_device = 0,
					.dst_device = 1};
		p2pg_spool_put(writing, writing_fd, t, &r);
	}
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	return remove(path);
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
	CHECK(one(db, "PRAGMA user_version") == 2, "schema version 2");
	CHECK(one(db, "PRAGMA application_id") == 0x50325047, "application_id P2PG");

	struct p2pg_process_info info = {.hostname = "unit",
					 .rank = 3,
					 .local_rank = 1,
					 .mode = "observe",
					 .cmdline = "unit test"};
	int fd = -1;
	struct p2pg_spool_layout *spool =
	    p2pg_spool_create(spool_dir, &info, &fd, spool_path, sizeof(spool_path), NULL, 0);
	CHECK(spool != NULL, "spool created");
	writing = spool;
	writing_fd = fd;
	struct p2pg_spool_thread *a = p2pg_spool_claim_thread(spool, fd, 11);
	struct p2pg_spool_thread *b = p2pg_spool_claim_thread(spool, fd, 12);
	CHECK(a && b && a != b && a->serial != b->serial, "two threads, two rings, two serials");

	publish(a, 100, 0);
	publish(b, 50, 0);
	struct p2pg_importer im;
	p2pg_importer_init(&im, P2PG_RECORD_ALL);
	CHECK(p2pg_store_import(db, spool, &im, false) == 150, "first pass imports 150 rows");
	CHECK(p2pg_store_import(db, spool, &im, false) == 0, "second pass: nothing new");
	publish(a, 7, 0);
	CHECK(p2pg_store_import(db, spool, &im, false) == 7, "only what is new");
	CHECK(one(db, "SELECT count(*) FROM transfers") == 157, "157 rows");
	CHECK(one(db, "SELECT rank FROM processes") == 3, "rank recorded");

	/* A crash between the commit and the tail store: the file still says 0 for ring b, but a
	 * fresh importer (the next process, `p2pguard recover`) reads the watermark from the
	 * database and imports nothing twice. */
	atomic_store(&b->tail, 0);
	publish(b, 5, 0);
	struct p2pg_importer fresh;
	p2pg_importer_init(&fresh, P2PG_RECORD_ALL);
	CHECK(p2pg_store_import(db, spool, &fresh, true) == 5,
	      "fresh importer: only the 5 new rows");
	CHECK(one(db, "SELECT count(*) FROM transfers") == 162, "no duplicate after a lost tail");
	CHECK(one(db,
		  "SELECT count(*) FROM (SELECT thread_serial, seq FROM transfers GROUP BY 1, 2 "
		  "HAVING count(*) > 1)") == 0,
	      "every (thread, seq) once");
	CHECK(one(db, "SELECT recovered FROM processes") == 1, "the process is marked recovered");

	/* A failure blob and a crash blob. */
	struct p2pg_spool_blob *blob = p2pg_spool_blob_claim(spool);
	blob->kind = P2PG_BLOB_FAILURE;
	blob->serial = a->serial;
	blob->seq = 3;
	blob->status = 217;
	blob->api = 1;
	const char *fields[] = {"device=0 peer=0",
				"cudaErrorPeerAccessUnsupported",
				"msg",
				"cuda/peer-access-to-own-device",
				"why",
				"what",
				"#0 x+0x1 f",
				"t.py:1 in f",
				"{\"peer_is_self\":true}",
				"passed"};
	for (size_t k = 0; k < sizeof(fields) / sizeof(fields[0]); k++)
		p2pg_spool_blob_add(blob, fields[k]);
	p2pg_spool_blob_publish(blob);
	struct p2pg_spool_blob *half = p2pg_spool_blob_claim(spool);
	half->kind = P2PG_BLOB_FAILURE; /* claimed, never published: a writer that died */
	CHECK(p2pg_store_import(db, spool, &im, false) == 1, "the published failure is imported");
	CHECK(one(db,
		  "SELECT count(*) FROM failures WHERE rule_id = 'cuda/peer-access-to-own-device' "
		  "AND python_stack = 't.py:1 in f' AND action = 'passed'") == 1,
	      "its fields land in their columns");
	CHECK(p2pg_store_import(db, spool, &fresh, true) == 0, "and never twice");

	/* Full ring: a successful transfer past the reserve is folded into the thread's overflow
	 * aggregates; a failure takes the reserved room; only with that full too is a record
	 * dropped and counted. Never blocking. */
	struct p2pg_spool_thread *c = p2pg_spool_claim_thread(spool, fd, 13);
	long long rows_before = one(db, "SELECT count(*) FROM transfers");
	publish(c, P2PG_SPOOL_RING + 10, 0);
	CHECK(atomic_load(&c->folded) == P2PG_SPOOL_RESERVE + 10 && atomic_load(&c->dropped) == 0,
	      "successes past the reserve are folded, none dropped");
	publish(c, P2PG_SPOOL_RESERVE + 3, 1);
	CHECK(atomic_load(&c->dropped) == 3, "failures fill the reserve; 3 dropped on a full ring");
	CHECK(p2pg_store_import(db, spool, &im, false) == P2PG_SPOOL_RING,
	      "the ring's records land");
	CHECK(one(db, "SELECT records_dropped FROM processes") == 3,
	      "the drop count is in the database");
	char sql[160];
	snprintf(sql, sizeof(sql),
		 "SELECT count(*) FROM transfers WHERE thread_serial = %u AND status = 1",
		 c->serial);
	CHECK(one(db, sql) == P2PG_SPOOL_RESERVE, "every failure that found room has its row");
	/* host_ns of the folded calls: 1000 + k for k in [RING - RESERVE, RING + 10). */
	long long first = P2PG_SPOOL_RING - P2PG_SPOOL_RESERVE, n = P2PG_SPOOL_RESERVE + 10;
	long long host_want = n * 1000 + (first + first + n - 1) * n / 2;
	CHECK(one(db, "SELECT count(*) FROM transfer_overflow") == 1 &&
		  one(db, "SELECT count FROM transfer_overflow WHERE thread_id = 13 AND api = "
			  "'cudaMemcpyPeerAsync' AND src_device = 0 AND dst_device = 1 AND path = "
			  "'p2p' AND status = 0 AND size_bucket = 12") == n &&
		  one(db, "SELECT bytes FROM transfer_overflow") == n * 4096 &&
		  one(db, "SELECT host_ns_total FROM transfer_overflow") == host_want,
	      "the folded calls are one aggregate: count, bytes and host time exact");
	CHECK(one(db, "SELECT sum(calls) FROM peer_totals") ==
		  one(db, "SELECT count(*) FROM transfers") + n,
	      "peer_totals: every row and every folded call");
	struct p2pg_importer again;
	p2pg_importer_init(&again, P2PG_RECORD_ALL);
	CHECK(p2pg_store_import(db, spool, &again, true) == 0 &&
		  one(db, "SELECT sum(count) FROM transfer_overflow") == n,
	      "importing the aggregates again (a crash after the commit) counts nothing twice");
	p2pg_importer_release(&again);

	/* The thread ends: once all is imported its ring is free, its aggregates cleared for the
	 * next thread, whose folds are counted under its own serial. */
	uint32_t c_serial = c->serial;
	atomic_store(&c->state, P2PG_SLOT_RETIRED);
	p2pg_store_import(db, spool, &im, false);
	CHECK(atomic_load(&c->state) == P2PG_SLOT_FREE, "a drained retired ring is free");
	struct p2pg_spool_thread *d = p2pg_spool_claim_thread(spool, fd, 14);
	CHECK(d == c && d->serial != c_serial && d->serial > b->serial,
	      "reused, with a new serial");
	publish(d, P2PG_SPOOL_RING - P2PG_SPOOL_RESERVE + 2, 0);
	CHECK(p2pg_store_import(db, spool, &im, false) == P2PG_SPOOL_RING - P2PG_SPOOL_RESERVE &&
		  one(db, "SELECT sum(count) FROM transfer_overflow WHERE thread_id = 14") == 2 &&
		  one(db, "SELECT sum(count) FROM transfer_overflow WHERE thread_id = 13") == n,
	      "the next owner's folds start from zero");
	long long rows_added = one(db, "SELECT count(*) FROM transfers") - rows_before;

	/* A SIGKILL between a ring's first fold and its folded count: the count still says 0, but a
	 * fresh importer (`p2pguard recover`) reads the aggregates whatever it says. */
	struct p2pg_spool_thread *e = p2pg_spool_claim_thread(spool, fd, 15);
	struct p2pg_record cut = {.host_ns = 1000,
				  .bytes = 4096,
				  .api = 5,
				  .kind = P2PG_REC_TRANSFER,
				  .path = P2PG_PATH_P2P,
				  .src_device = 0,
				  .dst_device = 1};
	CHECK(e && p2pg_spool_fold(e, &cut), "a fold");
	atomic_store(&e->folded, 0);
	struct p2pg_importer after_kill;
	p2pg_importer_init(&after_kill, P2PG_RECORD_ALL);
	p2pg_store_import(db, spool, &after_kill, true);
	p2pg_importer_release(&after_kill);
	CHECK(one(db, "SELECT sum(count) FROM transfer_overflow WHERE thread_id = 15") == 1,
	      "a fold whose count the kill cut off is imported all the same");

	/* Recovery of a dead process's file: flock free, imported, deleted. Another version's spool
	 * beside it (another layout) is left alone, for that version's recover. */
	munmap(spool, P2PG_SPOOL_MAP_SIZE);
	close(fd);
	char other_version[600];
	snprintf(other_version, sizeof(other_version), "%s/1-1.spool", spool_dir);
	FILE *ov = fopen(other_version, "w");
	CHECK(ov && fwrite("P2PGSPL1", 1, 8, ov) == 8 && fclose(ov) == 0, "an old version's spool");
	CHECK(p2pg_store_recover_dir(db, spool_dir, NULL, P2PG_RECORD_ALL) == 1,
	      "recovered one file");
	CHECK(access(spool_path, F_OK) != 0, "and removed it");
	CHECK(access(other_version, F_OK) == 0, "the other version's spool stays");
	unlink(other_version);
	CHECK(one(db, "SELECT count(*) FROM transfers") == rows_before + rows_added &&
		  one(db, "SELECT sum(count) FROM transfer_overflow") == n + 2 + 1,
	      "recovery added nothing already imported");

	/* Summary mode: aggregates, plus failures and outliers as rows. */
	spool = p2pg_spool_create(spool_dir, &info, &fd, spool_path, sizeof(spool_path), NULL, 0);
	writing = spool;
	writing_fd = fd;
	struct p2pg_spool_thread *s = p2pg_spool_claim_thread(spool, fd, 21);
	publish(s, 200, 0);
	publish(s, 3, 1);
	struct p2pg_importer sum;
	p2pg_importer_init(&sum, P2PG_RECORD_SUMMARY);
	p2pg_store_import(db, spool, &sum, false);
	CHECK(one(db, "SELECT sum(count) FROM transfer_summary") == 203,
	      "summary counts every call");
	CHECK(one(db, "SELECT sum(failures) FROM transfer_summary") == 3, "and its failures");
	CHECK(one(db, "SELECT count(*) FROM transfers WHERE status = 1 AND process_id = (SELECT "
		      "max(id) FROM processes)") == 3,
	      "failed transfers are still rows");
	p2pg_importer_release(&sum);

	/* Timed copies are handed to the owner only once their rows are committed; summarised ones
	 * come back without a row, so their event pairs are freed. */
	struct p2pg_spool_thread *tt = p2pg_spool_claim_thread(spool, fd, 22);
	struct p2pg_importer timed_all, timed_sum;
	p2pg_importer_init(&timed_all, P2PG_RECORD_ALL);
	p2pg_importer_init(&timed_sum, P2PG_RECORD_SUMMARY);
	timed_all.on_timed = timed_sum.on_timed = count_timed;
	publish_timed(tt, 40);
	sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL); /* the import must fail: busy */
	sqlite3 *other = NULL;
	sqlite3_open(db_path, &other);
	sqlite3_busy_timeout(other, 1);
	sqlite3_exec(other, "BEGIN IMMEDIATE", NULL, NULL, NULL);
	CHECK(p2pg_store_import(other, spool, &timed_all, false) < 0 && timed_calls == 0,
	      "a failed pass hands no timed copy over");
	sqlite3_close(other);
	sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
	CHECK(p2pg_store_import(db, spool, &timed_all, false) == 40 && timed_rows == 40,
	      "after the commit, 40 timed copies with their rows (%d)", timed_rows);
	publish_timed(tt, 30);
	p2pg_store_import(db, spool, &timed_sum, false);
	CHECK(timed_without_row + timed_rows - 40 == 30 && timed_without_row > 0,
	      "summary mode hands summarised timed copies back without a row (%d)",
	      timed_without_row);

	/* GPU times written into records the database had not taken (the exit's last pass, the
	 * database locked): whole, or cut by a SIGKILL between the time and its checksum, a record
	 * comes in with its time; a damaged one, or an untimed one with a time it never had, does
	 * not. */
	struct p2pg_spool_thread *late = p2pg_spool_claim_thread(spool, fd, 23);
	publish_timed(late, 3);
	publish(late, 1, 0);
	p2pg_spool_record_set_gpu_ns(late, 0, 5000);
	late->rec[1].gpu_ns = 7000; /* killed before the checksum was made again */
	late->rec[2].gpu_ns = 9000;
	late->rec[2].bytes ^= 1; /* damage */
	late->rec[3].gpu_ns = 11000;
	int calls_before = timed_calls;
	uint64_t invalid_before = timed_all.invalid;
	p2pg_store_import(db, spool, &timed_all, false);
	CHECK(one(db, "SELECT count(*) FROM transfers WHERE gpu_ns IN (5000, 7000)") == 2 &&
		  one(db, "SELECT count(*) FROM transfers WHERE gpu_ns IN (9000, 11000)") == 0,
	      "late GPU times in the spool: whole and cut ones kept, damaged and untimed refused");
	CHECK(timed_all.invalid - invalid_before == 2 && timed_calls == calls_before,
	      "the two refused records counted as damage, the timed ones asked for no event (%d)",
	      (int)(timed_all.invalid - invalid_before));
	p2pg_importer_release(&timed_all);
	p2pg_importer_release(&timed_sum);
	p2pg_importer_release(&im);
	p2pg_importer_release(&fresh);
	munmap(spool, P2PG_SPOOL_MAP_SIZE);
	close(fd);
	sqlite3_stmt *st = NULL;
	sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL);
	CHECK(sqlite3_step(st) == SQLITE_ROW &&
		  strcmp((const char *)sqlite3_column_text(st, 0), "ok") == 0,
	      "integrity check ok");
	sqlite3_finalize(st);
	sqlite3_close(db);
	nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	return TAP_DONE();
}
