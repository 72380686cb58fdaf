/* SPDX-License-Identifier: MIT */
#include <stdio.h>

#include "cli.h"

int p2pg_cmd_topo(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "p2pguard: topo is not available in this build yet\n");
	return 2;
}
