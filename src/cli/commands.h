/* SPDX-License-Identifier: MIT */
/*
 * The CLI's subcommands. Each takes the arguments from the subcommand's own name on
 * (argv[0] == "rules" for "p2pguard rules validate"), prints to stdout, problems to stderr, and
 * returns the process exit status: 0 success, 1 the answer is "no" (problems found, nothing
 * matched), 2 usage or system error.
 */
#pragma once

/* p2pguard rules validate [--with-builtin] [DIR...] | list [DIR...] | show ID */
int p2pg_cmd_rules(int argc, char **argv);

/* p2pguard explain [--all] "<error text or code>" (or "-" / nothing: read the text from stdin) */
int p2pg_cmd_explain(int argc, char **argv);

struct p2pg_ruleset;

/*
 * The rules the guard itself would use: the builtin set plus the folder named by P2PGUARD_RULES
 * when set. Problems are printed to stderr as "FILE:LINE: message" and counted in *ret_problems.
 * Returns NULL (after saying why) when the set cannot be built.
 */
struct p2pg_ruleset *p2pg_cli_load_rules(int *ret_problems);
/* The same for explaining text (a line or a log): of the builtin rules, only those its lines can
 * reach (rules-gate.h); every rule when P2PGUARD_RULES is set, so that a user's rule is checked
 * against all the builtin ones as always. */
struct p2pg_ruleset *p2pg_cli_load_rules_for_text(const char *text);

struct p2pg_rule;

/* The rule `p2pguard explain` shows first for a pasted text, from the set rs (a
 * p2pg_rules_answer_fn, for `rules validate` to judge text examples as the command answers). */
int p2pg_explain_first_answer(const struct p2pg_ruleset *rs, const char *pasted,
			      const struct p2pg_rule **ret);
