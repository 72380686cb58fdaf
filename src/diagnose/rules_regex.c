/* SPDX-License-Identifier: MIT */
/* A rule's regex: the cost check run before regcomp(), and its compilation, at first use for a
 * built-in rule. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rules-loader.h"
#include "rules-private.h"

/* Stands for a regex that did not compile; never passed to regexec. */
regex_t rules_regex_broken;

regex_t *rules_regex_compile(const char *regex, char *why, size_t why_size)
{
	regex_t *re = malloc(sizeof(*re));
	if (!re)
		return NULL;
	int rc = regcomp(re, regex, REG_EXTENDED | REG_ICASE);
	if (rc == 0)
		return re;
	if (why)
		regerror(rc, re, why, why_size);
	free(re);
	return &rules_regex_broken;
}

/* Keeps re as r's regex unless another thread stored one first; answers the one kept. */
static regex_t *keep(const struct p2pg_rule *r, regex_t *re)
{
	regex_t *expected = NULL;
	/* The compiled regex is a cache of the rule's text: storing it does not change the rule
	 * that callers hold as const. */
	if (atomic_compare_exchange_strong(&((struct p2pg_rule *)r)->regex, &expected, re))
		return re;
	if (re != &rules_regex_broken) {
		regfree(re);
		free(re);
	}
	return expected;
}

const regex_t *rules_rule_regex(const struct p2pg_rule *r)
{
	regex_t *re = atomic_load(&r->regex);
	if (!re && r->regex_text && (re = rules_regex_compile(r->regex_text, NULL, 0)))
		re = keep(r, re);
	return re == &rules_regex_broken ? NULL : re;
}

/*
 * A bracket expression that holds a backslash and a letter, as in "[^\\n]": POSIX reads the
 * backslash inside brackets as itself, so the expression leaves out the letters '\\' and 'n' and
 * not the newline its writer meant, and a line with an 'n' in that place silently fails to match.
 */
bool rules_regex_escape_in_bracket(const char *p, char *why, size_t why_size)
{
	while (*p) {
		if (*p == '\\') {
			p += p[1] ? 2 : 1;
			continue;
		}
		if (*p != '[') {
			p++;
			continue;
		}
		const char *end = rules_regex_skip_bracket(p);
		for (const char *q = p + 1; q + 1 < end; q++)
			if (*q == '\\' && isalpha((unsigned char)q[1])) {
				snprintf(
				    why, why_size,
				    "regex bracket %.*s holds a backslash and a letter: inside "
				    "brackets POSIX reads '\\' as itself; put the character itself "
				    "there (in the JSON text a single \"\\n\" is already a "
				    "newline)",
				    (int)(end - p), p);
				return true;
			}
		p = end;
	}
	return false;
}

int rules_check_regex(const struct p2pg_rule *r, p2pg_rules_report_fn report, void *userdata)
{
	char why[160] = "";
	if (!r->regex_text)
		return 0;
	regex_t *re = atomic_load(&r->regex);
	if (!re) {
		if (!(re = rules_regex_compile(r->regex_text, why, sizeof(why))))
			return 0; /* out of memory: nothing is known about the regex */
		re = keep(r, re);
	}
	if (re == &rules_regex_broken) {
		if (!why[0])
			rules_regex_compile(r->regex_text, why,
					    sizeof(why)); /* for regerror's words */
		rules_report(report, userdata, r->file, r->regex_line, "invalid regex: %s", why);
		return 1;
	}
	if (regexec(re, "", 0, NULL, 0) == 0) {
		rules_report(report, userdata, r->file, r->regex_line,
			     "regex matches the empty string");
		return 1;
	}
	char bracket[320];
	if (rules_regex_escape_in_bracket(r->regex_text, bracket, sizeof(bracket))) {
		rules_report(report, userdata, r->file, r->regex_line, "%s", bracket);
		return 1;
	}
	return 0;
}

const char *rules_regex_skip_bracket(const char *p)
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
			p = rules_regex_skip_bracket(p);
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
