/* SPDX-License-Identifier: MIT */
/*
 * Build step: writes the gates of the built-in rules (rules-gate.h) as C, from the loader's own
 * reading of them, so that what a gate lets through is what p2pg_ruleset_explain can list.
 *
 *     rules_gate_gen OUTPUT.c
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rules-builtin.h"
#include "rules-private.h"

static void report(void *userdata, const char *file, int line, const char *message)
{
	(void)userdata;
	fprintf(stderr, "rules_gate_gen: %s:%d: %s\n", file, line, message);
}

/* A C string literal of s: printable ASCII as itself, the rest in octal. */
static void c_string(FILE *out, const char *s)
{
	fputc('"', out);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(out, "\\%c", *p);
		else if (*p >= 0x20 && *p < 0x7f && *p != '?')
			fputc(*p, out);
		else
			fprintf(out, "\\%03o", *p);
	}
	fputc('"', out);
}

static void write_words(FILE *out, size_t k, const struct p2pg_rule *r)
{
	fprintf(out, "static const char *const w%zu[] = {", k);
	for (size_t j = 0; j < r->n_regex_literals; j++) {
		c_string(out, r->regex_literals[j]);
		fputs(", ", out);
	}
	for (size_t j = 0; j < r->n_aliases; j++) {
		c_string(out, r->aliases[j]);
		fputs(", ", out);
	}
	fputs("NULL};\n", out);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: rules_gate_gen OUTPUT.c\n");
		return 2;
	}
	struct p2pg_ruleset *rs = p2pg_ruleset_new();
	if (!rs || p2pg_ruleset_load_builtin(rs, report, NULL) != 0 ||
	    rs->count != p2pg_builtin_rule_count) {
		fprintf(stderr, "rules_gate_gen: the built-in rules do not all load\n");
		p2pg_ruleset_free(rs);
		return 1;
	}
	for (size_t k = 0; k < rs->count; k++) {
		const char *file = rs->rules[k]->file;
		if (!file || strncmp(file, "rules/", 6) != 0 ||
		    strcmp(file + 6, p2pg_builtin_rules[k].path) != 0) {
			fprintf(stderr, "rules_gate_gen: rule %zu is not the built-in file %s\n", k,
				p2pg_builtin_rules[k].path);
			p2pg_ruleset_free(rs);
			return 1;
		}
	}
	FILE *out = fopen(argv[1], "w");
	if (!out) {
		perror(argv[1]);
		p2pg_ruleset_free(rs);
		return 1;
	}
	fputs("/* Written by rules_gate_gen.c from the built-in rules; do not edit. */\n"
	      "#include \"rules-gate.h\"\n\n",
	      out);
	for (size_t k = 0; k < rs->count; k++) {
		const struct p2pg_rule *r = rs->rules[k];
		fprintf(out, "static const int c%zu[] = {", k);
		for (size_t j = 0; j < r->n_codes; j++)
			fprintf(out, "%d, ", r->codes[j]);
		fputs("0};\n", out);
		write_words(out, k, r);
	}
	fputs("\nconst struct p2pg_rule_gate p2pg_builtin_gates[] = {\n", out);
	for (size_t k = 0; k < rs->count; k++) {
		const struct p2pg_rule *r = rs->rules[k];
		fputs("    {", out);
		c_string(out, p2pg_builtin_rules[k].path);
		fprintf(out, ", c%zu, %zu, w%zu, %zu, %s},\n", k, r->n_codes, k,
			r->n_regex_literals + r->n_aliases,
			r->regex_text && r->n_regex_literals == 0 ? "true" : "false");
	}
	fprintf(out, "};\nconst size_t p2pg_builtin_gate_count = %zu;\n", rs->count);
	int failed = ferror(out);
	if (fclose(out) != 0 || failed) {
		perror(argv[1]);
		p2pg_ruleset_free(rs);
		return 1;
	}
	p2pg_ruleset_free(rs);
	return 0;
}
