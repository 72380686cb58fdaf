/* SPDX-License-Identifier: MIT */
/*
 * Many threads, each with a stream on either device, enqueue staged copies in both directions at
 * once, so copies from different streams interleave in the same rings. Every copy has its own
 * destination range, verified after the streams drained; sources stay fixed during a round. Each
 * thread also runs dependent chains (copy there, copy back) on one stream.
 */
#include "common.h"

#include <pthread.h>

#define THREADS	  8
#define COPIES	  24
#define MAX_BYTES (384 * T_KIB)

static struct t_env e;

struct job {
	int dir;
	size_t soff, doff, n;
};

struct worker {
	int id;
	CUstream stream[2]; /* one on each device */
	CUdeviceptr src[2], dst[2], back[2];
	unsigned char *src_host[2];
	unsigned char *got;
	struct job jobs[COPIES];
	pthread_barrier_t *start;
};

static void *worker_main(void *p)
{
	struct worker *w = p;
	uint32_t rng = 777u + (uint32_t)w->id * 31u;
	/* Each thread chooses which context is current; the engine must not care. */
	T_CU(p2pg_drv.cuCtxSetCurrent(e.ctx[w->id & 1]));
	pthread_barrier_wait(w->start);
	for (int round = 0; round < 3; round++) {
		size_t dcursor[2] = {0, 0};
		for (int k = 0; k < COPIES; k++) {
			struct job *j = &w->jobs[k];
			j->dir = (int)(t_rand(&rng) & 1);
			j->n = 1 + t_rand(&rng) % MAX_BYTES;
			j->soff = t_rand(&rng) % (MAX_BYTES);
			j->doff = dcursor[!j->dir];
			dcursor[!j->dir] += j->n + (t_rand(&rng) % 64);
			int sd = j->dir, dd = !j->dir;
			struct p2pg_staged_copy c = {
			    .dst = w->dst[dd] + j->doff,
			    .src = w->src[sd] + j->soff,
			    .dst_device = dd,
			    .src_device = sd,
			    .bytes = j->n,
			    .stream = w->stream[t_rand(&rng) & 1],
			    .async = (k % 7) != 3, /* a few synchronous ones in between */
			};
			CUresult r = p2pg_staged_copy(&c);
			T_EXPECT(r == CUDA_SUCCESS, "thread %d copy %d: %d", w->id, k, (int)r);
		}
		for (int d = 0; d < 2; d++)
			T_CU(p2pg_drv.cuStreamSynchronize(w->stream[d]));
		for (int k = 0; k < COPIES; k++) {
			struct job *j = &w->jobs[k];
			int sd = j->dir, dd = !j->dir;
			t_download(e.ctx[dd], w->got, w->dst[dd] + j->doff, j->n);
			size_t at = t_diff(w->src_host[sd] + j->soff, w->got, j->n);
			T_EXPECT(at == (size_t)-1,
				 "thread %d round %d copy %d (%zu bytes %d->%d): wrong byte at %zu",
				 w->id, round, k, j->n, sd, dd, at);
		}
		/* A chain: there and back on one stream, the second copy reading the first's
		 * output. */
		int sd = w->id & 1, dd = !sd;
		size_t n = MAX_BYTES + (size_t)w->id * 4099;
		CUstream s = w->stream[t_rand(&rng) & 1];
		struct p2pg_staged_copy there = {.dst = w->dst[dd],
						 .src = w->src[sd],
						 .dst_device = dd,
						 .src_device = sd,
						 .bytes = n,
						 .stream = s,
						 .async = true};
		struct p2pg_staged_copy back = {.dst = w->back[sd],
						.src = w->dst[dd],
						.dst_device = sd,
						.src_device = dd,
						.bytes = n,
						.stream = s,
						.async = true};
		T_CU(p2pg_staged_copy(&there));
		T_CU(p2pg_staged_copy(&back));
		T_CU(p2pg_drv.cuStreamSynchronize(s));
		t_download(e.ctx[sd], w->got, w->back[sd], n);
		size_t at = t_diff(w->src_host[sd], w->got, n);
		T_EXPECT(at == (size_t)-1, "thread %d chain of %zu bytes: wrong byte at %zu", w->id,
			 n, at);
	}
	return NULL;
}

int main(void)
{
	t_setup(&e);
	static struct worker w[THREADS];
	pthread_t th[THREADS];
	pthread_barrier_t start;
	pthread_barrier_init(&start, NULL, THREADS);
	/* Destination space: every copy of a round at its own offset. */
	size_t dst_bytes = COPIES * (MAX_BYTES + 64);
	size_t src_bytes = 2 * MAX_BYTES + THREADS * 4099;
	for (int k = 0; k < THREADS; k++) {
		w[k].id = k;
		w[k].start = &start;
		w[k].got = malloc(dst_bytes);
		if (!w[k].got)
			return 1;
		for (int d = 0; d < 2; d++) {
			w[k].stream[d] = t_stream(e.ctx[d]);
			w[k].src[d] = t_alloc(e.ctx[d], src_bytes);
			w[k].dst[d] = t_alloc(e.ctx[d], dst_bytes);
			w[k].back[d] = t_alloc(e.ctx[d], src_bytes);
			w[k].src_host[d] = malloc(src_bytes);
			if (!w[k].src_host[d])
				return 1;
			t_pattern(w[k].src_host[d], src_bytes, (uint32_t)(k * 2 + d + 1));
			t_upload(e.ctx[d], w[k].src[d], w[k].src_host[d], src_bytes);
		}
	}
	for (int k = 0; k < THREADS; k++)
		pthread_create(&th[k], NULL, worker_main, &w[k]);
	for (int k = 0; k < THREADS; k++)
		pthread_join(th[k], NULL);
	pthread_barrier_destroy(&start);
	for (int k = 0; k < THREADS; k++) {
		free(w[k].got);
		for (int d = 0; d < 2; d++)
			free(w[k].src_host[d]);
	}
	return t_result("staged-threads");
}
