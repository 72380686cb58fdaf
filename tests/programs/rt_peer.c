/* SPDX-License-Identifier: MIT */
/*
 * A multi-GPU program linked with the shared CUDA runtime, used by the preload tests (against the
 * simulated CUDA) and by scripts/gpu-check.sh (against real GPUs). Each mode prints an
 * "EXPECT ..." line saying what the guard must have recorded.
 *
 *   rt_peer basic             peer access calls and every kind of cross-device copy, checked
 *   rt_peer errors            induce 217 (own device), 704, 101, 705 and invalid flags
 *   rt_peer threads T N       T threads x N async peer copies on their own streams
 *   rt_peer fork              copies in the parent, then a child calling the runtime
 *   rt_peer crash             a copy, then SIGSEGV in crash_here()
 *   rt_peer copier FILE T     T threads copying forever, publishing counts in FILE (SIGKILL test)
 *   rt_peer crasher FILE T MS as copier, then SIGSEGV in crash_here() MS ms after all copied
 *   rt_peer flood FILE T      as copier, unthrottled: the rings overflow (overload test/bench)
 *   rt_peer threads T N [MS] T threads of N async peer copies each; then MS ms alive
 *   rt_peer spaced N US [p2p] N async peer copies of 256 B, US microseconds apart (a program whose
 *                             copies come between kernels); p2p: with peer access enabled, as
 *                             cudaMemcpyAsync on the legacy default stream (PyTorch's way)
 *   rt_peer streams N         N rounds of: create a stream, an async peer copy of 256 B + round
 *                             bytes on it, synchronise, destroy it (handles come back reused)
 *   rt_peer bench N SIZE      N async peer copies of SIZE bytes, prints ns per call
 *                             (median of batches of 256, and the mean)
 *   rt_peer peer-first N      the first CUDA call is one the guard intercepts
 *                             (cudaDeviceCanAccessPeer: the runtime initialises the driver inside
 *                             it), then N back-to-back async peer copies of 256 B on a stream
 *   rt_peer empty-idle N      an empty async peer copy (which leaves no CUPTI record), 12 s with
 *                             no copy, then N back-to-back async peer copies of 256 B
 *   rt_peer profiler N        N async peer copies 200 us apart; then a profiler takes CUPTI over
 *                             as PyTorch's does (its own activity callbacks, copy tracing on) for N
 *                             more, and switches copy tracing off when it stops; then a copy every
 *                             20 ms for 13 s. Prints the records the profiler received.
 */
#include <cuda_runtime_api.h>
#include <cupti_activity.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHECK(call)                                                                        \
	do {                                                                               \
		cudaError_t _e = (call);                                                   \
		if (_e != cudaSuccess) {                                                   \
			fprintf(stderr, "%s:%d: %s -> %d %s\n", __FILE__, __LINE__, #call, \
				(int)_e, cudaGetErrorName(_e));                            \
			exit(1);                                                           \
		}                                                                          \
	} while (0)

/* dst on device 1 and src on device 0, size bytes each; device 0 is current after, and *s, when
 * asked for, a new stream of device 0. */
static void peer_buffers(void **dst, void **src, size_t size, cudaStream_t *s)
{
	CHECK(cudaSetDevice(1));
	CHECK(cudaMalloc(dst, size));
	CHECK(cudaSetDevice(0));
	CHECK(cudaMalloc(src, size));
	if (s)
		CHECK(cudaStreamCreate(s));
}

static int need_two_devices(void)
{
	int n = 0;
	CHECK(cudaGetDeviceCount(&n));
	if (n < 2) {
		fprintf(stderr, "rt_peer: needs two devices, found %d\n", n);
		exit(77);
	}
	return n;
}

static void fill(unsigned char *h, size_t n, unsigned seed)
{
	for (size_t k = 0; k < n; k++)
		h[k] = (unsigned char)(seed + k * 131);
}

static int mode_basic(void)
{
	need_two_devices();
	const size_t big = 1 << 20;
	unsigned char *h = malloc(big), *back = malloc(big);
	void *a0, *a0b, *b1;
	cudaStream_t s0;
	peer_buffers(&b1, &a0, big, NULL);
	CHECK(cudaMalloc(&a0b, big));
	CHECK(cudaStreamCreate(&s0));
	fill(h, big, 7);
	CHECK(cudaMemcpy(a0, h, big, cudaMemcpyHostToDevice)); /* not a peer copy */

	long transfers = 0, bytes = 0, peer = 0;
	int can = -1;
	CHECK(cudaDeviceCanAccessPeer(&can, 0, 1));
	peer++;
	int enabled = 0;
	if (can) {
		CHECK(cudaDeviceEnablePeerAccess(1, 0));
		peer++;
		enabled = 1;
	}
	CHECK(cudaMemcpyPeer(b1, 1, a0, 0, big));
	transfers++, bytes += big;
	CHECK(cudaMemcpyPeerAsync(a0b, 0, b1, 1, 4096, s0));
	transfers++, bytes += 4096;
	CHECK(cudaMemcpyAsync(b1, a0, 65536, cudaMemcpyDeviceToDevice, s0));
	transfers++, bytes += 65536;
	CHECK(cudaMemcpyAsync(a0b, b1, 100, cudaMemcpyDefault, s0));
	transfers++, bytes += 100;
	CHECK(cudaStreamSynchronize(s0));
	CHECK(cudaMemcpy(b1, a0, 3000, cudaMemcpyDefault));
	transfers++, bytes += 3000;
	CHECK(cudaMemcpy(a0b, a0, 1000, cudaMemcpyDeviceToDevice)); /* same device: not recorded */
	CHECK(cudaMemcpy(back, a0, 1000, cudaMemcpyDeviceToHost));  /* not a peer copy */

	struct cudaMemcpy3DPeerParms p;
	memset(&p, 0, sizeof(p));
	p.srcPtr = (struct cudaPitchedPtr){.ptr = a0, .pitch = 1024, .xsize = 1024, .ysize = 16};
	p.dstPtr = (struct cudaPitchedPtr){.ptr = b1, .pitch = 1024, .xsize = 1024, .ysize = 16};
	p.srcDevice = 0;
	p.dstDevice = 1;
	p.extent = (struct cudaExtent){.width = 1024, .height = 16, .depth = 1};
	CHECK(cudaMemcpy3DPeer(&p));
	transfers++, bytes += 1024 * 16;

	if (enabled) {
		CHECK(cudaDeviceDisablePeerAccess(1));
		peer++;
	}
	CHECK(cudaMemcpyPeer(b1, 1, a0, 0, 512));
	transfers++, bytes += 512;

	/* The data must have arrived intact, whatever path it took. */
	CHECK(cudaMemcpyPeer(b1, 1, a0, 0, big));
	transfers++, bytes += big;
	CHECK(cudaSetDevice(1));
	CHECK(cudaMemcpy(back, b1, big, cudaMemcpyDeviceToHost));
	int same = memcmp(h, back, big) == 0;
	free(h);
	free(back);
	if (!same) {
		fprintf(stderr, "rt_peer: data mismatch after peer copy\n");
		return 1;
	}
	printf("EXPECT transfers=%ld bytes=%ld peer_access=%ld failures=0 p2p=%d\n", transfers,
	       bytes, peer, can);
	return 0;
}

/* Each failure comes from a function of its own, so the backtrace can be checked by name. */
__attribute__((noinline)) static cudaError_t induce_own_device(void)
{
	CHECK(cudaSetDevice(0));
	return cudaDeviceEnablePeerAccess(0, 0);
}

__attribute__((noinline)) static cudaError_t induce_already_enabled(void)
{
	CHECK(cudaSetDevice(0));
	cudaDeviceEnablePeerAccess(1, 0);
	return cudaDeviceEnablePeerAccess(1, 0);
}

__attribute__((noinline)) static cudaError_t induce_bad_ordinal(void)
{
	CHECK(cudaSetDevice(0));
	return cudaDeviceEnablePeerAccess(7, 0);
}

__attribute__((noinline)) static cudaError_t induce_not_enabled(void)
{
	CHECK(cudaSetDevice(1));
	return cudaDeviceDisablePeerAccess(0);
}

__attribute__((noinline)) static cudaError_t induce_bad_flags(void)
{
	CHECK(cudaSetDevice(1));
	return cudaDeviceEnablePeerAccess(0, 5);
}

static int mode_errors(void)
{
	int n = need_two_devices();
	int can = 0;
	CHECK(cudaDeviceCanAccessPeer(&can, 0, 1));
	struct {
		const char *name;
		cudaError_t (*fn)(void);
	} cases[] = {
	    {"induce_own_device", induce_own_device},
	    {"induce_already_enabled", induce_already_enabled},
	    {"induce_bad_ordinal", induce_bad_ordinal},
	    {"induce_not_enabled", induce_not_enabled},
	    {"induce_bad_flags", induce_bad_flags},
	};
	int failures = 0;
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		if (strcmp(cases[k].name, "induce_bad_ordinal") == 0 && n > 7)
			continue;
		if (strcmp(cases[k].name, "induce_already_enabled") == 0 && !can)
			continue;
		cudaError_t e = cases[k].fn();
		cudaError_t last = cudaGetLastError();
		printf("CASE %s status=%d last_error=%d\n", cases[k].name, (int)e, (int)last);
		if (e != cudaSuccess)
			failures++;
	}
	printf("EXPECT failures=%d\n", failures);
	return 0;
}

struct worker {
	int index, copies;
	size_t bytes;
	_Atomic long *published; /* copier mode: calls returned so far */
	_Atomic long *failed;	 /* flood mode: of those, calls that failed (on purpose) */
	uint32_t *tid_out;
	bool flood; /* no pause between copies */
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	void *a, *b;
	cudaStream_t s;
	peer_buffers(&b, &a, w->bytes, &s);
	if (w->tid_out)
		*w->tid_out = (uint32_t)syscall(SYS_gettid);
	for (long k = 0; w->copies < 0 || k < w->copies; k++) {
		if (w->flood && (k & 32767) == 32767) {
			/* Past the end of both buffers: a failure among the flood, which must keep
			 * its row however full the ring. */
			if (cudaMemcpyPeerAsync(b, 1, a, 0, w->bytes + (1 << 20), s) ==
			    cudaSuccess) {
				fprintf(stderr, "rt_peer: an out-of-bounds copy succeeded\n");
				exit(1);
			}
			atomic_store(w->failed, atomic_load(w->failed) + 1);
		} else {
			CHECK(cudaMemcpyPeerAsync(b, 1, a, 0, w->bytes, s));
		}
		if (w->published)
			atomic_store(w->published, k + 1);
		if ((k & 63) == 63)
			CHECK(cudaStreamSynchronize(s));
		/* The copier stands for a program, not a flood: a real job's peer copies come
		 * between kernels. Unthrottled (flood), the simulated copies outrun any drain and
		 * the rings overflow (by design those records are folded into aggregates, which the
		 * SIGKILL test is not about). */
		if (w->published && !w->flood && (k & 7) == 7)
			usleep(100);
	}
	CHECK(cudaStreamSynchronize(s));
	return NULL;
}

static int mode_threads(int threads, int copies, int linger_ms)
{
	need_two_devices();
	pthread_t tids[256];
	struct worker w[256];
	if (threads > 256)
		threads = 256;
	for (int k = 0; k < threads; k++) {
		w[k] = (struct worker){.index = k, .copies = copies, .bytes = 256};
		pthread_create(&tids[k], NULL, worker_main, &w[k]);
	}
	for (int k = 0; k < threads; k++)
		pthread_join(tids[k], NULL);
	/* Optionally go on living, as a program does after its copies (see mode_spaced). */
	if (linger_ms > 0)
		usleep((useconds_t)linger_ms * 1000);
	printf("EXPECT transfers=%ld bytes=%ld\n", (long)threads * copies,
	       (long)threads * copies * 256);
	return 0;
}

static int mode_spaced(int copies, int gap_us, bool p2p)
{
	need_two_devices();
	void *a, *b;
	cudaStream_t s = NULL;
	peer_buffers(&b, &a, 256, NULL);
	if (p2p)
		CHECK(cudaDeviceEnablePeerAccess(1, 0));
	else
		CHECK(cudaStreamCreate(&s));
	for (int k = 0; k < copies; k++) {
		if (p2p)
			CHECK(cudaMemcpyAsync(b, a, 256, cudaMemcpyDeviceToDevice, s));
		else
			CHECK(cudaMemcpyPeerAsync(b, 1, a, 0, 256, s));
		usleep((useconds_t)gap_us);
	}
	CHECK(cudaStreamSynchronize(s));
	/* The program goes on with other work: the guard reads GPU times only while the process
	 * runs (no CUDA call at exit), so copies in flight in its last moments keep none. A second
	 * covers the drainer's first pass on a loaded machine. */
	usleep(1000000);
	printf("EXPECT transfers=%d bytes=%d\n", copies, copies * 256);
	return 0;
}

static _Atomic long profiler_records;
static CUptiResult(CUPTIAPI *profiler_next)(uint8_t *, size_t, CUpti_Activity **);

static void CUPTIAPI profiler_buffer(uint8_t **buffer, size_t *size, size_t *max_records)
{
	*size = 1 << 20;
	*buffer = aligned_alloc(8, *size);
	*max_records = 0;
}

static void CUPTIAPI profiler_done(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
				   size_t valid)
{
	(void)ctx;
	(void)stream;
	(void)size;
	CUpti_Activity *rec = NULL;
	while (buffer && valid && profiler_next(buffer, valid, &rec) == CUPTI_SUCCESS)
		profiler_records++;
	free(buffer);
}

static void spaced_copies(void *dst, const void *src, cudaStream_t s, int copies, int gap_us)
{
	for (int k = 0; k < copies; k++) {
		CHECK(cudaMemcpyPeerAsync(dst, 1, src, 0, 256, s));
		usleep((useconds_t)gap_us);
	}
	CHECK(cudaStreamSynchronize(s));
}

static int mode_profiler(int copies)
{
	need_two_devices();
	void *a, *b;
	cudaStream_t s;
	peer_buffers(&b, &a, 256, &s);
	spaced_copies(b, a, s, copies, 200);
	/* The guard reads these copies' GPU times before the profiler takes over. */
	usleep(1000000);

	const char *path = getenv("P2PGUARD_CUPTI");
	void *lib = dlopen(path && *path ? path : "libcupti.so.13", RTLD_NOW | RTLD_GLOBAL);
	if (!lib) {
		fprintf(stderr, "rt_peer: no libcupti.so.13: %s\n", dlerror());
		return 1;
	}
	CUptiResult(CUPTIAPI * reg)(CUpti_BuffersCallbackRequestFunc,
				    CUpti_BuffersCallbackCompleteFunc) =
	    (CUptiResult(CUPTIAPI *)(
		CUpti_BuffersCallbackRequestFunc,
		CUpti_BuffersCallbackCompleteFunc))dlsym(lib, "cuptiActivityRegisterCallbacks");
	CUptiResult(CUPTIAPI * enable)(CUpti_ActivityKind) =
	    (CUptiResult(CUPTIAPI *)(CUpti_ActivityKind))dlsym(lib, "cuptiActivityEnable");
	CUptiResult(CUPTIAPI * disable)(CUpti_ActivityKind) =
	    (CUptiResult(CUPTIAPI *)(CUpti_ActivityKind))dlsym(lib, "cuptiActivityDisable");
	CUptiResult(CUPTIAPI * flush)(uint32_t) =
	    (CUptiResult(CUPTIAPI *)(uint32_t))dlsym(lib, "cuptiActivityFlushAll");
	profiler_next = (CUptiResult(CUPTIAPI *)(uint8_t *, size_t, CUpti_Activity **))dlsym(
	    lib, "cuptiActivityGetNextRecord");
	if (!reg || !enable || !disable || !flush || !profiler_next ||
	    reg(profiler_buffer, profiler_done) != CUPTI_SUCCESS ||
	    enable(CUPTI_ACTIVITY_KIND_MEMCPY) != CUPTI_SUCCESS ||
	    enable(CUPTI_ACTIVITY_KIND_MEMCPY2) != CUPTI_SUCCESS) {
		fprintf(stderr, "rt_peer: CUPTI would not trace for the profiler\n");
		return 1;
	}
	spaced_copies(b, a, s, copies, 200);
	flush(0);
	disable(CUPTI_ACTIVITY_KIND_MEMCPY2);
	disable(CUPTI_ACTIVITY_KIND_MEMCPY);

	int later = 650;
	spaced_copies(b, a, s, later, 20000);
	usleep(1000000);
	printf("PROFILER records=%ld\n", (long)profiler_records);
	printf("EXPECT transfers=%d bytes=%d\n", 2 * copies + later, (2 * copies + later) * 256);
	return 0;
}

static int mode_peer_first(int copies)
{
	int can = 0;
	CHECK(cudaDeviceCanAccessPeer(&can, 0, 1));
	void *a, *b;
	cudaStream_t s;
	peer_buffers(&b, &a, 256, &s);
	for (int k = 0; k < copies; k++)
		CHECK(cudaMemcpyPeerAsync(b, 1, a, 0, 256, s));
	CHECK(cudaStreamSynchronize(s));
	usleep(1000000); /* the drainer reads GPU times only while the process runs */
	printf("EXPECT transfers=%d bytes=%d\n", copies, copies * 256);
	return 0;
}

static int mode_empty_idle(int copies)
{
	need_two_devices();
	void *a, *b;
	cudaStream_t s;
	peer_buffers(&b, &a, 256, &s);
	CHECK(cudaMemcpyPeerAsync(b, 1, a, 0, 0, s));
	CHECK(cudaStreamSynchronize(s));
	sleep(12);
	for (int k = 0; k < copies; k++)
		CHECK(cudaMemcpyPeerAsync(b, 1, a, 0, 256, s));
	CHECK(cudaStreamSynchronize(s));
	usleep(1000000);
	printf("EXPECT transfers=%d bytes=%d\n", copies + 1, copies * 256);
	return 0;
}

static int mode_streams(int rounds)
{
	need_two_devices();
	void *a, *b;
	size_t most = 256 + (size_t)rounds;
	peer_buffers(&b, &a, most, NULL);
	CHECK(cudaDeviceEnablePeerAccess(1, 0));
	for (int k = 0; k < rounds; k++) {
		cudaStream_t s;
		CHECK(cudaStreamCreate(&s));
		CHECK(cudaMemcpyAsync(b, a, 256 + (size_t)k, cudaMemcpyDeviceToDevice, s));
		CHECK(cudaStreamSynchronize(s));
		CHECK(cudaStreamDestroy(s));
	}
	usleep(1000000); /* the program goes on: GPU times are read while it lives */
	printf("EXPECT transfers=%d\n", rounds);
	return 0;
}

static int one_copy_round(int copies)
{
	void *a, *b;
	cudaError_t e = cudaSetDevice(1);
	if (e == cudaSuccess)
		e = cudaMalloc(&b, 4096);
	if (e == cudaSuccess)
		e = cudaSetDevice(0);
	if (e == cudaSuccess)
		e = cudaMalloc(&a, 4096);
	for (int k = 0; k < copies; k++) {
		/* After fork the runtime may refuse; the call still counts. */
		cudaError_t c = cudaMemcpyPeer(e == cudaSuccess ? b : (void *)0x1000, 1,
					       e == cudaSuccess ? a : (void *)0x2000, 0, 4096);
		if (c != cudaSuccess && e == cudaSuccess)
			e = c;
	}
	return e == cudaSuccess ? 0 : 1;
}

static int mode_fork(void)
{
	need_two_devices();
	one_copy_round(2);
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		int rc = one_copy_round(3);
		printf("CHILD pid=%d copies=3 ok=%d\n", (int)getpid(), rc == 0);
		fflush(stdout);
		_exit(0);
	}
	int status;
	waitpid(pid, &status, 0);
	one_copy_round(1);
	printf("EXPECT parent_transfers=3 child_transfers=3 child_pid=%d\n", (int)pid);
	return 0;
}

/* The fault is the point: UBSan's null check would end the program before the SIGSEGV. */
__attribute__((noinline, no_sanitize("null"))) static void crash_here(volatile int *p)
{
	*p = 42;
}

static int mode_crash(void)
{
	need_two_devices();
	one_copy_round(1);
	printf("EXPECT transfers=1 crash_signal=%d\n", SIGSEGV);
	fflush(stdout);
	/* A null pointer the compiler cannot see through. */
	volatile uintptr_t bad = 0;
	crash_here((volatile int *)bad);
	return 0;
}

/* What copier threads publish for the SIGKILL and SIGSEGV tests: per thread, its tid and the
 * number of calls that had returned. */
struct shared_counts {
	_Atomic long count[64];
	uint32_t tid[64];
	_Atomic long failed[64]; /* flood mode: calls among count that failed */
};

/* Maps FILE and starts `threads` (1..64) copier threads that copy until the process dies. */
static struct shared_counts *start_copiers(const char *file, int threads, pthread_t *tids,
					   struct worker *w, bool flood)
{
	int fd = open(file, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || ftruncate(fd, (off_t)sizeof(struct shared_counts)) < 0)
		return NULL;
	struct shared_counts *sh =
	    mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (sh == MAP_FAILED)
		return NULL;
	for (int k = 0; k < threads; k++) {
		w[k] = (struct worker){.index = k,
				       .copies = -1,
				       .bytes = 256,
				       .published = &sh->count[k],
				       .tid_out = &sh->tid[k],
				       .failed = &sh->failed[k],
				       .flood = flood};
		pthread_create(&tids[k], NULL, worker_main, &w[k]);
	}
	return sh;
}

static int clamp_threads(int threads)
{
	return threads < 1 ? 1 : threads > 64 ? 64 : threads;
}

/* Threads copy until killed; flood: as fast as they can. */
static int mode_copier(const char *file, int threads, bool flood)
{
	need_two_devices();
	threads = clamp_threads(threads);
	pthread_t tids[64];
	struct worker w[64];
	if (!start_copiers(file, threads, tids, w, flood))
		return 2;
	printf("READY\n");
	fflush(stdout);
	for (int k = 0; k < threads; k++)
		pthread_join(tids[k], NULL);
	return 0;
}

struct crasher {
	_Atomic long *count;
	int threads, ms;
};

/* Once every copier has returned from a copy, waits ms and faults in a thread of its own. */
static void *crasher_main(void *arg)
{
	struct crasher *c = arg;
	for (int k = 0; k < c->threads; k++)
		while (atomic_load(&c->count[k]) == 0)
			usleep(100);
	usleep((useconds_t)c->ms * 1000);
	volatile uintptr_t bad = 0;
	crash_here((volatile int *)bad);
	return NULL;
}

/* Copier threads as in copier mode, killed by a SIGSEGV of the program's own. */
static int mode_crasher(const char *file, int threads, int ms)
{
	need_two_devices();
	threads = clamp_threads(threads);
	pthread_t tids[64], crash_tid;
	struct worker w[64];
	struct shared_counts *sh = start_copiers(file, threads, tids, w, false);
	if (!sh)
		return 2;
	struct crasher c = {.count = sh->count, .threads = threads, .ms = ms};
	pthread_create(&crash_tid, NULL, crasher_main, &c);
	printf("READY\n");
	fflush(stdout);
	pthread_join(crash_tid, NULL);
	return 0;
}

struct bench_copy {
	void *dst, *src;
	size_t size;
	cudaStream_t stream;
	bool peer; /* device 0 -> 1 with cudaMemcpyPeerAsync, else within one device */
};

static void bench_enqueue(const struct bench_copy *c)
{
	if (c->peer)
		CHECK(cudaMemcpyPeerAsync(c->dst, 1, c->src, 0, c->size, c->stream));
	else
		CHECK(cudaMemcpyAsync(c->dst, c->src, c->size, cudaMemcpyDefault, c->stream));
}

static int compare_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/*
 * Host time per enqueued copy, in batches small enough that the queue never fills: the median of
 * the batches' per-call times, so that a batch hit by an interrupt or a descheduling does not move
 * the figure (the mean of the same run is printed beside it).
 */
#define BENCH_BATCH 256
static double enqueue_ns_per_call(const struct bench_copy *c, long n, double *ret_mean)
{
	for (int k = 0; k < 100; k++)
		bench_enqueue(c);
	CHECK(cudaStreamSynchronize(c->stream));
	long nbatches = (n + BENCH_BATCH - 1) / BENCH_BATCH, b = 0;
	double *per_call = calloc((size_t)nbatches, sizeof(double));
	if (!per_call)
		return -1;
	long done = 0;
	double total_ns = 0;
	while (done < n) {
		long batch = n - done < BENCH_BATCH ? n - done : BENCH_BATCH;
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		for (long k = 0; k < batch; k++)
			bench_enqueue(c);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		double ns = (t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec);
		total_ns += ns;
		per_call[b++] = ns / batch;
		done += batch;
		CHECK(cudaStreamSynchronize(c->stream));
	}
	qsort(per_call, (size_t)b, sizeof(double), compare_double);
	double median = per_call[b / 2];
	free(per_call);
	*ret_mean = total_ns / n;
	return median;
}

/*
 * A fixed piece of work without CUDA, ns: a dependent walk through 4 MiB (cache and memory
 * latency) and an arithmetic loop. Printed beside a benchmark's figure, it tells whether a slow
 * run was a slow process (the whole process at a lower speed) or a slow CUDA call.
 */
static double cpu_probe_ns(void)
{
	enum { WORDS = 1 << 20, STEPS = 1 << 18 };
	uint32_t *next = malloc(WORDS * sizeof(uint32_t));
	if (!next)
		return -1;
	uint64_t x = 88172645463325252ull;
	for (uint32_t k = 0; k < WORDS; k++)
		next[k] = k;
	for (uint32_t k = WORDS - 1; k > 0; k--) { /* one cycle through every word (Sattolo) */
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		uint32_t j = (uint32_t)(x % k), t = next[k];
		next[k] = next[j];
		next[j] = t;
	}
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	uint32_t at = 0;
	for (int k = 0; k < STEPS; k++)
		at = next[at];
	volatile uint64_t sink = at;
	for (int k = 0; k < STEPS * 8; k++)
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
	sink += x;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	(void)sink;
	free(next);
	return (double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec);
}

/* Peer copies with peer access enabled: the guard's cost per intercepted call. */
static int mode_bench(long n, size_t size)
{
	double cpu_ns = cpu_probe_ns(); /* before any CUDA call: the guard is idle */
	need_two_devices();
	struct bench_copy c = {.size = size, .peer = true};
	peer_buffers(&c.dst, &c.src, size, &c.stream);
	int can = 0;
	CHECK(cudaDeviceCanAccessPeer(&can, 0, 1));
	if (can)
		cudaDeviceEnablePeerAccess(1, 0);
	double mean = 0, median = enqueue_ns_per_call(&c, n, &mean);
	printf("BENCH calls=%ld bytes=%zu ns_per_call=%.1f mean_ns=%.1f p2p=%d cpu_probe_ns=%.0f\n",
	       n, size, median, mean, can, cpu_ns);
	return 0;
}

/* Copies that never cross devices: what every cudaMemcpyAsync pays for the guard's question "does
 * this cross devices?" (within GPU 0, kind Default so both pointers are asked). */
static int mode_bench_local(long n, size_t size)
{
	struct bench_copy c = {.size = size, .peer = false};
	CHECK(cudaSetDevice(0));
	CHECK(cudaMalloc(&c.src, size));
	CHECK(cudaMalloc(&c.dst, size));
	CHECK(cudaStreamCreate(&c.stream));
	double mean = 0, median = enqueue_ns_per_call(&c, n, &mean);
	printf("BENCH calls=%ld bytes=%zu ns_per_call=%.1f mean_ns=%.1f local=1\n", n, size, median,
	       mean);
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "basic";
	if (strcmp(mode, "basic") == 0)
		return mode_basic();
	if (strcmp(mode, "errors") == 0)
		return mode_errors();
	if (strcmp(mode, "threads") == 0)
		return mode_threads(argc > 2 ? atoi(argv[2]) : 8, argc > 3 ? atoi(argv[3]) : 100,
				    argc > 4 ? atoi(argv[4]) : 0);
	if (strcmp(mode, "fork") == 0)
		return mode_fork();
	if (strcmp(mode, "crash") == 0)
		return mode_crash();
	if (strcmp(mode, "copier") == 0 && argc > 3)
		return mode_copier(argv[2], atoi(argv[3]), false);
	if (strcmp(mode, "flood") == 0 && argc > 3)
		return mode_copier(argv[2], atoi(argv[3]), true);
	if (strcmp(mode, "streams") == 0)
		return mode_streams(argc > 2 ? atoi(argv[2]) : 100);
	if (strcmp(mode, "empty-idle") == 0)
		return mode_empty_idle(argc > 2 ? atoi(argv[2]) : 100);
	if (strcmp(mode, "peer-first") == 0)
		return mode_peer_first(argc > 2 ? atoi(argv[2]) : 1000);
	if (strcmp(mode, "profiler") == 0)
		return mode_profiler(argc > 2 ? atoi(argv[2]) : 100);
	if (strcmp(mode, "spaced") == 0)
		return mode_spaced(argc > 2 ? atoi(argv[2]) : 100, argc > 3 ? atoi(argv[3]) : 200,
				   argc > 4 && strcmp(argv[4], "p2p") == 0);
	if (strcmp(mode, "bench-local") == 0)
		return mode_bench_local(argc > 2 ? atol(argv[2]) : 20000,
					argc > 3 ? (size_t)atol(argv[3]) : 256);
	if (strcmp(mode, "crasher") == 0 && argc > 4)
		return mode_crasher(argv[2], atoi(argv[3]), atoi(argv[4]));
	if (strcmp(mode, "bench") == 0)
		return mode_bench(argc > 2 ? atol(argv[2]) : 20000,
				  argc > 3 ? (size_t)atol(argv[3]) : 256);
	fprintf(stderr, "usage: rt_peer basic|errors|threads T N|fork|crash|copier FILE T|flood "
			"FILE T|crasher FILE T "
			"MS|spaced N US|streams N|peer-first N|empty-idle N|profiler N|bench N "
			"SIZE|bench-local N SIZE\n");
	return 2;
}
