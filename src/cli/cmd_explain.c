/* SPDX-License-Identifier: MIT */
/*
 * p2pguard explain: what a pasted error line means and what to do about it, from the same rules
 * the guard uses at run time.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "dbread.h"
#include "explain_log.h"
#include "explain_paste.h"
#include "explain_text.h"
#include "p2pguard/rules.h"

#define STDIN_MAX (1024 * 1024)
#define MAX_FOUND 64 /* matches listed by --json */

/* The whole of stdin, NUL-terminated; NULL when it cannot be read or is too large. */
static char *read_stdin(void)
{
	size_t len = 0, cap = 4096;
	char *buf = malloc(cap);

	while (buf) {
		size_t n = fread(buf + len, 1, cap - len - 1, stdin);
		len += n;
		if (n == 0)
			break;
		if (len + 1 == cap) {
			if (cap >= STDIN_MAX) {
				free(buf);
				return NULL;
			}
			char *bigger = realloc(buf, cap * 2);
			if (!bigger)
				free(buf);
			buf = bigger;
			cap *= 2;
		}
	}
	if (!buf || ferror(stdin)) {
		free(buf);
		return NULL;
	}
	buf[len] = '\0';
	return buf;
}

static char *join(int argc, char **argv)
{
	size_t len = 1;
	for (int k = 0; k < argc; k++)
		len += strlen(argv[k]) + 1;
	char *text = malloc(len), *p = text;
	if (!text)
		return NULL;
	for (int k = 0; k < argc; k++)
		p += sprintf(p, "%s%s", k ? " " : "", argv[k]);
	*p = '\0';
	return text;
}

static void print_match(const struct p2pg_rule *rule, bool first)
{
	printf("%s\n  {\"id\": ", first ? "" : ",");
	p2pg_cli_json_string(stdout, p2pg_rule_id(rule));
	printf(", \"title\": ");
	p2pg_cli_json_string(stdout, p2pg_rule_title(rule));
	printf(", \"confidence\": %.3g, \"rule\": %s}", p2pg_rule_confidence(rule),
	       p2pg_rule_json(rule) ?: "null");
}

/*
 * {"text", "matches", "lines", "first"}: "text" as pasted, the lines as read (what carried the
 * paste taken off, explain_paste.h). A single line: "matches" are its rules, best first. A
 * log: "matches" are the rules of its lines, each once, in the order of the lines (each line's
 * best first), the lines whose best rule names a cause before those answered by a triage;
 * "lines" the distinct lines a rule explains, in order, with their rules' ids; "first" the
 * number of the first of them, "cause" of the first whose best rule names a cause (null when
 * none).
 */
static int print_json(const struct p2pg_ruleset *rs, const char *pasted, const char *text)
{
	const struct p2pg_rule *found[MAX_FOUND];
	struct p2pg_explain_log log;
	size_t n = 0;

	if (p2pg_explain_log_read(rs, text, &log) < 0) {
		fprintf(stderr, "p2pguard: explain: out of memory\n");
		return 2;
	}
	if (p2pg_explain_is_log(text)) {
		for (size_t k = 0; k < log.n_listed; k++) {
			const struct p2pg_explain_line *line = &log.lines[log.answers[k]];
			for (size_t j = 0; j < line->n_rules && n < MAX_FOUND; j++) {
				size_t seen = 0;
				while (seen < n && found[seen] != line->rules[j])
					seen++;
				if (seen == n)
					found[n++] = line->rules[j];
			}
		}
	} else {
		n = p2pg_ruleset_explain(rs, text, found, MAX_FOUND);
		if (n > MAX_FOUND)
			n = MAX_FOUND;
	}
	printf("{\"text\": ");
	p2pg_cli_json_string(stdout, pasted);
	printf(", \"matches\": [");
	for (size_t k = 0; k < n; k++)
		print_match(found[k], k == 0);
	printf("],\n \"lines\": [");
	for (size_t k = 0; k < log.n_listed; k++) {
		const struct p2pg_explain_line *line = &log.lines[k];
		printf("%s\n  {\"line\": %zu, \"repeats\": %zu, \"text\": ", k ? "," : "",
		       line->number, line->repeats);
		p2pg_cli_json_string(stdout, line->text);
		printf(", \"matches\": [");
		for (size_t j = 0; j < line->n_rules; j++) {
			printf("%s", j ? ", " : "");
			p2pg_cli_json_string(stdout, p2pg_rule_id(line->rules[j]));
		}
		printf("]}");
	}
	if (log.n_listed)
		printf("],\n \"first\": %zu", log.lines[0].number);
	else
		printf("],\n \"first\": null");
	if (log.n_listed && log.cause >= 0)
		printf(", \"cause\": %zu}\n", log.lines[log.cause].number);
	else
		printf(", \"cause\": null}\n");
	p2pg_explain_log_done(&log);
	return n ? 0 : 1;
}

/* Whether every rule of rules[0..n) is among the rules the log's lines were answered with. */
static bool log_lists_no_other(const struct p2pg_explain_log *log, const struct p2pg_rule **rules,
			       size_t n)
{
	for (size_t k = 0; k < log->n_listed; k++)
		for (size_t j = 0; j < log->lines[k].n_rules; j++) {
			const char *id = p2pg_rule_id(log->lines[k].rules[j]);
			size_t i = 0;
			while (i < n && strcmp(p2pg_rule_id(rules[i]), id) != 0)
				i++;
			if (i == n)
				return false;
		}
	return true;
}

/*
 * Two lines that may be one line cut by a terminal of any width (p2pg_explain_paste_join_pair)
 * are read as that line when it says more than they do: it finds a rule, one that names a cause
 * unless the two found nothing, and every rule the two lines found is among its own. rs holds the
 * rules text can reach, together those joined can.
 */
static bool joined_says_more(const struct p2pg_ruleset *rs, const char *text,
			     const struct p2pg_ruleset *together, const char *joined)
{
	const struct p2pg_rule *found[MAX_FOUND];
	struct p2pg_explain_log log;
	bool more = false;

	if (p2pg_explain_log_read(rs, text, &log) == 0) {
		size_t n = p2pg_ruleset_explain(together, joined, found, MAX_FOUND);
		if (n > MAX_FOUND)
			n = MAX_FOUND;
		more = n > 0 && (log.n_listed == 0 || !p2pg_rule_is_triage(found[0])) &&
		       log_lists_no_other(&log, found, n);
		p2pg_explain_log_done(&log);
	}
	return more;
}

int p2pg_explain_first_answer(const struct p2pg_ruleset *rs, const char *pasted,
			      const struct p2pg_rule **ret)
{
	*ret = NULL;
	char *text = p2pg_explain_paste_clean(pasted);
	if (!text)
		return -ENOMEM;
	char *joined = p2pg_explain_paste_join_pair(text);
	if (joined && joined_says_more(rs, text, rs, joined))
		free(text), text = joined, joined = NULL;
	free(joined);
	if (p2pg_explain_is_log(text)) {
		struct p2pg_explain_log log;
		if (p2pg_explain_log_read(rs, text, &log) < 0) {
			free(text);
			return -ENOMEM;
		}
		if (log.n_listed)
			*ret = log.lines[log.answers[0]].rules[0];
		p2pg_explain_log_done(&log);
	} else {
		p2pg_ruleset_explain(rs, text, ret, 1);
	}
	free(text);
	return 0;
}

static void usage(FILE *out)
{
	fprintf(
	    out,
	    "Usage: p2pguard explain [--all] [--json] \"<error text or code>\"\n"
	    "       p2pguard explain [--all] [--json] - < log.txt\n"
	    "\n"
	    "Prints the rules that explain a line pasted from a log (a PyTorch, TensorFlow, JAX,\n"
	    "vLLM, SGLang, CuPy or NCCL message, a CUDA sample's output, a kernel log line, an "
	    "error\n"
	    "name such as cudaErrorPeerAccessUnsupported or CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, or "
	    "a\n"
	    "bare status such as 217 or 0x2c0), best first: root cause, what to do, dead ends,\n"
	    "documentation; the narrower causes the guard tells apart at run time are named.\n"
	    "A text of several lines (explain - < log.txt) is a log: each distinct line a rule\n"
	    "explains is listed in order with its rule, the first one is named (and the first\n"
	    "that names a cause, when the first names none), and each rule is printed once.\n"
	    "Terminal colours and wrapping, web-page entities and container JSON records are\n"
	    "taken off first. --all prints every match in full.\n"
	    "--json prints {\"text\", \"matches\": [{\"id\", \"title\", \"confidence\", "
	    "\"rule\"}],\n"
	    "\"lines\": [{\"line\", \"repeats\", \"text\", \"matches\": [ids]}], \"first\", "
	    "\"cause\"},\n"
	    "best first, \"rule\" being the whole knowledge-base entry, \"first\" the number of\n"
	    "the first line explained, \"cause\" of the first whose best rule names a cause.\n"
	    "P2PGUARD_RULES names a folder of extra rules. Exits 0 when something matched, 1\n"
	    "when nothing did.\n");
}

int p2pg_cmd_explain(int argc, char **argv)
{
	bool all = false, json = false;
	int first = 1;
	char *text;
	struct p2pg_ruleset *rs;

	for (; first < argc && argv[first][0] == '-' && argv[first][1] != '\0'; first++) {
		if (strcmp(argv[first], "--all") == 0) {
			all = true;
		} else if (strcmp(argv[first], "--json") == 0) {
			json = true;
		} else if (strcmp(argv[first], "--help") == 0 || strcmp(argv[first], "-h") == 0) {
			usage(stdout);
			return 0;
		} else if (strcmp(argv[first], "--") == 0) {
			first++;
			break;
		} else if (argv[first][1] == '-') {
			return p2pg_cli_unknown_option("explain", argv[first]);
		} else {
			break; /* "-1" style text is still text */
		}
	}
	if (first >= argc || (argc - first == 1 && strcmp(argv[first], "-") == 0))
		text = read_stdin();
	else
		text = join(argc - first, argv + first);
	if (!text) {
		fprintf(stderr, "p2pguard: explain: cannot read the text to explain\n");
		return 2;
	}
	if (text[strspn(text, " \t\r\n")] == '\0') {
		free(text);
		usage(stderr);
		return 2;
	}

	char *pasted = text;
	text = p2pg_explain_paste_clean(pasted);
	rs = text ? p2pg_cli_load_rules_for_text(text) : NULL;
	char *joined = rs ? p2pg_explain_paste_join_pair(text) : NULL;
	struct p2pg_ruleset *together = joined ? p2pg_cli_load_rules_for_text(joined) : NULL;
	if (together && joined_says_more(rs, text, together, joined)) {
		free(text), text = joined, joined = NULL;
		p2pg_ruleset_free(rs), rs = together, together = NULL;
	}
	p2pg_ruleset_free(together);
	free(joined);
	int status = 2;
	if (!text)
		fprintf(stderr, "p2pguard: explain: out of memory\n");
	else if (rs && json)
		status = print_json(rs, pasted, text);
	else if (rs)
		status = p2pg_explain_text(stdout, rs, text, all);
	p2pg_ruleset_free(rs);
	free(text);
	free(pasted);
	return status;
}
