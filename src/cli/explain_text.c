/* SPDX-License-Identifier: MIT */
/* What `p2pguard explain` prints for a text: kept apart from main so that a fuzz target can feed
 * it any text. */
#include "explain_text.h"

#include <stdbool.h>
#include <string.h>

#include "explain_log.h"
#include "p2pguard/rules.h"

#define WIDTH	  100
#define SHOWN	  3 /* rules printed in full; the rest are named */
#define MAX_FOUND 64

/* Prints text wrapped at WIDTH columns after indent and prefix; continuation lines line up with
 * the text after the prefix. */
static void print_wrapped(FILE *out, const char *indent, const char *prefix, const char *text)
{
	size_t cont = strlen(indent) + strlen(prefix), col = cont;
	bool fresh = true; /* nothing but indentation on this line yet */

	fprintf(out, "%s%s", indent, prefix);
	for (const char *p = text; *p;) {
		if (*p == ' ') {
			p++;
			continue;
		}
		if (*p == '\n') {
			fprintf(out, "\n%*s", (int)cont, "");
			col = cont;
			fresh = true;
			p++;
			continue;
		}
		size_t word = strcspn(p, " \n");
		if (!fresh && col + 1 + word > WIDTH) {
			fprintf(out, "\n%*s", (int)cont, "");
			col = cont;
			fresh = true;
		}
		if (!fresh) {
			fputc(' ', out);
			col++;
		}
		fwrite(p, 1, word, out);
		col += word;
		p += word;
		fresh = false;
	}
	fputc('\n', out);
}

static void print_rule(FILE *out, const struct p2pg_rule *rule)
{
	const char *doc = p2pg_rule_doc_url(rule);
	size_t n;

	fprintf(out, "%s\n", p2pg_rule_id(rule));
	print_wrapped(out, "  ", "", p2pg_rule_title(rule));
	fprintf(out, "\n  Root cause:\n");
	print_wrapped(out, "    ", "", p2pg_rule_root_cause(rule));

	n = p2pg_rule_workaround_count(rule);
	if (n)
		fprintf(out, "\n  What to do:\n");
	for (size_t k = 0; k < n; k++) {
		const char *action, *how;
		double rate;
		char head[128];
		if (p2pg_rule_workaround(rule, k, &action, &how, &rate) < 0)
			break;
		snprintf(head, sizeof(head), "%zu. ", k + 1);
		char line[1024];
		snprintf(line, sizeof(line), "%s (%.0f%% success)", action, rate * 100.0);
		print_wrapped(out, "    ", head, line);
		const char *when = p2pg_rule_workaround_condition(rule, k);
		if (when)
			print_wrapped(out, "       ", "When: ", when);
		if (how)
			print_wrapped(out, "       ", "", how);
	}

	n = p2pg_rule_dead_end_count(rule);
	if (n)
		fprintf(out, "\n  Dead ends:\n");
	for (size_t k = 0; k < n; k++) {
		const char *action, *why;
		double rate;
		char line[2048];
		if (p2pg_rule_dead_end(rule, k, &action, &why, &rate) < 0)
			break;
		if (rate >= 0)
			snprintf(line, sizeof(line), "%s%s%s (fails %.0f%%)", action ? action : "",
				 action ? ": " : "", why, rate * 100.0);
		else
			snprintf(line, sizeof(line), "%s%s%s", action ? action : "",
				 action ? ": " : "", why);
		print_wrapped(out, "    ", "- ", line);
		const char *when = p2pg_rule_dead_end_condition(rule, k);
		if (when)
			print_wrapped(out, "      ", "When: ", when);
	}
	if (doc)
		fprintf(out, "\n  Documentation: %s\n", doc);
}

/* The rules not printed in full whose need of evidence is `evidence`, one a line, under head. */
static void print_named(FILE *out, const char *head, const struct p2pg_rule **found, size_t n,
			const bool *printed, bool evidence)
{
	bool any = false;

	for (size_t k = 0; k < n; k++) {
		if (printed[k] || p2pg_rule_needs_evidence(found[k]) != evidence)
			continue;
		if (!any)
			fprintf(out, "\n%s\n", head);
		any = true;
		fprintf(out, "  %s: %s\n", p2pg_rule_id(found[k]), p2pg_rule_title(found[k]));
	}
}

/*
 * One line: the best rule in full, then, in full, the next rules that pasted text can support.
 * Rules whose match needs evidence (the own device, a VM, a host bridge behind 217) are narrower
 * causes: printing them in full under a line that cannot tell them apart would contradict the
 * answer above them, so they are named, and the guard tells them apart at run time.
 */
static int explain_line(FILE *out, const struct p2pg_ruleset *rs, const char *text, bool all)
{
	const struct p2pg_rule *found[MAX_FOUND];
	bool printed[MAX_FOUND] = {false};
	size_t n, shown = 0;

	n = p2pg_ruleset_explain(rs, text, found, MAX_FOUND);
	if (n == 0) {
		fprintf(out,
			"No rule explains this text. `p2pguard rules list` shows what is known.\n");
		return 1;
	}
	if (n > MAX_FOUND)
		n = MAX_FOUND;
	for (size_t k = 0; k < n; k++) {
		if (!all && k && (shown == SHOWN || p2pg_rule_needs_evidence(found[k])))
			continue;
		if (shown++)
			fprintf(out, "\n");
		print_rule(out, found[k]);
		printed[k] = true;
	}
	print_named(out,
		    "Narrower causes the guard tells apart at run time (`p2pguard run` records the "
		    "evidence):",
		    found, n, printed, true);
	print_named(out, "Also possible (p2pguard explain --all shows them):", found, n, printed,
		    false);
	return 0;
}

/* At most this much of a line is quoted in the list of a log's lines. */
#define QUOTED 160

/*
 * A log: the distinct lines a rule explains, in the order they came, each with its best rule;
 * which came first (what followed may be its consequence), and the first that names a cause when
 * the first names none; then each of those rules once in full in the order of log.answers (a
 * failure's, then a notice's, then a triage answer's; --all: every rule found for those lines).
 */
static int explain_log(FILE *out, const struct p2pg_ruleset *rs, const char *text, bool all)
{
	struct p2pg_explain_log log;
	const struct p2pg_rule *printed[MAX_FOUND];
	size_t n_printed = 0;

	if (p2pg_explain_log_read(rs, text, &log) < 0) {
		fprintf(stderr, "p2pguard: explain: out of memory\n");
		return 2;
	}
	if (log.n_listed == 0) {
		fprintf(
		    out,
		    "No rule explains any of these %zu lines. `p2pguard rules list` shows what is "
		    "known.\n",
		    log.n_lines);
		p2pg_explain_log_done(&log);
		return 1;
	}
	fprintf(out, "%zu of %zu lines explained, in the order they came:\n",
		log.n_listed + log.n_unlisted, log.n_lines);
	for (size_t k = 0; k < log.n_listed; k++) {
		const struct p2pg_explain_line *line = &log.lines[k];
		size_t len = strlen(line->text), shown = len > QUOTED ? QUOTED : len;
		/* Not inside a character: back to the start of a UTF-8 sequence. */
		while (shown < len && shown > 0 &&
		       ((unsigned char)line->text[shown] & 0xc0) == 0x80)
			shown--;
		fprintf(out, "\n  line %zu", line->number);
		if (line->repeats)
			fprintf(out, " (and %zu more like it)", line->repeats);
		fprintf(out, ": %s\n    %.*s%s\n", p2pg_rule_id(line->rules[0]), (int)shown,
			line->text, shown < len ? "..." : "");
	}
	if (log.n_unlisted)
		fprintf(out, "\n  (%zu more distinct lines explained, not listed)\n",
			log.n_unlisted);
	if (log.cause > 0) {
		const struct p2pg_explain_line *cause = &log.lines[log.cause];
		bool notice = p2pg_rule_is_notice(log.lines[0].rules[0]);
		fprintf(out,
			"\nFirst: line %zu (%s), %s. The first %s is line %zu (%s): start there.\n",
			log.lines[0].number, p2pg_rule_id(log.lines[0].rules[0]),
			notice ? "a notice, not a failure" : "which names no cause",
			p2pg_rule_is_notice(cause->rules[0]) ? "line that names a cause"
							     : "failure that names its cause",
			cause->number, p2pg_rule_id(cause->rules[0]));
	} else if (log.cause < 0) {
		/* No line names a cause (log.cause is set so exactly then): the first of them is
		 * often a harmless warning printed before the failure (NCCL's missing libibverbs
		 * before a hang), not what the later lines follow from. */
		fprintf(out,
			"\nFirst: line %zu (%s). No line names its cause: the triage answers below "
			"say how to find it, line %zu's first (later errors may be its "
			"consequences).\n",
			log.lines[0].number, p2pg_rule_id(log.lines[0].rules[0]),
			log.lines[0].number);
	} else {
		fprintf(out,
			"\nFirst: line %zu (%s). Errors after it may be its consequences: start "
			"there.\n",
			log.lines[0].number, p2pg_rule_id(log.lines[0].rules[0]));
	}

	for (size_t k = 0; k < log.n_listed; k++) {
		const struct p2pg_explain_line *line = &log.lines[log.answers[k]];
		for (size_t j = 0; j < (all ? line->n_rules : 1); j++) {
			size_t seen = 0;
			while (seen < n_printed && printed[seen] != line->rules[j])
				seen++;
			if (seen < n_printed || n_printed == MAX_FOUND)
				continue;
			printed[n_printed++] = line->rules[j];
			fprintf(out, "\n");
			print_rule(out, line->rules[j]);
		}
	}
	p2pg_explain_log_done(&log);
	return 0;
}

int p2pg_explain_text(FILE *out, const struct p2pg_ruleset *rs, const char *text, bool all)
{
	if (p2pg_explain_is_log(text))
		return explain_log(out, rs, text, all);
	return explain_line(out, rs, text, all);
}
