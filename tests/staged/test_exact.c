/* SPDX-License-Identifier: MIT */
/*
 * Byte-exact staged copies: fixed awkward sizes (0, 1, 3, 4095, 1 MiB + 7, 100 MiB) and random
 * ones, random source and destination offsets, both directions, every kind of caller stream and
 * synchronous copies. The bytes around the destination range must stay untouched.
 */
#include "common.h"

#define GUARD ((size_t)8192)

struct bufs {
	CUdeviceptr src[2], dst[2];
	size_t cap;
	unsigned char *want, *got, *pat;
	CUstream stream[2];
};

enum mode {
	MODE_STREAM_SRC, /* caller's stream on the source device */
	MODE_STREAM_DST, /* caller's stream on the destination device */
	MODE_LEGACY,
	MODE_PER_THREAD,
	MODE_SYNC,
	NMODES,
};

static const char *const mode_names[] = {"stream-src", "stream-dst", "legacy", "per-thread",
					 "sync"};

static void one_case(struct t_env *e, struct bufs *b, size_t n, int dir, size_t soff, size_t doff,
		     enum mode mode, uint32_t seed)
{
	int sd = dir, dd = !dir;
	size_t span = n + GUARD;
	/* Source pattern and a different background in the destination. */
	t_pattern(b->pat, span, seed);
	t_upload(e->ctx[sd], b->src[sd], b->pat, span);
	t_pattern(b->want, span, seed ^ 0xabcdef);
	t_upload(e->ctx[dd], b->dst[dd], b->want, span);
	memcpy(b->want + doff, b->pat + soff, n);

	struct p2pg_staged_copy c = {
	    .dst = b->dst[dd] + doff,
	    .src = b->src[sd] + soff,
	    .dst_device = dd,
	    .src_device = sd,
	    .bytes = n,
	    .async = mode != MODE_SYNC,
	    .per_thread_stream = mode == MODE_PER_THREAD,
	};
	if (mode == MODE_STREAM_SRC)
		c.stream = b->stream[sd];
	else if (mode == MODE_STREAM_DST)
		c.stream = b->stream[dd];
	/* The current context decides which default stream 0 means. */
	T_CU(p2pg_drv.cuCtxSetCurrent(e->ctx[(seed & 1) ? sd : dd]));
	CUresult r = p2pg_staged_copy(&c);
	T_EXPECT(r == CUDA_SUCCESS, "copy of %zu bytes %d->%d (%s) returned %d", n, sd, dd,
		 mode_names[mode], (int)r);
	if (mode == MODE_STREAM_SRC || mode == MODE_STREAM_DST)
		T_CU(p2pg_drv.cuStreamSynchronize(c.stream));
	else if (mode == MODE_LEGACY)
		T_CU(p2pg_drv.cuStreamSynchronize(CU_STREAM_LEGACY));
	else if (mode == MODE_PER_THREAD)
		T_CU(p2pg_drv.cuStreamSynchronize(CU_STREAM_PER_THREAD));
	t_download(e->ctx[dd], b->got, b->dst[dd], span);
	size_t at = t_diff(b->want, b->got, span);
	T_EXPECT(at == (size_t)-1,
		 "%zu bytes %d->%d, src+%zu dst+%zu, %s: first wrong byte at %zu (%s the copy)", n,
		 sd, dd, soff, doff, mode_names[mode], at,
		 at < doff	  ? "before"
		 : at >= doff + n ? "after"
				  : "inside");
}

int main(void)
{
	struct t_env e;
	t_setup(&e);
	struct bufs b = {.cap = 100 * T_MIB + GUARD};
	for (int d = 0; d < 2; d++) {
		b.src[d] = t_alloc(e.ctx[d], b.cap);
		b.dst[d] = t_alloc(e.ctx[d], b.cap);
		b.stream[d] = t_stream(e.ctx[d]);
	}
	b.want = malloc(b.cap);
	b.got = malloc(b.cap);
	b.pat = malloc(b.cap);
	if (!b.want || !b.got || !b.pat)
		return 1;

	uint32_t rng = 12345;
	static const size_t fixed[] = {0, 1, 3, 4095, 4096, 64 * T_KIB + 1, T_MIB + 7};
	unsigned seed = 1;
	for (size_t k = 0; k < sizeof(fixed) / sizeof(fixed[0]); k++)
		for (int dir = 0; dir < 2; dir++)
			for (int m = 0; m < NMODES; m++)
				one_case(&e, &b, fixed[k], dir, t_rand(&rng) % 4096,
					 t_rand(&rng) % 4096, (enum mode)m, seed++);
	/* Random sizes, log-uniform from 1 byte to 16 MiB, and random offsets. */
	for (int k = 0; k < 40; k++) {
		size_t n = (size_t)1 << (t_rand(&rng) % 24);
		n += t_rand(&rng) % n;
		one_case(&e, &b, n, t_rand(&rng) & 1, t_rand(&rng) % 4096, t_rand(&rng) % 4096,
			 (enum mode)(t_rand(&rng) % NMODES), seed++);
	}
	/* Large: many chunks and a full turn of the ring, both directions. */
	one_case(&e, &b, 100 * T_MIB, 0, 5, 4093, MODE_STREAM_SRC, seed++);
	one_case(&e, &b, 100 * T_MIB, 1, 0, 1, MODE_SYNC, seed++);

	/* Zero bytes is no work at all, whatever the addresses. */
	struct p2pg_staged_copy zero = {.dst_device = 1, .bytes = 0, .async = true};
	T_EXPECT(p2pg_staged_copy(&zero) == CUDA_SUCCESS, "zero bytes succeed");
	free(b.want);
	free(b.got);
	free(b.pat);
	return t_result("staged-exact");
}
