/* SPDX-License-Identifier: MIT */
/* NCCL's operations in the trace (trace_nccl.c): a track per rank's communicator. */
#pragma once

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

#include "report.h"
#include "trace.h"
#include "trace_out.h"

struct trace_nccl;

/* Reads the NCCL operations that opt chooses (started in [from_ns, to_ns], the first opt->limit
 * by start) into *ret (NULL when the database has no NCCL tables). Returns 0 or a negative errno
 * after saying why. */
int trace_nccl_read(sqlite3 *db, const struct trace_options *opt, struct trace_nccl **ret,
		    struct report_progress *progress);
/* How many slices and instants it will write. */
size_t trace_nccl_count(const struct trace_nccl *n);
/* Operations folded into summary buckets or overflow: counted, without a slice. */
int64_t trace_nccl_folded(const struct trace_nccl *n);
/* Writes the tracks' names, a slice per finished operation, an instant per unfinished one and
 * per stall; base_ns is the trace's zero. */
void trace_nccl_write(struct trace_nccl *n, struct trace_out *o, int64_t base_ns,
		      struct report_progress *progress);
void trace_nccl_free(struct trace_nccl *n);
