/* SPDX-License-Identifier: MIT */
#include "trace_read.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report_format.h"

uint16_t trace_name(struct trace_names *names, const char *text)
{
	if (!text)
		return 0;
	for (size_t k = 0; k < names->n; k++)
		if (strcmp(names->texts[k], text) == 0)
			return (uint16_t)(k + 1);
	if (names->n >= 0xfffe)
		return 0;
	char **bigger = realloc(names->texts, (names->n + 1) * sizeof(*bigger));
	if (!bigger)
		return 0;
	names->texts = bigger;
	names->texts[names->n] = strdup(text);
	return names->texts[names->n] ? (uint16_t)(++names->n) : 0;
}

const char *trace_name_text(const struct trace_names *names, uint16_t k)
{
	return k ? names->texts[k - 1] : NULL;
}

void trace_names_free(struct trace_names *names)
{
	for (size_t k = 0; k < names->n; k++)
		free(names->texts[k]);
	free(names->texts);
	*names = (struct trace_names){0};
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

static int64_t start_of(const void *items, size_t k, size_t size, size_t start_offset)
{
	int64_t start;
	memcpy(&start, (const char *)items + k * size + start_offset, sizeof(start));
	return start;
}

int trace_keep_first(void *items, size_t *n, size_t size, size_t start_offset, long long limit,
		     const char *what)
{
	if (limit <= 0 || *n <= (size_t)limit)
		return 0;
	int64_t *starts = malloc(*n * sizeof(int64_t));
	if (!starts)
		return -ENOMEM;
	for (size_t k = 0; k < *n; k++)
		starts[k] = start_of(items, k, size, start_offset);
	sort_n(starts, *n, sizeof(int64_t), cmp_i64);
	int64_t last = starts[limit - 1];
	free(starts);
	size_t kept = 0;
	for (size_t k = 0; k < *n && kept < (size_t)limit; k++)
		if (start_of(items, k, size, start_offset) <= last) {
			if (kept != k)
				memcpy((char *)items + kept * size, (const char *)items + k * size,
				       size);
			kept++;
		}
	fprintf(stderr, "p2pguard trace: the first %zu of %zu %s (--limit)\n", kept, *n, what);
	*n = kept;
	return 0;
}
