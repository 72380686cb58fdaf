/* SPDX-License-Identifier: MIT */
/*
 * The caller's current context (and the context stack under it) is what it was before the call,
 * whatever the copy's kind, and on error paths too; statuses the engine reports itself.
 */
#include "common.h"

static struct t_env e;
static CUdeviceptr a0, b1, a1, b0;
static const size_t N = 3 * T_MIB + 5;
static unsigned char *pat, *got;

static CUresult copy(int sd, CUstream s, bool async, bool per_thread)
{
	struct p2pg_staged_copy c = {
	    .dst = sd ? b0 : b1,
	    .src = sd ? a1 : a0,
	    .dst_device = !sd,
	    .src_device = sd,
	    .bytes = N,
	    .stream = s,
	    .per_thread_stream = per_thread,
	    .async = async,
	};
	return p2pg_staged_copy(&c);
}

static CUcontext current(void)
{
	CUcontext c;
	T_CU(p2pg_drv.cuCtxGetCurrent(&c));
	return c;
}

static void verify(int sd, const char *what)
{
	t_download(e.ctx[!sd], got, sd ? b0 : b1, N);
	size_t at = t_diff(pat, got, N);
	T_EXPECT(at == (size_t)-1, "%s: wrong byte at %zu", what, at);
}

int main(void)
{
	t_setup(&e);
	pat = malloc(N);
	got = malloc(N);
	if (!pat || !got)
		return 1;
	a0 = t_alloc(e.ctx[0], N);
	b0 = t_alloc(e.ctx[0], N);
	a1 = t_alloc(e.ctx[1], N);
	b1 = t_alloc(e.ctx[1], N);
	t_pattern(pat, N, 5);
	t_upload(e.ctx[0], a0, pat, N);
	t_upload(e.ctx[1], a1, pat, N);
	CUstream s0 = t_stream(e.ctx[0]), s1 = t_stream(e.ctx[1]);

	for (int sd = 0; sd < 2; sd++) {
		/* Current context of either device, caller stream of either device. */
		for (int cur = 0; cur < 2; cur++) {
			for (int sdev = 0; sdev < 2; sdev++) {
				CUstream s = sdev ? s1 : s0;
				T_CU(p2pg_drv.cuCtxSetCurrent(e.ctx[cur]));
				T_EXPECT(copy(sd, s, true, false) == CUDA_SUCCESS, "async copy");
				T_EXPECT(current() == e.ctx[cur],
					 "current context kept (async, %d->%d, current %d, "
					 "stream of %d)",
					 sd, !sd, cur, sdev);
				T_CU(p2pg_drv.cuStreamSynchronize(s));
				verify(sd, "async copy");
			}
			T_CU(p2pg_drv.cuCtxSetCurrent(e.ctx[cur]));
			T_EXPECT(copy(sd, NULL, true, false) == CUDA_SUCCESS, "legacy async copy");
			T_EXPECT(current() == e.ctx[cur], "current context kept (legacy stream)");
			T_EXPECT(copy(sd, NULL, true, true) == CUDA_SUCCESS,
				 "per-thread async copy");
			T_EXPECT(current() == e.ctx[cur], "current context kept (per-thread)");
			T_EXPECT(copy(sd, NULL, false, false) == CUDA_SUCCESS, "sync copy");
			T_EXPECT(current() == e.ctx[cur], "current context kept (sync)");
			verify(sd, "sync copy");
		}

		/* No current context: a synchronous copy and an async one on an explicit stream
		 * work; an async one on stream 0 has no default stream to use. */
		T_CU(p2pg_drv.cuCtxSetCurrent(NULL));
		T_EXPECT(copy(sd, NULL, false, false) == CUDA_SUCCESS, "sync copy without context");
		T_EXPECT(current() == NULL, "still no context after a sync copy");
		verify(sd, "sync copy without a context");
		T_CU(p2pg_drv.cuCtxSetCurrent(NULL));
		T_EXPECT(copy(sd, s1, true, false) == CUDA_SUCCESS, "async copy without context");
		T_EXPECT(current() == NULL, "still no context after an async copy");
		T_CU(p2pg_drv.cuStreamSynchronize(s1));
		verify(sd, "async copy without a context");
		T_CU(p2pg_drv.cuCtxSetCurrent(NULL));
		CUresult r = copy(sd, NULL, true, false);
		T_EXPECT(r == CUDA_ERROR_INVALID_CONTEXT, "stream 0 without a context: got %d",
			 (int)r);
		T_EXPECT(current() == NULL, "still no context after a failed copy");

		/* A context stack: only its top is current, and both entries survive. */
		T_CU(p2pg_drv.cuCtxSetCurrent(NULL));
		T_CU(p2pg_drv.cuCtxPushCurrent(e.ctx[0]));
		T_CU(p2pg_drv.cuCtxPushCurrent(e.ctx[1]));
		T_EXPECT(copy(sd, s0, true, false) == CUDA_SUCCESS, "copy under a context stack");
		T_EXPECT(copy(sd, NULL, false, false) == CUDA_SUCCESS, "sync copy under a stack");
		CUcontext popped;
		T_CU(p2pg_drv.cuCtxPopCurrent(&popped));
		T_EXPECT(popped == e.ctx[1], "top of the stack kept");
		T_CU(p2pg_drv.cuCtxPopCurrent(&popped));
		T_EXPECT(popped == e.ctx[0], "bottom of the stack kept");
		T_EXPECT(current() == NULL, "stack empty again");
		T_CU(p2pg_drv.cuStreamSynchronize(s0));
	}

	/* Statuses the engine reports itself, with the context untouched. */
	T_CU(p2pg_drv.cuCtxSetCurrent(e.ctx[1]));
	struct p2pg_staged_copy bad = {.dst = b1,
				       .src = a0,
				       .dst_device = 1,
				       .src_device = e.ndev,
				       .bytes = 16,
				       .async = true};
	T_EXPECT(p2pg_staged_copy(&bad) == CUDA_ERROR_INVALID_DEVICE, "source device out of range");
	bad.src_device = 0;
	bad.dst_device = -1;
	T_EXPECT(p2pg_staged_copy(&bad) == CUDA_ERROR_INVALID_DEVICE, "negative destination");
	bad.bytes = 0;
	T_EXPECT(p2pg_staged_copy(&bad) == CUDA_SUCCESS, "zero bytes succeed before any check");
	T_EXPECT(p2pg_staged_copy(NULL) == CUDA_ERROR_INVALID_VALUE, "no copy at all");
	T_EXPECT(current() == e.ctx[1], "context kept across failed calls");

	/* A driver error in the middle (a source address that is no allocation) comes back as the
	 * driver's status, and the pair keeps working afterwards. */
	struct p2pg_staged_copy wild = {.dst = b1,
					.src = (CUdeviceptr)0x10,
					.dst_device = 1,
					.src_device = 0,
					.bytes = 4096,
					.stream = s0,
					.async = true};
	CUresult r = p2pg_staged_copy(&wild);
	T_EXPECT(r != CUDA_SUCCESS, "copy from a wild address fails (got %d)", (int)r);
	T_EXPECT(current() == e.ctx[1], "context kept after a driver error");
	T_CU(p2pg_drv.cuCtxSetCurrent(e.ctx[1]));
	T_CU(p2pg_drv.cuMemsetD8(b1, 0, N));
	T_CU(p2pg_drv.cuCtxSetCurrent(e.ctx[0]));
	T_EXPECT(copy(0, s0, true, false) == CUDA_SUCCESS, "next copy on the pair");
	T_CU(p2pg_drv.cuStreamSynchronize(s0));
	verify(0, "copy after a failed one");
	free(pat);
	free(got);
	return t_result("staged-context");
}
