/* SPDX-License-Identifier: MIT */
/*
 * What `explain` needs to know of a built-in rule before reading it: the statuses it is about and
 * the words a line must hold for its regex or an alias to match. A rule is listed for a line only
 * through one of those (rules_explain.c), so a one-line explain reads the few rules the line can
 * reach instead of every rule's JSON. The table is written at build time by rules_gate_gen.c,
 * from the loader's own reading of the same texts, and compiled into the CLI.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "p2pguard/rules.h"

struct p2pg_rule_gate {
	const char *path; /* the built-in rule's path, as in p2pg_builtin_rules */
	const int *codes;
	size_t n_codes;
	const char *const *words; /* the regex's needed words, then the aliases; any case */
	size_t n_words;
	bool always; /* a regex whose needed words cannot be told: the rule is always read */
};

/* The table for the compiled-in rules, in their order (the CLI links it). */
extern const struct p2pg_rule_gate p2pg_builtin_gates[];
extern const size_t p2pg_builtin_gate_count;

/*
 * Loads the built-in rules that may explain one of lines (each explained on its own, as explain
 * reads a log): those whose gate a line passes. Everything else is as p2pg_ruleset_load_builtin,
 * which it falls back to when the table does not describe the compiled-in rules (another build's
 * table).
 */
int p2pg_ruleset_load_builtin_for_lines(struct p2pg_ruleset *rs, const char *const *lines,
					size_t n_lines, const struct p2pg_rule_gate *gates,
					size_t n_gates, p2pg_rules_report_fn report,
					void *userdata);

/* Whether line passes g: p2pg_ruleset_explain can list the gate's rule for that line only if so
 * (the fuzz target of explain checks it). */
bool p2pg_rule_gate_passes(const struct p2pg_rule_gate *g, const char *line);
