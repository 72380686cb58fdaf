/* SPDX-License-Identifier: MIT */
/* The cost check run before regcomp() on a rule's regex. */
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

/* An interval ({n}, {n,}, {,m}, {n,m}, as glibc reads them) at *p, moving *p past it: the copies
 * it spells out and how many of them are optional; false when the '{' starts no interval (it is
 * then an ordinary character). */
static bool interval(const char **p, double *ret_copies, double *ret_optional)
{
	const char *q = *p + 1;
	char *end = (char *)q;
	if (!isdigit((unsigned char)*q) && *q != ',')
		return false;
	unsigned long low = isdigit((unsigned char)*q) ? strtoul(q, &end, 10) : 0, high = low;
	bool loop = false;
	if (*end == ',') {
		q = end + 1;
		if (isdigit((unsigned char)*q)) {
			high = strtoul(q, &end, 10);
		} else {
			loop = true; /* x{n,} is n copies and a loop, x{,} a loop */
			end = (char *)q;
		}
	}
	if (*end != '}')
		return false;
	*p = end + 1;
	if (loop) {
		*ret_copies = (double)low + 1;
		*ret_optional = 1;
	} else {
		*ret_copies = high > low ? (double)high : low > 0 ? (double)low : 1;
		*ret_optional = high > low ? (double)(high - low) : low == 0 ? 1 : 0;
	}
	return true;
}

struct rules_regex_cost rules_regex_cost(const char *p)
{
	/* Per open group: its finished alternatives, the current one, and the current one's last
	 * element, which a repetition applies to; each as (size, optional). */
	struct part {
		double size, optional;
	};
	struct group {
		struct part alternatives, branch, last;
	} stack[REGEX_MAX_DEPTH + 1];
	memset(stack, 0, sizeof(stack));
	int depth = 0;

	while (*p) {
		struct group *g = &stack[depth];
		double copies = 0, optional = 0;
		switch (*p) {
		case '(':
			if (depth == REGEX_MAX_DEPTH)
				return (struct rules_regex_cost){HUGE_VAL, HUGE_VAL};
			stack[++depth] = (struct group){{0, 0}, {0, 0}, {0, 0}};
			p++;
			continue;
		case ')': {
			if (depth == 0)
				break; /* unmatched: regcomp() will say so */
			struct part whole = {g->alternatives.size + g->branch.size,
					     g->alternatives.optional + g->branch.optional};
			g = &stack[--depth];
			g->branch.size += whole.size;
			g->branch.optional += whole.optional;
			g->last = whole;
			p++;
			continue;
		}
		case '|':
			g->alternatives.size += g->branch.size;
			g->alternatives.optional += g->branch.optional;
			g->branch = g->last = (struct part){0, 0};
			p++;
			continue;
		case '*':
		case '?':
			/* A loop around the element, or a way past it: no copy, an optional part.
			 */
			copies = 1;
			optional = 1;
			p++;
			break;
		case '+':
			copies = 2; /* x+ is xx* */
			optional = 1;
			p++;
			break;
		case '{':
			if (!interval(&p, &copies, &optional))
				copies = 0;
			break;
		default:
			break;
		}
		if (copies > 0) {
			g->branch.size += g->last.size * (copies - 1);
			g->branch.optional += g->last.optional * (copies - 1) + optional;
			g->last.size *= copies;
			g->last.optional = g->last.optional * copies + optional;
			continue;
		}
		/* An atom: a character, an escaped one, or a bracket expression. */
		if (*p == '[')
			p = skip_bracket(p);
		else
			p += p[0] == '\\' && p[1] ? 2 : 1;
		g->branch.size += 1;
		g->last = (struct part){1, 0};
	}
	struct rules_regex_cost cost = {0, 0};
	for (int k = 0; k <= depth; k++) {
		cost.size += stack[k].alternatives.size + stack[k].branch.size;
		cost.optional += stack[k].alternatives.optional + stack[k].branch.optional;
	}
	return cost;
}
