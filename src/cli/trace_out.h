/* SPDX-License-Identifier: MIT */
/* The trace's output (trace_out.c): a buffer of its own and number formatting without printf,
 * for the hundreds of megabytes a cluster job's trace can be. */
#pragma once

#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct trace_out {
	FILE *f;
	char buf[1 << 20];
	size_t len;
	int64_t written;
	bool first;
};

#define TRACE_PUTS(o, lit) trace_put((o), (lit), sizeof(lit) - 1)

void trace_flush(struct trace_out *o);
void trace_put(struct trace_out *o, const char *s, size_t n);
void trace_put_str(struct trace_out *o, const char *s);
void trace_put_i64(struct trace_out *o, int64_t v);
/* ns / 1000 with three decimals ("12.345"): ns as microseconds, as Kineto writes them. */
void trace_put_us(struct trace_out *o, int64_t ns);
/* text as a JSON string, quotes included; NULL as null */
void trace_put_json(struct trace_out *o, const char *text);
/* ,"key":value inside an object being written; a NULL text writes nothing. */
void trace_put_text_arg(struct trace_out *o, const char *key, const char *value);
void trace_put_int_arg(struct trace_out *o, const char *key, int64_t value);
/* A track's metadata events: its name (thread_name) and its place among the process's tracks
 * (thread_sort_index), each after a separator. */
void trace_put_track_meta(struct trace_out *o, int64_t pid, int64_t tid, const char *name,
			  int64_t sort_index);
/* the separator before the next event */
void trace_sep(struct trace_out *o);
/* Every column of a row as "args":{...}, except process_id and NULL columns. */
void trace_put_row_args(struct trace_out *o, sqlite3_stmt *st);
