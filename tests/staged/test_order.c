/* SPDX-License-Identifier: MIT */
/*
 * Caller semantics of staged copies: an async copy returns before its bytes are there; work
 * enqueued earlier on the caller's stream is visible to it (writes of its source, reads of its
 * destination) and work enqueued later sees it complete; chains of copies through both directions
 * (two rings) stay ordered; the legacy and the per-thread default streams; a synchronous copy is
 * ordered after the legacy stream and returns with the bytes in place. Each check runs with a
 * one-chunk copy and a chunked one, with the caller's stream on the source device and on the
 * destination device, so every path of the engine is covered. Meant to run with
 * SIMCUDA_COPY_NS_PER_BYTE set, so that a missing dependency shows up as wrong bytes rather than
 * passing by luck.
 */
#include "common.h"

#include <pthread.h>

static struct t_env e;
static size_t N; /* this pass's size */
static unsigned char *pat, *old, *got;
static void *pinned; /* for async uploads and downloads */

static CUresult staged(CUdeviceptr dst, int dd, CUdeviceptr src, int sd, size_t n, CUstream s,
		       bool async, bool per_thread)
{
	struct p2pg_staged_copy c = {
	    .dst = dst,
	    .src = src,
	    .dst_device = dd,
	    .src_device = sd,
	    .bytes = n,
	    .stream = s,
	    .per_thread_stream = per_thread,
	    .async = async,
	};
	return p2pg_staged_copy(&c);
}

static void expect_bytes(int dev, CUdeviceptr p, const unsigned char *want, const char *what,
			 int sdev)
{
	t_download(e.ctx[dev], got, p, N);
	size_t at = t_diff(want, got, N);
	T_EXPECT(at == (size_t)-1, "%s (%zu bytes, stream of device %d): first wrong byte at %zu",
		 what, N, sdev, at);
}

static void expect_fill(int dev, CUdeviceptr p, unsigned char v, const char *what, int sdev)
{
	t_download(e.ctx[dev], got, p, N);
	size_t k = 0;
	while (k < N && got[k] == v)
		k++;
	T_EXPECT(k == N, "%s (%zu bytes, stream of device %d): byte %zu is %#x, not %#x", what, N,
		 sdev, k, k < N ? got[k] : 0, v);
}

/* Returns early, and the caller's stream is still busy with it. */
static void test_async_returns_early(CUdeviceptr a0, CUdeviceptr b1, CUstream s, int sdev)
{
	t_pattern(pat, N, 20);
	t_upload(e.ctx[0], a0, pat, N);
	double t0 = t_now();
	T_CU(staged(b1, 1, a0, 0, N, s, true, false));
	double call = t_now() - t0;
	CUresult q = p2pg_drv.cuStreamQuery(s);
	T_EXPECT(q == CUDA_ERROR_NOT_READY, "caller's stream busy right after the call, got %d",
		 (int)q);
	const char *v = getenv("SIMCUDA_COPY_NS_PER_BYTE");
	double leg = v ? (double)N * atof(v) * 1e-9 : 0;
	if (leg >= 0.005) {
		/* Each leg alone takes N * ns_per_byte: the call must not have waited for one
		 * (checked only where that is long enough to tell on a loaded machine). */
		T_EXPECT(call < leg / 2, "async call took %.3f s, one leg takes %.3f s", call, leg);
	}
	T_CU(p2pg_drv.cuStreamSynchronize(s));
	expect_bytes(1, b1, pat, "async copy after synchronising its stream", sdev);
}

/* Earlier work on the stream is visible to the copy: an async upload and a memset of its source,
 * an async download of its destination (which must still read the old bytes). */
static void test_earlier_work(CUdeviceptr a0, CUdeviceptr b1, CUstream s, int sdev)
{
	t_pattern(pat, N, 21);
	memcpy(pinned, pat, N);
	T_CU(p2pg_drv.cuMemcpyHtoDAsync(a0, pinned, N, s));
	T_CU(staged(b1, 1, a0, 0, N, s, true, false));
	T_CU(p2pg_drv.cuStreamSynchronize(s));
	expect_bytes(1, b1, pat, "upload enqueued before the copy", sdev);

	if (sdev == 0) {
		/* A memset runs on the stream's own device. */
		T_CU(p2pg_drv.cuMemsetD8Async(a0, 0x3c, N, s));
		T_CU(staged(b1, 1, a0, 0, N, s, true, false));
		T_CU(p2pg_drv.cuStreamSynchronize(s));
		expect_fill(1, b1, 0x3c, "memset enqueued before the copy", sdev);
	}

	t_pattern(old, N, 22);
	t_upload(e.ctx[1], b1, old, N);
	t_pattern(pat, N, 23);
	t_upload(e.ctx[0], a0, pat, N);
	memset(pinned, 0, N);
	T_CU(p2pg_drv.cuMemcpyDtoHAsync(pinned, b1, N, s));
	T_CU(staged(b1, 1, a0, 0, N, s, true, false));
	T_CU(p2pg_drv.cuStreamSynchronize(s));
	size_t at = t_diff(old, pinned, N);
	T_EXPECT(at == (size_t)-1,
		 "download enqueued before the copy (%zu bytes, stream of device %d) saw new bytes "
		 "at %zu",
		 N, sdev, at);
	expect_bytes(1, b1, pat, "copy after a download of its destination", sdev);
}

/* Later work on the stream (a download, a memset) runs after the copy completed. */
static void test_later_work(CUdeviceptr a0, CUdeviceptr b1, CUstream s, int sdev)
{
	t_pattern(pat, N, 24);
	t_upload(e.ctx[0], a0, pat, N);
	memset(pinned, 0, N);
	T_CU(staged(b1, 1, a0, 0, N, s, true, false));
	T_CU(p2pg_drv.cuMemcpyDtoHAsync(pinned, b1, N, s));
	T_CU(p2pg_drv.cuStreamSynchronize(s));
	size_t at = t_diff(pat, pinned, N);
	T_EXPECT(at == (size_t)-1,
		 "download enqueued after the copy (%zu bytes, stream of device %d): first wrong "
		 "byte at %zu",
		 N, sdev, at);

	if (sdev == 1) {
		T_CU(staged(b1, 1, a0, 0, N, s, true, false));
		T_CU(p2pg_drv.cuMemsetD8Async(b1, 0x77, N, s));
		T_CU(p2pg_drv.cuStreamSynchronize(s));
		expect_fill(1, b1, 0x77, "memset enqueued after the copy", sdev);
	}
}

/* 0 -> 1 -> 0 -> 1 on one stream: each copy reads what the one before wrote, through the other
 * direction's ring and engine streams. */
static void test_chain(CUdeviceptr a0, CUdeviceptr b1, CUdeviceptr c0, CUdeviceptr d1, CUstream s,
		       int sdev)
{
	t_pattern(pat, N, 25);
	t_upload(e.ctx[0], a0, pat, N);
	memset(old, 0, N);
	t_upload(e.ctx[1], b1, old, N);
	t_upload(e.ctx[1], d1, old, N);
	t_upload(e.ctx[0], c0, old, N);
	T_CU(staged(b1, 1, a0, 0, N, s, true, false));
	T_CU(staged(c0, 0, b1, 1, N, s, true, false));
	T_CU(staged(d1, 1, c0, 0, N, s, true, false));
	T_CU(p2pg_drv.cuStreamSynchronize(s));
	expect_bytes(1, d1, pat, "end of a 0->1->0->1 chain on one stream", sdev);
}

/* Stream 0 as the legacy default stream of the current context: ordered after earlier work on
 * it, and after a blocking stream's work (legacy semantics), and before later work. */
static void test_legacy(CUdeviceptr a0, CUdeviceptr b1, int cur)
{
	T_CU(p2pg_drv.cuCtxSetCurrent(e.ctx[cur]));
	t_pattern(pat, N, 26);
	memcpy(pinned, pat, N);
	T_CU(p2pg_drv.cuMemcpyHtoDAsync(a0, pinned, N, CU_STREAM_LEGACY));
	T_CU(staged(b1, 1, a0, 0, N, NULL, true, false));
	T_CU(p2pg_drv.cuStreamSynchronize(CU_STREAM_LEGACY));
	expect_bytes(1, b1, pat, "legacy stream: upload, copy, synchronise", cur);

	CUstream blocking;
	T_CU(p2pg_drv.cuStreamCreate(&blocking, 0));
	t_pattern(pat, N, 27);
	memcpy(pinned, pat, N);
	T_CU(p2pg_drv.cuMemcpyHtoDAsync(a0, pinned, N, blocking));
	T_CU(staged(b1, 1, a0, 0, N, CU_STREAM_LEGACY, true, false));
	T_CU(p2pg_drv.cuStreamSynchronize(CU_STREAM_LEGACY));
	expect_bytes(1, b1, pat, "legacy stream after a blocking stream's upload", cur);
	T_CU(p2pg_drv.cuStreamSynchronize(blocking));
	T_CU(p2pg_drv.cuStreamDestroy(blocking));

	/* A synchronous copy is ordered after the legacy stream and returns with the bytes. */
	t_pattern(pat, N, 28);
	memcpy(pinned, pat, N);
	T_CU(p2pg_drv.cuMemcpyHtoDAsync(a0, pinned, N, CU_STREAM_LEGACY));
	T_CU(staged(b1, 1, a0, 0, N, NULL, false, false));
	expect_bytes(1, b1, pat, "synchronous copy after a legacy-stream upload", cur);
	T_CU(p2pg_drv.cuCtxSetCurrent(e.ctx[0]));
}

struct pt_arg {
	CUdeviceptr a0, b1;
	unsigned char *pat;
	void *up, *down; /* pinned; the upload reads its buffer after the call returned */
	uint32_t seed;
	int cur;
};

static void *per_thread_main(void *p)
{
	struct pt_arg *a = p;
	T_CU(p2pg_drv.cuCtxSetCurrent(e.ctx[a->cur]));
	for (int round = 0; round < 3; round++) {
		t_pattern(a->pat, N, a->seed + (uint32_t)round);
		memcpy(a->up, a->pat, N);
		memset(a->down, 0, N);
		T_CU(p2pg_drv.cuMemcpyHtoDAsync(a->a0, a->up, N, CU_STREAM_PER_THREAD));
		T_CU(staged(a->b1, 1, a->a0, 0, N, NULL, true, true));
		T_CU(p2pg_drv.cuMemcpyDtoHAsync(a->down, a->b1, N, CU_STREAM_PER_THREAD));
		T_CU(p2pg_drv.cuStreamSynchronize(CU_STREAM_PER_THREAD));
		size_t at = t_diff(a->pat, a->down, N);
		T_EXPECT(at == (size_t)-1,
			 "per-thread stream of device %d, round %d: first wrong byte at %zu",
			 a->cur, round, at);
	}
	return NULL;
}

/* Stream 0 with per_thread_stream: each thread's own default stream. */
static void test_per_thread(size_t cap)
{
	enum { T = 4 };
	pthread_t th[T];
	struct pt_arg args[T];
	for (int k = 0; k < T; k++) {
		args[k] = (struct pt_arg){
		    .a0 = t_alloc(e.ctx[0], cap),
		    .b1 = t_alloc(e.ctx[1], cap),
		    .pat = malloc(cap),
		    .up = t_alloc_host(cap),
		    .down = t_alloc_host(cap),
		    .seed = 100u + (uint32_t)k * 10u,
		    .cur = k & 1,
		};
		if (!args[k].pat)
			exit(1);
		pthread_create(&th[k], NULL, per_thread_main, &args[k]);
	}
	for (int k = 0; k < T; k++) {
		pthread_join(th[k], NULL);
		t_free(e.ctx[0], args[k].a0);
		t_free(e.ctx[1], args[k].b1);
		free(args[k].pat);
		T_CU(p2pg_drv.cuMemFreeHost(args[k].up));
		T_CU(p2pg_drv.cuMemFreeHost(args[k].down));
	}
}

int main(void)
{
	t_setup(&e);
	/* A one-chunk copy (the engine takes the caller's stream for one leg) and a chunked one.
	 * The chunked one must still be running when the call returns: the simulated driver's
	 * delay makes a few MiB slow; on a real GPU it takes more bytes. */
	const size_t sizes[2] = {256 * T_KIB + 1,
				 t_slow_copies() ? 4 * T_MIB + 3 : 256 * T_MIB + 3};
	const size_t cap = sizes[1];
	pat = malloc(cap);
	old = malloc(cap);
	got = malloc(cap);
	pinned = t_alloc_host(cap);
	if (!pat || !old || !got)
		return 1;
	CUdeviceptr a0 = t_alloc(e.ctx[0], cap), c0 = t_alloc(e.ctx[0], cap);
	CUdeviceptr b1 = t_alloc(e.ctx[1], cap), d1 = t_alloc(e.ctx[1], cap);
	CUstream s[2] = {t_stream(e.ctx[0]), t_stream(e.ctx[1])};

	for (int pass = 0; pass < 2; pass++) {
		N = sizes[pass];
		for (int sdev = 0; sdev < 2; sdev++) {
			/* A small copy on a real GPU may well be done before the query. */
			if (pass == 1 || t_slow_copies())
				test_async_returns_early(a0, b1, s[sdev], sdev);
			test_earlier_work(a0, b1, s[sdev], sdev);
			test_later_work(a0, b1, s[sdev], sdev);
			test_chain(a0, b1, c0, d1, s[sdev], sdev);
			test_legacy(a0, b1, sdev);
		}
		test_per_thread(cap);
	}
	free(pat);
	free(old);
	free(got);
	return t_result("staged-order");
}
