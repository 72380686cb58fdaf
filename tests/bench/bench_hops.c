/* SPDX-License-Identifier: MIT */
/*
 * bench_hops: whether CUDA stream memory operations are a cheaper cross-device "hop" than events
 * for a host-staged peer copy, on devices 0 and 1.
 *
 * A staged copy of N bytes from device 0 to device 1, enqueued from one host thread, is
 *   on S0 (device 0, non-blocking): cuMemcpyDtoHAsync(pinned slot, src0, N, S0)
 *   hop 0->1: S1 (device 1, non-blocking) waits for that D2H
 *   on S1: cuMemcpyHtoDAsync(dst1, pinned slot, N, S1)
 *   hop 1->0: S0 waits for that H2D, so later work on S0 is ordered after the whole copy.
 * The two hops are what staging adds to the two copies, in calls on both devices; the variants:
 *   events  cuEventRecord(e1, S0); cuStreamWaitEvent(S1, e1) ... cuEventRecord(e2, S1);
 *           cuStreamWaitEvent(S0, e2). CU_EVENT_DISABLE_TIMING events, e1 of device 0's context,
 *           e2 of device 1's; re-recorded at once, since a wait takes the record current at the
 *           call.
 *   memops  cuStreamWriteValue64 of a counter in pinned host memory on one stream, then
 *           cuStreamWaitValue64(CU_STREAM_WAIT_VALUE_GEQ) for it on the other; one counter per
 *           direction. They are not in the core's driver table: they are resolved here through
 *           the driver's cuGetProcAddress_v2 (cudaVersion 12000). Where the driver lacks them, or
 *           a device lacks CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS or unified
 *           addressing (which makes the counters' host address their device address), the rows
 *           say why and the program still exits 0. The simulated CUDA has no memops.
 *   driver  the reference: cuMemcpyPeerAsync on S0 without peer access (this program never
 *           enables it), which the driver stages through the host itself.
 * events and memops make device 1's context current for the S1 half of each copy and device 0's
 * again after it (cuCtxSetCurrent), as a staged engine would; that is inside their figures. Each
 * copy uses the next pinned slot of a ring of 64, so consecutive copies never share a slot (the
 * hop back orders them anyway).
 *
 * Per size (256 B, 4 KiB, 64 KiB, or --sizes) and variant, each the median of --runs runs, with
 * the variants interleaved in each run (the order rotating by one each run) so that drift hits
 * them equally; host time by CLOCK_MONOTONIC:
 *   enq_us   per copy, --calls copies in batches of 32 with an untimed synchronise of S0 and S1
 *            between batches, only the batches timed: what the calls themselves cost.
 *   loop_us  per copy, one loop of --calls copies, no synchronise inside, the loop alone timed:
 *            once the GPU falls behind, the driver makes the enqueueing thread wait.
 *   done_us  per copy, that loop plus its final synchronise of S0 and S1.
 * The drv/ columns are the driver's figure over the variant's: above 1, the variant is cheaper.
 * Before the runs, every variant's chain is checked once per size: src0 filled with a byte value
 * of that size and variant, dst1 cleared, one copy, synchronise, dst1 read back and compared. A
 * wrong byte, or any failing CUDA call, ends the program with status 1.
 *
 *   bench_hops [--calls N] [--runs N] [--sizes LIST] [--quick]
 *
 * --calls defaults to 2000 and --runs to 5; --quick is --calls 200 --runs 2. --sizes takes a
 * comma-separated list of sizes from 1 B to 1 MiB with optional K or M suffixes (powers of two),
 * e.g. --sizes 256,4K,64K. Needs two devices.
 *
 * On real GPUs: `build/tests/bench/bench_hops` (the real libcuda.so.1 must be the one found).
 * With the simulated CUDA: `LD_LIBRARY_PATH=build/tests/simcuda build/tests/bench/bench_hops
 * --quick`.
 */
#include "bench_devices.h"
#include "driver.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)

#define MAX_RUNS   64
#define MAX_SIZES  16
#define MAX_BYTES  MIB /* largest --sizes entry: the ring is RING_SLOTS slots of the largest */
#define RING_SLOTS 64
#define MIN_SLOT   (64 * KIB)
#define ENQ_BATCH  32

enum variant {
	V_EVENTS,
	V_MEMOPS,
	V_DRIVER,
	NVARIANTS,
};

static const char *const variant_name[NVARIANTS] = {"events", "memops", "driver"};

enum measure {
	M_ENQ,
	M_LOOP,
	M_DONE,
	NMEASURES,
};

/* cuStreamWriteValue64 and cuStreamWaitValue64 (their _v2 ABI, which cudaVersion 12000 gives). */
typedef CUresult(CUDAAPI *memop64_fn)(CUstream stream, CUdeviceptr addr, cuuint64_t value,
				      unsigned int flags);
typedef CUresult(CUDAAPI *get_proc_address_fn)(const char *symbol, void **pfn, int cudaVersion,
					       cuuint64_t flags,
					       CUdriverProcAddressQueryResult *symbolStatus);

struct opts {
	unsigned calls, runs;
	size_t sizes[MAX_SIZES];
	unsigned nsizes;
};

struct bench {
	struct opts o;
	CUdevice d0, d1;
	CUcontext ctx0, ctx1;
	CUstream s0, s1;
	CUdeviceptr src0, dst1;
	size_t max_bytes;
	/* The pinned ring: RING_SLOTS slots of slot_bytes; next_slot: the next copy's. */
	unsigned char *ring;
	size_t slot_bytes;
	unsigned next_slot;
	CUevent e1, e2; /* e1: device 0's context, recorded on S0; e2: device 1's, on S1 */
	/* memops */
	bool memops_ok;
	char memops_why[256];
	memop64_fn write64, wait64;
	uint64_t *flags;	    /* pinned: [0] counter A (0->1), [1] counter B (1->0) */
	CUdeviceptr flag_a, flag_b; /* their device addresses (the host ones, under UVA) */
	uint64_t a, b;		    /* the last values written */
	int can_peer;
};

/* One size's row: medians in us, <0 where not measured. */
struct row {
	size_t bytes;
	double med[NVARIANTS][NMEASURES];
};

#define CHECK(call)                                                                           \
	do {                                                                                  \
		CUresult r_ = (call);                                                         \
		if (r_ != CUDA_SUCCESS) {                                                     \
			fprintf(stderr, "bench_hops: %s failed: %s (%d) at line %d\n", #call, \
				p2pg_cu_error_name(r_), (int)r_, __LINE__);                   \
			return -1;                                                            \
		}                                                                             \
	} while (0)

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Sorts v. */
static double median(double *v, unsigned n)
{
	if (!n)
		return -1;
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- the copies ---- */

/*
 * Enqueues one copy of n bytes, src0 -> dst1, by variant v. Device 0's context is current on entry
 * and on return.
 */
static int copy_once(struct bench *b, enum variant v, size_t n)
{
	if (v == V_DRIVER) {
		CHECK(p2pg_drv.cuMemcpyPeerAsync(b->dst1, b->ctx1, b->src0, b->ctx0, n, b->s0));
		return 0;
	}
	unsigned char *slot = b->ring + (size_t)b->next_slot * b->slot_bytes;
	b->next_slot = (b->next_slot + 1) % RING_SLOTS;
	bool ev = v == V_EVENTS;
	CHECK(p2pg_drv.cuMemcpyDtoHAsync(slot, b->src0, n, b->s0));
	if (ev)
		CHECK(p2pg_drv.cuEventRecord(b->e1, b->s0));
	else
		CHECK(b->write64(b->s0, b->flag_a, ++b->a, CU_STREAM_WRITE_VALUE_DEFAULT));
	CHECK(p2pg_drv.cuCtxSetCurrent(b->ctx1));
	if (ev)
		CHECK(p2pg_drv.cuStreamWaitEvent(b->s1, b->e1, 0));
	else
		CHECK(b->wait64(b->s1, b->flag_a, b->a, CU_STREAM_WAIT_VALUE_GEQ));
	CHECK(p2pg_drv.cuMemcpyHtoDAsync(b->dst1, slot, n, b->s1));
	if (ev)
		CHECK(p2pg_drv.cuEventRecord(b->e2, b->s1));
	else
		CHECK(b->write64(b->s1, b->flag_b, ++b->b, CU_STREAM_WRITE_VALUE_DEFAULT));
	CHECK(p2pg_drv.cuCtxSetCurrent(b->ctx0));
	if (ev)
		CHECK(p2pg_drv.cuStreamWaitEvent(b->s0, b->e2, 0));
	else
		CHECK(b->wait64(b->s0, b->flag_b, b->b, CU_STREAM_WAIT_VALUE_GEQ));
	return 0;
}

static int sync_both(struct bench *b)
{
	CHECK(p2pg_drv.cuStreamSynchronize(b->s0));
	CHECK(p2pg_drv.cuStreamSynchronize(b->s1));
	return 0;
}

/* One copy of n bytes by v into a cleared dst1; -1 when a call fails or a byte is wrong. */
static int check_copy(struct bench *b, enum variant v, size_t n, unsigned char value)
{
	CHECK(p2pg_drv.cuMemsetD8(b->src0, value, n));
	CHECK(p2pg_drv.cuCtxSynchronize());
	CHECK(p2pg_drv.cuCtxSetCurrent(b->ctx1));
	CHECK(p2pg_drv.cuMemsetD8(b->dst1, 0, n));
	CHECK(p2pg_drv.cuCtxSynchronize());
	CHECK(p2pg_drv.cuCtxSetCurrent(b->ctx0));
	if (copy_once(b, v, n) < 0 || sync_both(b) < 0)
		return -1;
	unsigned char *back = malloc(n);
	if (!back) {
		fprintf(stderr, "bench_hops: out of memory\n");
		return -1;
	}
	CHECK(p2pg_drv.cuCtxSetCurrent(b->ctx1));
	CUresult r = p2pg_drv.cuMemcpyDtoH(back, b->dst1, n);
	CUresult r2 = p2pg_drv.cuCtxSetCurrent(b->ctx0);
	if (r == CUDA_SUCCESS)
		r = r2;
	if (r != CUDA_SUCCESS) {
		free(back);
		CHECK(r);
	}
	for (size_t k = 0; k < n; k++)
		if (back[k] != value) {
			fprintf(stderr,
				"bench_hops: check FAILED: %s, %zu B: byte %zu is 0x%02x, expected "
				"0x%02x\n",
				variant_name[v], n, k, back[k], value);
			free(back);
			return -1;
		}
	free(back);
	return 0;
}

/* ---- runs ---- */

static void format_size(size_t bytes, char *buf, size_t len)
{
	if (bytes >= MIB && bytes % MIB == 0)
		snprintf(buf, len, "%zu MiB", bytes / MIB);
	else if (bytes >= KIB && bytes % KIB == 0)
		snprintf(buf, len, "%zu KiB", bytes / KIB);
	else
		snprintf(buf, len, "%zu B", bytes);
}

/* One run of v at n bytes: ret[M_ENQ], ret[M_LOOP], ret[M_DONE], us per copy. */
static int run_once(struct bench *b, enum variant v, size_t n, double *ret)
{
	unsigned calls = b->o.calls;
	double spent = 0;
	for (unsigned done = 0; done < calls;) {
		unsigned k = calls - done < ENQ_BATCH ? calls - done : ENQ_BATCH;
		double t0 = now_us();
		for (unsigned j = 0; j < k; j++)
			if (copy_once(b, v, n) < 0)
				return -1;
		spent += now_us() - t0;
		if (sync_both(b) < 0)
			return -1;
		done += k;
	}
	ret[M_ENQ] = spent / calls;

	double t0 = now_us();
	for (unsigned j = 0; j < calls; j++)
		if (copy_once(b, v, n) < 0)
			return -1;
	double t1 = now_us();
	if (sync_both(b) < 0)
		return -1;
	double t2 = now_us();
	ret[M_LOOP] = (t1 - t0) / calls;
	ret[M_DONE] = (t2 - t0) / calls;
	return 0;
}

static bool available(const struct bench *b, enum variant v)
{
	return v != V_MEMOPS || b->memops_ok;
}

/* Size index k: check every variant, warm each up, then the interleaved runs. */
static int measure_size(struct bench *b, unsigned k, struct row *row)
{
	size_t n = b->o.sizes[k];
	double runs[NVARIANTS][NMEASURES][MAX_RUNS];
	*row = (struct row){.bytes = n};
	char size[32], checked[64] = "";
	format_size(n, size, sizeof(size));
	for (unsigned v = 0; v < NVARIANTS; v++) {
		for (unsigned m = 0; m < NMEASURES; m++)
			row->med[v][m] = -1;
		if (!available(b, v))
			continue;
		/* Never 0 (dst1's cleared value), different for each size and variant. */
		unsigned char value = (unsigned char)(1 + (k * NVARIANTS + v) % 255);
		if (check_copy(b, v, n, value) < 0)
			return -1;
		snprintf(checked + strlen(checked), sizeof(checked) - strlen(checked), "%s%s",
			 checked[0] ? ", " : "", variant_name[v]);
		for (unsigned j = 0; j < ENQ_BATCH; j++)
			if (copy_once(b, v, n) < 0)
				return -1;
		if (sync_both(b) < 0)
			return -1;
	}
	printf("%s: check ok (%s)\n", size, checked);
	fflush(stdout);
	for (unsigned run = 0; run < b->o.runs; run++)
		for (unsigned j = 0; j < NVARIANTS; j++) {
			enum variant v = (run + j) % NVARIANTS;
			if (!available(b, v))
				continue;
			double r[NMEASURES];
			if (run_once(b, v, n, r) < 0)
				return -1;
			for (unsigned m = 0; m < NMEASURES; m++)
				runs[v][m][run] = r[m];
		}
	for (unsigned v = 0; v < NVARIANTS; v++)
		if (available(b, v))
			for (unsigned m = 0; m < NMEASURES; m++)
				row->med[v][m] = median(runs[v][m], b->o.runs);
	return 0;
}

/* ---- memops ---- */

static const char *proc_status_name(CUdriverProcAddressQueryResult s)
{
	switch (s) {
	case CU_GET_PROC_ADDRESS_SUCCESS:
		return "no function";
	case CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND:
		return "symbol not found";
	case CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT:
		return "version not sufficient";
	default:
		return "unknown status";
	}
}

/* Resolves name into *fn; false with b->memops_why set when it cannot be had. */
static bool resolve_memop(struct bench *b, get_proc_address_fn gpa, const char *name,
			  memop64_fn *fn)
{
	void *p = NULL;
	CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	CUresult r = gpa(name, &p, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &st);
	if (r != CUDA_SUCCESS) {
		snprintf(b->memops_why, sizeof(b->memops_why),
			 "cuGetProcAddress_v2(\"%s\", 12000) failed: %s (%d)", name,
			 p2pg_cu_error_name(r), (int)r);
		return false;
	}
	if (!p || st != CU_GET_PROC_ADDRESS_SUCCESS) {
		snprintf(b->memops_why, sizeof(b->memops_why),
			 "cuGetProcAddress_v2(\"%s\", 12000): %s", name, proc_status_name(st));
		return false;
	}
	*fn = (memop64_fn)p;
	return true;
}

/* false with b->memops_why set when device dev lacks attribute a (or cannot say). */
static bool has_attribute(struct bench *b, int ordinal, CUdevice dev, CUdevice_attribute a,
			  const char *name)
{
	int val = 0;
	CUresult r = p2pg_drv.cuDeviceGetAttribute(&val, a, dev);
	if (r != CUDA_SUCCESS) {
		snprintf(b->memops_why, sizeof(b->memops_why),
			 "device %d: cuDeviceGetAttribute(%s) failed: %s (%d)", ordinal, name,
			 p2pg_cu_error_name(r), (int)r);
		return false;
	}
	if (!val) {
		snprintf(b->memops_why, sizeof(b->memops_why), "device %d: %s is 0", ordinal, name);
		return false;
	}
	return true;
}

/* Sets b->memops_ok, or b->memops_why. Makes no CUDA call that can change state. */
static void probe_memops(struct bench *b)
{
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		const char *e = dlerror();
		snprintf(b->memops_why, sizeof(b->memops_why), "dlopen(libcuda.so.1): %s",
			 e ? e : "failed");
		return;
	}
	/* Never closed: the functions resolved must stay valid. */
	get_proc_address_fn gpa = (get_proc_address_fn)dlsym(lib, "cuGetProcAddress_v2");
	if (!gpa)
		snprintf(b->memops_why, sizeof(b->memops_why),
			 "libcuda.so.1 has no cuGetProcAddress_v2");
	else if (resolve_memop(b, gpa, "cuStreamWriteValue64", &b->write64) &&
		 resolve_memop(b, gpa, "cuStreamWaitValue64", &b->wait64) &&
		 has_attribute(b, 0, b->d0, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS,
			       "CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS") &&
		 has_attribute(b, 1, b->d1, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS,
			       "CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS") &&
		 has_attribute(b, 0, b->d0, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING,
			       "CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING") &&
		 has_attribute(b, 1, b->d1, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING,
			       "CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING"))
		b->memops_ok = true;
}

/* ---- set-up ---- */

static int parse_size(const char *s, char **end, size_t *ret)
{
	errno = 0;
	unsigned long long v = strtoull(s, end, 10);
	if (errno || *end == s)
		return -EINVAL;
	if (**end == 'k' || **end == 'K')
		v <<= 10, (*end)++;
	else if (**end == 'm' || **end == 'M')
		v <<= 20, (*end)++;
	if (v == 0 || v > MAX_BYTES)
		return -EINVAL;
	*ret = (size_t)v;
	return 0;
}

/* "256,4K,64K" */
static int parse_sizes(const char *s, struct opts *o)
{
	o->nsizes = 0;
	for (;;) {
		char *end;
		if (o->nsizes == MAX_SIZES || parse_size(s, &end, &o->sizes[o->nsizes]) < 0)
			return -EINVAL;
		o->nsizes++;
		if (!*end)
			return 0;
		if (*end != ',')
			return -EINVAL;
		s = end + 1;
	}
}

static int usage(void)
{
	fprintf(stderr, "usage: bench_hops [--calls N] [--runs N] [--sizes LIST] [--quick]\n"
			"  LIST: comma-separated sizes, 1 B to 1 MiB, K and M suffixes\n");
	return 2;
}

static int parse_args(int argc, char **argv, struct opts *o)
{
	for (int k = 1; k < argc; k++) {
		const char *a = argv[k];
		const char *v = k + 1 < argc ? argv[k + 1] : NULL;
		if (!strcmp(a, "--quick")) {
			o->calls = 200;
			o->runs = 2;
			continue;
		}
		if (!v)
			return usage();
		k++;
		if (!strcmp(a, "--sizes")) {
			if (parse_sizes(v, o) < 0)
				return usage();
			continue;
		}
		char *end;
		errno = 0;
		unsigned long long n = strtoull(v, &end, 10);
		if (errno || end == v || *end || n == 0 || n > 1u << 30)
			return usage();
		if (!strcmp(a, "--calls"))
			o->calls = (unsigned)n;
		else if (!strcmp(a, "--runs") && n <= MAX_RUNS)
			o->runs = (unsigned)n;
		else
			return usage();
	}
	return 0;
}

static int setup(struct bench *b)
{
	struct bench_devices dev;
	if (bench_devices_open("bench_hops", &dev) < 0)
		return -1;
	b->d0 = dev.d0;
	b->d1 = dev.d1;
	b->ctx0 = dev.ctx0;
	b->ctx1 = dev.ctx1;
	/* Only reported: peer access is never enabled here. */
	CHECK(p2pg_drv.cuDeviceCanAccessPeer(&b->can_peer, b->d0, b->d1));

	b->max_bytes = 0;
	for (unsigned k = 0; k < b->o.nsizes; k++)
		if (b->o.sizes[k] > b->max_bytes)
			b->max_bytes = b->o.sizes[k];
	b->slot_bytes = b->max_bytes > MIN_SLOT ? b->max_bytes : MIN_SLOT;

	CHECK(p2pg_drv.cuCtxSetCurrent(b->ctx1));
	CHECK(p2pg_drv.cuMemAlloc(&b->dst1, b->max_bytes));
	CHECK(p2pg_drv.cuStreamCreate(&b->s1, CU_STREAM_NON_BLOCKING));
	CHECK(p2pg_drv.cuEventCreate(&b->e2, CU_EVENT_DISABLE_TIMING));
	CHECK(p2pg_drv.cuCtxSetCurrent(b->ctx0));
	CHECK(p2pg_drv.cuMemAlloc(&b->src0, b->max_bytes));
	CHECK(p2pg_drv.cuStreamCreate(&b->s0, CU_STREAM_NON_BLOCKING));
	CHECK(p2pg_drv.cuEventCreate(&b->e1, CU_EVENT_DISABLE_TIMING));
	void *h;
	CHECK(p2pg_drv.cuMemAllocHost(&h, RING_SLOTS * b->slot_bytes));
	b->ring = h;
	memset(b->ring, 0, RING_SLOTS * b->slot_bytes);

	probe_memops(b);
	if (b->memops_ok) {
		CHECK(p2pg_drv.cuMemAllocHost(&h, 2 * sizeof(uint64_t)));
		b->flags = h;
		b->flags[0] = b->flags[1] = 0;
		/* cuMemAllocHost memory is mapped into every context under UVA at its host address.
		 */
		b->flag_a = (CUdeviceptr)(uintptr_t)&b->flags[0];
		b->flag_b = (CUdeviceptr)(uintptr_t)&b->flags[1];
	}
	return 0;
}

static int teardown(struct bench *b)
{
	CHECK(p2pg_drv.cuCtxSetCurrent(b->ctx0));
	CHECK(p2pg_drv.cuEventDestroy(b->e1));
	CHECK(p2pg_drv.cuStreamDestroy(b->s0));
	CHECK(p2pg_drv.cuMemFree(b->src0));
	CHECK(p2pg_drv.cuMemFreeHost(b->ring));
	if (b->flags)
		CHECK(p2pg_drv.cuMemFreeHost(b->flags));
	CHECK(p2pg_drv.cuCtxSetCurrent(b->ctx1));
	CHECK(p2pg_drv.cuEventDestroy(b->e2));
	CHECK(p2pg_drv.cuStreamDestroy(b->s1));
	CHECK(p2pg_drv.cuMemFree(b->dst1));
	CHECK(p2pg_drv.cuCtxSetCurrent(NULL));
	CHECK(p2pg_drv.cuDevicePrimaryCtxRelease(b->d0));
	CHECK(p2pg_drv.cuDevicePrimaryCtxRelease(b->d1));
	return 0;
}

/* ---- output ---- */

static int print_header(const struct bench *b)
{
	struct bench_devices_names names;
	CHECK(bench_devices_describe(&(struct bench_devices){b->d0, b->d1, b->ctx0, b->ctx1},
				     &names));
	printf("bench_hops: device 0 \"%s\" -> device 1 \"%s\"; driver %d; peer access not enabled "
	       "(cuDeviceCanAccessPeer 0->1: %d)\n",
	       names.d0, names.d1, names.driver_version, b->can_peer);
	printf("memops: %s%s\n",
	       b->memops_ok ? "available" : "unavailable: ", b->memops_ok ? "" : b->memops_why);
	printf("%u copies per run; enq in batches of %d (S0 and S1 synchronised between batches, "
	       "untimed); median of %u runs, variants interleaved; ring of %d pinned slots of %zu "
	       "KiB\n",
	       b->o.calls, ENQ_BATCH, b->o.runs, RING_SLOTS, b->slot_bytes / KIB);
	return 0;
}

static void print_table(const struct bench *b, const struct row *rows, unsigned nrows)
{
	printf("\nus per copy; drv/ = driver / variant (above 1: the variant is cheaper)\n");
	printf("%-9s %-8s %9s %9s %9s %9s %9s %9s\n", "size", "variant", "enq_us", "loop_us",
	       "done_us", "drv/enq", "drv/loop", "drv/done");
	for (unsigned k = 0; k < nrows; k++) {
		const struct row *r = &rows[k];
		char size[32];
		format_size(r->bytes, size, sizeof(size));
		for (unsigned v = 0; v < NVARIANTS; v++) {
			printf("%-9s %-8s ", size, variant_name[v]);
			if (!available(b, v)) {
				printf("unavailable: %s\n", b->memops_why);
				continue;
			}
			for (unsigned m = 0; m < NMEASURES; m++)
				printf("%s%9.2f", m ? " " : "", r->med[v][m]);
			for (unsigned m = 0; m < NMEASURES; m++) {
				double drv = r->med[V_DRIVER][m], x = r->med[v][m];
				if (v == V_DRIVER || drv <= 0 || x <= 0)
					printf(" %9s", "-");
				else
					printf(" %8.2fx", drv / x);
			}
			printf("\n");
		}
	}
}

int main(int argc, char **argv)
{
	struct bench b = {
	    .o = {.calls = 2000, .runs = 5, .sizes = {256, 4 * KIB, 64 * KIB}, .nsizes = 3}};
	int pr = parse_args(argc, argv, &b.o);
	if (pr)
		return pr;
	if (setup(&b) < 0)
		return 1;
	if (print_header(&b) < 0)
		return 1;
	fflush(stdout);

	struct row rows[MAX_SIZES];
	for (unsigned k = 0; k < b.o.nsizes; k++)
		if (measure_size(&b, k, &rows[k]) < 0)
			return 1;
	print_table(&b, rows, b.o.nsizes);
	return teardown(&b) < 0 ? 1 : 0;
}
