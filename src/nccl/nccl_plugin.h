/* SPDX-License-Identifier: MIT */
/*
 * The guard as NCCL's profiler plugin: what the room's files share. versions.c decodes each
 * interface version's descriptors into v6's layout (a superset) and calls events.c, which tracks
 * communicators and operations in ops.c's fixed slots and forwards everything to the user's own
 * plugin through chain.c.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "nccl_abi.h"
#include "p2pguard/spool.h"

/* ---- events.c: one implementation behind every exported version ---- */

nccl_result p2pg_nccl_init(int version, void **context, uint64_t comm_hash, int *mask,
			   const char *comm_name, int nnodes, int nranks, int rank,
			   nccl_logger log);
/* d: NCCL's descriptor decoded into v6's layout (versions.c) */
nccl_result p2pg_nccl_start(void *context, void **handle, struct nccl_v6_descr *d);
nccl_result p2pg_nccl_stop(void *handle);
nccl_result p2pg_nccl_record(void *handle, int state, union nccl_v4_state_args *args);
nccl_result p2pg_nccl_finalize(void *context);

/* ---- names.c ---- */

enum p2pg_nccl_name { P2PG_NAME_FUNC, P2PG_NAME_ALGO, P2PG_NAME_PROTO, P2PG_NAME_DTYPE };

/*
 * The nccl_codes.h code of a string NCCL handed over, 0 when unknown. The pointer is not trusted:
 * the first sight of each pointer reads it through the kernel (a bad one is an error there, not a
 * fault here); later sights hit a lock-free cache (NCCL's names are static strings).
 */
unsigned p2pg_nccl_name_code(enum p2pg_nccl_name kind, const char *s);
/* Copies a string NCCL handed over (a communicator's name) the same checked way, truncated to
 * len - 1 bytes; "" for a bad pointer. */
void p2pg_nccl_copy_string(const char *s, char *buf, size_t len);

/* ---- ops.c: communicators and operations in fixed slots ---- */

struct p2pg_nccl_comm {
	_Atomic uint32_t live;
	uint16_t serial;
	bool recording; /* the guard is up: this communicator's operations are recorded */
	uint64_t hash;
	int rank, nranks;
	void *chain_ctx;	  /* the user's plugin's context; NULL: not forwarded */
	_Atomic uint64_t p2p_seq; /* the count that numbers its point-to-point operations */
	_Atomic uint64_t recorded, unreported, untracked;
};

/* What an operation is, fixed when it starts. */
struct p2pg_nccl_op_desc {
	uint64_t started_ns, seq, bytes;
	uint32_t flags; /* P2PG_NCCL_F_P2P, _CE, _SIZE_UNKNOWN and the datatype */
	int32_t value;	/* peer or root */
	uint8_t func, algo_proto, channels;
};

struct p2pg_nccl_op;

/* Prepares the slots (once; again in a forked child, where the parent's are not its own). */
void p2pg_nccl_ops_init(void);

struct p2pg_nccl_comm *p2pg_nccl_comm_new(void);
void p2pg_nccl_comm_free(struct p2pg_nccl_comm *c);
/* context as NCCL hands it back: the communicator, or NULL for anything else. */
struct p2pg_nccl_comm *p2pg_nccl_comm_of(void *context);

/* A new operation, or NULL when every slot is taken (counted in the communicator). */
struct p2pg_nccl_op *p2pg_nccl_op_start(struct p2pg_nccl_comm *c,
					const struct p2pg_nccl_op_desc *d);
void p2pg_nccl_op_set_chain(struct p2pg_nccl_op *op, void *chain_handle);
void *p2pg_nccl_op_chain(const struct p2pg_nccl_op *op);
/* NCCL stopped the operation's event: it is enqueued (it ends when its channels do). */
void p2pg_nccl_op_stop(struct p2pg_nccl_op *op);

/* A kernel channel of op started: its handle, or NULL when NCCL sends one the operation did not
 * announce (a repeated or an extra channel). */
void *p2pg_nccl_channel_start(struct p2pg_nccl_op *op, unsigned channel, uint64_t gpu_ns);
void p2pg_nccl_channel_set_chain(void *channel_handle, void *chain_handle);
void *p2pg_nccl_channel_chain(void *channel_handle);
void p2pg_nccl_channel_gpu_end(void *channel_handle, uint64_t gpu_ns);
void p2pg_nccl_channel_stop(void *channel_handle);

/* What a handle from NCCL is: one of our operations, one of their channels, or neither. */
struct p2pg_nccl_op *p2pg_nccl_op_of(void *handle);
bool p2pg_nccl_is_channel(void *handle);
/* Anywhere in the guard's slots, in use or not: never a handle of the user's plugin. */
bool p2pg_nccl_in_pool(const void *handle);

/* The communicator ends: its operations still running are recorded as unreported. */
void p2pg_nccl_ops_end_comm(struct p2pg_nccl_comm *c);

/* Where records go: the recorder, or a test's sink. */
struct p2pg_nccl_sink {
	void (*record)(struct p2pg_record *r);
	struct p2pg_spool_blob *(*blob)(void);
};
extern struct p2pg_nccl_sink p2pg_nccl_sink;

/* ---- chain.c: the user's own plugin ---- */

/* Loads it once, as NCCL would (P2PGUARD_NCCL_CHAIN, else libnccl-profiler.so when present),
 * choosing its newest version at or below the one NCCL loaded the guard as. */
void p2pg_nccl_chain_load(int nccl_version);
bool p2pg_nccl_chained(void);
/* "Inspector (v5) /path/libnccl-profiler-inspector.so" for the communicator's row; "" when none. */
const char *p2pg_nccl_chain_description(void);
/* Its init: its context, or NULL when it refused (the communicator is then not forwarded). */
void *p2pg_nccl_chain_init(uint64_t comm_hash, const char *comm_name, int nnodes, int nranks,
			   int rank, nccl_logger log);
/* Its activation mask, as its init left it. */
int p2pg_nccl_chain_mask(void);
/* Whether NCCL would have given it an event of this type, had it been loaded alone. */
bool p2pg_nccl_chain_wants(uint64_t type);
/* d's parents already translated to its handles. Returns its handle (NULL: none). */
void *p2pg_nccl_chain_start(void *chain_ctx, struct nccl_v6_descr *d);
/* NCCL 2.23 to 2.26's descriptor as it came, for a plugin of the same version (v1 to v3). */
void *p2pg_nccl_chain_start_raw(void *chain_ctx, void *descr);
/* The version it speaks; 0: none loaded. */
int p2pg_nccl_chain_version(void);
void p2pg_nccl_chain_stop(void *chain_handle);
void p2pg_nccl_chain_record(void *chain_handle, int state, const union nccl_v4_state_args *args);
/* NCCL 2.23 to 2.26's state arguments (v1 to v3 share them), as they came. */
void p2pg_nccl_chain_record_old(void *handle, int state, union nccl_v1_state_args *args);
void p2pg_nccl_chain_finalize(void *chain_ctx);

/* Whether the guard records (the recorder is configured: the preload started the core before
 * NCCL made a communicator, at the process's first CUDA entry); tests put their own here. */
extern bool (*p2pg_nccl_guard_up)(void);
