/* SPDX-License-Identifier: MIT */
/*
 * The recorder's budgets, measured (scripts/bench-recorder.sh runs this and prints the table):
 *   record    cost of publishing one record, p50/p99 per call, at 1, 8 and 32 threads
 *   drain     rows per second the import into SQLite sustains
 *   latency   time from a call's record to its row being visible to another connection, p50/p99
 *   disk      database bytes per recorded call, P2PGUARD_RECORD=all vs summary
 * No GPU is involved: this is the guard's own cost.
 */
#include <errno.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include "crc32c.h"
#include "failure.h"
#include "guard.h"
#include "recorder.h"
#include "settings.h"
#include "spool.h"
#include "spool_ring.h"
#include "store.h"

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static double ns_per_tick;

static void calibrate(void)
{
	uint64_t t0 = now_ns(), c0 = __rdtsc();
	usleep(200000);
	uint64_t t1 = now_ns(), c1 = __rdtsc();
	ns_per_tick = (double)(t1 - t0) / (double)(c1 - c0);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* ---- record: per-call cost into a spool with no drainer, rings emptied between batches ---- */

/* A call costs a few ns, less than the timer's own jitter: the p50 is read from batches of
 * RECORD_BATCH calls (the timer once per batch), the p99 from calls timed one by one. */
#define RECORD_BATCH 16

struct record_arg {
	struct p2pg_spool_layout *spool;
	int fd;
	int calls;
	uint64_t *ticks;   /* one call each */
	uint64_t *batches; /* RECORD_BATCH calls each */
	pthread_barrier_t *barrier;
};

static void *record_worker(void *p)
{
	struct record_arg *a = p;
	struct p2pg_spool_thread *t = p2pg_spool_claim_thread(a->spool, a->fd, 1);
	if (!t) {
		perror("bench: no ring");
		exit(1);
	}
	struct p2pg_record r = {.api = 5, .kind = P2PG_REC_TRANSFER, .bytes = 256, .path = 1};
	pthread_barrier_wait(a->barrier);
	for (int k = 0; k < a->calls; k++) {
		/* Stand-in for the drainer, before the ring reaches the room kept for failures
		 * (past it a success would be folded: another path, measured by
		 * scripts/bench-overload.sh). */
		if (k % (P2PG_SPOOL_RING - P2PG_SPOOL_RESERVE) == 0)
			atomic_store(&t->tail, atomic_load(&t->head));
		r.started_ns = (uint64_t)k;
		_mm_lfence();
		uint64_t c0 = __rdtsc();
		_mm_lfence();
		p2pg_spool_put(a->spool, a->fd, t, &r);
		_mm_lfence();
		uint64_t c1 = __rdtsc();
		a->ticks[k] = c1 - c0;
	}
	for (int b = 0; b < a->calls / RECORD_BATCH; b++) {
		if ((b * RECORD_BATCH) % (P2PG_SPOOL_RING - P2PG_SPOOL_RESERVE) < RECORD_BATCH)
			atomic_store(&t->tail, atomic_load(&t->head));
		_mm_lfence();
		uint64_t c0 = __rdtsc();
		_mm_lfence();
		for (int k = 0; k < RECORD_BATCH; k++) {
			r.started_ns = (uint64_t)(b * RECORD_BATCH + k);
			p2pg_spool_put(a->spool, a->fd, t, &r);
		}
		_mm_lfence();
		uint64_t c1 = __rdtsc();
		a->batches[b] = c1 - c0;
	}
	return NULL;
}

static struct p2pg_spool_layout *make_spool(const char *dir, int *fd)
{
	struct p2pg_process_info info = {
	    .hostname = "bench", .rank = -1, .local_rank = -1, .mode = "observe"};
	char path[4096];
	return p2pg_spool_create(dir, &info, fd, path, sizeof(path), NULL, 0);
}

static void bench_record(const char *dir, int threads, const char *how)
{
	int fd;
	struct p2pg_spool_layout *spool = make_spool(dir, &fd);
	int calls = 200000;
	pthread_t tid[64];
	struct record_arg args[64];
	pthread_barrier_t barrier;
	pthread_barrier_init(&barrier, NULL, (unsigned)threads);
	/* The timer itself costs a few ns: measure it and subtract. */
	uint64_t empty[1000];
	for (int k = 0; k < 1000; k++) {
		_mm_lfence();
		uint64_t c0 = __rdtsc();
		_mm_lfence();
		_mm_lfence();
		uint64_t c1 = __rdtsc();
		empty[k] = c1 - c0;
	}
	qsort(empty, 1000, sizeof(uint64_t), cmp_u64);
	for (int k = 0; k < threads; k++) {
		args[k] =
		    (struct record_arg){spool,
					fd,
					calls,
					calloc((size_t)calls, sizeof(uint64_t)),
					calloc((size_t)calls / RECORD_BATCH, sizeof(uint64_t)),
					&barrier};
		pthread_create(&tid[k], NULL, record_worker, &args[k]);
	}
	size_t total = (size_t)threads * (size_t)calls;
	size_t per = (size_t)calls / RECORD_BATCH, nbatches = (size_t)threads * per;
	uint64_t *all = malloc(total * sizeof(uint64_t));
	uint64_t *batches = malloc(nbatches * sizeof(uint64_t));
	for (int k = 0; k < threads; k++) {
		pthread_join(tid[k], NULL);
		memcpy(all + (size_t)k * calls, args[k].ticks, (size_t)calls * sizeof(uint64_t));
		memcpy(batches + (size_t)k * per, args[k].batches, per * sizeof(uint64_t));
		free(args[k].ticks);
		free(args[k].batches);
	}
	qsort(all, total, sizeof(uint64_t), cmp_u64);
	qsort(batches, nbatches, sizeof(uint64_t), cmp_u64);
	double base = (double)empty[500];
	double p50 = ((double)batches[nbatches / 2] - base) * ns_per_tick / RECORD_BATCH;
	double p99 = ((double)all[total * 99 / 100] - base) * ns_per_tick;
	printf(
	    "| record, %2d thread%s%s | p50 %.1f ns, p99 %.0f ns | p50 <= 15 ns, p99 <= 500 ns | "
	    "%s |\n",
	    threads, threads == 1 ? " " : "s", how, p50 < 0 ? 0 : p50, p99 < 0 ? 0 : p99,
	    (p50 <= 15 && p99 <= 500) ? "met" : "MISSED");
	free(all);
	free(batches);
	pthread_barrier_destroy(&barrier);
	munmap(spool, P2PG_SPOOL_MAP_SIZE);
	close(fd);
}

/* ---- drain: rows per second from full rings into SQLite ---- */

static void fill(struct p2pg_spool_layout *spool, int fd, struct p2pg_spool_thread **rings,
		 int threads, int per_thread)
{
	for (int k = 0; k < threads; k++) {
		struct p2pg_spool_thread *t = rings[k];
		for (int n = 0; n < per_thread; n++) {
			struct p2pg_record r = {.started_ns = (uint64_t)n,
						.host_ns = 2000,
						.bytes = (uint64_t)(256 << (n % 16)),
						.stream = 0x1234,
						.api = (uint16_t)(n % 4),
						.kind = P2PG_REC_TRANSFER,
						.path = (uint8_t)(1 + n % 2),
						.src_device = 0,
						.dst_device = 1};
			p2pg_spool_put(spool, fd, t, &r);
		}
	}
}

static long long file_size(const char *path)
{
	struct stat st;
	long long n = stat(path, &st) == 0 ? (long long)st.st_size : 0;
	char wal[4200];
	snprintf(wal, sizeof(wal), "%s-wal", path);
	if (stat(wal, &st) == 0)
		n += st.st_size;
	return n;
}

static void bench_drain(const char *dir, enum p2pg_record_mode mode, const char *label)
{
	char db_path[4200];
	snprintf(db_path, sizeof(db_path), "%s/drain-%s.db", dir, label);
	sqlite3 *db;
	char err[256];
	if (p2pg_store_open(db_path, &db, err, sizeof(err)) < 0) {
		fprintf(stderr, "bench: %s\n", err);
		exit(1);
	}
	int fd;
	struct p2pg_spool_layout *spool = make_spool(dir, &fd);
	struct p2pg_importer im;
	p2pg_importer_init(&im, mode);
	long long rows = 0;
	double seconds = 0;
	long long calls = 0;
	struct p2pg_spool_thread *rings[8];
	for (int k = 0; k < 8; k++)
		rings[k] = p2pg_spool_claim_thread(spool, fd, (uint32_t)(100 + k));
	for (int round = 0; round < 25; round++) {
		/* Each ring up to the room kept for failures: rows only, nothing folded. */
		fill(spool, fd, rings, 8, P2PG_SPOOL_RING - P2PG_SPOOL_RESERVE);
		calls += 8LL * (P2PG_SPOOL_RING - P2PG_SPOOL_RESERVE);
		uint64_t t0 = now_ns();
		int n = p2pg_store_import(db, spool, &im, false);
		seconds += (double)(now_ns() - t0) / 1e9;
		if (n < 0) {
			fprintf(stderr, "bench: import failed: %d\n", n);
			exit(1);
		}
		rows += n;
	}
	sqlite3_exec(db, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL);
	if (mode == P2PG_RECORD_ALL)
		printf("| drain into SQLite | %.2f M rows/s (%lld rows) | >= 1 M rows/s | %s |\n",
		       rows / seconds / 1e6, rows, rows / seconds >= 1e6 ? "met" : "MISSED");
	printf("| disk, RECORD=%s | %.1f bytes per call (%lld calls, %.1f MiB) | summary << all | "
	       "- |\n",
	       label, (double)file_size(db_path) / (double)calls, calls,
	       (double)file_size(db_path) / 1048576.0);
	p2pg_importer_release(&im);
	sqlite3_close(db);
	munmap(spool, P2PG_SPOOL_MAP_SIZE);
	close(fd);
}

/* ---- latency: a record's row becomes visible to a reader, through the real drainer ---- */

static void ignore_warning(const char *line)
{
	(void)line;
}

static void bench_latency(const char *dir)
{
	char db_path[4200];
	snprintf(db_path, sizeof(db_path), "%s/latency.db", dir);
	struct p2pg_settings s;
	char *(*get)(const char *) = getenv;
	p2pg_settings_parse(&s, get, ignore_warning);
	snprintf(s.db_path, sizeof(s.db_path), "%.4000s", db_path);
	p2pg_recorder_configure(&s, "observe", &p2pg_knowledge_hooks);

	enum { N = 400 };
	static uint64_t written[N];
	uint64_t lat[N];
	int seen = 0;
	for (int k = 0; k < N; k++) {
		struct p2pg_record r = {.kind = P2PG_REC_TRANSFER,
					.api = 5,
					.bytes = (uint64_t)k,
					.src_device = 0,
					.dst_device = 1,
					.path = 1};
		written[k] = now_ns();
		r.started_ns = (uint64_t)k;
		p2pg_record(&r, NULL);
		/* Poll until this row shows, through a connection of its own each time: the view a
		 * user's sqlite3 gets, not the writer's. Bounded, so a stuck drainer shows as a
		 * miss. */
		bool visible = false;
		while (!visible && now_ns() - written[k] < 5000000000ull) {
			sqlite3 *reader = NULL;
			sqlite3_stmt *st = NULL;
			if (sqlite3_open_v2(db_path, &reader, SQLITE_OPEN_READONLY, NULL) ==
				SQLITE_OK &&
			    sqlite3_prepare_v2(reader, "SELECT max(bytes) FROM transfers", -1, &st,
					       NULL) == SQLITE_OK &&
			    sqlite3_step(st) == SQLITE_ROW &&
			    sqlite3_column_type(st, 0) != SQLITE_NULL)
				visible = sqlite3_column_int64(st, 0) >= k;
			sqlite3_finalize(st);
			sqlite3_close(reader);
			if (!visible)
				usleep(200);
		}
		lat[seen++] = now_ns() - written[k];
		usleep(2000);
	}
	qsort(lat, (size_t)seen, sizeof(uint64_t), cmp_u64);
	double p50 = lat[seen / 2] / 1e6, p99 = lat[seen * 99 / 100] / 1e6;
	printf("| row visible to a reader | p50 %.1f ms, p99 %.1f ms | p99 <= 100 ms | %s |\n", p50,
	       p99, p99 <= 100 ? "met" : "MISSED");
	p2pg_recorder_shutdown();
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : "/tmp/p2pguard-bench";
	mkdir(dir, 0755);
	calibrate();
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("| what | measured | budget | |\n|---|---|---|---|\n");
	const char *only = argc > 2 ? argv[2] : "";
	if (!*only || strcmp(only, "record") == 0) {
		bench_record(dir, 1, "");
		bench_record(dir, 8, "");
		bench_record(dir, 32, "");
		/* What a CPU without SSE4.2 pays: the checksum by table. */
		if (p2pg_crc32c_hw) {
			p2pg_crc32c_hw = false;
			bench_record(dir, 1, ", CRC32C by table");
			p2pg_crc32c_hw = true;
		}
	}
	if (!*only || strcmp(only, "drain") == 0) {
		bench_drain(dir, P2PG_RECORD_ALL, "all");
		bench_drain(dir, P2PG_RECORD_SUMMARY, "summary");
	}
	if (!*only || strcmp(only, "latency") == 0)
		bench_latency(dir);
	return 0;
}
