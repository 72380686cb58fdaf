/* SPDX-License-Identifier: MIT */
/*
 * p2pguard merge OUT.db IN.db...: one database from the databases of many nodes or ranks. A
 * process is keyed by (boot_id, pid, started_ns) as in every database, so merging the same input
 * twice adds nothing; its rows follow it under its new id, hostname and rank kept.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "cli.h"
#include "dbread.h"
#include "merge_db.h"
#include "store.h"

static void usage(FILE *out)
{
	fputs("Usage: p2pguard merge OUT.db IN.db...\n"
	      "\n"
	      "Adds the processes of each input database (nodes, ranks) to OUT.db, created if\n"
	      "needed, with all their rows; hostname and rank kept. A process already in OUT.db\n"
	      "(same boot, pid and start time) is not added twice, so merging again adds only\n"
	      "what is new. Each input's dead spools are imported into it first.\n",
	      out);
}

int p2pg_cmd_merge(int argc, char **argv)
{
	int first = 1;
	for (int k = 1; k < argc; k++) {
		if (strcmp(argv[k], "--help") == 0 || strcmp(argv[k], "-h") == 0) {
			usage(stdout);
			return 0;
		}
		if (strcmp(argv[k], "--") == 0) {
			first = k + 1;
			break;
		}
		if (argv[k][0] == '-')
			return p2pg_cli_unknown_option("merge", argv[k]);
	}
	if (argc - first < 2) {
		fprintf(stderr, "Usage: p2pguard merge OUT.db IN.db...\n");
		return 2;
	}
	const char *out_path = argv[first];
	char out_real[PATH_MAX];
	bool out_exists = realpath(out_path, out_real) != NULL;
	for (int k = first + 1; k < argc; k++) {
		char in_real[PATH_MAX];
		if (!realpath(argv[k], in_real)) {
			fprintf(stderr, "p2pguard: no database at %s\n", argv[k]);
			return 2;
		}
		if (out_exists && strcmp(in_real, out_real) == 0) {
			fprintf(stderr, "p2pguard merge: %s is the output itself\n", argv[k]);
			return 2;
		}
	}
	if (out_exists)
		(void)p2pg_cli_import_dead_spools(out_path, true);
	_cleanup_sqlite_ sqlite3 *db = NULL;
	char err[256];
	if (p2pg_store_open(out_path, &db, err, sizeof(err)) < 0) {
		fprintf(stderr, "p2pguard merge: cannot open %s: %s\n", out_path, err);
		return 2;
	}
	p2pg_merge_prepare(db);
	int total = 0, added = 0, failed = 0;
	for (int k = first + 1; k < argc; k++) {
		int n = 0, fresh = 0;
		(void)p2pg_cli_import_dead_spools(argv[k], true);
		if (p2pg_merge_database(db, argv[k], &n, &fresh) < 0) {
			fprintf(stderr, "p2pguard merge: %s not merged\n", argv[k]);
			failed++;
			continue;
		}
		total += n;
		added += fresh;
	}
	printf("merged %d database%s into %s: %d process%s, %d new\n", argc - first - 1 - failed,
	       argc - first - 1 - failed == 1 ? "" : "s", out_path, total, total == 1 ? "" : "es",
	       added);
	return failed ? 2 : 0;
}
