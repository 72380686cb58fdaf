/* SPDX-License-Identifier: MIT */
/*
 * p2pguard metrics: the database as Prometheus text exposition (format 0.0.4), for node_exporter's
 * textfile collector or, with --listen, for a scrape of /metrics (metrics_serve.c). Counters only:
 * a fleet's Prometheus aggregates across nodes and takes rates. The copy families are labelled by
 * host (Hostname, as dcgm-exporter spells it), rank, device pair and path and, where the database
 * has the devices table, by the physical GPUs under dcgm-exporter's own label names (gpu, UUID,
 * pci_bus_id; peer_gpu for the other end, as its P2P status metric has it), so that they join with
 * its series on (Hostname, UUID). This file is the command;
 * the text is written by metrics_write.c (NCCL's families by metrics_nccl.c, the cross-process
 * mappings' by metrics_mappings.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "cli.h"
#include "dbread.h"
#include "metrics.h"
#include "report.h"
#include "safe_path.h"

static void usage(FILE *out)
{
	fputs("Usage: p2pguard metrics [DATABASE] [-o FILE | --listen [HOST:]PORT]\n"
	      "\n"
	      "Prints the database as Prometheus text exposition: copies, bytes, failures, timed\n"
	      "and untimed copies, copy seconds and overflow per host, rank, device pair and path\n"
	      "(with dcgm-exporter's labels Hostname and gpu, UUID, pci_bus_id and peer_gpu,\n"
	      "peer_UUID, peer_pci_bus_id where the database knows the physical GPUs, so that\n"
	      "they join with its series on (Hostname, UUID)); failures by rule,\n"
	      "probe verdicts, crashes, stalls, dropped records; NCCL's operations, bytes and GPU\n"
	      "seconds per rank, communicator and function (with the other end's GPU for sends,\n"
	      "receives and two-rank collectives), its stalls; cross-process mappings opened,\n"
	      "closed, live, their bytes and failed calls per device pair and handle type (the\n"
	      "accessor's GPU as gpu, the owner's as peer_gpu), exports, own-device calls.\n"
	      "\n"
	      "  -o FILE                  write it atomically (node_exporter's textfile collector\n"
	      "                           reads *.prom files)\n"
	      "  --listen [HOST:]PORT     serve GET /metrics, read afresh at each scrape; HOST\n"
	      "                           defaults to 127.0.0.1; PORT in decimal digits, 0 to\n"
	      "                           65535, 0 takes a free one\n"
	      "\n"
	      "Bandwidth: rate(p2pguard_peer_copy_timed_bytes_total) / "
	      "rate(p2pguard_peer_copy_seconds_total);\n"
	      "NCCL's: rate(p2pguard_nccl_gpu_timed_bytes_total) / "
	      "rate(p2pguard_nccl_gpu_seconds_total).\n",
	      out);
}

int p2pg_cmd_metrics(int argc, char **argv)
{
	const char *db_arg = NULL, *out_path = NULL, *listen_addr = NULL;
	for (int k = 1; k < argc; k++) {
		if (strcmp(argv[k], "--help") == 0 || strcmp(argv[k], "-h") == 0) {
			usage(stdout);
			return 0;
		} else if (strcmp(argv[k], "-o") == 0 || strcmp(argv[k], "--listen") == 0) {
			if (k + 1 == argc) {
				fprintf(stderr, "p2pguard metrics: %s needs a value\n", argv[k]);
				return 2;
			}
			*(argv[k][1] == 'o' ? &out_path : &listen_addr) = argv[k + 1];
			k++;
		} else if (argv[k][0] == '-') {
			return p2pg_cli_unknown_option("metrics", argv[k]);
		} else if (db_arg) {
			fprintf(stderr, "p2pguard metrics: one database only\n");
			return 2;
		} else {
			db_arg = argv[k];
		}
	}
	/* A server writes no file: -o beside it would be dropped without a word. */
	if (out_path && listen_addr) {
		fprintf(stderr, "p2pguard metrics: -o FILE or --listen [HOST:]PORT, not both\n");
		return 2;
	}
	const char *db_path = p2pg_cli_db_path(db_arg);
	struct p2pg_listen where;
	/* The address first: a wrong one is a usage error, whatever the database. */
	if (listen_addr && p2pg_metrics_parse_listen(listen_addr, &where) < 0)
		return 2;
	size_t len = 0;
	_cleanup_free_ char *text = p2pg_metrics_render(db_path, &len);
	if (!text)
		return 2;
	if (listen_addr)
		return p2pg_metrics_serve(db_path, &where);
	if (!out_path) {
		fwrite(text, 1, len, stdout);
		return ferror(stdout) ? 2 : 0;
	}
	/* Written beside under an unguessable name and renamed: the collector never reads half a
	 * file, and no link another user planted is followed (safe_path.h). */
	char why[256];
	if (p2pg_replace_file(out_path, text, len, why, sizeof(why)) < 0) {
		fprintf(stderr, "p2pguard metrics: cannot write %s: %s\n", out_path, why);
		return 2;
	}
	return 0;
}
