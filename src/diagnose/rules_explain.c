/* SPDX-License-Identifier: MIT */
/*
 * The rules that explain a line pasted from a log, best first (rules/README.md, "Explain").
 */
#include "p2pguard/rules.h"

#include <ctype.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "rules-private.h"

static bool is_word_char(char c)
{
	return isalnum((unsigned char)c) || c == '_';
}

/* Finds word in text, ignoring case, where it is not part of a longer identifier. */
static bool find_word(const char *text, const char *word)
{
	size_t n = strlen(word);
	for (const char *p = text; (p = strcasestr(p, word)); p++) {
		bool left = p == text || !is_word_char(p[-1]) || !is_word_char(word[0]);
		bool right = !is_word_char(p[n]) || !is_word_char(word[n - 1]);
		if (left && right)
			return true;
	}
	return false;
}

/* A number is read as a status when it is all the text, or when it follows a word that
 * introduces one ("Error 802", "Cuda failure 217", "status=700"); other numbers in a log line
 * are device ordinals, bus ids and sizes. */
static bool number_is_status(const char *text, const char *start, const char *end)
{
	static const char *const words[] = {"error",  "err",	  "code", "status", "failure",
					    "result", "returned", "rc",	  NULL};
	const char *p = text, *q = end;

	while (*p && isspace((unsigned char)*p))
		p++;
	while (*q && isspace((unsigned char)*q))
		q++;
	if (p == start && *q == '\0')
		return true;

	p = start;
	while (p > text && strchr(" \t:=#(", p[-1]))
		p--;
	const char *word_end = p;
	while (p > text && isalpha((unsigned char)p[-1]))
		p--;
	size_t n = (size_t)(word_end - p);
	for (size_t k = 0; words[k]; k++)
		if (n == strlen(words[k]) && strncasecmp(p, words[k], n) == 0)
			return true;
	return false;
}

static bool mentions_number(const char *text, int code)
{
	for (const char *p = text; *p;) {
		if (!isdigit((unsigned char)*p)) {
			p++;
			continue;
		}
		const char *start = p;
		while (isdigit((unsigned char)*p))
			p++;
		if ((start > text && (is_word_char(start[-1]) || start[-1] == '.')) ||
		    is_word_char(*p) || (*p == '.' && isdigit((unsigned char)p[1])))
			continue;
		if (p - start <= 6 && atoi(start) == code && number_is_status(text, start, p))
			return true;
	}
	return false;
}

/* How much of the text a mention of code accounts for: the longest of its names or message
 * found, or the digits of a bare status number. */
static size_t code_score(const char *text, int code)
{
	size_t best = 0;
	const char *names[3];
	if (p2pg_status_spellings(code, &names[0], &names[1], &names[2]))
		for (size_t m = 0; m < 3; m++)
			if (names[m] && strlen(names[m]) > best && find_word(text, names[m]))
				best = strlen(names[m]);
	if (best == 0 && mentions_number(text, code)) {
		char digits[16];
		best = (size_t)snprintf(digits, sizeof(digits), "%d", code);
	}
	return best;
}

static size_t explain_score(const struct p2pg_rule *r, const char *text)
{
	size_t score = 0;
	regmatch_t m;

	if (r->has_regex && regexec(&r->regex, text, 1, &m, 0) == 0 && m.rm_eo > m.rm_so)
		score = (size_t)(m.rm_eo - m.rm_so);
	for (size_t k = 0; k < r->n_aliases; k++)
		if (strlen(r->aliases[k]) > score && strcasestr(text, r->aliases[k]))
			score = strlen(r->aliases[k]);
	/* Text-only rules are about one framework's wording; a bare status says nothing about
	 * the framework, so only rules about the status itself are found through it. */
	for (size_t k = 0; r->has_match && k < r->n_codes; k++) {
		size_t s = code_score(text, r->codes[k]);
		if (s > score)
			score = s;
	}
	return score;
}

struct candidate {
	const struct p2pg_rule *rule;
	size_t score;
};

static int compare_candidates(const void *a, const void *b)
{
	const struct candidate *x = a, *y = b;
	if (x->score != y->score)
		return x->score > y->score ? -1 : 1;
	/* Text carries no evidence: the general rule first, the narrower causes after it. */
	if (x->rule->specificity != y->rule->specificity)
		return x->rule->specificity < y->rule->specificity ? -1 : 1;
	if (x->rule->confidence != y->rule->confidence)
		return x->rule->confidence > y->rule->confidence ? -1 : 1;
	return strcmp(x->rule->id, y->rule->id);
}

size_t p2pg_ruleset_explain(const struct p2pg_ruleset *rs, const char *text,
			    const struct p2pg_rule **out, size_t max)
{
	struct candidate *c;
	size_t n = 0;

	if (!rs || !text || rs->count == 0)
		return 0;
	c = calloc(rs->count, sizeof(*c));
	if (!c)
		return 0;
	for (size_t k = 0; k < rs->count; k++) {
		size_t score = explain_score(rs->rules[k], text);
		if (score > 0)
			c[n++] = (struct candidate){rs->rules[k], score};
	}
	qsort(c, n, sizeof(*c), compare_candidates);
	for (size_t k = 0; out && k < n && k < max; k++)
		out[k] = c[k].rule;
	free(c);
	return n;
}
