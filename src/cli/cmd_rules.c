/* SPDX-License-Identifier: MIT */
/*
 * p2pguard rules: the validator for rules/ folders (libinput's "quirks validate" idea) and a
 * listing of what the guard knows.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "explain_log.h"
#include "p2pguard/rules.h"
#include "rules-gate.h"

static void print_problem(void *userdata, const char *file, int line, const char *message)
{
	FILE *out = userdata;
	if (line > 0)
		fprintf(out, "%s:%d: %s\n", file, line, message);
	else
		fprintf(out, "%s: %s\n", file, message);
}

/* A log of more lines than this reaches most rules anyway: it reads them all. */
#define GATED_LOG_LINES 256

/*
 * The builtin rules that may explain text (one line, or a log's lines each on its own): a log is
 * split as the log reader splits it. Returns as p2pg_ruleset_load_builtin.
 */
static int load_builtin_for_text(struct p2pg_ruleset *rs, const char *text)
{
	if (!p2pg_explain_is_log(text))
		return p2pg_ruleset_load_builtin_for_lines(rs, &text, 1, p2pg_builtin_gates,
							   p2pg_builtin_gate_count, print_problem,
							   stderr);
	const char *lines[GATED_LOG_LINES];
	size_t n = 0;
	char *buf = strdup(text), *p = buf;
	if (!buf)
		return -ENOMEM;
	bool too_many = false;
	for (char *line; !too_many && (line = p2pg_explain_log_next_line(&p));) {
		if (p2pg_explain_line_is_blank(line))
			continue;
		too_many = n == GATED_LOG_LINES;
		if (!too_many)
			lines[n++] = line;
	}
	int r = too_many ? p2pg_ruleset_load_builtin(rs, print_problem, stderr)
			 : p2pg_ruleset_load_builtin_for_lines(rs, lines, n, p2pg_builtin_gates,
							       p2pg_builtin_gate_count,
							       print_problem, stderr);
	free(buf);
	return r;
}

static struct p2pg_ruleset *load_rules(const char *text, int *ret_problems)
{
	struct p2pg_ruleset *rs = p2pg_ruleset_new();
	const char *user = getenv("P2PGUARD_RULES");
	int problems = 0, r;

	if (!rs) {
		fprintf(stderr, "p2pguard: out of memory\n");
		return NULL;
	}
	if (text && !(user && *user))
		r = load_builtin_for_text(rs, text);
	else
		r = p2pg_ruleset_load_builtin(rs, print_problem, stderr);
	if (r < 0) {
		fprintf(stderr, "p2pguard: cannot load the builtin rules: %s\n", strerror(-r));
		p2pg_ruleset_free(rs);
		return NULL;
	}
	problems += r;
	if (user && *user) {
		r = p2pg_ruleset_load_dir(rs, user, print_problem, stderr);
		if (r < 0) {
			/* The builtin rules still answer; say once why the user's are missing. */
			fprintf(stderr, "p2pguard: P2PGUARD_RULES=%s: %s\n", user, strerror(-r));
			problems++;
		} else {
			problems += r;
		}
	}
	if (ret_problems)
		*ret_problems = problems;
	return rs;
}

struct p2pg_ruleset *p2pg_cli_load_rules(int *ret_problems)
{
	return load_rules(NULL, ret_problems);
}

struct p2pg_ruleset *p2pg_cli_load_rules_for_text(const char *text)
{
	return load_rules(text, NULL);
}

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: p2pguard rules validate [--with-builtin] [DIR...]\n"
		"       p2pguard rules list [DIR...]\n"
		"       p2pguard rules show ID\n"
		"\n"
		"validate  checks rule files (rules/README.md is the format): every file, then\n"
		"          every example against the whole set. Without DIR, the builtin rules;\n"
		"          --with-builtin adds them to the given folders, so that user rules are\n"
		"          checked against the rules they compete with. Prints FILE:LINE: message\n"
		"          per problem; exits 0 when clean, 1 when there are problems.\n"
		"list      prints id, CUDA statuses and title of each rule: the builtin ones and\n"
		"          those in P2PGUARD_RULES, or those in the given folders.\n"
		"show      prints one rule's entry as loaded.\n");
}

/* Loads the given folders (and the builtin set when asked). Returns the problem count, or -1
 * when a folder cannot be read at all. */
static int load_dirs(struct p2pg_ruleset *rs, char **dirs, int n, bool builtin, FILE *out)
{
	int problems = 0;

	if (builtin) {
		int r = p2pg_ruleset_load_builtin(rs, print_problem, out);
		if (r < 0) {
			fprintf(stderr, "p2pguard: cannot load the builtin rules: %s\n",
				strerror(-r));
			return -1;
		}
		problems += r;
	}
	for (int k = 0; k < n; k++) {
		int r = p2pg_ruleset_load_dir(rs, dirs[k], print_problem, out);
		if (r < 0) {
			fprintf(stderr, "p2pguard: %s: %s\n", dirs[k], strerror(-r));
			return -1;
		}
		problems += r;
	}
	return problems;
}

static int cmd_validate(int argc, char **argv)
{
	bool with_builtin = false;
	int first = 0, problems;
	struct p2pg_ruleset *rs;

	for (; first < argc && argv[first][0] == '-'; first++) {
		if (strcmp(argv[first], "--with-builtin") == 0) {
			with_builtin = true;
		} else if (strcmp(argv[first], "--") == 0) {
			first++;
			break;
		} else {
			fprintf(stderr, "p2pguard: rules validate: unknown option %s\n",
				argv[first]);
			usage(stderr);
			return 2;
		}
	}
	rs = p2pg_ruleset_new();
	if (!rs) {
		fprintf(stderr, "p2pguard: out of memory\n");
		return 2;
	}
	problems = load_dirs(rs, argv + first, argc - first, with_builtin || first == argc, stdout);
	if (problems < 0) {
		p2pg_ruleset_free(rs);
		return 2;
	}
	/* Examples of broken files are gone with them; the others are judged against what loaded.
	 */
	int r = p2pg_ruleset_check_examples_answered(rs, p2pg_explain_first_answer, print_problem,
						     stdout);
	if (r < 0) {
		fprintf(stderr, "p2pguard: checking examples: %s\n", strerror(-r));
		p2pg_ruleset_free(rs);
		return 2;
	}
	problems += r;
	printf("%zu rule%s loaded, %d problem%s\n", p2pg_ruleset_count(rs),
	       p2pg_ruleset_count(rs) == 1 ? "" : "s", problems, problems == 1 ? "" : "s");
	p2pg_ruleset_free(rs);
	return problems ? 1 : 0;
}

static int cmd_list(int argc, char **argv)
{
	struct p2pg_ruleset *rs;
	int problems = 0;

	if (argc > 0) {
		rs = p2pg_ruleset_new();
		if (!rs) {
			fprintf(stderr, "p2pguard: out of memory\n");
			return 2;
		}
		problems = load_dirs(rs, argv, argc, false, stderr);
		if (problems < 0) {
			p2pg_ruleset_free(rs);
			return 2;
		}
	} else {
		rs = p2pg_cli_load_rules(&problems);
		if (!rs)
			return 2;
	}
	for (size_t k = 0; k < p2pg_ruleset_count(rs); k++) {
		const struct p2pg_rule *rule = p2pg_ruleset_at(rs, k);
		const int *codes = NULL;
		size_t n = p2pg_rule_codes(rule, &codes);
		char list[64] = "";
		size_t pos = 0;

		for (size_t c = 0; c < n && pos < sizeof(list); c++)
			pos += (size_t)snprintf(list + pos, sizeof(list) - pos, "%s%d",
						c ? "," : "", codes[c]);
		printf("%-52s %-12s %s\n", p2pg_rule_id(rule), n ? list : "-",
		       p2pg_rule_title(rule));
	}
	p2pg_ruleset_free(rs);
	return problems ? 1 : 0;
}

static int cmd_show(int argc, char **argv)
{
	struct p2pg_ruleset *rs;
	const struct p2pg_rule *rule;

	if (argc != 1) {
		usage(stderr);
		return 2;
	}
	rs = p2pg_cli_load_rules(NULL);
	if (!rs)
		return 2;
	rule = p2pg_ruleset_find(rs, argv[0]);
	if (!rule) {
		fprintf(stderr, "p2pguard: no rule with id %s\n", argv[0]);
		p2pg_ruleset_free(rs);
		return 1;
	}
	printf("# %s\n%s", p2pg_rule_source_file(rule), p2pg_rule_json(rule));
	p2pg_ruleset_free(rs);
	return 0;
}

int p2pg_cmd_rules(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (strcmp(argv[1], "validate") == 0)
		return cmd_validate(argc - 2, argv + 2);
	if (strcmp(argv[1], "list") == 0)
		return cmd_list(argc - 2, argv + 2);
	if (strcmp(argv[1], "show") == 0)
		return cmd_show(argc - 2, argv + 2);
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		usage(stdout);
		return 0;
	}
	fprintf(stderr, "p2pguard: rules: unknown subcommand %s\n", argv[1]);
	usage(stderr);
	return 2;
}
