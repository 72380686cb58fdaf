/* SPDX-License-Identifier: MIT */
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cleanup.h"
#include "cli.h"

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

static void report_processes(sqlite3 *db)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(db,
			       "SELECT count(*), group_concat(pid, ' '), sum(records_dropped), "
			       "sum(recovered) FROM processes",
			       -1, &st, NULL) != SQLITE_OK ||
	    sqlite3_step(st) != SQLITE_ROW)
		return;
	printf("processes: %d (pid %s)", sqlite3_column_int(st, 0), text_or(st, 1, "-"));
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
	if (sqlite3_prepare_v2(
		db,
		"WITH timed AS (SELECT src_device, dst_device, path, api, count(gpu_ns) AS n FROM "
		"transfers GROUP BY 1, 2, 3, 4) "
		"SELECT t.src_device, t.dst_device, t.path, t.api, sum(t.calls), sum(t.bytes), "
		"sum(t.failures), b.p50_gbps, coalesce(g.n, 0), sum(t.folded) FROM peer_totals t "
		"LEFT JOIN peer_bandwidth b ON b.src_device = t.src_device AND b.dst_device = "
		"t.dst_device AND b.path = t.path "
		"LEFT JOIN timed g ON g.src_device = t.src_device AND g.dst_device = t.dst_device "
		"AND g.path = t.path AND g.api = t.api "
		"GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4",
		-1, &st, NULL) != SQLITE_OK)
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
		       sqlite3_column_int64(st, 6), sqlite3_column_int64(st, 8),
		       text_or(st, 7, "-"));
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
	if (sqlite3_prepare_v2(
		db,
		"SELECT api, device, peer_device, status, action, count(*), max(result) "
		"FROM peer_access GROUP BY 1, 2, 3, 4, 5 ORDER BY min(id)",
		-1, &st, NULL) != SQLITE_OK)
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
	if (sqlite3_prepare_v2(
		db,
		"SELECT f.id, f.api, f.status, f.error_name, f.device, f.peer_device, f.action, "
		"f.rule_id, f.diagnosis, f.advice, r.python_where, r.c_where "
		"FROM failures f JOIN failure_report r ON r.id = f.id ORDER BY f.id",
		-1, &st, NULL) != SQLITE_OK)
		return;
	int n = 0;
	while (sqlite3_step(st) == SQLITE_ROW) {
		if (n++ == 0)
			printf("\nfailures\n");
		printf("  #%d %s -> %d %s, devices %d->%d, %s\n", sqlite3_column_int(st, 0),
		       text_or(st, 1, "?"), sqlite3_column_int(st, 2), text_or(st, 3, ""),
		       sqlite3_column_int(st, 4), sqlite3_column_int(st, 5),
		       text_or(st, 6, "passed"));
		const char *where = text_or(st, 10, NULL);
		if (!where || !*where)
			where = text_or(st, 11, "");
		if (*where)
			printf("     where: %s\n", where);
		if (sqlite3_column_type(st, 7) != SQLITE_NULL) {
			char line[200];
			printf("     rule:  %s\n", text_or(st, 7, ""));
			first_line(text_or(st, 8, ""), line, sizeof(line));
			printf("     why:   %s\n", line);
			if (!brief) {
				first_line(text_or(st, 9, ""), line, sizeof(line));
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
	if (sqlite3_prepare_v2(
		db,
		"SELECT c.signal, p.pid, c.backtrace FROM crashes c JOIN processes p ON "
		"p.id = c.process_id ORDER BY c.id",
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
	}
}

int p2pg_cli_report(const char *db_path, bool brief)
{
	_cleanup_sqlite_ sqlite3 *db = NULL;
	if (sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
		fprintf(stderr, "p2pguard: cannot open %s: %s\n", db_path,
			db ? sqlite3_errmsg(db) : "out of memory");
		return 2;
	}
	sqlite3_busy_timeout(db, 5000);
	printf("p2pguard report: %s\n", db_path);
	report_processes(db);
	report_transfers(db);
	report_peer_access(db);
	report_failures(db, brief);
	report_crashes(db);
	return 0;
}

int p2pg_cmd_report(int argc, char **argv)
{
	if (argc > 2 || (argc == 2 && argv[1][0] == '-')) {
		fprintf(stderr, "usage: p2pguard report [DATABASE]\n");
		return 2;
	}
	return p2pg_cli_report(p2pg_cli_db_path(argc == 2 ? argv[1] : NULL), false);
}
