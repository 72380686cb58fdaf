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

#include "driver.h"
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

/* The longest spelling in the line of a status the rule lists; 0 when it names none of them. */
static size_t status_span(const struct p2pg_rule *r, const struct line_clues *clues)
{
	size_t span = 0;
	for (size_t k = 0; k < r->n_codes; k++) {
		size_t s = line_status_span(clues, r->codes[k]);
		if (s > span)
			span = s;
	}
	return span;
}

/* What the line names of a rule's context. */
struct context_found {
	int kinds;     /* how many kinds (0 to 3); -1: the rule has a context and none is named */
	bool anchored; /* one of its calls or source files is named */
};

static struct context_found context_clues(const struct p2pg_rule *r, const struct line_clues *clues)
{
	struct context_found f = {0, false};
	if (!r->has_context)
		return f;
	/* A call named only in a library's words finds the rule but does not rank it: NCCL's own
	 * rule for "failed to open CUDA IPC handle" stays before the general rules of the call. */
	bool in_words_only = false;
	for (size_t k = 0; k < r->n_context_apis; k++) {
		bool in_words;
		if (line_names_api(clues, r->context_apis[k], &in_words)) {
			f.anchored = true;
			in_words_only = in_words;
			if (!in_words)
				break;
		}
	}
	if (f.anchored && !in_words_only)
		f.kinds++;
	for (size_t k = 0; k < r->n_context_files; k++)
		if (line_names_file(clues, r->context_files[k])) {
			f.kinds++;
			f.anchored = true;
			break;
		}
	if (r->context_frameworks & clues->frameworks)
		f.kinds++;
	if (f.kinds == 0 && !f.anchored)
		f.kinds = -1;
	return f;
}

/* False when the text lacks every word the rule's regex needs (rules_regex_literal.c): the regex
 * is then neither compiled nor run. */
static bool regex_may_match(const struct p2pg_rule *r, const char *text)
{
	if (r->n_regex_literals == 0)
		return true;
	for (size_t k = 0; k < r->n_regex_literals; k++)
		if (strcasestr(text, r->regex_literals[k]))
			return true;
	return false;
}

/*
 * How much of the text the rule accounts for: the part its regex matches, its longest alias found
 * or, for a rule about a status (one with "match"), the longest spelling of a status it lists.
 */
static size_t wording_score(const struct p2pg_rule *r, const char *text,
			    const struct line_clues *clues)
{
	size_t score = 0;
	regmatch_t m;

	const regex_t *re = regex_may_match(r, text) ? rules_rule_regex(r) : NULL;
	if (re && regexec(re, text, 1, &m, 0) == 0 && m.rm_eo > m.rm_so)
		score = (size_t)(m.rm_eo - m.rm_so);
	for (size_t k = 0; k < r->n_aliases; k++)
		if (strlen(r->aliases[k]) > score && strcasestr(text, r->aliases[k]))
			score = strlen(r->aliases[k]);
	if (r->has_match && status_span(r, clues) > score)
		score = status_span(r, clues);
	return score;
}

/*
 * Whether a triage answer is the answer to a status the line names however it spells it: a rule
 * of category "triage" with neither context nor match whose regex matches one of that status's
 * own spellings (cuda/invalid-device-ordinal-triage matches "invalid device ordinal"), so that
 * "CUDA error 101", "hipErrorInvalidDevice" and a bare "invalid argument" reach the triage that
 * "cudaErrorInvalidDevice" and "CUDA error: invalid argument" reach. Its other codes are the
 * same status's numbers before CUDA 10.1 (77 for 700), so Caffe's "(77 vs. 0)" reaches it too. A
 * triage whose wording is a library's own ("Cuda failure N '...'", NCCL's) matches none of them and
 * stays with it.
 */
static size_t triage_status_span(const struct p2pg_rule *r, const struct line_clues *clues)
{
	size_t span = status_span(r, clues);
	if (!r->triage || r->has_context || r->has_match || span == 0)
		return 0;
	const regex_t *re = rules_rule_regex(r);
	for (size_t k = 0; re && k < r->n_codes; k++) {
		const char *spellings[3];
		if (!p2pg_status_spellings(r->codes[k], &spellings[0], &spellings[1],
					   &spellings[2]))
			continue;
		for (size_t m = 0; m < 3; m++)
			if (regexec(re, spellings[m], 0, NULL, 0) == 0)
				return span;
	}
	return 0;
}

struct candidate {
	const struct p2pg_rule *rule;
	size_t score;
	int clues;
};

static bool has_facts(const struct p2pg_rule *r)
{
	return r->n_conditions > 0;
}

static int compare_candidates(const void *a, const void *b)
{
	const struct candidate *x = a, *y = b;
	if (x->clues != y->clues)
		return x->clues > y->clues ? -1 : 1;
	/* A triage answer says how to find the cause of a line that names none; any other rule
	 * the line finds as well names a cause, however few of the line's words it matches. */
	if (x->rule->triage != y->rule->triage)
		return x->rule->triage ? 1 : -1;
	if (x->score != y->score)
		return x->score > y->score ? -1 : 1;
	/* Text carries no evidence: the rules that need none first, then the narrower causes the
	 * guard tells apart at run time. Those are ordered by how often each is the cause when it
	 * matches (confidence), not by how many facts it tests: two causes of one failure test
	 * different facts (an IPC open's 217 with the exporter outside the process's view, or
	 * with a visible peer unreachable), and more facts do not make a cause more likely. */
	if (has_facts(x->rule) != has_facts(y->rule))
		return has_facts(x->rule) ? 1 : -1;
	if (has_facts(x->rule) && x->rule->confidence != y->rule->confidence)
		return x->rule->confidence > y->rule->confidence ? -1 : 1;
	if (x->rule->specificity != y->rule->specificity)
		return x->rule->specificity < y->rule->specificity ? -1 : 1;
	if (x->rule->confidence != y->rule->confidence)
		return x->rule->confidence > y->rule->confidence ? -1 : 1;
	return strcmp(x->rule->id, y->rule->id);
}

size_t p2pg_ruleset_explain(const struct p2pg_ruleset *rs, const char *text,
			    const struct p2pg_rule **out, size_t max)
{
	return p2pg_ruleset_explain_within(rs, text, NULL, out, max);
}

size_t p2pg_ruleset_explain_within(const struct p2pg_ruleset *rs, const char *text,
				   const char *surroundings, const struct p2pg_rule **out,
				   size_t max)
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
	if (surroundings)
		explain_line_add_surroundings(&clues, surroundings);
	for (size_t k = 0; k < rs->count; k++) {
		const struct p2pg_rule *r = rs->rules[k];
		if (!status_fits(r, &clues))
			continue;
		struct context_found found = context_clues(r, &clues);
		if (found.kinds < 0)
			continue;
		/* A rule in the folder of the framework that printed the line ranks as if its
		 * context named that framework: TensorRT-LLM's rule for its own "[TensorRT-LLM]
		 * [ERROR] ... cudaIpcOpenMemHandle ... peer access is not supported" comes before
		 * the general rules of the call, without making its other wordings need the
		 * framework's name. */
		if (!(r->context_frameworks & clues.frameworks) &&
		    (r->folder_framework & clues.frameworks))
			found.kinds++;
		size_t score = wording_score(r, text, &clues);
		int kinds = found.kinds;
		/*
		 * A framework's rule is also found through a status it lists where the line names
		 * one of its calls or source files: the same failure reaches users in many wordings
		 * (a JIT kernel's "Runtime check failed at .../custom_all_reduce.cuh:37: CUDA
		 * error: invalid argument", NCCL's "Cuda failure 101 'invalid devi" cut short),
		 * while the file or call that failed stays in the line. The call or file then
		 * counts as what found the rule rather than as a clue that ranks it: a rule whose
		 * own wording matches comes first where it names as much. A framework alone does
		 * not find a rule through a status: every framework prints out-of-memory and
		 * invalid arguments of its own.
		 */
		if (score == 0 && found.anchored) {
			score = status_span(r, &clues);
			kinds--;
		}
		if (score == 0)
			score = triage_status_span(r, &clues);
		if (score > 0)
			c[n++] = (struct candidate){r, score, kinds};
	}
	qsort(c, n, sizeof(*c), compare_candidates);
	for (size_t k = 0; out && k < n && k < max; k++)
		out[k] = c[k].rule;
	free(c);
	return n;
}
