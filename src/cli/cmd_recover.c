/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "cleanup.h"
#include "cli.h"
#include "p2pguard/spool.h"
#include "store.h"

/* Imports the spools of processes that are gone; shared by `recover` and `run`. */
int p2pg_cli_recover(const char *db_path, bool quiet);

int p2pg_cli_recover(const char *db_path, bool quiet)
{
	char dir[PATH_MAX];
	if (p2pg_spool_dir_for(db_path, dir, sizeof(dir)) < 0) {
		fprintf(stderr, "p2pguard: database path too long: %s\n", db_path);
		return 2;
	}
	_cleanup_sqlite_ sqlite3 *db = NULL;
	char err[256];
	if (p2pg_store_open(db_path, &db, err, sizeof(err)) < 0) {
		fprintf(stderr, "p2pguard: cannot open %s: %s\n", db_path, err);
		return 2;
	}
	int n = p2pg_store_recover_dir(db, dir, NULL, P2PG_RECORD_ALL);
	if (n < 0) {
		fprintf(stderr, "p2pguard: cannot read %s: %s\n", dir, strerror(-n));
		return 2;
	}
	if (!quiet || n > 0)
		printf("recovered %d spool file%s into %s\n", n, n == 1 ? "" : "s", db_path);
	return 0;
}

int p2pg_cmd_recover(int argc, char **argv)
{
	if (argc > 2 || (argc == 2 && argv[1][0] == '-')) {
		fprintf(stderr, "usage: p2pguard recover [DATABASE]\n");
		return 2;
	}
	return p2pg_cli_recover(p2pg_cli_db_path(argc == 2 ? argv[1] : NULL), false);
}
