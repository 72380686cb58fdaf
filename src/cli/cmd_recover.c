/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cleanup.h"
#include "cli.h"
#include "dbread.h"
#include "p2pguard/spool.h"
#include "store.h"

/* Imports the spools of processes that are gone; shared by `recover` and `run`. */
int p2pg_cli_recover(const char *db_path, bool quiet);

int p2pg_cli_recover(const char *db_path, bool quiet)
{
	return p2pg_cli_import_dead_spools(db_path, quiet) < 0 ? 2 : 0;
}

int p2pg_cmd_recover(int argc, char **argv)
{
	if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		printf(
		    "Usage: p2pguard recover [DATABASE]\n\nImports the spools of guarded processes "
		    "that are gone (killed, crashed) into DATABASE.\n");
		return 0;
	}
	if (argc == 2 && argv[1][0] == '-')
		return p2pg_cli_unknown_option("recover", argv[1]);
	if (argc > 2) {
		fprintf(stderr, "Usage: p2pguard recover [DATABASE]\n");
		return 2;
	}
	const char *db = p2pg_cli_db_path(argc == 2 ? argv[1] : NULL);
	char dir[PATH_MAX], err[256];
	bool has_spools = p2pg_spool_dir_for(db, dir, sizeof(dir)) == 0 && access(dir, F_OK) == 0;
	bool has_db = access(db, F_OK) == 0;
	/* Nothing to recover from and nothing to recover into: a mistyped name, said as such. */
	if (!has_db && !has_spools) {
		fprintf(stderr, "p2pguard: no database at %s (nor a spool folder %s)\n", db, dir);
		return 2;
	}
	/* No spool to import: still, a database that is not ours is not called recovered into. */
	if (!has_spools && p2pg_store_check(db, err, sizeof(err)) < 0) {
		fprintf(stderr, "p2pguard: %s: %s\n", db, err);
		return 2;
	}
	return p2pg_cli_recover(db, false);
}
