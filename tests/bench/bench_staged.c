/* SPDX-License-Identifier: MIT */
/*
 * bench_staged: the staged copy engine against the driver's own peer copies, on devices 0 and 1.
 *
 * For each size: bandwidth (GB/s, median of --iters runs; a run is a loop of copies on one stream
 * followed by a synchronise, timed by the wall clock) of the staged engine, of cuMemcpyPeerAsync
 * without peer access (the driver stages through the host itself), of cuMemcpyPeerAsync with peer
 * access enabled (when the pair can), and of plain pinned D2H and H2D copies for reference; the
 * per-call enqueue time of the small sizes; and both directions at once (staged and driver).
 *
 *   bench_staged [--max-bytes N] [--min-bytes N] [--run-bytes N] [--iters N] [--calls N]
 *                [--staging-mb N]
 *                [--slot BYTES] [--slots N] [--min-chunk BYTES] [--chunk-cost BYTES]
 *                [--no-check] [--staged-only]
 *
 * Sizes accept K, M and G suffixes (powers of two). With the simulated CUDA use small sizes, e.g.
 * `--max-bytes 1M --iters 3 --calls 50`; on real GPUs run it with LD_LIBRARY_PATH pointing at the
 * real driver. Device memory only, never managed memory.
 */
#include "bench_devices.h"
#include "driver.h"
#include "staged.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define GIB ((size_t)1 << 30)
#define MIB ((size_t)1 << 20)
#define KIB ((size_t)1 << 10)

static const size_t sizes[] = {256, 4 * KIB, 64 * KIB, MIB, 64 * MIB, 256 * MIB, GIB};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))
/* Sizes up to this get an enqueue-time column: larger ones are dominated by the copy itself. */
#define SMALL_LIMIT (64 * KIB)

struct opts {
	size_t max_bytes, min_bytes;
	size_t run_bytes; /* bytes a run moves per direction, at least one copy */
	unsigned iters, calls;
	bool check;
	bool staged_only; /* for sweeping the engine's knobs: skip the reference columns */
};

struct row {
	size_t bytes;
	double staged, driver, p2p, d2h, h2d, bi_staged, bi_driver; /* GB/s, <0: not measured */
	/* us per call, <0: not measured; [0] batched enqueue, [1] in one long loop (FACTS.md's
	 * way: past a queue depth the driver makes the enqueueing thread wait for the GPU) */
	double enq_staged[2], enq_driver[2], enq_p2p[2];
	bool check_failed;
};

struct bench {
	struct opts o;
	CUcontext ctx0, ctx1;
	CUstream s0, s1;
	CUdeviceptr a0, b0, a1, b1; /* a0 -> b1 and a1 -> b0 */
	unsigned char *host;	    /* pinned, for the reference columns and checks */
	size_t host_bytes;
	bool can_p2p;
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int parse_size(const char *s, size_t *ret)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	switch (*end) {
	case 'k':
	case 'K':
		v <<= 10;
		end++;
		break;
	case 'm':
	case 'M':
		v <<= 20;
		end++;
		break;
	case 'g':
	case 'G':
		v <<= 30;
		end++;
		break;
	default:
		break;
	}
	if (*end)
		return -EINVAL;
	*ret = (size_t)v;
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *v, unsigned n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#define CHECK(call)                                                                             \
	do {                                                                                    \
		CUresult r_ = (call);                                                           \
		if (r_ != CUDA_SUCCESS) {                                                       \
			fprintf(stderr, "bench_staged: %s failed: %s (%d) at line %d\n", #call, \
				p2pg_cu_error_name(r_), (int)r_, __LINE__);                     \
			return -1;                                                              \
		}                                                                               \
	} while (0)

enum method {
	M_STAGED,
	M_DRIVER, /* cuMemcpyPeerAsync; P2P or not depends on whether peer access is enabled */
	M_D2H,
	M_H2D,
};

/* One copy of `bytes` in direction 0 (dev 0 -> dev 1) or 1 (dev 1 -> dev 0). */
static CUresult one_copy(struct bench *b, enum method m, int dir, size_t bytes)
{
	CUdeviceptr src = dir ? b->a1 : b->a0, dst = dir ? b->b0 : b->b1;
	CUstream s = dir ? b->s1 : b->s0;
	switch (m) {
	case M_STAGED: {
		struct p2pg_staged_copy c = {
		    .dst = dst,
		    .src = src,
		    .dst_device = dir ? 0 : 1,
		    .src_device = dir ? 1 : 0,
		    .bytes = bytes,
		    .stream = s,
		    .async = true,
		};
		return p2pg_staged_copy(&c);
	}
	case M_DRIVER:
		return p2pg_drv.cuMemcpyPeerAsync(dst, dir ? b->ctx0 : b->ctx1, src,
						  dir ? b->ctx1 : b->ctx0, bytes, s);
	case M_D2H:
		return p2pg_drv.cuMemcpyDtoHAsync(b->host, b->a0, bytes, b->s0);
	case M_H2D:
		return p2pg_drv.cuMemcpyHtoDAsync(b->b1, b->host, bytes, b->s1);
	}
	return CUDA_ERROR_INVALID_VALUE;
}

/* Loop length for a size: enough bytes per run to hide the synchronise, bounded for tiny sizes. */
static unsigned loop_calls(const struct bench *b, size_t bytes)
{
	size_t n = b->o.run_bytes / bytes;
	if (n > b->o.calls)
		n = b->o.calls;
	return n ? (unsigned)n : 1;
}

/*
 * Host time per call (us) to enqueue a copy, median of `iters` runs. A run is `calls` copies in
 * batches of ENQ_BATCH with a synchronise between batches, and only the enqueueing is timed: in
 * one long loop the GPU falls behind, the driver's queue fills and the enqueueing thread ends up
 * waiting for the GPU, which is the completed time (the bandwidth columns), not the enqueue cost.
 */
#define ENQ_BATCH 32
static int measure_enqueue(struct bench *b, enum method m, size_t bytes, double *ret_enq)
{
	unsigned calls = loop_calls(b, bytes);
	double enq[64];
	unsigned iters = b->o.iters > 64 ? 64 : b->o.iters;
	CHECK(one_copy(b, m, 0, bytes));
	CHECK(p2pg_drv.cuStreamSynchronize(b->s0));
	for (unsigned it = 0; it < iters; it++) {
		double spent = 0;
		for (unsigned done = 0; done < calls;) {
			unsigned n = calls - done < ENQ_BATCH ? calls - done : ENQ_BATCH;
			double t0 = now_s();
			for (unsigned k = 0; k < n; k++)
				CHECK(one_copy(b, m, 0, bytes));
			spent += now_s() - t0;
			CHECK(p2pg_drv.cuStreamSynchronize(b->s0));
			CHECK(p2pg_drv.cuStreamSynchronize(b->s1));
			done += n;
		}
		enq[it] = spent * 1e6 / calls;
	}
	*ret_enq = median(enq, iters);
	return 0;
}

/* Median bandwidth (GB/s) of `iters` runs; both: direction 0 and 1 interleaved on their streams. */
/* *ret_enq: batched enqueue time, ret_enq[1]: host time per call inside the long loop. */
static int measure(struct bench *b, enum method m, bool both, size_t bytes, double *ret_gbs,
		   double *ret_enq)
{
	unsigned calls = loop_calls(b, bytes);
	double gbs[64], loop[64];
	unsigned iters = b->o.iters > 64 ? 64 : b->o.iters;
	/* Warm-up: the engine's lazy set-up and the driver's own first-use costs stay out. */
	CHECK(one_copy(b, m, 0, bytes));
	if (both)
		CHECK(one_copy(b, m, 1, bytes));
	CHECK(p2pg_drv.cuStreamSynchronize(b->s0));
	CHECK(p2pg_drv.cuStreamSynchronize(b->s1));
	for (unsigned it = 0; it < iters; it++) {
		double t0 = now_s();
		for (unsigned k = 0; k < calls; k++) {
			CHECK(one_copy(b, m, 0, bytes));
			if (both)
				CHECK(one_copy(b, m, 1, bytes));
		}
		double t1 = now_s();
		CHECK(p2pg_drv.cuStreamSynchronize(b->s0));
		CHECK(p2pg_drv.cuStreamSynchronize(b->s1));
		double t2 = now_s();
		double moved = (double)bytes * calls * (both ? 2 : 1);
		gbs[it] = moved / (t2 - t0) / 1e9;
		loop[it] = (t1 - t0) * 1e6 / (calls * (both ? 2 : 1));
	}
	*ret_gbs = median(gbs, iters);
	if (!ret_enq)
		return 0;
	ret_enq[1] = median(loop, iters);
	return measure_enqueue(b, m, bytes, ret_enq);
}

static uint32_t rng_next(uint32_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 17;
	*s ^= *s << 5;
	return *s;
}

/* Fills a0 with a pattern for `bytes`, clears b1, runs one staged copy, compares. */
static int check_staged(struct bench *b, size_t bytes, bool *ret_ok)
{
	size_t n = bytes < b->host_bytes ? bytes : b->host_bytes;
	uint32_t seed = (uint32_t)bytes * 2654435761u + 1;
	for (size_t k = 0; k < n; k++)
		b->host[k] = (unsigned char)rng_next(&seed);
	CHECK(p2pg_drv.cuMemcpyHtoDAsync(b->a0, b->host, n, b->s0));
	CHECK(p2pg_drv.cuStreamSynchronize(b->s0));
	CHECK(p2pg_drv.cuCtxSetCurrent(b->ctx1));
	CHECK(p2pg_drv.cuMemsetD8(b->b1, 0, n));
	CHECK(p2pg_drv.cuCtxSetCurrent(b->ctx0));
	CHECK(one_copy(b, M_STAGED, 0, n));
	CHECK(p2pg_drv.cuStreamSynchronize(b->s0));
	unsigned char *back = malloc(n);
	if (!back)
		return -1;
	CUresult r = p2pg_drv.cuMemcpyDtoH(back, b->b1, n);
	*ret_ok = r == CUDA_SUCCESS && memcmp(back, b->host, n) == 0;
	free(back);
	return r == CUDA_SUCCESS ? 0 : -1;
}

static void print_gbs(double v)
{
	if (v < 0)
		printf(" %9s", "-");
	else
		printf(" %9.2f", v);
}

struct cell {
	char s[16];
};

/* "-" for a figure not measured (< 0), else two decimals and the unit. */
static struct cell fmt(double v, const char *unit)
{
	struct cell c;
	if (v < 0)
		snprintf(c.s, sizeof(c.s), "-");
	else
		snprintf(c.s, sizeof(c.s), "%.2f%s", v, unit);
	return c;
}

static void print_size(size_t bytes)
{
	char buf[32];
	if (bytes >= GIB && bytes % GIB == 0)
		snprintf(buf, sizeof(buf), "%zu GiB", bytes / GIB);
	else if (bytes >= MIB && bytes % MIB == 0)
		snprintf(buf, sizeof(buf), "%zu MiB", bytes / MIB);
	else if (bytes >= KIB && bytes % KIB == 0)
		snprintf(buf, sizeof(buf), "%zu KiB", bytes / KIB);
	else
		snprintf(buf, sizeof(buf), "%zu B", bytes);
	printf("%-9s", buf);
}

static int usage(void)
{
	fprintf(stderr,
		"usage: bench_staged [--max-bytes N] [--min-bytes N] [--run-bytes N] [--iters N] "
		"[--calls N] [--staging-mb N] [--slot BYTES] [--slots N] "
		"[--min-chunk BYTES] [--chunk-cost BYTES] [--no-check] "
		"[--staged-only]\n");
	return 2;
}

static int parse_args(int argc, char **argv, struct opts *o)
{
	struct p2pg_staged_tuning t;
	p2pg_staged_get_tuning(&t);
	bool tuned = false;
	for (int k = 1; k < argc; k++) {
		const char *a = argv[k];
		const char *v = k + 1 < argc ? argv[k + 1] : NULL;
		size_t n;
		if (!strcmp(a, "--no-check")) {
			o->check = false;
			continue;
		}
		if (!strcmp(a, "--staged-only")) {
			o->staged_only = true;
			continue;
		}
		if (!v || parse_size(v, &n) < 0)
			return usage();
		k++;
		if (!strcmp(a, "--max-bytes"))
			o->max_bytes = n;
		else if (!strcmp(a, "--min-bytes"))
			o->min_bytes = n;
		else if (!strcmp(a, "--run-bytes"))
			o->run_bytes = n;
		else if (!strcmp(a, "--iters") && n > 0)
			o->iters = (unsigned)n;
		else if (!strcmp(a, "--calls") && n > 0)
			o->calls = (unsigned)n;
		else if (!strcmp(a, "--staging-mb"))
			p2pg_staged_set_budget(n * MIB);
		else if (!strcmp(a, "--slot"))
			t.slot_bytes = n, tuned = true;
		else if (!strcmp(a, "--slots"))
			t.slots = (unsigned)n, tuned = true;
		else if (!strcmp(a, "--min-chunk"))
			t.min_chunk = n, tuned = true;
		else if (!strcmp(a, "--chunk-cost"))
			t.chunk_cost = n, tuned = true;
		else
			return usage();
	}
	if (tuned && p2pg_staged_set_tuning(&t) < 0) {
		fprintf(stderr, "bench_staged: invalid tuning\n");
		return 2;
	}
	return 0;
}

static int setup(struct bench *b)
{
	struct bench_devices dev;
	if (bench_devices_open("bench_staged", &dev) < 0)
		return -1;
	CUdevice d0 = dev.d0, d1 = dev.d1;
	b->ctx0 = dev.ctx0;
	b->ctx1 = dev.ctx1;
	int can = 0;
	CHECK(p2pg_drv.cuDeviceCanAccessPeer(&can, d0, d1));
	b->can_p2p = can != 0;
	size_t bytes = b->o.max_bytes;
	CHECK(p2pg_drv.cuCtxSetCurrent(b->ctx1));
	CHECK(p2pg_drv.cuMemAlloc(&b->a1, bytes));
	CHECK(p2pg_drv.cuMemAlloc(&b->b1, bytes));
	CHECK(p2pg_drv.cuStreamCreate(&b->s1, CU_STREAM_NON_BLOCKING));
	CHECK(p2pg_drv.cuCtxSetCurrent(b->ctx0));
	CHECK(p2pg_drv.cuMemAlloc(&b->a0, bytes));
	CHECK(p2pg_drv.cuMemAlloc(&b->b0, bytes));
	CHECK(p2pg_drv.cuStreamCreate(&b->s0, CU_STREAM_NON_BLOCKING));
	b->host_bytes = bytes;
	void *h;
	CHECK(p2pg_drv.cuMemAllocHost(&h, bytes));
	b->host = h;
	memset(b->host, 0x5a, bytes);
	CHECK(p2pg_drv.cuMemsetD8(b->a0, 0x11, bytes));
	CHECK(p2pg_drv.cuCtxSetCurrent(b->ctx1));
	CHECK(p2pg_drv.cuMemsetD8(b->a1, 0x22, bytes));
	CHECK(p2pg_drv.cuCtxSetCurrent(b->ctx0));
	return 0;
}

static int peer_access(struct bench *b, bool enable)
{
	CHECK(p2pg_drv.cuCtxSetCurrent(b->ctx0));
	CHECK(enable ? p2pg_drv.cuCtxEnablePeerAccess(b->ctx1, 0)
		     : p2pg_drv.cuCtxDisablePeerAccess(b->ctx1));
	CHECK(p2pg_drv.cuCtxSetCurrent(b->ctx1));
	CHECK(enable ? p2pg_drv.cuCtxEnablePeerAccess(b->ctx0, 0)
		     : p2pg_drv.cuCtxDisablePeerAccess(b->ctx0));
	CHECK(p2pg_drv.cuCtxSetCurrent(b->ctx0));
	return 0;
}

int main(int argc, char **argv)
{
	struct bench b = {.o = {.max_bytes = GIB,
				.min_bytes = 0,
				.run_bytes = 256 * MIB,
				.iters = 7,
				.calls = 2000,
				.check = true}};
	int pr = parse_args(argc, argv, &b.o);
	if (pr)
		return pr;
	if (setup(&b) < 0)
		return 1;

	struct row rows[NSIZES];
	unsigned nrows = 0;
	for (unsigned k = 0; k < NSIZES; k++) {
		if (sizes[k] > b.o.max_bytes || sizes[k] < b.o.min_bytes)
			continue;
		struct row *r = &rows[nrows++];
		*r = (struct row){.bytes = sizes[k],
				  .p2p = -1,
				  .enq_staged = {-1, -1},
				  .enq_driver = {-1, -1},
				  .enq_p2p = {-1, -1}};
		bool small = r->bytes <= SMALL_LIMIT;
		if (b.o.check) {
			bool ok = false;
			if (check_staged(&b, r->bytes, &ok) < 0)
				return 1;
			r->check_failed = !ok;
		}
		r->driver = r->d2h = r->h2d = r->bi_driver = -1;
		if (b.o.staged_only) {
			if (measure(&b, M_STAGED, false, r->bytes, &r->staged,
				    small ? r->enq_staged : NULL) ||
			    measure(&b, M_STAGED, true, r->bytes, &r->bi_staged, NULL))
				return 1;
			continue;
		}
		if (measure(&b, M_STAGED, false, r->bytes, &r->staged,
			    small ? r->enq_staged : NULL) ||
		    measure(&b, M_DRIVER, false, r->bytes, &r->driver,
			    small ? r->enq_driver : NULL) ||
		    measure(&b, M_D2H, false, r->bytes, &r->d2h, NULL) ||
		    measure(&b, M_H2D, false, r->bytes, &r->h2d, NULL) ||
		    measure(&b, M_STAGED, true, r->bytes, &r->bi_staged, NULL) ||
		    measure(&b, M_DRIVER, true, r->bytes, &r->bi_driver, NULL))
			return 1;
	}
	/* Peer access last: enabling it changes the driver's path for the whole pair. */
	if (b.can_p2p && !b.o.staged_only) {
		if (peer_access(&b, true) < 0)
			return 1;
		for (unsigned k = 0; k < nrows; k++) {
			struct row *r = &rows[k];
			if (measure(&b, M_DRIVER, false, r->bytes, &r->p2p,
				    r->bytes <= SMALL_LIMIT ? r->enq_p2p : NULL))
				return 1;
		}
		if (peer_access(&b, false) < 0)
			return 1;
	}

	struct p2pg_staged_tuning t;
	p2pg_staged_get_tuning(&t);
	printf("bench_staged: devices 0 and 1, %u calls per run for small sizes\n", b.o.calls);
	printf(
	    "staged engine: slot %zu KiB x %u, min chunk %zu KiB, chunk cost %zu KiB; pinned %zu "
	    "KiB; %u runs (median)\n",
	    t.slot_bytes / KIB, t.slots, t.min_chunk / KIB, t.chunk_cost / KIB,
	    p2pg_staged_pinned_bytes() / KIB, b.o.iters);
	printf("\nbandwidth, GB/s (1e9 B/s); st/pin = staged / min(pinned D2H, H2D); bi = both "
	       "directions at once, sum\n");
	printf("%-9s %9s %9s %9s %9s %9s %9s %9s %9s %9s %9s\n", "size", "staged", "driver", "p2p",
	       "pin-d2h", "pin-h2d", "st/pin", "st/drv", "bi-stg", "bi-drv", "check");
	bool failed = false;
	for (unsigned k = 0; k < nrows; k++) {
		struct row *r = &rows[k];
		double pin = r->d2h < r->h2d ? r->d2h : r->h2d;
		print_size(r->bytes);
		print_gbs(r->staged);
		print_gbs(r->driver);
		print_gbs(r->p2p);
		print_gbs(r->d2h);
		print_gbs(r->h2d);
		print_gbs(pin > 0 ? r->staged / pin : -1);
		print_gbs(r->driver > 0 ? r->staged / r->driver : -1);
		print_gbs(r->bi_staged);
		print_gbs(r->bi_driver);
		printf(" %9s\n", !b.o.check ? "-" : r->check_failed ? "FAILED" : "ok");
		failed |= r->check_failed;
	}
	if (nrows == 0 || rows[0].enq_staged[0] < 0)
		return failed ? 1 : 0;
	printf(
	    "\nsmall copies, us per call. enq: host time per call in batches of %d with an untimed "
	    "synchronise between them (the API's own cost); loop: host time per call inside the "
	    "long loop of the bandwidth runs (FACTS.md's way: once the GPU falls behind, the "
	    "driver makes the thread wait); done: that loop plus its synchronise, per copy. "
	    "d/s = driver / staged\n",
	    ENQ_BATCH);
	printf("%-9s %8s %8s %8s %6s %8s %8s %8s %6s %8s %8s %8s %6s\n", "size", "enq-stg",
	       "enq-drv", "enq-p2p", "d/s", "loop-stg", "loop-drv", "loop-p2p", "d/s", "done-stg",
	       "done-drv", "done-p2p", "d/s");
	for (unsigned k = 0; k < nrows; k++) {
		struct row *r = &rows[k];
		if (r->enq_staged[0] < 0)
			continue;
		double done[3] = {r->staged > 0 ? (double)r->bytes / r->staged / 1e3 : -1,
				  r->driver > 0 ? (double)r->bytes / r->driver / 1e3 : -1,
				  r->p2p > 0 ? (double)r->bytes / r->p2p / 1e3 : -1};
		print_size(r->bytes);
		for (int w = 0; w < 3; w++) {
			double st = w < 2 ? r->enq_staged[w] : done[0];
			double dr = w < 2 ? r->enq_driver[w] : done[1];
			double pp = w < 2 ? r->enq_p2p[w] : done[2];
			printf(" %8s %8s %8s %6s", fmt(st, "").s, fmt(dr, "").s, fmt(pp, "").s,
			       fmt(st > 0 && dr > 0 ? dr / st : -1, "x").s);
		}
		printf("\n");
	}
	return failed ? 1 : 0;
}
