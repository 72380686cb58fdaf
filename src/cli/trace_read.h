/* SPDX-License-Identifier: MIT */
/* What the trace's readers (transfers, NCCL's operations, the mappings) share between reading their
 * rows and writing their events (trace_read.c). */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Texts interned as small numbers, 1 and up (0: none), for events kept by the million. */
struct trace_names {
	char **texts;
	size_t n;
};

/* text's number (interned on first sight), or 0 for NULL, past 65534 texts or out of memory. */
uint16_t trace_name(struct trace_names *names, const char *text);
/* The text of a number trace_name gave, NULL for 0. */
const char *trace_name_text(const struct trace_names *names, uint16_t k);
void trace_names_free(struct trace_names *names);

/*
 * --limit: keeps the first `limit` of the *n items (each `size` bytes, its start an int64_t at
 * start_offset) by start, in their order, and says so on stderr naming them `what`; nothing when
 * limit is 0 or not below *n. Returns 0 or -ENOMEM (items untouched).
 */
int trace_keep_first(void *items, size_t *n, size_t size, size_t start_offset, long long limit,
		     const char *what);
