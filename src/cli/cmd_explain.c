/* SPDX-License-Identifier: MIT */
/*
 * p2pguard explain: what a pasted error line means and what to do about it, from the same rules
 * the guard uses at run time.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "explain_text.h"
#include "p2pguard/rules.h"

#define STDIN_MAX (1024 * 1024)

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

static void usage(FILE *out)
{
	fprintf(
	    out,
	    "Usage: p2pguard explain [--all] \"<error text or code>\"\n"
	    "       p2pguard explain [--all] - < log.txt\n"
	    "\n"
	    "Prints the rules that explain a line pasted from a log (a PyTorch, TensorFlow, JAX\n"
	    "or NCCL message, an error name such as cudaErrorPeerAccessUnsupported or\n"
	    "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, or a bare status such as 217), best first: root\n"
	    "cause, what to do, dead ends, documentation. --all prints every match in full.\n"
	    "P2PGUARD_RULES names a folder of extra rules. Exits 0 when something matched, 1\n"
	    "when nothing did.\n");
}

int p2pg_cmd_explain(int argc, char **argv)
{
	bool all = false;
	int first = 1;
	char *text;
	struct p2pg_ruleset *rs;

	for (; first < argc && argv[first][0] == '-' && argv[first][1] != '\0'; first++) {
		if (strcmp(argv[first], "--all") == 0) {
			all = true;
		} else if (strcmp(argv[first], "--help") == 0 || strcmp(argv[first], "-h") == 0) {
			usage(stdout);
			return 0;
		} else if (strcmp(argv[first], "--") == 0) {
			first++;
			break;
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

	rs = p2pg_cli_load_rules(NULL);
	if (!rs) {
		free(text);
		return 2;
	}
	int status = p2pg_explain_text(stdout, rs, text, all);
	p2pg_ruleset_free(rs);
	free(text);
	return status;
}
