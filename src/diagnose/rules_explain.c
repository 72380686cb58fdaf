/* SPDX-License-Identifier: MIT */
/*
 * The rules that explain a line pasted from a log, best first (rules/README.md, "Explain"). What
 * the line names decides before how much of it a rule accounts for: a status it names rules out
 * the rules about other statuses, and a rule's "context" (calls, source files, frameworks) must
 * be named for the rule to be listed at all, the more of it the better.
 */
#include "p2pguard/rules.h"

#include <regex.h>
#include <stdlib.h>
#include <string.h>

#include "explain-line.h"
#include "rules-private.h"

/* A line that names statuses is about them: a rule about other statuses, or about none (codes
 * []), does not explain it. */
static bool status_fits(const struct p2pg_rule *r, const struct line_clues *clues)
{
	if (clues->n_statuses == 0)
		return true;
	for (size_t k = 0; k < r->n_codes; k++)
		if (line_names_status(clues, r->codes[k]))
			return true;
	return false;
}

/* How many kinds of the rule's context the line names (0 to 3); -1 when the rule has a context
 * and the line names none of it. */
static int context_clues(const struct p2pg_rule *r, const struct line_clues *clues)
{
	int found = 0;
	if (!r->has_context)
		return 0;
	for (size_t k = 0; k < r->n_context_apis; k++)
		if (line_names_api(clues, r->context_apis[k])) {
			found++;
			break;
		}
	for (size_t k = 0; k < r->n_context_files; k++)
		if (line_names_file(clues, r->context_files[k])) {
			found++;
			break;
		}
	if (r->context_frameworks & clues->frameworks)
		found++;
	return found ? found : -1;
}

static size_t explain_score(const struct p2pg_rule *r, const char *text,
			    const struct line_clues *clues)
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
		size_t s = line_status_span(clues, r->codes[k]);
		if (s > score)
			score = s;
	}
	return score;
}

struct candidate {
	const struct p2pg_rule *rule;
	size_t score;
	int clues;
};

static int compare_candidates(const void *a, const void *b)
{
	const struct candidate *x = a, *y = b;
	if (x->clues != y->clues)
		return x->clues > y->clues ? -1 : 1;
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
	struct line_clues clues;
	size_t n = 0;

	if (!rs || !text || rs->count == 0)
		return 0;
	c = calloc(rs->count, sizeof(*c));
	if (!c)
		return 0;
	explain_line_read(text, &clues);
	for (size_t k = 0; k < rs->count; k++) {
		const struct p2pg_rule *r = rs->rules[k];
		if (!status_fits(r, &clues))
			continue;
		int found = context_clues(r, &clues);
		if (found < 0)
			continue;
		size_t score = explain_score(r, text, &clues);
		if (score > 0)
			c[n++] = (struct candidate){r, score, found};
	}
	qsort(c, n, sizeof(*c), compare_candidates);
	for (size_t k = 0; out && k < n && k < max; k++)
		out[k] = c[k].rule;
	free(c);
	return n;
}
