/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: NCCL's calls into the guard's profiler plugin (src/nccl/), through the
 * exported ncclProfiler_v4/v5/v6, with whatever NCCL could hand over: any event type, any counts
 * and channel ids, NULL, stale, foreign and misaligned handles and contexts, parents of the wrong
 * kind, strings that are NULL, unterminated or not mapped at all, repeated stops. The input is a
 * program, one command per step:
 *
 *   op byte: 0 init, 1 start, 2 stop, 3 recordEventState, 4 finalize; then its operands, each
 *   taken from the following bytes (a byte picks a version, a handle of the table of those handed
 *   out, a string, or is a number).
 *
 * Whatever the input, nothing may crash, every call must answer success, and every record the
 * plugin publishes must be one the importer accepts (store_nccl.c), every blob too.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "nccl_abi.h"
#include "nccl_plugin.h"
#include "notice.h"
#include "spool.h"
#include "store_nccl.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

extern struct nccl_v4_plugin ncclProfiler_v4;
extern struct nccl_v5_plugin ncclProfiler_v5;
extern struct nccl_v6_plugin ncclProfiler_v6;

#define HANDLES 64

static void *handles[HANDLES];
static size_t nhandles;
static void *contexts[64];
static size_t ncontexts;
static struct p2pg_spool_blob blob;
static char *unmapped; /* a page that is not mapped: a string there must not be read here */
static char unterminated[64];

static void quiet(const char *line)
{
	(void)line;
}

static void check_record(struct p2pg_record *r)
{
	if (!p2pg_nccl_record_valid(r))
		abort();
}

static struct p2pg_spool_blob *get_blob(void)
{
	memset(&blob, 0, sizeof(blob));
	return &blob;
}

static bool up(void)
{
	return true;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	p2pg_notice_set_sink(quiet);
	p2pg_nccl_sink.record = check_record;
	p2pg_nccl_sink.blob = get_blob;
	p2pg_nccl_guard_up = up;
	unmapped = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	memset(unterminated, 'A', sizeof(unterminated));
	return 0;
}

struct input {
	const uint8_t *p;
	size_t left;
};

static uint8_t byte(struct input *in)
{
	if (!in->left)
		return 0;
	in->left--;
	return *in->p++;
}

static uint64_t number(struct input *in)
{
	uint64_t v = 0;
	unsigned n = byte(in) % 9;
	for (unsigned k = 0; k < n; k++)
		v = v << 8 | byte(in);
	return v;
}

static const char *string(struct input *in)
{
	static const char *const names[] = {"AllReduce", "Send",    "Recv",   "ncclFloat32",
					    "ncclInt8",	 "RING",    "SIMPLE", "LL128",
					    "Broadcast", "Unknown", "",	      "ncclBfloat16"};
	uint8_t b = byte(in);
	switch (b % 6) {
	case 0:
		return NULL;
	case 1:
		return unmapped + (b % 64);
	case 2:
		return unterminated;
	case 3:
		return (const char *)(uintptr_t)(b * 8); /* a small integer */
	default:
		return names[(b / 6) % (sizeof(names) / sizeof(names[0]))];
	}
}

/* A handle or context as NCCL could pass it: one handed out, a stale or neighbouring address,
 * NULL, a foreign pointer. */
static void *pointer(struct input *in, void **table, size_t n)
{
	uint8_t b = byte(in);
	switch (b % 5) {
	case 0:
		return NULL;
	case 1:
		return (void *)(uintptr_t)(0x1000 + b);
	case 2:
		return n ? (char *)table[b % n] + (int8_t)byte(in) : NULL;
	case 3:
		return unterminated + b % 8;
	default:
		return n ? table[b % n] : NULL;
	}
}

static void keep(void *h)
{
	if (h)
		handles[nhandles++ % HANDLES] = h;
}

static void descriptor(struct input *in, struct nccl_v6_descr *d)
{
	memset(d, 0, sizeof(*d));
	uint8_t t = byte(in);
	d->type = t < 15 * 16 ? 1ull << (t % 15) : number(in);
	d->parentObj = pointer(in, handles, nhandles < HANDLES ? nhandles : HANDLES);
	d->rank = (int)number(in);
	/* every member the types use, so each type sees its own */
	d->coll.seqNumber = number(in);
	d->coll.func = string(in);
	d->coll.count = number(in);
	d->coll.root = (int)number(in);
	d->coll.datatype = string(in);
	d->coll.nChannels = byte(in);
	d->coll.algo = string(in);
	d->coll.proto = string(in);
	d->coll.parentGroup = pointer(in, handles, nhandles < HANDLES ? nhandles : HANDLES);
	if (d->type == NCCL_EV_P2P) {
		d->p2p.func = string(in);
		d->p2p.datatype = string(in);
		d->p2p.count = number(in);
		d->p2p.peer = (int)number(in);
		d->p2p.nChannels = byte(in);
	} else if (d->type == NCCL_EV_KERNEL_CH) {
		d->kernelCh.channelId = byte(in);
		d->kernelCh.pTimer = number(in);
	} else if (d->type == NCCL_EV_CE_COLL) {
		d->ceColl.func = string(in);
		d->ceColl.datatype = string(in);
		d->ceColl.count = number(in);
	}
}

static void ok(nccl_result rc)
{
	if (rc != NCCL_OK)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct input in = {data, size};
	nhandles = ncontexts = 0;
	int version = 5;
	while (in.left) {
		uint8_t op = byte(&in) % 5;
		void *ctx = pointer(&in, contexts, ncontexts);
		if (op == 0) {
			version = 4 + byte(&in) % 3;
			void *c = NULL;
			int mask = 0;
			const char *name = string(&in);
			uint64_t hash = number(&in);
			int nranks = (int)number(&in), rank = (int)number(&in);
			if (version == 4)
				ok(ncclProfiler_v4.init(&c, &mask, name, hash, 1, nranks, rank,
							NULL));
			else if (version == 5)
				ok(ncclProfiler_v5.init(&c, hash, &mask, name, 1, nranks, rank,
							NULL));
			else
				ok(ncclProfiler_v6.init(&c, hash, &mask, name, 1, nranks, rank,
							NULL));
			if (c && ncontexts < 64)
				contexts[ncontexts++] = c;
			else if (c)
				ok(ncclProfiler_v5.finalize(c)); /* no room to end it later */
			if (blob.kind && !p2pg_nccl_blob_valid(&blob))
				abort();
		} else if (op == 1) {
			struct nccl_v6_descr d;
			descriptor(&in, &d);
			void *h = NULL;
			if (version == 6) {
				ok(ncclProfiler_v6.startEvent(ctx, &h, &d));
			} else if (version == 5) {
				struct nccl_v5_descr d5;
				memcpy(&d5, &d, sizeof(d5));
				ok(ncclProfiler_v5.startEvent(ctx, &h, &d5));
			} else {
				struct nccl_v4_descr d4;
				memset(&d4, 0, sizeof(d4));
				d4.type = (uint8_t)d.type;
				d4.parentObj = d.parentObj;
				memcpy(&d4.coll, &d.coll, sizeof(d4.coll));
				if (d.type == NCCL_EV_KERNEL_CH) {
					d4.kernelCh.channelId = d.kernelCh.channelId;
					d4.kernelCh.pTimer = d.kernelCh.pTimer;
				}
				ok(ncclProfiler_v4.startEvent(ctx, &h, &d4));
			}
			keep(h);
			/* NULL pointers where NCCL never passes them */
			if (byte(&in) == 0xff)
				ok(ncclProfiler_v5.startEvent(ctx, NULL, NULL));
		} else if (op == 2) {
			ok(ncclProfiler_v5.stopEvent(
			    pointer(&in, handles, nhandles < HANDLES ? nhandles : HANDLES)));
		} else if (op == 3) {
			union nccl_v4_state_args args = {.kernelCh.pTimer = number(&in)};
			void *h = pointer(&in, handles, nhandles < HANDLES ? nhandles : HANDLES);
			int state = (int)(byte(&in) % 32);
			ok(ncclProfiler_v5.recordEventState(h, state,
							    byte(&in) & 1 ? &args : NULL));
		} else {
			ok(ncclProfiler_v5.finalize(ctx));
		}
	}
	/* The communicators end: every operation still in a slot is published, the slots free. */
	for (size_t k = 0; k < ncontexts; k++)
		ok(ncclProfiler_v5.finalize(contexts[k]));
	return 0;
}
