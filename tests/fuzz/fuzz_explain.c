/* SPDX-License-Identifier: MIT */
/* libFuzzer target: a text pasted into `p2pguard explain`, cleaned of what carried it and
 * explained against the shipped rules, printed the way the command prints it; the words explain
 * looks for before it runs a rule's regex are in every text that regex matches; and every rule
 * explain lists for the text passes its gate (rules-gate.h), which is what lets a one-line explain
 * read only the rules a line reaches. */
#include <regex.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "explain_paste.h"
#include "explain_text.h"
#include "p2pguard/rules.h"
#include "rules-gate.h"
#include "rules-private.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct p2pg_ruleset *rules;

static void ignore(void *userdata, const char *file, int line, const char *message)
{
}
static FILE *devnull;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	rules = p2pg_ruleset_new();
	devnull = fopen("/dev/null", "w");
	if (!rules || !devnull || p2pg_ruleset_load_builtin(rules, ignore, NULL) != 0)
		abort();
	return 0;
}

static void check_regex_words(const char *text)
{
	for (size_t k = 0; k < p2pg_ruleset_count(rules); k++) {
		const struct p2pg_rule *r = p2pg_ruleset_at(rules, k);
		if (r->n_regex_literals == 0)
			continue;
		const regex_t *re = rules_rule_regex(r);
		if (!re || regexec(re, text, 0, NULL, 0) != 0)
			continue;
		bool has_word = false;
		for (size_t w = 0; w < r->n_regex_literals && !has_word; w++)
			has_word = strcasestr(text, r->regex_literals[w]) != NULL;
		if (!has_word)
			abort();
	}
}

/* The rules are loaded whole and in the builtin table's order, so rule k is the gate table's k.
 * What surrounds a line (a traceback's frames) may rank rules, never list one the line's own gate
 * keeps out: the text is also read as its own surroundings. */
static void check_gates(const char *text, const char *surroundings)
{
	const struct p2pg_rule *found[64];
	size_t n = p2pg_ruleset_explain_within(rules, text, surroundings, found, 64);
	if (p2pg_builtin_gate_count != p2pg_ruleset_count(rules))
		abort();
	for (size_t j = 0; j < n && j < 64; j++)
		for (size_t k = 0; k < p2pg_ruleset_count(rules); k++)
			if (p2pg_ruleset_at(rules, k) == found[j] &&
			    !p2pg_rule_gate_passes(&p2pg_builtin_gates[k], text))
				abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	char *clean = p2pg_explain_paste_clean(text);
	if (clean && strlen(clean) > strlen(text))
		abort(); /* the cleaner works in place: it may only shorten */
	if (clean) {
		p2pg_explain_text(devnull, rules, clean, size > 0 && (data[0] & 1));
		check_regex_words(clean);
		check_gates(clean, NULL);
		check_gates(clean, text);
		char *joined = p2pg_explain_paste_join_pair(clean);
		if (joined && (strlen(joined) >= strlen(clean) || strchr(joined, '\n')))
			abort(); /* two lines made one: shorter, and one line */
		if (joined)
			check_gates(joined, NULL);
		free(joined);
	}
	check_regex_words(text);
	check_gates(text, NULL);
	free(clean);
	free(text);
	return 0;
}
