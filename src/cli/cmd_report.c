/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cleanup.h"
#include "cli.h"
#include "dbread.h"
#include "report.h"
#include "report_mappings.h"

int p2pg_cli_report(const char *db_path, bool brief);

static void human_bytes(long long bytes, char *buf, size_t len)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	double v = (double)bytes;
	int u = 0;
	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", v, units[u]);
}

static const char *text_or(sqlite3_stmt *st, int col, const char *fallback)
{
	const unsigned char *t = sqlite3_column_text(st, col);
	return t ? (const char *)t : fallback;
}

/* The first line of a multi-line text, at most max characters. */
static void first_line(const char *text, char *buf, size_t max)
{
	size_t n = strcspn(text, "\n");
	if (n >= max)
		n = max - 1;
	memcpy(buf, text, n);
	buf[n] = '\0';
}

static void utc_time(int64_t ns, char *buf, size_t len)
{
	time_t s = (time_t)(ns / 1000000000);
	struct tm tm;
	if (!gmtime_r(&s, &tm) || strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm) == 0)
		snprintf(buf, len, "?");
}

static void report_processes(sqlite3 *db)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(db,
			       "WITH p AS (" REPORT_PROCESSES_SQL ") SELECT count(*), "
			       "group_concat(pid, ' '), sum(records_dropped), sum(recovered), "
			       "sum(NOT peer_calls), count(DISTINCT hostname), count(rank >= 0 OR "
			       "NULL) FROM p",
			       -1, &st, NULL) != SQLITE_OK ||
	    sqlite3_step(st) != SQLITE_ROW)
		return;
	printf("processes: %d guarded (pid %s)", sqlite3_column_int(st, 0), text_or(st, 1, "-"));
	printf(", %d made no peer call", sqlite3_column_int(st, 4));
	if (sqlite3_column_int(st, 5) > 1)
		printf(", on %d hosts", sqlite3_column_int(st, 5));
	if (sqlite3_column_int(st, 6) > 0)
		printf(", %d with a rank", sqlite3_column_int(st, 6));
	if (sqlite3_column_int64(st, 2) > 0)
		printf(", %lld records dropped (full rings)", sqlite3_column_int64(st, 2));
	if (sqlite3_column_int64(st, 3) > 0)
		printf(", %lld recovered after an abrupt end", sqlite3_column_int64(st, 3));
	printf("\n");
}

static void report_transfers(sqlite3 *db)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	/* Calls and bytes from peer_totals: every call, rows and overflow (and summary mode's
	 * aggregates) alike; GPU times exist only on rows. */
	if (sqlite3_prepare_v2(db, REPORT_TRANSFERS_SQL, -1, &st, NULL) != SQLITE_OK)
		return;
	bool header = false;
	long long folded = 0;
	while (sqlite3_step(st) == SQLITE_ROW) {
		if (!header) {
			/* "GPU-timed": how many carry gpu_ns; small async copies are sampled. */
			printf("\ntransfers\n  %-8s %-9s %-28s %8s %12s %7s %9s %9s\n", "pair",
			       "path", "api", "calls", "bytes", "failed", "GPU-timed", "p50 GB/s");
			header = true;
		}
		char pair[32], bytes[32];
		snprintf(pair, sizeof(pair), "%d->%d", sqlite3_column_int(st, 0),
			 sqlite3_column_int(st, 1));
		human_bytes(sqlite3_column_int64(st, 5), bytes, sizeof(bytes));
		printf("  %-8s %-9s %-28s %8lld %12s %7lld %9lld %9s\n", pair, text_or(st, 2, "?"),
		       text_or(st, 3, "?"), sqlite3_column_int64(st, 4), bytes,
		       sqlite3_column_int64(st, 6), sqlite3_column_int64(st, 7),
		       text_or(st, 8, "-"));
		folded += sqlite3_column_int64(st, 9);
	}
	if (!header)
		printf("\ntransfers: none recorded\n");
	else if (folded > 0)
		printf("  %lld of these calls were counted without a row of their own (rings full, "
		       "see transfer_overflow)\n",
		       folded);
}

static void report_peer_access(sqlite3 *db)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(db, REPORT_PEER_ACCESS_SQL, -1, &st, NULL) != SQLITE_OK)
		return;
	bool header = false;
	while (sqlite3_step(st) == SQLITE_ROW) {
		if (!header) {
			printf("\npeer access calls\n  %-30s %-8s %7s %-9s %6s\n", "api", "pair",
			       "status", "action", "calls");
			header = true;
		}
		char pair[32];
		snprintf(pair, sizeof(pair), "%d->%d", sqlite3_column_int(st, 1),
			 sqlite3_column_int(st, 2));
		printf("  %-30s %-8s %7d %-9s %6lld", text_or(st, 0, "?"), pair,
		       sqlite3_column_int(st, 3), text_or(st, 4, "passed"),
		       sqlite3_column_int64(st, 5));
		if (sqlite3_column_type(st, 6) != SQLITE_NULL)
			printf("  (answer %d)", sqlite3_column_int(st, 6));
		printf("\n");
	}
}

static void report_failures(sqlite3 *db, bool brief)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(db, REPORT_FAILURES_SQL, -1, &st, NULL) != SQLITE_OK)
		return;
	int n = 0;
	while (sqlite3_step(st) == SQLITE_ROW) {
		if (n++ == 0)
			printf("\nfailures (identical ones grouped)\n");
		printf("  #%d %s -> %d %s, devices %d->%d, %s", sqlite3_column_int(st, 0),
		       text_or(st, 5, "?"), sqlite3_column_int(st, 6), text_or(st, 7, ""),
		       sqlite3_column_int(st, 8), sqlite3_column_int(st, 9),
		       text_or(st, 10, "passed"));
		int count = sqlite3_column_int(st, 1);
		if (count > 1) {
			char first[32], last[32];
			utc_time(sqlite3_column_int64(st, 3), first, sizeof(first));
			utc_time(sqlite3_column_int64(st, 4), last, sizeof(last));
			printf(", %d times in %d process%s (first %s, last %s UTC)", count,
			       sqlite3_column_int(st, 2),
			       sqlite3_column_int(st, 2) == 1 ? "" : "es", first, last);
		}
		printf("\n");
		const char *where = text_or(st, 14, NULL);
		if (!where || !*where)
			where = text_or(st, 15, "");
		if (*where)
			printf("     where: %s\n", where);
		if (sqlite3_column_type(st, 11) != SQLITE_NULL) {
			char line[200];
			printf("     rule:  %s\n", text_or(st, 11, ""));
			first_line(text_or(st, 12, ""), line, sizeof(line));
			printf("     why:   %s\n", line);
			if (!brief) {
				first_line(text_or(st, 13, ""), line, sizeof(line));
				printf("     do:    %s\n", line);
			}
		}
	}
	if (n && brief)
		printf("  (details: sqlite3 -box DB 'SELECT * FROM failure_report')\n");
}

static void report_crashes(sqlite3 *db)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	bool py = p2pg_cli_has_column(db, "crashes", "python_stack");
	if (sqlite3_prepare_v2(
		db,
		py ? "SELECT c.signal, p.pid, c.backtrace, c.python_stack FROM crashes "
		     "c JOIN processes p ON p.id = c.process_id ORDER BY c.id"
		   : "SELECT c.signal, p.pid, c.backtrace, NULL FROM crashes c JOIN "
		     "processes p ON p.id = c.process_id ORDER BY c.id",
		-1, &st, NULL) != SQLITE_OK)
		return;
	int n = 0;
	while (sqlite3_step(st) == SQLITE_ROW) {
		if (n++ == 0)
			printf("\ncrashes\n");
		char line[200];
		first_line(text_or(st, 2, ""), line, sizeof(line));
		printf("  pid %d: signal %d (%s) at %s\n", sqlite3_column_int(st, 1),
		       sqlite3_column_int(st, 0), strsignal(sqlite3_column_int(st, 0)), line);
		const char *pyst = text_or(st, 3, "");
		if (*pyst) {
			first_line(pyst, line, sizeof(line));
			printf("     python: %s\n", line);
		}
	}
}

static void report_stalls(sqlite3 *db)
{
	if (!p2pg_cli_has_table(db, "stalls"))
		return;
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(db, REPORT_STALLS_SQL, -1, &st, NULL) != SQLITE_OK)
		return;
	int n = 0;
	while (sqlite3_step(st) == SQLITE_ROW) {
		if (n++ == 0)
			printf("\nstalls (peer copies that did not finish)\n");
		printf("  pid %d:", sqlite3_column_int(st, 0));
		/* The table's own columns, whatever the guard that wrote it recorded. */
		for (int c = 3; c < sqlite3_column_count(st); c++) {
			const char *name = sqlite3_column_name(st, c);
			if (strcmp(name, "id") == 0 || strcmp(name, "process_id") == 0 ||
			    strcmp(name, "evidence") == 0 ||
			    sqlite3_column_type(st, c) == SQLITE_NULL)
				continue;
			char line[120];
			first_line(text_or(st, c, ""), line, sizeof(line));
			printf(" %s=%s", name, line);
		}
		printf("\n");
	}
}

int p2pg_report_prepare(sqlite3 *db)
{
	char *err = NULL;
	if (sqlite3_exec(db,
			 "CREATE TEMP TABLE IF NOT EXISTS bw AS SELECT * FROM main.peer_bandwidth",
			 NULL, NULL, &err) == SQLITE_OK)
		return 0;
	fprintf(stderr, "p2pguard report: cannot read the peer_bandwidth view: %s\n",
		err ? err : sqlite3_errmsg(db));
	sqlite3_free(err);
	return -EIO;
}

int p2pg_cli_report(const char *db_path, bool brief)
{
	_cleanup_sqlite_ sqlite3 *db = NULL;
	if (p2pg_cli_open_read(db_path, &db) < 0 || p2pg_report_prepare(db) < 0)
		return 2;
	printf("p2pguard report: %s\n", db_path);
	report_processes(db);
	report_transfers(db);
	report_peer_access(db);
	report_failures(db, brief);
	report_crashes(db);
	report_stalls(db);
	p2pg_report_mappings(db);
	return 0;
}

/*
 * Each row of sql as a JSON object keyed by column name, in an array (one: the first row's object
 * alone); key: the member's name.
 */
static void json_rows(sqlite3 *db, FILE *out, const char *key, const char *sql, bool one, bool last)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	fprintf(out, "  \"%s\": ", key);
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
		fprintf(out, "null%s\n", last ? "" : ",");
		return;
	}
	fputs(one ? "" : "[", out);
	for (int n = 0; (!one || n == 0) && sqlite3_step(st) == SQLITE_ROW; n++) {
		fputs(one ? "{" : n ? ",\n    {" : "\n    {", out);
		for (int c = 0; c < sqlite3_column_count(st); c++) {
			if (c)
				fputs(", ", out);
			p2pg_cli_json_string(out, sqlite3_column_name(st, c));
			fputs(": ", out);
			switch (sqlite3_column_type(st, c)) {
			case SQLITE_INTEGER:
				fprintf(out, "%lld", sqlite3_column_int64(st, c));
				break;
			case SQLITE_FLOAT:
				fprintf(out, "%.17g", sqlite3_column_double(st, c));
				break;
			case SQLITE_NULL:
				fputs("null", out);
				break;
			default:
				p2pg_cli_json_string(out, p2pg_cli_col(st, c));
			}
		}
		fputs("}", out);
	}
	fprintf(out, "%s%s\n", one ? "" : "]", last ? "" : ",");
}

static int report_json(const char *db_path)
{
	_cleanup_sqlite_ sqlite3 *db = NULL;
	if (p2pg_cli_open_read(db_path, &db) < 0 || p2pg_report_prepare(db) < 0)
		return 2;
	FILE *out = stdout;
	fputs("{\n  \"database\": ", out);
	p2pg_cli_json_string(out, db_path);
	fputs(",\n", out);
	json_rows(
	    db, out, "summary",
	    "WITH p AS (" REPORT_PROCESSES_SQL
	    ") SELECT count(*) AS processes_guarded, coalesce(sum(NOT peer_calls), 0) AS "
	    "processes_without_peer_calls, coalesce(sum(records_dropped), 0) AS "
	    "records_dropped, (SELECT count(*) FROM transfers) AS transfers, (SELECT count(*) "
	    "FROM failures) AS failures, (SELECT count(*) FROM crashes) AS crashes FROM p",
	    true, false);
	json_rows(db, out, "processes", REPORT_PROCESSES_SQL, false, false);
	json_rows(db, out, "transfers", REPORT_TRANSFERS_SQL, false, false);
	json_rows(db, out, "bandwidth", "SELECT * FROM temp.bw ORDER BY 1, 2, 3", false, false);
	json_rows(db, out, "peer_access", REPORT_PEER_ACCESS_SQL, false, false);
	json_rows(db, out, "failures", REPORT_FAILURES_SQL, false, false);
	json_rows(db, out, "crashes", REPORT_CRASHES_SQL, false, false);
	p2pg_report_mappings_json(db, out);
	if (p2pg_cli_has_table(db, "stalls"))
		json_rows(db, out, "stalls", REPORT_STALLS_SQL, false, true);
	else
		fputs("  \"stalls\": null\n", out);
	fputs("}\n", out);
	return ferror(out) ? 2 : 0;
}

static int report_html(const char *db_path, const char *out_path)
{
	_cleanup_sqlite_ sqlite3 *db = NULL;
	if (p2pg_cli_open_read(db_path, &db) < 0 || p2pg_report_prepare(db) < 0)
		return 2;
	FILE *out = strcmp(out_path, "-") == 0 ? stdout : fopen(out_path, "we");
	if (!out) {
		fprintf(stderr, "p2pguard report: cannot write %s: %s\n", out_path,
			strerror(errno));
		return 2;
	}
	int r = p2pg_report_html(db, db_path, out);
	if (out != stdout && fclose(out) != 0)
		r = -EIO;
	if (r < 0) {
		fprintf(stderr, "p2pguard report: cannot write %s\n", out_path);
		return 2;
	}
	if (out != stdout)
		printf("p2pguard report: wrote %s\n", out_path);
	return 0;
}

static void usage(FILE *out)
{
	fputs("usage: p2pguard report [DATABASE] [--json | --html FILE]\n"
	      "\n"
	      "What the guard recorded: processes (how many made no peer call), transfers by pair\n"
	      "and path, peer-access calls, failures (identical ones grouped, with diagnosis and\n"
	      "advice), crashes and stalls. --json prints the same as one JSON object; --html\n"
	      "FILE writes one self-contained page (P2P matrix, bandwidth over time and sizes per\n"
	      "pair, stacks). Dead processes' spools are imported first.\n",
	      out);
}

int p2pg_cmd_report(int argc, char **argv)
{
	const char *db_arg = NULL, *html = NULL;
	bool json = false;
	for (int k = 1; k < argc; k++) {
		if (strcmp(argv[k], "--help") == 0 || strcmp(argv[k], "-h") == 0) {
			usage(stdout);
			return 0;
		} else if (strcmp(argv[k], "--json") == 0) {
			json = true;
		} else if (strcmp(argv[k], "--html") == 0) {
			if (++k == argc) {
				fprintf(stderr, "p2pguard report: --html needs a file name\n");
				return 2;
			}
			html = argv[k];
		} else if (argv[k][0] == '-') {
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
	const char *db_path = p2pg_cli_db_path(db_arg);
	if (json)
		return report_json(db_path);
	if (html)
		return report_html(db_path, html);
	return p2pg_cli_report(db_path, false);
}
