/* SPDX-License-Identifier: MIT */
/*
 * Cross-process and VMM mappings read once for the outputs (report in its three forms, metrics):
 * per device pair, owner -> accessor (whose memory -> the GPU given access to it), each GPU named
 * by its host and physical identity (gpus.h) as the view mapping_pairs names them, and per
 * process, pair and handle type for metrics. A mapping here is a grant of access: an IPC open
 * (the device it was opened on gains the memory) or a cuMemSetAccess of a device other than none;
 * a cuMem import or map is the way there, with no device yet. It is closed when the close or
 * unmap that ended it was seen, live otherwise (still mapped when the process's records end).
 */
#pragma once

#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpus.h"
#include "report_format.h"

/* A peer_mappings row (alias m) that grants access, as every output counts it. */
#define MAPPING_OPENED_SQL(m)                                             \
	"(" m ".status = 0 AND " m ".accessor_device IS NOT NULL AND (" m \
	".event = 'import' OR (" m ".event = 'access' AND " m ".flags != 0)))"

enum {
	MAPPING_HANDLE_IPC = 1,
	MAPPING_HANDLE_POSIX_FD = 2,
	MAPPING_HANDLE_FABRIC = 4,
	MAPPING_HANDLE_OTHER = 8,
	MAPPING_HANDLE_NONE = 16, /* a process's own memory given to another device */
};

struct mapping_counts {
	int64_t opened, closed, bytes, cross_process, failed;
	int64_t lived_ns; /* the closed ones' lives, summed */
};

static inline int64_t mapping_live(const struct mapping_counts *c)
{
	return c->opened - c->closed;
}

/* Processes, as indices into mapping_scan.procs: sorted, distinct. */
struct mapping_procs {
	int *v;
	size_t n, cap;
};

/* One device pair on one host: what the processes there mapped of the owner's memory. */
struct mapping_pair {
	const char *host;
	int owner, accessor; /* gpus, -1 unknown */
	struct mapping_counts c;
	unsigned handles;	 /* MAPPING_HANDLE_* of its rows */
	struct mapping_procs by; /* the processes that mapped (the accessors') */
	int64_t first_ns;
};

/* One (process, owner ordinal, accessor ordinal, handle type), for metrics. */
struct mapping_group {
	int proc, owner, accessor; /* ordinals as the process numbered them, -1 unknown */
	unsigned handle;	   /* one MAPPING_HANDLE_* */
	int pair;		   /* index into pairs */
	struct mapping_counts c;
};

struct mapping_process {
	int64_t id;
	int pid, rank; /* rank -1: none */
	char *host;
};

struct mapping_scan {
	bool present; /* the database has the mapping tables */
	struct cli_gpus gpus;
	struct mapping_pair *pairs; /* by host, owner, accessor (unknown GPUs last) */
	size_t npairs, cappairs;
	struct mapping_group *groups;
	size_t ngroups, capgroups;
	struct mapping_process *procs;
	size_t nprocs;
	struct mapping_procs *exporters; /* per GPU: the processes that exported its memory */
	struct mapping_counts total;
	int64_t rows, exports, own_calls;
	void *maps;
};

/* Reads the mappings of db (nothing, and 0, for a database without the tables). Returns 0 or
 * -ENOMEM/-EIO after saying why on stderr. */
int mapping_scan_run(sqlite3 *db, struct mapping_scan *s);
void mapping_scan_free(struct mapping_scan *s);

/* "ipc,posix_fd" from MAPPING_HANDLE_* bits ("-" for none). */
void mapping_handles_text(unsigned handles, char *buf, size_t len);
/* The name of one MAPPING_HANDLE_* as peer_mappings has it ("none" for a process's own memory). */
const char *mapping_handle_name(unsigned handle);
/* Who: "ranks 0-3" (compact ranges), "pid 4242", "ranks 0,1, pid 4242"; "-" for nobody. */
void mapping_who(const struct mapping_scan *s, const struct mapping_procs *p, struct rbuf *b);
