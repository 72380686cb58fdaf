/* SPDX-License-Identifier: MIT */
/* What `p2pguard explain` prints for a text: kept apart from main so that a fuzz target can feed
 * it any text. */
#include "explain_text.h"

#include <stdbool.h>
#include <string.h>

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
	}
	if (doc)
		fprintf(out, "\n  Documentation: %s\n", doc);
}

int p2pg_explain_text(FILE *out, const struct p2pg_ruleset *rs, const char *text, bool all)
{
	const struct p2pg_rule *found[MAX_FOUND];
	size_t n, shown;

	n = p2pg_ruleset_explain(rs, text, found, MAX_FOUND);
	if (n == 0) {
		fprintf(out,
			"No rule explains this text. `p2pguard rules list` shows what is known.\n");
		return 1;
	}
	if (n > MAX_FOUND)
		n = MAX_FOUND;
	shown = all || n < SHOWN ? n : SHOWN;
	for (size_t k = 0; k < shown; k++) {
		if (k)
			fprintf(out, "\n");
		print_rule(out, found[k]);
	}
	if (shown < n) {
		fprintf(out, "\nAlso possible (p2pguard explain --all shows them):\n");
		for (size_t k = shown; k < n; k++)
			fprintf(out, "  %s: %s\n", p2pg_rule_id(found[k]),
				p2pg_rule_title(found[k]));
	}
	return 0;
}
