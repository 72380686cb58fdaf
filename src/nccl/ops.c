/* SPDX-License-Identifier: MIT */
/*
 * Communicators and operations in fixed slots. NCCL calls the plugin from its own threads (the
 * program's, its proxy thread, a CUDA callback thread), so nothing here takes a lock or allocates
 * on an event: an operation takes a slot from a lock-free free list when it starts, counts down
 * NCCL's stop and each kernel channel's end, and whichever thread brings the count to zero gives
 * the slot back and publishes the record. Slots are checked, never trusted: a handle is ours only
 * if it points exactly at one.
 *
 * An operation's description is written once, before its slot is handed out, as relaxed atomic
 * words; the drainer's scan reads them seqlock-style (the slot's generation is odd while it is in
 * use and is read again after the words).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "nccl_codes.h"
#include "nccl_plugin.h"
#include "nccl_watch.h"
#include "recorder.h"

#define COMMS	 1024
#define OPS	 4096
#define CHANNELS 64 /* NCCL's MAXCHANNELS, 2.23 to 2.30 */

struct p2pg_nccl_op {
	_Atomic uint64_t next_free; /* index + 1 of the next free slot */
	_Atomic uint32_t gen;	    /* odd while the slot is in use */
	_Atomic int32_t pending;    /* NCCL's stop + channels announced, still to come */
	_Atomic uint32_t stopped;
	_Atomic uint32_t accepted_count;
	_Atomic uint64_t started_mask, accepted_mask, done_mask;
	_Atomic uint64_t gpu_first, gpu_last;
	_Atomic uint64_t running_ns;
	_Atomic uint32_t marks;
	_Atomic(struct p2pg_nccl_comm *) comm;
	_Atomic(void *) chain;
	/* the description: started_ns, seq, bytes, flags | value << 32,
	 * serial | func << 16 | algo_proto << 24 | channels << 32 | tid << 40 (tid: 24 bits kept)
	 */
	_Atomic uint64_t w[5];
	uint8_t tags[CHANNELS]; /* a kernel channel's handle is the address of its tag */
};

static struct p2pg_nccl_op ops[OPS];
static _Atomic(void *) channel_chain[OPS][CHANNELS]; /* the user's plugin's channel handles */
static _Atomic uint64_t free_head;		     /* tag << 32 | index + 1 */

static struct p2pg_nccl_comm comms[COMMS];
static pthread_mutex_t comms_lock = PTHREAD_MUTEX_INITIALIZER;
static uint16_t next_serial;

static void default_record(struct p2pg_record *r)
{
	p2pg_record(r, NULL);
}

struct p2pg_nccl_sink p2pg_nccl_sink = {default_record, p2pg_recorder_blob};

static size_t scan(struct p2pg_nccl_inflight *out, size_t max, uint64_t started_before);
static void mark(uint32_t slot, uint32_t gen, uint32_t marks);
static const struct p2pg_nccl_watch watch = {scan, mark};

static void push_free(uint32_t index)
{
	uint64_t head = atomic_load_explicit(&free_head, memory_order_relaxed);
	uint64_t next;
	do {
		atomic_store_explicit(&ops[index].next_free, head & 0xffffffffu,
				      memory_order_relaxed);
		next = ((head >> 32) + 1) << 32 | (index + 1);
	} while (!atomic_compare_exchange_weak_explicit(
	    &free_head, &head, next, memory_order_release, memory_order_relaxed));
}

static struct p2pg_nccl_op *pop_free(void)
{
	uint64_t head = atomic_load_explicit(&free_head, memory_order_acquire);
	uint64_t next;
	do {
		uint32_t index = (uint32_t)(head & 0xffffffffu);
		if (index == 0)
			return NULL;
		uint64_t after =
		    atomic_load_explicit(&ops[index - 1].next_free, memory_order_relaxed);
		next = ((head >> 32) + 1) << 32 | after;
	} while (!atomic_compare_exchange_weak_explicit(
	    &free_head, &head, next, memory_order_acquire, memory_order_acquire));
	return &ops[(head & 0xffffffffu) - 1];
}

static void reset_all(void)
{
	atomic_store(&free_head, 0);
	for (uint32_t k = 0; k < OPS; k++) {
		struct p2pg_nccl_op *op = &ops[OPS - 1 - k];
		atomic_store(&op->gen, atomic_load(&op->gen) & ~1u);
		atomic_store(&op->pending, 0);
		push_free(OPS - 1 - k);
	}
	for (int k = 0; k < COMMS; k++)
		atomic_store(&comms[k].live, 0);
	/* The drainer watches from the next communicator on (a forked child's starts afresh). */
}

static void atfork_child(void)
{
	pthread_mutex_init(&comms_lock, NULL);
	reset_all();
}

static pthread_once_t ops_once = PTHREAD_ONCE_INIT;

static void init_once(void)
{
	reset_all();
	pthread_atfork(NULL, NULL, atfork_child);
}

void p2pg_nccl_ops_init(void)
{
	pthread_once(&ops_once, init_once);
	p2pg_recorder_watch_nccl(&watch);
}

/* ---- communicators ---- */

struct p2pg_nccl_comm *p2pg_nccl_comm_new(void)
{
	struct p2pg_nccl_comm *found = NULL;
	pthread_mutex_lock(&comms_lock);
	for (int k = 0; k < COMMS && !found; k++) {
		if (atomic_load(&comms[k].live))
			continue;
		found = &comms[k];
		found->serial = next_serial++;
		found->recording = false;
		found->hash = 0;
		found->rank = found->nranks = -1;
		found->chain_ctx = NULL;
		atomic_store(&found->p2p_seq, 0);
		atomic_store(&found->recorded, 0);
		atomic_store(&found->unreported, 0);
		atomic_store(&found->untracked, 0);
		atomic_store(&found->live, 1);
	}
	pthread_mutex_unlock(&comms_lock);
	return found;
}

void p2pg_nccl_comm_free(struct p2pg_nccl_comm *c)
{
	pthread_mutex_lock(&comms_lock);
	atomic_store(&c->live, 0);
	pthread_mutex_unlock(&comms_lock);
}

struct p2pg_nccl_comm *p2pg_nccl_comm_of(void *context)
{
	uintptr_t p = (uintptr_t)context, base = (uintptr_t)comms;
	if (p < base || p >= base + sizeof(comms) || (p - base) % sizeof(comms[0]) != 0)
		return NULL;
	struct p2pg_nccl_comm *c = context;
	return atomic_load_explicit(&c->live, memory_order_acquire) ? c : NULL;
}

/* ---- handles ---- */

struct p2pg_nccl_op *p2pg_nccl_op_of(void *handle)
{
	uintptr_t p = (uintptr_t)handle, base = (uintptr_t)ops;
	if (p < base || p >= base + sizeof(ops) || (p - base) % sizeof(ops[0]) != 0)
		return NULL;
	struct p2pg_nccl_op *op = handle;
	return (atomic_load_explicit(&op->gen, memory_order_acquire) & 1) ? op : NULL;
}

/* The operation and channel a channel handle names, or NULL. */
static struct p2pg_nccl_op *channel_of(void *handle, unsigned *ret_channel)
{
	uintptr_t p = (uintptr_t)handle, base = (uintptr_t)ops;
	if (p < base || p >= base + sizeof(ops))
		return NULL;
	size_t index = (p - base) / sizeof(ops[0]);
	size_t offset = (p - base) % sizeof(ops[0]);
	size_t tags = offsetof(struct p2pg_nccl_op, tags);
	if (offset < tags || offset >= tags + CHANNELS)
		return NULL;
	struct p2pg_nccl_op *op = &ops[index];
	if (!(atomic_load_explicit(&op->gen, memory_order_acquire) & 1))
		return NULL;
	*ret_channel = (unsigned)(offset - tags);
	return op;
}

bool p2pg_nccl_in_pool(const void *handle)
{
	uintptr_t p = (uintptr_t)handle;
	return (p >= (uintptr_t)ops && p < (uintptr_t)ops + sizeof(ops)) ||
	       (p >= (uintptr_t)comms && p < (uintptr_t)comms + sizeof(comms));
}

bool p2pg_nccl_is_channel(void *handle)
{
	unsigned ch;
	return channel_of(handle, &ch) != NULL;
}

static uint32_t index_of(const struct p2pg_nccl_op *op)
{
	return (uint32_t)(op - ops);
}

/* ---- operations ---- */

static uint32_t tid_now(void)
{
	return p2pg_tid();
}

struct p2pg_nccl_op *p2pg_nccl_op_start(struct p2pg_nccl_comm *c, const struct p2pg_nccl_op_desc *d)
{
	struct p2pg_nccl_op *op = pop_free();
	if (!op) {
		atomic_fetch_add_explicit(&c->untracked, 1, memory_order_relaxed);
		return NULL;
	}
	unsigned channels = d->channels > CHANNELS ? CHANNELS : d->channels;
	atomic_store_explicit(&op->comm, c, memory_order_relaxed);
	atomic_store_explicit(&op->chain, NULL, memory_order_relaxed);
	atomic_store_explicit(&op->stopped, 0, memory_order_relaxed);
	atomic_store_explicit(&op->accepted_count, 0, memory_order_relaxed);
	atomic_store_explicit(&op->started_mask, 0, memory_order_relaxed);
	atomic_store_explicit(&op->accepted_mask, 0, memory_order_relaxed);
	atomic_store_explicit(&op->done_mask, 0, memory_order_relaxed);
	atomic_store_explicit(&op->gpu_first, 0, memory_order_relaxed);
	atomic_store_explicit(&op->gpu_last, 0, memory_order_relaxed);
	atomic_store_explicit(&op->running_ns, 0, memory_order_relaxed);
	atomic_store_explicit(&op->marks, 0, memory_order_relaxed);
	atomic_store_explicit(&op->w[0], d->started_ns, memory_order_relaxed);
	atomic_store_explicit(&op->w[1], d->seq, memory_order_relaxed);
	atomic_store_explicit(&op->w[2], d->bytes, memory_order_relaxed);
	atomic_store_explicit(&op->w[3], (uint64_t)d->flags | (uint64_t)(uint32_t)d->value << 32,
			      memory_order_relaxed);
	atomic_store_explicit(&op->w[4],
			      (uint64_t)c->serial | (uint64_t)d->func << 16 |
				  (uint64_t)d->algo_proto << 24 | (uint64_t)channels << 32 |
				  (uint64_t)(tid_now() & 0xffffffu) << 40,
			      memory_order_relaxed);
	atomic_store_explicit(&op->pending, (int32_t)(1 + channels), memory_order_relaxed);
	atomic_fetch_add_explicit(&op->gen, 1, memory_order_release); /* odd: in use */
	return op;
}

void p2pg_nccl_op_set_chain(struct p2pg_nccl_op *op, void *chain_handle)
{
	atomic_store_explicit(&op->chain, chain_handle, memory_order_relaxed);
}

void *p2pg_nccl_op_chain(const struct p2pg_nccl_op *op)
{
	return atomic_load_explicit(&((struct p2pg_nccl_op *)op)->chain, memory_order_relaxed);
}

/* Gives the slot back, then publishes the operation's record (in this order, so that the
 * drainer's scan never finds an operation whose record it may already have imported). */
static void complete(struct p2pg_nccl_op *op, int status)
{
	uint64_t w[5];
	for (int k = 0; k < 5; k++)
		w[k] = atomic_load_explicit(&op->w[k], memory_order_relaxed);
	struct p2pg_nccl_comm *c = atomic_load_explicit(&op->comm, memory_order_relaxed);
	uint64_t first = atomic_load_explicit(&op->gpu_first, memory_order_relaxed);
	uint64_t last = atomic_load_explicit(&op->gpu_last, memory_order_relaxed);
	uint64_t done = atomic_load_explicit(&op->done_mask, memory_order_relaxed);
	atomic_fetch_add_explicit(&op->gen, 1, memory_order_release); /* even: free */
	push_free(index_of(op));

	uint64_t end = p2pg_realtime_ns();
	uint32_t flags = (uint32_t)w[3];
	unsigned channels = (unsigned)(w[4] >> 32) & 0xff;
	flags |= P2PG_NCCL_F_MAKE(channels, __builtin_popcountll(done), 0);
	if (channels == 0)
		flags |= P2PG_NCCL_F_NO_CHANNELS;
	struct p2pg_record r = {
	    .started_ns = w[0],
	    .host_ns = end > w[0] ? end - w[0] : 0,
	    .bytes = w[2],
	    .stream = w[1],
	    .api = (uint16_t)(P2PG_NCCL_API + ((w[4] >> 16) & 0xff)),
	    .kind = P2PG_REC_NCCL_OP,
	    .path = (uint8_t)(w[4] >> 24),
	    .status = status,
	    .src_device = (int16_t)(uint16_t)w[4],
	    .flags = flags,
	    .value = (int32_t)(w[3] >> 32),
	};
	int32_t value = r.value;
	r.dst_device = (flags & P2PG_NCCL_F_P2P) ? (int16_t)(value > INT16_MAX	 ? INT16_MAX
							     : value < INT16_MIN ? INT16_MIN
										 : value)
						 : -1;
	/* The GPU's own clock: the last channel's end after the first one's start, and sane. */
	if (first && last > first && last - first < 3600ull * 1000000000ull) {
		r.gpu_ns = last - first;
		r.flags |= P2PG_NCCL_F_GPU_TIMED;
	}
	/* Only a recording communicator's operations take slots. */
	atomic_fetch_add_explicit(status ? &c->unreported : &c->recorded, 1, memory_order_relaxed);
	p2pg_nccl_sink.record(&r);
}

static void release(struct p2pg_nccl_op *op)
{
	if (atomic_fetch_sub_explicit(&op->pending, 1, memory_order_acq_rel) == 1)
		complete(op, 0);
}

void p2pg_nccl_op_stop(struct p2pg_nccl_op *op)
{
	/* Once: a second stop of the same event must not end it for a channel. */
	if (atomic_exchange_explicit(&op->stopped, 1, memory_order_relaxed) == 0)
		release(op);
}

void *p2pg_nccl_channel_start(struct p2pg_nccl_op *op, unsigned channel, uint64_t gpu_ns)
{
	if (channel >= CHANNELS)
		return NULL;
	uint64_t bit = 1ull << channel;
	if (atomic_fetch_or_explicit(&op->started_mask, bit, memory_order_relaxed) & bit)
		return NULL; /* the same channel again */
	unsigned announced =
	    (unsigned)(atomic_load_explicit(&op->w[4], memory_order_relaxed) >> 32) & 0xff;
	if (atomic_fetch_add_explicit(&op->accepted_count, 1, memory_order_relaxed) >= announced)
		return NULL; /* more channels than NCCL announced: not counted */
	atomic_fetch_or_explicit(&op->accepted_mask, bit, memory_order_release);
	uint64_t zero = 0;
	atomic_compare_exchange_strong_explicit(&op->running_ns, &zero, p2pg_realtime_ns(),
						memory_order_relaxed, memory_order_relaxed);
	if (gpu_ns) {
		uint64_t first = atomic_load_explicit(&op->gpu_first, memory_order_relaxed);
		while ((first == 0 || gpu_ns < first) &&
		       !atomic_compare_exchange_weak_explicit(&op->gpu_first, &first, gpu_ns,
							      memory_order_relaxed,
							      memory_order_relaxed))
			;
	}
	return &op->tags[channel];
}

void p2pg_nccl_channel_set_chain(void *channel_handle, void *chain_handle)
{
	unsigned ch;
	struct p2pg_nccl_op *op = channel_of(channel_handle, &ch);
	if (op)
		atomic_store_explicit(&channel_chain[index_of(op)][ch], chain_handle,
				      memory_order_relaxed);
}

void *p2pg_nccl_channel_chain(void *channel_handle)
{
	unsigned ch;
	struct p2pg_nccl_op *op = channel_of(channel_handle, &ch);
	return op ? atomic_load_explicit(&channel_chain[index_of(op)][ch], memory_order_relaxed)
		  : NULL;
}

void p2pg_nccl_channel_gpu_end(void *channel_handle, uint64_t gpu_ns)
{
	unsigned ch;
	struct p2pg_nccl_op *op = channel_of(channel_handle, &ch);
	if (!op || !gpu_ns ||
	    !(atomic_load_explicit(&op->accepted_mask, memory_order_acquire) & (1ull << ch)))
		return;
	uint64_t last = atomic_load_explicit(&op->gpu_last, memory_order_relaxed);
	while (gpu_ns > last &&
	       !atomic_compare_exchange_weak_explicit(&op->gpu_last, &last, gpu_ns,
						      memory_order_relaxed, memory_order_relaxed))
		;
}

void p2pg_nccl_channel_stop(void *channel_handle)
{
	unsigned ch;
	struct p2pg_nccl_op *op = channel_of(channel_handle, &ch);
	if (!op)
		return;
	uint64_t bit = 1ull << ch;
	if (!(atomic_load_explicit(&op->accepted_mask, memory_order_acquire) & bit) ||
	    (atomic_fetch_or_explicit(&op->done_mask, bit, memory_order_relaxed) & bit))
		return;
	release(op);
}

void p2pg_nccl_ops_end_comm(struct p2pg_nccl_comm *c)
{
	for (uint32_t k = 0; k < OPS; k++) {
		struct p2pg_nccl_op *op = &ops[k];
		if (!(atomic_load_explicit(&op->gen, memory_order_acquire) & 1) ||
		    atomic_load_explicit(&op->comm, memory_order_relaxed) != c)
			continue;
		/* Claimed by bringing the count to zero at once; a late channel's end then finds
		 * it below one and does nothing. */
		int32_t pending = atomic_load_explicit(&op->pending, memory_order_acquire);
		while (pending > 0 &&
		       !atomic_compare_exchange_weak_explicit(
			   &op->pending, &pending, 0, memory_order_acq_rel, memory_order_acquire))
			;
		if (pending > 0)
			complete(op, P2PG_NCCL_UNREPORTED);
	}
}

/* ---- the drainer's watch ---- */

static size_t scan(struct p2pg_nccl_inflight *out, size_t max, uint64_t started_before)
{
	size_t n = 0;
	for (uint32_t k = 0; k < OPS && n < max; k++) {
		struct p2pg_nccl_op *op = &ops[k];
		uint32_t gen = atomic_load_explicit(&op->gen, memory_order_acquire);
		if (!(gen & 1))
			continue;
		uint64_t w[5];
		for (int j = 0; j < 5; j++)
			w[j] = atomic_load_explicit(&op->w[j], memory_order_relaxed);
		struct p2pg_nccl_comm *c = atomic_load_explicit(&op->comm, memory_order_relaxed);
		uint64_t running = atomic_load_explicit(&op->running_ns, memory_order_relaxed);
		uint64_t done = atomic_load_explicit(&op->done_mask, memory_order_relaxed);
		uint32_t marks = atomic_load_explicit(&op->marks, memory_order_relaxed);
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&op->gen, memory_order_relaxed) != gen)
			continue; /* ended, or another operation took the slot, meanwhile */
		if (w[0] >= started_before || !c)
			continue;
		out[n++] = (struct p2pg_nccl_inflight){
		    .started_ns = w[0],
		    .running_ns = running,
		    .seq = w[1],
		    .bytes = w[2],
		    .flags = (uint32_t)w[3] |
			     P2PG_NCCL_F_MAKE((w[4] >> 32) & 0xff, __builtin_popcountll(done), 0),
		    .value = (int32_t)(w[3] >> 32),
		    .tid = (uint32_t)(w[4] >> 40),
		    .comm_serial = (uint16_t)w[4],
		    .func = (uint8_t)(w[4] >> 16),
		    .algo_proto = (uint8_t)(w[4] >> 24),
		    .slot = k,
		    .gen = gen,
		    .marks = marks,
		};
	}
	return n;
}

static void mark(uint32_t slot, uint32_t gen, uint32_t marks)
{
	if (slot >= OPS)
		return;
	struct p2pg_nccl_op *op = &ops[slot];
	if (atomic_load_explicit(&op->gen, memory_order_acquire) == gen)
		atomic_fetch_or_explicit(&op->marks, marks, memory_order_relaxed);
}
