/* SPDX-License-Identifier: MIT */
/* What the two JSON readers (json.c, json_checked.c) share. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/*
 * The line each value starts on, in document order, into *ret (freed by the caller), and their
 * number into *ret_n; with ret NULL, only the number. Reads no byte outside [p, end) whatever the
 * text, but the lines are only right for valid JSON.
 */
int json_value_lines(const char *p, const char *end, int **ret, size_t *ret_n);

static inline bool json_is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* Where a value cannot start, and where a number or a literal ends: blanks and punctuation other
 * than the containers' openings. */
static inline bool json_is_separator(char c)
{
	switch (c) {
	case ',':
	case ':':
	case ']':
	case '}':
		return true;
	default:
		return json_is_blank(c);
	}
}
