/* SPDX-License-Identifier: MIT */
#include "gpu_match.h"

#include <stdlib.h>
#include <string.h>

/* A stream whose copies never leave records must not grow without bound. */
#define QUEUE_MAX 65536

struct queue {
	void *items;
	size_t head, len, cap; /* items[head .. len) are waiting */
};

struct stream {
	uint32_t context_id, id; /* the context's ID compared in its low 16 bits */
	/*
	 * A row let go unpaired (aged out, or over the queue's bound) may still have its record
	 * coming, which the next row would then take. Such a stream pairs nothing more: its rows
	 * keep no time rather than a neighbour's. Its entry stays so that the mark is not lost.
	 */
	bool tainted;
	struct queue rows;   /* struct p2pg_gpu_row */
	struct queue copies; /* struct p2pg_gpu_copy */
};

struct p2pg_gpu_match {
	struct stream *streams;
	size_t nstreams, cap;
};

static size_t waiting(const struct queue *q)
{
	return q->len - q->head;
}

static void *at(const struct queue *q, size_t k, size_t size)
{
	return (char *)q->items + (q->head + k) * size;
}

static void pop(struct queue *q, size_t n)
{
	q->head += n;
	if (q->head == q->len)
		q->head = q->len = 0;
}

/* Full: false, the caller decides what the loss of the oldest means. */
static bool push(struct queue *q, const void *item, size_t size)
{
	if (q->len == q->cap) {
		if (q->head > 0) {
			memmove(q->items, at(q, 0, size), waiting(q) * size);
			q->len -= q->head;
			q->head = 0;
		}
		if (q->len == q->cap) {
			size_t cap = q->cap ? q->cap * 2 : 64;
			void *grown = realloc(q->items, cap * size);
			if (!grown)
				return false;
			q->items = grown;
			q->cap = cap;
		}
	}
	memcpy((char *)q->items + q->len * size, item, size);
	q->len++;
	return true;
}

struct p2pg_gpu_match *p2pg_gpu_match_new(void)
{
	return calloc(1, sizeof(struct p2pg_gpu_match));
}

void p2pg_gpu_match_free(struct p2pg_gpu_match *m)
{
	if (!m)
		return;
	for (size_t k = 0; k < m->nstreams; k++) {
		free(m->streams[k].rows.items);
		free(m->streams[k].copies.items);
	}
	free(m->streams);
	free(m);
}

static struct stream *stream_get(struct p2pg_gpu_match *m, uint32_t context_id, uint32_t id)
{
	context_id &= 0xffffu;
	for (size_t k = 0; k < m->nstreams; k++)
		if (m->streams[k].id == id && m->streams[k].context_id == context_id)
			return &m->streams[k];
	if (m->nstreams == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 16;
		struct stream *grown = realloc(m->streams, cap * sizeof(*grown));
		if (!grown)
			return NULL;
		m->streams = grown;
		m->cap = cap;
	}
	struct stream *s = &m->streams[m->nstreams++];
	memset(s, 0, sizeof(*s));
	s->context_id = context_id;
	s->id = id;
	return s;
}

static void taint(struct stream *s)
{
	s->tainted = true;
	pop(&s->rows, waiting(&s->rows));
	pop(&s->copies, waiting(&s->copies));
}

bool p2pg_gpu_match_row(struct p2pg_gpu_match *m, const struct p2pg_gpu_row *r)
{
	struct stream *s = stream_get(m, r->context_id, r->stream_id);
	if (!s)
		return false;
	if (s->tainted)
		return true;
	if (waiting(&s->rows) >= QUEUE_MAX)
		taint(s);
	return s->tainted || push(&s->rows, r, sizeof(*r));
}

bool p2pg_gpu_match_copy(struct p2pg_gpu_match *m, const struct p2pg_gpu_copy *c)
{
	struct stream *s = stream_get(m, c->context_id, c->stream_id);
	if (!s)
		return false;
	if (s->tainted)
		return true;
	if (waiting(&s->copies) >= QUEUE_MAX)
		pop(&s->copies, 1); /* a record no row came for in 65,536: not the guard's */
	return push(&s->copies, c, sizeof(*c));
}

/* A record handed over before the GPU's timestamps were in (CUPTI's forced flush) still holds
 * its place in the stream's order, but has no time to give. */
static bool complete(const struct p2pg_gpu_copy *c)
{
	return c->has_time;
}

/* Could c be r's copy: the same bytes between the same devices, not over before the call began. */
static bool fits(const struct p2pg_gpu_row *r, const struct p2pg_gpu_copy *c)
{
	return r->bytes == c->bytes && r->src_device == c->src_device &&
	       r->dst_device == c->dst_device && (!complete(c) || c->end_ns >= r->started_ns);
}

/* The first waiting copy from index `from` on that fits r, or SIZE_MAX. */
static size_t find_copy(const struct stream *s, const struct p2pg_gpu_row *r, size_t from)
{
	for (size_t k = from; k < waiting(&s->copies); k++)
		if (fits(r, at(&s->copies, k, sizeof(struct p2pg_gpu_copy))))
			return k;
	return SIZE_MAX;
}

static size_t match_stream(struct stream *s,
			   void (*found)(void *, const struct p2pg_gpu_row *, uint64_t), void *arg)
{
	size_t pairs = 0;
	while (waiting(&s->rows) && waiting(&s->copies)) {
		const struct p2pg_gpu_row *r = at(&s->rows, 0, sizeof(*r));
		const struct p2pg_gpu_copy *c = at(&s->copies, 0, sizeof(*c));
		if (fits(r, c)) {
			if (complete(c)) {
				found(arg, r,
				      c->end_ns > c->start_ns ? c->end_ns - c->start_ns : 1);
				pairs++;
			}
			pop(&s->rows, 1);
			pop(&s->copies, 1);
			continue;
		}
		if (complete(c) && c->end_ns < r->started_ns) {
			/* Over before this row's call began, so before every later row's too. */
			pop(&s->copies, 1);
			continue;
		}
		/* Copies ahead of r's own on its stream belong to no later row: they are not ours.
		 */
		size_t k = find_copy(s, r, 1);
		if (k != SIZE_MAX) {
			pop(&s->copies, k);
			continue;
		}
		/* If the front copy is a later row's, r's copy would have come before it: r left
		 * no record. */
		size_t j;
		for (j = 1; j < waiting(&s->rows); j++)
			if (fits(at(&s->rows, j, sizeof(*r)), c))
				break;
		if (j == waiting(&s->rows))
			break; /* r's record may still come */
		pop(&s->rows, j);
	}
	return pairs;
}

static void age(struct stream *s, uint64_t now_ns, uint64_t max_age_ns)
{
	if (waiting(&s->rows)) {
		const struct p2pg_gpu_row *r = at(&s->rows, 0, sizeof(*r));
		if (r->started_ns + max_age_ns < now_ns) {
			taint(s);
			return;
		}
	}
	while (waiting(&s->copies)) {
		const struct p2pg_gpu_copy *c = at(&s->copies, 0, sizeof(*c));
		if (c->end_ns + max_age_ns >= now_ns)
			break;
		pop(&s->copies, 1);
	}
}

size_t p2pg_gpu_match_run(struct p2pg_gpu_match *m, uint64_t now_ns, uint64_t max_age_ns,
			  void (*found)(void *arg, const struct p2pg_gpu_row *row, uint64_t gpu_ns),
			  void *arg)
{
	size_t pairs = 0;
	for (size_t k = 0; k < m->nstreams;) {
		struct stream *s = &m->streams[k];
		pairs += match_stream(s, found, arg);
		age(s, now_ns, max_age_ns);
		if (!s->tainted && !waiting(&s->rows) && !waiting(&s->copies)) {
			/* Stream IDs are not reused: an idle stream's entry goes. */
			free(s->rows.items);
			free(s->copies.items);
			m->streams[k] = m->streams[--m->nstreams];
			continue;
		}
		k++;
	}
	return pairs;
}

size_t p2pg_gpu_match_rows_waiting(const struct p2pg_gpu_match *m)
{
	size_t n = 0;
	for (size_t k = 0; k < m->nstreams; k++)
		n += waiting(&m->streams[k].rows);
	return n;
}

size_t p2pg_gpu_match_copies_waiting(const struct p2pg_gpu_match *m)
{
	size_t n = 0;
	for (size_t k = 0; k < m->nstreams; k++)
		n += waiting(&m->streams[k].copies);
	return n;
}

void p2pg_gpu_match_forget_rows(struct p2pg_gpu_match *m)
{
	for (size_t k = 0; m && k < m->nstreams; k++) {
		struct queue *rows = &m->streams[k].rows;
		for (size_t i = 0; i < waiting(rows); i++)
			((struct p2pg_gpu_row *)at(rows, i, sizeof(struct p2pg_gpu_row)))->row = 0;
	}
}
