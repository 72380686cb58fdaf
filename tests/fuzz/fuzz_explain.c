/* SPDX-License-Identifier: MIT */
/* libFuzzer target: a text pasted into `p2pguard explain`, against the shipped rules, printed the
 * way the command prints it. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "explain_text.h"
#include "p2pguard/rules.h"

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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	p2pg_explain_text(devnull, rules, text, size > 0 && (data[0] & 1));
	free(text);
	return 0;
}
