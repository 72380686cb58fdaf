/* SPDX-License-Identifier: MIT */
/*
 * p2pguard trace: its options, and the processes and times they choose; trace_write.c writes the
 * trace.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cleanup.h"
#include "cli.h"
#include "dbread.h"
#include "output_file.h"
#include "trace.h"

static void usage(FILE *out)
{
	fputs(
	    "Usage: p2pguard trace [DATABASE] [-o FILE] [--rank LIST] [--pid LIST] [--host NAMES]\n"
	    "                      [--from TIME] [--to TIME] [--limit N] [--clock CLOCK]\n"
	    "\n"
	    "Writes the database as Chrome trace-event JSON (ui.perfetto.dev): a process per\n"
	    "guarded process (rank, host and pid in its name), a track per stream and device\n"
	    "pair (named with the physical GPUs where the database knows them), each transfer a\n"
	    "slice over its GPU time where known (args.timing = gpu; the call's host time\n"
	    "otherwise), failures, probe verdicts, crashes and stalls as instant events; a\n"
	    "track per rank's NCCL communicator, each NCCL operation a slice from its start to\n"
	    "its end as the host saw them (GPU time, bytes, peer, algorithm and protocol in\n"
	    "args), NCCL stalls and unfinished operations as instants; a \"mappings\" track per\n"
	    "process, each cross-process mapping a slice from its open or map to its close or\n"
	    "unmap (to the process's last moment when never closed, named live), exports and\n"
	    "failed mapping calls as instants.\n"
	    "\n"
	    "  -o FILE         write there (default: standard output)\n"
	    "  --rank LIST     only these ranks: 0-3,8\n"
	    "  --pid LIST      only these pids\n"
	    "  --host NAMES    only these hosts: node-01,node-02\n"
	    "  --from TIME     only what started at or after TIME, and --to before it: Unix\n"
	    "  --to TIME       seconds (1795500000.25), UTC (2026-11-24T06:00:00) or seconds\n"
	    "                  after the first process started (+90)\n"
	    "  --limit N       the first N transfers by start time (and the first N NCCL\n"
	    "                  operations, the first N mapping events)\n"
	    "  --clock CLOCK   kineto (default): microseconds from PyTorch Kineto's base,\n"
	    "                  written as baseTimeNanoseconds, so a PyTorch profiler trace of the\n"
	    "                  same run lines up; unix: microseconds since 1970; relative: 0 at\n"
	    "                  the first process's start\n"
	    "\n"
	    "A trace past 256 MB is said on stderr before it is written.\n",
	    out);
}

/* "1795500000.25", "2026-11-24T06:00:00[.5]" (UTC) or "+90" (after the first start). */
static int parse_time(sqlite3 *db, const char *text, int64_t *ret)
{
	char *end;
	if (text[0] == '+') {
		double s = strtod(text + 1, &end);
		if (*end || end == text + 1 || !(s >= 0))
			return -EINVAL;
		*ret = p2pg_cli_scalar(db, "SELECT min(started_ns) FROM processes") +
		       (int64_t)llround(s * 1e9);
		return 0;
	}
	double s = strtod(text, &end);
	if (!*end && end != text && s >= 0) {
		*ret = (int64_t)llround(s * 1e9);
		return 0;
	}
	struct tm tm = {0};
	const char *rest = strptime(text, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!rest)
		rest = strptime(text, "%Y-%m-%d %H:%M:%S", &tm);
	if (!rest)
		return -EINVAL;
	double frac = 0;
	if (*rest == '.') {
		frac = strtod(rest, &end);
		rest = end;
	}
	if (*rest == 'Z')
		rest++;
	if (*rest)
		return -EINVAL;
	*ret = (int64_t)timegm(&tm) * 1000000000LL + (int64_t)llround(frac * 1e9);
	return 0;
}

/* The processes --rank, --pid and --host leave, as temp.chosen. */
static int choose(sqlite3 *db, const char *ranks, const char *pids, const char *hosts)
{
	sqlite3_str *sql = sqlite3_str_new(db);
	sqlite3_str_appendall(sql, "CREATE TEMP TABLE chosen AS SELECT id FROM main.processes "
				   "WHERE 1");
	const char *lists[2] = {ranks, pids}, *cols[2] = {"rank", "pid"};
	int l = 0;
	for (; l < 2; l++) {
		if (!lists[l])
			continue;
		sqlite3_str_appendf(sql, " AND (0");
		for (const char *p = lists[l]; *p;) {
			char *end;
			long lo = strtol(p, &end, 10), hi = lo;
			if (end == p)
				goto bad;
			if (*end == '-') {
				const char *q = end + 1;
				hi = strtol(q, &end, 10);
				if (end == q || hi < lo)
					goto bad;
			}
			sqlite3_str_appendf(sql, " OR %s BETWEEN %ld AND %ld", cols[l], lo, hi);
			if (*end && *end != ',')
				goto bad;
			p = *end ? end + 1 : end;
		}
		sqlite3_str_appendf(sql, ")");
	}
	if (hosts) {
		sqlite3_str_appendf(sql, " AND hostname IN (''");
		for (const char *p = hosts; *p;) {
			size_t n = strcspn(p, ",");
			sqlite3_str_appendf(sql, ", %.*Q", (int)n, p);
			p += n + (p[n] == ',');
		}
		sqlite3_str_appendf(sql, ")");
	}
	char *text = sqlite3_str_finish(sql), *err = NULL;
	int rc = text ? sqlite3_exec(db, text, NULL, NULL, &err) : SQLITE_NOMEM;
	sqlite3_free(text);
	if (rc != SQLITE_OK) {
		fprintf(stderr, "p2pguard trace: cannot choose the processes: %s\n",
			err ? err : "out of memory");
		sqlite3_free(err);
		return -EIO;
	}
	return p2pg_cli_restrict(db);
bad:
	sqlite3_free(sqlite3_str_finish(sql));
	fprintf(stderr, "p2pguard trace: --%s wants numbers and ranges such as 0-3,8, got %s\n",
		cols[l], lists[l]);
	return -EINVAL;
}

int p2pg_cmd_trace(int argc, char **argv)
{
	const char *db_arg = NULL, *out_path = NULL, *ranks = NULL, *pids = NULL, *hosts = NULL;
	const char *from = NULL, *to = NULL;
	struct trace_options opt;
	trace_options_init(&opt);
	for (int k = 1; k < argc; k++) {
		const char *a = argv[k];
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			usage(stdout);
			return 0;
		}
		static const char *const valued[] = {"-o",    "--output", "--rank",
						     "--pid", "--host",	  "--from",
						     "--to",  "--limit",  "--clock"};
		int v = -1;
		for (int j = 0; j < 9; j++)
			if (strcmp(a, valued[j]) == 0)
				v = j;
		if (v < 0 && a[0] == '-' && a[1])
			return p2pg_cli_unknown_option("trace", a);
		if (v < 0) {
			if (db_arg) {
				fprintf(stderr, "p2pguard trace: one database only (p2pguard merge "
						"joins them)\n");
				return 2;
			}
			db_arg = a;
			continue;
		}
		if (++k == argc) {
			fprintf(stderr, "p2pguard trace: %s needs a value\n", a);
			return 2;
		}
		const char *val = argv[k];
		char *end;
		switch (v) {
		case 0:
		case 1:
			out_path = val;
			break;
		case 2:
			ranks = val;
			break;
		case 3:
			pids = val;
			break;
		case 4:
			hosts = val;
			break;
		case 5:
			from = val;
			break;
		case 6:
			to = val;
			break;
		case 7:
			opt.limit = strtoll(val, &end, 10);
			if (*end || opt.limit <= 0) {
				fprintf(stderr,
					"p2pguard trace: --limit wants a positive number, got "
					"%s\n",
					val);
				return 2;
			}
			break;
		default:
			if (strcmp(val, "kineto") == 0)
				opt.clock = TRACE_CLOCK_KINETO;
			else if (strcmp(val, "unix") == 0)
				opt.clock = TRACE_CLOCK_UNIX;
			else if (strcmp(val, "relative") == 0)
				opt.clock = TRACE_CLOCK_RELATIVE;
			else {
				fprintf(stderr,
					"p2pguard trace: --clock wants kineto, unix or "
					"relative, got %s\n",
					val);
				return 2;
			}
		}
	}
	const char *db_path = p2pg_cli_db_path(db_arg);
	_cleanup_sqlite_ sqlite3 *db = NULL;
	if (p2pg_cli_open_read(db_path, &db) < 0)
		return 2;
	if ((from && parse_time(db, from, &opt.from_ns) < 0) ||
	    (to && parse_time(db, to, &opt.to_ns) < 0)) {
		fprintf(stderr,
			"p2pguard trace: a time is Unix seconds, YYYY-MM-DDTHH:MM:SS (UTC) "
			"or +SECONDS after the first process started, got %s\n",
			from && parse_time(db, from, &opt.from_ns) < 0 ? from : to);
		return 2;
	}
	if (to)
		opt.to_ns--; /* --to is exclusive */
	if ((ranks || pids || hosts) && choose(db, ranks, pids, hosts) < 0)
		return 2;
	struct cli_output out;
	if (cli_output_open(&out, out_path ? out_path : "-", "trace") < 0)
		return 2;
	int r = trace_write(db, &opt, out.f);
	if (r >= 0 && p2pg_cli_damage()) {
		fprintf(stderr, "p2pguard trace: %s is damaged (%s); no trace is written\n",
			db_path, p2pg_cli_damage());
		cli_output_close(&out, false);
		return 2;
	}
	if (cli_output_close(&out, r >= 0) < 0)
		r = -EIO;
	if (r < 0) {
		if (r == -EIO)
			fprintf(stderr, "p2pguard trace: cannot write %s\n",
				out_path ?: "standard output");
		return 2;
	}
	return 0;
}
