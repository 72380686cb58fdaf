/* SPDX-License-Identifier: MIT */
/*
 * The cost of the guard as NCCL's profiler plugin, per call NCCL makes: what each of NCCL's event
 * calls costs the thread that makes it (the program's for a collective's start and stop, NCCL's
 * proxy thread for its kernel channels). The plugin records for real: its records go into the
 * spool's rings and a drainer imports them into a database in a temporary folder.
 *
 *   bench_nccl [OPERATIONS] [THREADS]      (default 200000 operations, 1 thread)
 *
 * P2PGUARD_NCCL_CHAIN=PATH measures with a user's plugin fed too (its own cost included).
 * Prints a markdown table: p50 and p99 ns per call, from the TSC.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include "nccl_abi.h"
#include "nccl_plugin.h"
#include "recorder.h"
#include "settings.h"

extern struct nccl_v5_plugin ncclProfiler_v5;

enum { START_API, STOP_API, START_COLL, STOP_COLL, START_CH, RECORD_CH, STOP_CH, OP, NOOP, ROWS };
static const char *const names[ROWS] = {
    "startEvent CollApi (not recorded, NULL back)",
    "stopEvent CollApi (NCCL skips a NULL handle, as here without a user's plugin)",
    "startEvent Coll (an operation takes a slot)",
    "stopEvent Coll (enqueued)",
    "startEvent KernelCh (proxy thread)",
    "recordEventState KernelChStop (GPU end)",
    "stopEvent KernelCh (the last one ends the operation: its record)",
    "one operation, 2 channels: 7 calls",
    "baseline: an indirect call to an empty function",
};

static double ns_per_tick;
static int operations = 200000;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void calibrate(void)
{
	uint64_t t0 = now_ns(), c0 = __rdtsc();
	usleep(200000);
	uint64_t t1 = now_ns(), c1 = __rdtsc();
	ns_per_tick = (double)(t1 - t0) / (double)(c1 - c0);
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

static bool up(void)
{
	return true;
}

static nccl_result empty(void *handle)
{
	(void)handle;
	return 0;
}

static nccl_result (*volatile baseline)(void *) = empty;

struct worker {
	uint32_t *ticks[ROWS];
	int thread;
};

#define TIME(row, k, call)                                      \
	do {                                                    \
		uint64_t _t0 = __rdtsc();                       \
		call;                                           \
		w->ticks[row][k] = (uint32_t)(__rdtsc() - _t0); \
	} while (0)

static void *run(void *arg)
{
	struct worker *w = arg;
	void *ctx = NULL;
	int mask = 0;
	ncclProfiler_v5.init(&ctx, 0xbe0c4000ull + (uint64_t)w->thread, &mask, "bench", 1, 8,
			     w->thread, NULL);
	static float buf[1];
	for (int k = 0; k < operations; k++) {
		struct nccl_v5_descr d;
		void *api = NULL, *coll = NULL, *ch[2] = {NULL, NULL};
		uint64_t op0 = __rdtsc(), op_ticks = 0;
		memset(&d, 0, sizeof(d));
		d.type = NCCL_EV_COLL_API;
		d.collApi.func = "AllReduce";
		d.collApi.count = 262144;
		d.collApi.datatype = "ncclFloat32";
		TIME(START_API, k, ncclProfiler_v5.startEvent(ctx, &api, &d));
		TIME(STOP_API, k, if (api) ncclProfiler_v5.stopEvent(api));

		memset(&d, 0, sizeof(d));
		d.type = NCCL_EV_COLL;
		d.parentObj = api;
		d.coll.seqNumber = (uint64_t)k;
		d.coll.func = "AllReduce";
		d.coll.sendBuff = buf;
		d.coll.recvBuff = buf;
		d.coll.count = 262144;
		d.coll.datatype = "ncclFloat32";
		d.coll.nChannels = 2;
		d.coll.nWarps = 16;
		d.coll.algo = "RING";
		d.coll.proto = "SIMPLE";
		op0 = __rdtsc();
		TIME(START_COLL, k, ncclProfiler_v5.startEvent(ctx, &coll, &d));
		TIME(STOP_COLL, k, ncclProfiler_v5.stopEvent(coll));
		op_ticks += __rdtsc() - op0;
		for (int c = 0; c < 2; c++) {
			memset(&d, 0, sizeof(d));
			d.type = NCCL_EV_KERNEL_CH;
			d.parentObj = coll;
			d.kernelCh.channelId = (uint8_t)c;
			d.kernelCh.pTimer = (uint64_t)k * 1000;
			op0 = __rdtsc();
			TIME(START_CH, k, ncclProfiler_v5.startEvent(ctx, &ch[c], &d));
			op_ticks += __rdtsc() - op0;
		}
		for (int c = 0; c < 2; c++) {
			union nccl_v4_state_args a = {.kernelCh.pTimer = (uint64_t)k * 1000 + 500};
			op0 = __rdtsc();
			TIME(
			    RECORD_CH, k,
			    ncclProfiler_v5.recordEventState(ch[c], NCCL_STATE_KERNEL_CH_STOP, &a));
			TIME(STOP_CH, k, ncclProfiler_v5.stopEvent(ch[c]));
			op_ticks += __rdtsc() - op0;
		}
		w->ticks[OP][k] = (uint32_t)op_ticks;
		TIME(NOOP, k, baseline(coll));
		if (k % 1024 == 1023)
			usleep(
			    5000); /* NCCL's own work between operations: about 200,000 a second */
	}
	ncclProfiler_v5.finalize(ctx);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc > 1)
		operations = atoi(argv[1]);
	int threads = argc > 2 ? atoi(argv[2]) : 1;
	if (operations <= 0 || threads <= 0 || threads > 64) {
		fprintf(stderr, "usage: bench_nccl [OPERATIONS] [THREADS]\n");
		return 2;
	}
	char dir[] = "/tmp/bench-nccl-XXXXXX";
	if (!mkdtemp(dir))
		return 1;
	char db[64];
	snprintf(db, sizeof(db), "%s/bench.db", dir);
	setenv("P2PGUARD_DB", db, 1);
	setenv("P2PGUARD_QUIET", "1", 1);
	p2pg_settings_load();
	p2pg_recorder_configure(p2pg_settings_get(), "observe", NULL);
	p2pg_nccl_guard_up = up;
	calibrate();

	struct worker *w = calloc((size_t)threads, sizeof(*w));
	pthread_t *tid = calloc((size_t)threads, sizeof(*tid));
	for (int t = 0; t < threads; t++) {
		w[t].thread = t;
		for (int r = 0; r < ROWS; r++)
			w[t].ticks[r] = calloc((size_t)operations, sizeof(uint32_t));
		pthread_create(&tid[t], NULL, run, &w[t]);
	}
	for (int t = 0; t < threads; t++)
		pthread_join(tid[t], NULL);
	p2pg_recorder_shutdown();

	printf("| NCCL's call (%d operations, %d thread%s%s) | p50 ns | p99 ns |\n|---|---|---|\n",
	       operations, threads, threads == 1 ? "" : "s",
	       getenv("P2PGUARD_NCCL_CHAIN") ? ", a user's plugin fed" : "");
	size_t n = (size_t)operations * (size_t)threads;
	uint32_t *all = malloc(n * sizeof(uint32_t));
	for (int r = 0; r < ROWS; r++) {
		for (int t = 0; t < threads; t++)
			memcpy(all + (size_t)t * (size_t)operations, w[t].ticks[r],
			       (size_t)operations * sizeof(uint32_t));
		qsort(all, n, sizeof(uint32_t), cmp_u32);
		printf("| %s | %.0f | %.0f |\n", names[r], all[n / 2] * ns_per_tick,
		       all[n * 99 / 100] * ns_per_tick);
	}
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : 1;
}
