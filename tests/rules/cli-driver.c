/* SPDX-License-Identifier: MIT */
/* A stand-in for the CLI's main.c, so the rules and explain commands can be tested on their own:
 * rules-cli rules ... | rules-cli explain ... */
#include <stdio.h>
#include <string.h>

#include "commands.h"

int main(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "rules") == 0)
		return p2pg_cmd_rules(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "explain") == 0)
		return p2pg_cmd_explain(argc - 1, argv + 1);
	fprintf(stderr, "usage: rules-cli rules|explain ...\n");
	return 2;
}
