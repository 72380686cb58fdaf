/* SPDX-License-Identifier: MIT */
/*
 * What the outputs share to say much in little room: a growable text buffer, compact lists of
 * numbers ("0-3,5"), of device pairs ("0-3->4-7") and of hosts ("node-[01-04]"), text wrapped at
 * word boundaries, and human-sized numbers.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* qsort() that accepts an empty array given as NULL (qsort's own arguments must not be NULL). */
static inline void sort_n(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
	if (n > 1)
		qsort(base, n, size, cmp);
}

struct rbuf {
	char *text; /* always terminated once anything was added; NULL before */
	size_t len, cap;
};

void rbuf_printf(struct rbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void rbuf_free(struct rbuf *b);
static inline const char *rbuf_str(const struct rbuf *b)
{
	return b->text ? b->text : "";
}

/* Sorted, distinct values as ranges: "0-3,5,7-9". values is sorted in place. */
void fmt_ranges(struct rbuf *b, int *values, size_t n);

struct dev_pair {
	int src, dst;
};

/*
 * Ordered device pairs, sources with the same set of destinations merged: "0-3->4-7; 4-7->0-3",
 * or "every pair of 0-7" when that is what they are; an end that is not known (negative) is "?":
 * "1->?". pairs is sorted in place.
 */
void fmt_pairs(struct rbuf *b, struct dev_pair *pairs, size_t n);

/*
 * Host names in hostlist form, numbered names with one prefix and width merged as Slurm writes
 * them ("gpu-[01-04,07]"); at most max_shown groups, then "and N more". names is sorted in place.
 */
void fmt_hosts(struct rbuf *b, char **names, size_t n, size_t max_shown);

/*
 * text written from column `at` (what the line already holds) to `width`, broken only at spaces
 * (a word longer than the line is kept whole), every further line starting with `indent` spaces.
 * Newlines in text start a new line. Never cuts.
 */
void fmt_wrap(FILE *out, const char *text, int at, int indent, int width);
/* "  3. " and text wrapped under it (further lines 5 spaces in): a numbered item of a list. */
void fmt_numbered(FILE *out, long long number, const char *text, int width);

/* 1536 -> "1.5 KiB" */
void fmt_bytes(char *buf, size_t len, double bytes);
/* 1234567 -> "1,234,567" */
void fmt_count(char *buf, size_t len, long long n);
/* Unix ns as "YYYY-MM-DD HH:MM:SS" UTC ("?" if unreadable). */
void fmt_utc(char *buf, size_t len, int64_t ns);

/* The width to wrap text at: the terminal's when out is one (at least 60), else 100. */
int fmt_width(FILE *out);

/* uint64 key -> index, open addressing; keys are never 0 (callers add 1 where needed). */
struct imap {
	uint64_t *keys;
	int32_t *vals;
	size_t cap, n;
};
int32_t imap_get(const struct imap *m, uint64_t key);	 /* -1: absent */
int imap_put(struct imap *m, uint64_t key, int32_t val); /* 0 or -ENOMEM */
void imap_free(struct imap *m);

/* Grows *array (of *cap elements of size bytes, doubling from 16) to hold n + 1: 0 or -ENOMEM. */
int array_grow(void *array, size_t *cap, size_t n, size_t size);
