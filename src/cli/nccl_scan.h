/* SPDX-License-Identifier: MIT */
/*
 * NCCL's operations read once for the outputs (report in its three forms, metrics): per
 * communicator and function, per device pair as the nccl_pair_bandwidth view counts them, and,
 * for metrics, per rank, communicator, function and peer. One pass over nccl_ops in rowid order
 * plus the summary and overflow tables: the GROUP BYs and windows of the views took seconds on a
 * cluster job's database.
 */
#pragma once

#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpus.h"

/* A communicator, all its ranks (nccl_comms rows of one comm_hash). */
struct nccl_comm {
	char hash[17];
	char *name;
	int nranks;
	int64_t started_ns; /* its first rank's */
	int *rank_row;	    /* per rank: the newest nccl_comms row (index into rows), -1 */
	int rank_cap;	    /* entries of rank_row */
	int recorded;	    /* ranks with a row */
	int64_t untracked;  /* events that found the guard's slots full */
	int profiler_version;
};

/* One nccl_comms row: a rank of a communicator as its process recorded it. */
struct nccl_row {
	int64_t process;
	int serial, rank, comm, gpu; /* comm: index into comms; gpu: into gpus, -1 unknown */
	int global_rank;	     /* processes.rank, -1 */
	int64_t started_ns;
};

/* Every operation of one (communicator, kind, function), rows, summary buckets and overflow. */
struct nccl_func {
	int comm; /* -1: operations whose communicator has no row */
	const char *kind, *func;
	int64_t ops, bytes, folded;
	int64_t gpu_timed, timed_bytes, gpu_ns; /* those with a GPU time: GB/s from them */
	int64_t running, unreported;		/* rows not finished */
};

/* One direction between two GPUs for one kind (p2p, or coll: two-rank collectives). side 0 is
 * what the senders recorded, 1 the receivers; the pair counts `side`, the one that recorded more
 * (on a tie more GPU times, then the senders), as the view does. */
struct nccl_pair {
	int src, dst; /* gpus, -1 unknown */
	bool coll;
	int side;
	int64_t ops[2], bytes[2], timed[2];
	double *gbps[2]; /* the GPU-timed rows' GB/s, sorted after the scan */
	size_t n[2], cap[2];
};

/* metrics: one (nccl_comms row, kind, function, peer rank) */
struct nccl_series {
	int row, peer; /* peer: the other rank for p2p and two-rank collectives, else -1 */
	const char *kind, *func;
	int64_t ops, bytes, gpu_timed, timed_bytes, gpu_ns;
};

struct nccl_scan {
	bool present;	      /* the database has NCCL's tables */
	struct cli_gpus gpus; /* the ends of the pairs and the ranks' GPUs, by host and index */
	struct nccl_comm *comms;
	size_t ncomms;
	struct nccl_row *rows;
	size_t nrows;
	struct nccl_func *funcs; /* sorted by communicator's start, then function */
	size_t nfuncs, capfuncs;
	struct nccl_pair *pairs; /* sorted by source, destination, kind */
	size_t npairs, cappairs;
	struct nccl_series *series; /* only when asked for */
	size_t nseries, capseries;
	int64_t ops, bytes, gpu_timed, running, unreported; /* all the operations */
	char **names;					    /* interned kinds and functions */
	size_t nnames;
	void *maps;
};

/* Reads NCCL's tables of db (nothing, and 0, when it has none). with_series: per rank and peer
 * too (metrics). Returns 0 or -ENOMEM/-EIO after saying why on stderr. */
int nccl_scan_run(sqlite3 *db, struct nccl_scan *s, bool with_series);
void nccl_scan_free(struct nccl_scan *s);

static inline int64_t nccl_pair_ops(const struct nccl_pair *p)
{
	return p->ops[p->side];
}
static inline int64_t nccl_pair_bytes(const struct nccl_pair *p)
{
	return p->bytes[p->side];
}
static inline int64_t nccl_pair_untimed(const struct nccl_pair *p)
{
	return p->ops[p->side] - p->timed[p->side];
}
/* p50 (p = 0.5) or p99 of the pair's GPU-timed operations, as the view rounds it; NaN: none. */
double nccl_pair_percentile(const struct nccl_pair *p, double q);

/* Whether the process recorded an NCCL communicator. */
bool nccl_scan_has_process(const struct nccl_scan *s, int64_t process);
