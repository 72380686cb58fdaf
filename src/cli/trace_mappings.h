/* SPDX-License-Identifier: MIT */
/* Cross-process mappings in the trace (trace_mappings.c): a "mappings" track per process. */
#pragma once

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

#include "report.h"
#include "trace.h"
#include "trace_out.h"

struct trace_mappings;

/* Reads the mappings that opt chooses (started in [from_ns, to_ns], the first opt->limit by
 * start) into *ret (NULL when the database has no peer_mappings table). Returns 0 or a negative
 * errno after saying why. */
int trace_mappings_read(sqlite3 *db, const struct trace_options *opt, struct trace_mappings **ret,
			struct report_progress *progress);
/* How many slices and instants it will write. */
size_t trace_mappings_count(const struct trace_mappings *m);
/* The latest moment the trace knows of a process (a transfer's or an operation's end): a mapping
 * still live when its process's records end is drawn up to there. */
void trace_mappings_note_end(struct trace_mappings *m, int64_t process, int64_t end_ns);
/* After the last note: each live mapping's end, and the track each slice takes (mappings overlap
 * by the hundred: a slice goes on the first track where it follows or nests). Returns 0 or
 * -ENOMEM. */
int trace_mappings_plan(struct trace_mappings *m);
/* Mappings drawn as instants after planning: more overlapped at once than the tracks hold. */
int64_t trace_mappings_without_lane(const struct trace_mappings *m);
/* Writes the tracks' names, a slice per mapping from its open or map to its close or unmap (to its
 * process's last moment when it was never closed), an instant per export and per failed call;
 * base_ns is the trace's zero. */
void trace_mappings_write(struct trace_mappings *m, struct trace_out *o, int64_t base_ns,
			  struct report_progress *progress);
void trace_mappings_free(struct trace_mappings *m);
