/* SPDX-License-Identifier: MIT */
/*
 * p2pguard report: opening the database for every form of the report, choosing the processes
 * (all, or one run's), and the command's options. The forms are report_text.c, report_json.c and
 * report_html.c.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "cli.h"
#include "dbread.h"
#include "output_file.h"
#include "report.h"

/* The processes of one `p2pguard run`: by the run id its guard stored, else (an older guard
 * library) those started while it ran. */
static int choose_run(struct report *r)
{
	const struct report_options *o = r->opt;
	bool has_run = p2pg_cli_has_column(r->db, "processes", "run_id");
	char *sql = NULL;
	int64_t n = 0;
	if (has_run) {
		sql = sqlite3_mprintf("CREATE TEMP TABLE chosen AS SELECT id FROM main.processes "
				      "WHERE run_id = %Q",
				      o->run_id);
		_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
		if (sqlite3_prepare_v2(r->db,
				       "SELECT count(*) FROM main.processes WHERE run_id = ?1", -1,
				       &st, NULL) == SQLITE_OK) {
			sqlite3_bind_text(st, 1, o->run_id, -1, SQLITE_STATIC);
			if (sqlite3_step(st) == SQLITE_ROW)
				n = sqlite3_column_int64(st, 0);
		}
		snprintf(r->selection, sizeof(r->selection), "the processes of run %s", o->run_id);
	}
	if (n == 0 && o->run_started_ns > 0) {
		sqlite3_free(sql);
		sql = sqlite3_mprintf("CREATE TEMP TABLE chosen AS SELECT id FROM main.processes "
				      "WHERE started_ns >= %lld %s",
				      (long long)o->run_started_ns,
				      has_run ? "AND run_id IS NULL" : "");
		snprintf(r->selection, sizeof(r->selection),
			 "the processes started during this run (its guard library stores no run "
			 "id)");
	}
	char *err = NULL;
	int rc = sql ? sqlite3_exec(r->db, sql, NULL, NULL, &err) : SQLITE_ERROR;
	sqlite3_free(sql);
	if (rc != SQLITE_OK) {
		fprintf(stderr, "p2pguard report: cannot choose the run's processes: %s\n",
			err ? err : "no way to tell them");
		sqlite3_free(err);
		return -EIO;
	}
	return p2pg_cli_restrict(r->db);
}

int report_open(struct report *r, const struct report_options *opt, bool with_series)
{
	memset(r, 0, sizeof(*r));
	r->opt = opt;
	r->width = fmt_width(stdout);
	if (p2pg_cli_open_read(opt->db_path, &r->db) < 0)
		return 2;
	if (opt->run_id && choose_run(r) < 0)
		return 2;
	r->has_devices = p2pg_cli_has_table(r->db, "devices");
	r->has_stalls = p2pg_cli_has_table(r->db, "stalls");
	r->has_overflow = p2pg_cli_has_table(r->db, "transfer_overflow");
	r->crash_python = p2pg_cli_has_column(r->db, "crashes", "python_stack");
	progress_start(&r->progress, "p2pguard report");
	progress_attach(&r->progress, r->db);
	if (report_scan_run(r->db, &r->scan, with_series, &r->progress) < 0)
		return 2;
	progress_stage(&r->progress, "reading NCCL's operations", 0);
	/* Said on stderr when it fails; the rest of the report stands without it. */
	(void)nccl_scan_run(r->db, &r->nccl, false);
	progress_stage(&r->progress, "reading the cross-process mappings", 0);
	(void)mapping_scan_run(r->db, &r->mappings);
	return 0;
}

void report_close(struct report *r)
{
	progress_end(&r->progress);
	report_scan_free(&r->scan);
	nccl_scan_free(&r->nccl);
	mapping_scan_free(&r->mappings);
	sqlite3_close(r->db);
	r->db = NULL;
}

int p2pg_cli_report(const struct report_options *opt);

int p2pg_cli_report(const struct report_options *opt)
{
	struct report r;
	int rc = report_open(&r, opt, false);
	if (rc == 0)
		rc = report_text(&r, stdout);
	report_close(&r);
	return rc;
}

static int report_to_json(const struct report_options *opt)
{
	struct report r;
	int rc = report_open(&r, opt, false);
	if (rc == 0)
		rc = report_json(&r, stdout);
	report_close(&r);
	return rc;
}

static int report_to_html(const struct report_options *opt, const char *out_path)
{
	struct report r;
	int rc = report_open(&r, opt, true);
	if (rc != 0) {
		report_close(&r);
		return rc;
	}
	struct cli_output out;
	if (cli_output_open(&out, out_path, "report") < 0) {
		report_close(&r);
		return 2;
	}
	int e = p2pg_report_html(&r, out.f);
	e = cli_output_close(&out, e >= 0) < 0 ? -EIO : e;
	report_close(&r);
	if (e < 0) {
		fprintf(stderr, "p2pguard report: cannot write %s\n", out_path);
		return 2;
	}
	if (strcmp(out_path, "-") != 0)
		printf("p2pguard report: wrote %s\n", out_path);
	return 0;
}

static void usage(FILE *out)
{
	fputs(
	    "Usage: p2pguard report [DATABASE] [--json | --html FILE] [--run ID] [--verbose]\n"
	    "\n"
	    "What the guard recorded: processes (counted per host and mode), transfers by device\n"
	    "pair and path, peer-access calls, failures grouped by call, error and rule across\n"
	    "pairs, ranks and hosts (with diagnosis and advice), crashes grouped by signal and\n"
	    "top frames, stalls; NCCL's operations that did not finish (first), its traffic per\n"
	    "device pair (nccl_pair_bandwidth), communicators and operations; cross-process\n"
	    "mappings per device pair, owner -> accessor (mapping_pairs: opened, closed, live\n"
	    "at the end, bytes, handle types, failed calls), per process and call. Bandwidth is\n"
	    "computed only from copies with a GPU time (asynchronous or synchronous: a call\n"
	    "returns before its copy ends); copies without one are counted as untimed, never "
	    "divided\n"
	    "(NCCL's: from operations with a GPU time). Dead processes' spools are imported "
	    "first.\n"
	    "\n"
	    "  --json       the same as one JSON object\n"
	    "  --html FILE  one self-contained page (FILE - : standard output)\n"
	    "  --run ID     only the processes of that `p2pguard run` (processes.run_id, 16 hex\n"
	    "               digits)\n"
	    "  --verbose    every pid and every pair instead of summaries\n"
	    "\n"
	    "DATABASE defaults to $P2PGUARD_DB, else p2pguard.db. Progress goes to stderr when\n"
	    "a report takes over a second.\n",
	    out);
}

int p2pg_cmd_report(int argc, char **argv)
{
	const char *db_arg = NULL, *html = NULL;
	struct report_options opt = {0};
	bool json = false;
	for (int k = 1; k < argc; k++) {
		if (strcmp(argv[k], "--help") == 0 || strcmp(argv[k], "-h") == 0) {
			usage(stdout);
			return 0;
		} else if (strcmp(argv[k], "--json") == 0) {
			json = true;
		} else if (strcmp(argv[k], "--verbose") == 0 || strcmp(argv[k], "-v") == 0) {
			opt.verbose = true;
		} else if (strcmp(argv[k], "--html") == 0 || strcmp(argv[k], "--run") == 0) {
			if (++k == argc) {
				fprintf(stderr, "p2pguard report: %s needs a value\n", argv[k - 1]);
				return 2;
			}
			*(argv[k - 1][2] == 'h' ? &html : &opt.run_id) = argv[k];
		} else if (argv[k][0] == '-' && argv[k][1]) {
			return p2pg_cli_unknown_option("report", argv[k]);
		} else if (db_arg) {
			fprintf(stderr, "p2pguard report: one database only (p2pguard merge joins "
					"them)\n");
			return 2;
		} else {
			db_arg = argv[k];
		}
	}
	if (json && html) {
		fprintf(stderr, "p2pguard report: --json or --html, not both\n");
		return 2;
	}
	/* Only what `p2pguard run` writes can name a run: anything else would select no process
	 * and read as a run that did nothing. */
	if (opt.run_id &&
	    (strlen(opt.run_id) != 16 || strspn(opt.run_id, "0123456789abcdef") != 16)) {
		fprintf(stderr,
			"p2pguard report: --run wants a run id, 16 hex digits in lower case as "
			"p2pguard run names it, got %s\n",
			opt.run_id);
		return 2;
	}
	opt.db_path = p2pg_cli_db_path(db_arg);
	if (json)
		return report_to_json(&opt);
	if (html)
		return report_to_html(&opt, html);
	return p2pg_cli_report(&opt);
}
