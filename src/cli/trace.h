/* SPDX-License-Identifier: MIT */
/* p2pguard trace: the database as Chrome trace-event JSON. */
#pragma once

#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>

enum trace_clock {
	TRACE_CLOCK_KINETO,   /* µs from Kineto's base (baseTimeNanoseconds), as PyTorch writes */
	TRACE_CLOCK_UNIX,     /* µs since 1970 */
	TRACE_CLOCK_RELATIVE, /* µs since the first process started */
};

struct trace_options {
	enum trace_clock clock;
	int64_t from_ns, to_ns; /* what started in [from_ns, to_ns] */
	long long limit;	/* the first N transfers by start time; 0: all */
};

void trace_options_init(struct trace_options *o);

/* Writes the trace of db (its processes as chosen by the caller) to f. Returns 0 or a negative
 * errno (-EIO: writing failed; other errors said on stderr). */
int trace_write(sqlite3 *db, const struct trace_options *opt, FILE *f);
