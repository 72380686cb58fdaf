/* SPDX-License-Identifier: MIT */
/* p2pguard: run programs under the guard, read what it recorded, explain errors, measure pairs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "dbread.h"

static void usage(FILE *out)
{
	fputs(
	    "Usage: p2pguard COMMAND [ARGS]\n"
	    "\n"
	    "  run [OPTIONS] [--] CMD [ARG...]   run CMD under the guard, then report its run\n"
	    "      --db PATH --mode observe|fallback|staged --pairs all|0-1,... --record "
	    "all|summary\n"
	    "  report [DATABASE] [--json | --html FILE] [--run ID] [--verbose]\n"
	    "                                    what the guard recorded, grouped across pairs,\n"
	    "                                    ranks and hosts\n"
	    "  trace [DATABASE] [-o FILE] [--rank R] [--host H] [--from T] [--to T] [--limit N]\n"
	    "                                    trace-event JSON for ui.perfetto.dev, on the\n"
	    "                                    PyTorch profiler's (Kineto's) clock\n"
	    "  metrics [DATABASE] [-o FILE] [--listen [HOST:]PORT]\n"
	    "                                    Prometheus text exposition\n"
	    "  topo [--db PATH] [--sweep] [--json]\n"
	    "                                    every GPU pair: link, affinity, P2P health,\n"
	    "                                    bandwidth both ways, latency\n"
	    "  merge OUT.db IN.db...             one database from the databases of many nodes or "
	    "ranks\n"
	    "  recover [DATABASE]                import records left by processes that died\n"
	    "  explain [--json] \"TEXT OR CODE\"   diagnose an error line pasted from any "
	    "framework\n"
	    "  rules validate [DIR...]           check knowledge-base entries (file:line: errors)\n"
	    "  rules list | show ID              the knowledge base\n"
	    "  version\n"
	    "\n"
	    "DATABASE defaults to $P2PGUARD_DB, else p2pguard.db. p2pguard COMMAND --help: its "
	    "options.\n",
	    out);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	p2pg_cli_watch_damage();
	const char *cmd = argv[1];
	if (strcmp(cmd, "run") == 0)
		return p2pg_cmd_run(argc - 1, argv + 1);
	if (strcmp(cmd, "report") == 0)
		return p2pg_cmd_report(argc - 1, argv + 1);
	if (strcmp(cmd, "recover") == 0)
		return p2pg_cmd_recover(argc - 1, argv + 1);
	if (strcmp(cmd, "explain") == 0)
		return p2pg_cmd_explain(argc - 1, argv + 1);
	if (strcmp(cmd, "rules") == 0)
		return p2pg_cmd_rules(argc - 1, argv + 1);
	if (strcmp(cmd, "trace") == 0)
		return p2pg_cmd_trace(argc - 1, argv + 1);
	if (strcmp(cmd, "metrics") == 0)
		return p2pg_cmd_metrics(argc - 1, argv + 1);
	if (strcmp(cmd, "merge") == 0)
		return p2pg_cmd_merge(argc - 1, argv + 1);
	if (strcmp(cmd, "topo") == 0)
		return p2pg_cmd_topo(argc - 1, argv + 1);
	if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
		printf("p2pguard %s\n", P2PGUARD_VERSION);
		return 0;
	}
	if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
		usage(stdout);
		return 0;
	}
	fprintf(stderr, "p2pguard: unknown command '%s'\n", cmd);
	usage(stderr);
	return 2;
}
