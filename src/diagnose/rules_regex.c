/* SPDX-License-Identifier: MIT */
/* The size check run before regcomp() on a rule's regex. */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rules-loader.h"

/* p is on a bracket expression's '['; returns the character after its ']'. */
static const char *skip_bracket(const char *p)
{
	p++;
	if (*p == '^')
		p++;
	if (*p == ']') /* a leading ']' is a member */
		p++;
	while (*p && *p != ']') {
		if (*p == '[' && (p[1] == ':' || p[1] == '.' || p[1] == '=')) {
			const char *close = strchr(p + 2, p[1]);
			while (close && close[1] != ']')
				close = strchr(close + 1, p[1]);
			if (!close)
				return p + strlen(p);
			p = close + 2;
		} else {
			p++;
		}
	}
	return *p ? p + 1 : p;
}

/* The copies an interval ({n}, {n,}, {n,m}) at *p spells out, moving *p past it; 0 when the '{'
 * starts no interval (it is then an ordinary character). */
static double interval_copies(const char **p)
{
	const char *q = *p + 1;
	char *end;
	if (!isdigit((unsigned char)*q))
		return 0;
	unsigned long low = strtoul(q, &end, 10), high = low;
	if (*end == ',') {
		q = end + 1;
		if (isdigit((unsigned char)*q)) {
			high = strtoul(q, &end, 10);
		} else {
			high = low + 1; /* x{n,} is n copies and a loop */
			end = (char *)q;
		}
	}
	if (*end != '}')
		return 0;
	*p = end + 1;
	return high > low ? (double)high : low > 0 ? (double)low : 1;
}

/* How many copies of its atoms an extended regex makes once repetitions are spelt out. */
double rules_regex_size(const char *p)
{
	/* Per open group: its finished alternatives, the current one, and the current one's last
	 * element, which a repetition applies to. */
	struct group {
		double alternatives, branch, last;
	} stack[64] = {{0}};
	int depth = 0;

	while (*p) {
		struct group *g = &stack[depth];
		double copies = 0;
		switch (*p) {
		case '(':
			if (depth + 1 == (int)(sizeof(stack) / sizeof(stack[0])))
				return HUGE_VAL;
			stack[++depth] = (struct group){0};
			p++;
			continue;
		case ')': {
			if (depth == 0)
				break; /* unmatched: regcomp() will say so */
			double size = g->alternatives + g->branch;
			g = &stack[--depth];
			g->branch += size;
			g->last = size;
			p++;
			continue;
		}
		case '|':
			g->alternatives += g->branch;
			g->branch = g->last = 0;
			p++;
			continue;
		case '*':
		case '?':
			p++; /* a loop around the element, not a copy of it */
			continue;
		case '+':
			copies = 2;
			p++;
			break;
		case '{':
			copies = interval_copies(&p);
			break;
		default:
			break;
		}
		if (copies > 0) {
			g->branch += g->last * (copies - 1);
			g->last *= copies;
			continue;
		}
		/* An atom: a character, an escaped one, or a bracket expression. */
		if (*p == '[')
			p = skip_bracket(p);
		else
			p += p[0] == '\\' && p[1] ? 2 : 1;
		g->branch += 1;
		g->last = 1;
	}
	double size = 0;
	for (int k = 0; k <= depth; k++)
		size += stack[k].alternatives + stack[k].branch;
	return size;
}
