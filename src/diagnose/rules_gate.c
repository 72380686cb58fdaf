/* SPDX-License-Identifier: MIT */
/*
 * A one-line explain reads only the built-in rules the line can reach (rules-gate.h): reading
 * every rule's JSON was four fifths of the command's work, and grew with each rule.
 */
#include "rules-gate.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "explain-line.h"
#include "rules-builtin.h"
#include "rules-private.h"

/* Whether the line may get a rule through its gate: the ways p2pg_ruleset_explain finds one are a
 * status it lists named in the line, its regex (which needs one of its words) and its aliases. */
static bool gate_passes(const struct p2pg_rule_gate *g, const char *text,
			const struct line_clues *clues)
{
	if (g->always)
		return true;
	for (size_t k = 0; k < g->n_codes; k++)
		if (line_names_status(clues, g->codes[k]))
			return true;
	for (size_t k = 0; k < g->n_words; k++)
		if (strcasestr(text, g->words[k]))
			return true;
	return false;
}

bool p2pg_rule_gate_passes(const struct p2pg_rule_gate *g, const char *line)
{
	struct line_clues clues;
	explain_line_read(line, &clues);
	return gate_passes(g, line, &clues);
}

/* Whether the table was written for the rules compiled in: the same paths in the same order. */
static bool gates_fit(const struct p2pg_rule_gate *gates, size_t n_gates)
{
	if (!gates || n_gates != p2pg_builtin_rule_count)
		return false;
	for (size_t k = 0; k < n_gates; k++)
		if (!gates[k].path || strcmp(gates[k].path, p2pg_builtin_rules[k].path) != 0)
			return false;
	return true;
}

int p2pg_ruleset_load_builtin_for_lines(struct p2pg_ruleset *rs, const char *const *lines,
					size_t n_lines, const struct p2pg_rule_gate *gates,
					size_t n_gates, p2pg_rules_report_fn report, void *userdata)
{
	int problems = 0;

	if (!rs || (n_lines && !lines))
		return -EINVAL;
	if (!gates_fit(gates, n_gates))
		return p2pg_ruleset_load_builtin(rs, report, userdata);
	bool *wanted = calloc(n_gates, sizeof(*wanted));
	if (!wanted)
		return -ENOMEM;
	for (size_t j = 0; j < n_lines; j++) {
		struct line_clues clues;
		explain_line_read(lines[j], &clues);
		for (size_t k = 0; k < n_gates; k++)
			wanted[k] = wanted[k] || gate_passes(&gates[k], lines[j], &clues);
	}
	for (size_t k = 0; k < n_gates; k++)
		if (wanted[k] &&
		    rules_load_builtin_one(rs, k, report, userdata, &problems) == -ENOMEM) {
			free(wanted);
			return -ENOMEM;
		}
	free(wanted);
	return problems;
}
