/* SPDX-License-Identifier: MIT */
/*
 * p2pguard trace: the database as Chrome trace-event JSON (the "JSON Object Format" that
 * ui.perfetto.dev and chrome://tracing open). One trace process per guarded process, one track per
 * (stream, device pair), each transfer a complete event; failures, probe verdicts, crashes and
 * stalls as instant events.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "cli.h"
#include "dbread.h"

/* Overlapping slices on one track must nest; copies that overlap without nesting (host-timed
 * copies of two threads on one stream) go to a second lane of the same track. */
#define MAX_LANES 16

/*
 * Thread ids, unique in the whole trace: importers (Perfetto's among them) key threads by tid
 * first, and a tid seen under two pids is taken for a thread that moved. A process's own events
 * use its pid (its database id) as tid, as Chrome does for a main thread.
 */
#define STREAM_TID  (1 << 29) /* + the track's index */
#define FAILURE_TID (1 << 30) /* + the process's id */

struct track {
	int64_t process, stream;
	int src, dst;
	int lane;
	double end_us;
};

struct trace {
	FILE *out;
	int64_t base_ns; /* the earliest time in the database: ts 0 */
	bool first;
	struct track *tracks;
	size_t ntracks, cap;
};

static void event_sep(struct trace *t)
{
	fputs(t->first ? "\n" : ",\n", t->out);
	t->first = false;
}

static double ts_us(const struct trace *t, int64_t ns)
{
	return (double)(ns - t->base_ns) / 1000.0;
}

/* The track (tid) of a slice from start to end on (process, stream, pair); names new lanes. */
static int track_for(struct trace *t, int64_t process, int64_t stream, int src, int dst,
		     double start, double end)
{
	int lanes = 0;
	for (size_t k = 0; k < t->ntracks; k++) {
		struct track *tr = &t->tracks[k];
		if (tr->process != process || tr->stream != stream || tr->src != src ||
		    tr->dst != dst)
			continue;
		lanes++;
		if (tr->end_us <= start || lanes == MAX_LANES) {
			if (end > tr->end_us)
				tr->end_us = end;
			return (int)k + STREAM_TID;
		}
	}
	if (t->ntracks == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 32;
		struct track *bigger = realloc(t->tracks, cap * sizeof(*bigger));
		if (!bigger)
			return STREAM_TID - 1; /* out of memory: one shared track, still valid */
		t->tracks = bigger;
		t->cap = cap;
	}
	size_t k = t->ntracks++;
	t->tracks[k] = (struct track){process, stream, src, dst, lanes, end};
	event_sep(t);
	fprintf(t->out,
		"{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%" PRId64
		",\"tid\":%zu,\"args\":{\"name\":\"stream 0x%" PRIx64 " GPU %d->%d%s",
		process, k + STREAM_TID, (uint64_t)stream, src, dst, lanes ? " (overlap " : "");
	if (lanes)
		fprintf(t->out, "%d)", lanes + 1);
	fputs("\"}}", t->out);
	event_sep(t);
	fprintf(t->out,
		"{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":%" PRId64
		",\"tid\":%zu,\"args\":{\"sort_index\":%zu}}",
		process, k + STREAM_TID, k);
	return (int)k + STREAM_TID;
}

static void processes(struct trace *t, sqlite3 *db)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(db,
			       "SELECT id, pid, hostname, rank, local_rank, cmdline, mode, "
			       "guard_version, records_dropped FROM processes ORDER BY "
			       "coalesce(rank, 1 << 30), id",
			       -1, &st, NULL) != SQLITE_OK)
		return;
	for (int order = 0; sqlite3_step(st) == SQLITE_ROW; order++) {
		int64_t id = sqlite3_column_int64(st, 0);
		char name[512];
		const char *cmd = p2pg_cli_col(st, 5);
		if (sqlite3_column_type(st, 3) != SQLITE_NULL && sqlite3_column_int(st, 3) >= 0)
			snprintf(name, sizeof(name), "rank %d pid %d@%s %.200s",
				 sqlite3_column_int(st, 3), sqlite3_column_int(st, 1),
				 p2pg_cli_col(st, 2) ?: "?", cmd ?: "");
		else
			snprintf(name, sizeof(name), "pid %d@%s %.200s", sqlite3_column_int(st, 1),
				 p2pg_cli_col(st, 2) ?: "?", cmd ?: "");
		event_sep(t);
		fprintf(t->out,
			"{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%" PRId64
			",\"tid\":%" PRId64 ",\"args\":{\"name\":",
			id, id);
		p2pg_cli_json_string(t->out, name);
		fputs("}}", t->out);
		event_sep(t);
		fprintf(t->out,
			"{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%" PRId64
			",\"tid\":%" PRId64 ",\"args\":{\"sort_index\":%d}}",
			id, id, order);
		if (sqlite3_column_type(st, 3) != SQLITE_NULL && sqlite3_column_int(st, 3) >= 0) {
			event_sep(t);
			fprintf(t->out,
				"{\"ph\":\"M\",\"name\":\"process_labels\",\"pid\":%" PRId64
				",\"tid\":%" PRId64 ",\"args\":{\"labels\":\"rank %d, mode %s\"}}",
				id, id, sqlite3_column_int(st, 3), p2pg_cli_col(st, 6) ?: "?");
		}
		/* The track that carries the process's peer calls' failures and probe verdicts. */
		event_sep(t);
		fprintf(t->out,
			"{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%" PRId64
			",\"tid\":%" PRId64 ",\"args\":{\"name\":\"failures and probe verdicts\"}}",
			id, FAILURE_TID + id);
	}
}

static void transfers(struct trace *t, sqlite3 *db)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(
		db,
		"SELECT process_id, coalesce(stream, 0), src_device, dst_device, "
		"started_ns, host_ns, gpu_ns, api, bytes, path, status, thread_id, id "
		"FROM transfers WHERE started_ns IS NOT NULL ORDER BY process_id, "
		"stream, src_device, dst_device, started_ns, id",
		-1, &st, NULL) != SQLITE_OK)
		return;
	while (sqlite3_step(st) == SQLITE_ROW) {
		int64_t process = sqlite3_column_int64(st, 0), stream = sqlite3_column_int64(st, 1);
		int src = sqlite3_column_int(st, 2), dst = sqlite3_column_int(st, 3);
		bool gpu =
		    sqlite3_column_type(st, 6) != SQLITE_NULL && sqlite3_column_int64(st, 6) > 0;
		int64_t ns = gpu ? sqlite3_column_int64(st, 6) : sqlite3_column_int64(st, 5);
		int64_t bytes = sqlite3_column_int64(st, 8);
		double start = ts_us(t, sqlite3_column_int64(st, 4)), dur = (double)ns / 1000.0;
		int tid = track_for(t, process, stream, src, dst, start, start + dur);
		event_sep(t);
		fprintf(t->out, "{\"ph\":\"X\",\"cat\":\"transfer\",\"name\":");
		p2pg_cli_json_string(t->out, p2pg_cli_col(st, 7) ?: "?");
		fprintf(t->out,
			",\"pid\":%" PRId64 ",\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,\"args\":{"
			"\"bytes\":%" PRId64 ",\"path\":",
			process, tid, start, dur, bytes);
		p2pg_cli_json_string(t->out, p2pg_cli_col(st, 9) ?: "?");
		fprintf(t->out, ",\"src_device\":%d,\"dst_device\":%d,\"status\":%d,", src, dst,
			sqlite3_column_int(st, 10));
		if (ns > 0)
			fprintf(t->out, "\"GB/s\":%.3f,", (double)bytes / (double)ns);
		/* A GPU-timed slice starts at the call: the copy's GPU start is not recorded. */
		fprintf(t->out,
			"\"timing\":\"%s\",\"thread_id\":%" PRId64 ",\"transfer_id\":%" PRId64 "}}",
			gpu ? "gpu" : "host", (int64_t)sqlite3_column_int64(st, 11),
			(int64_t)sqlite3_column_int64(st, 12));
	}
}

/* Every column of a row as args, except the ones the event itself carries. */
static void row_args(struct trace *t, sqlite3_stmt *st)
{
	bool first = true;
	fputs("\"args\":{", t->out);
	for (int c = 0; c < sqlite3_column_count(st); c++) {
		const char *name = sqlite3_column_name(st, c);
		if (strcmp(name, "process_id") == 0 || sqlite3_column_type(st, c) == SQLITE_NULL)
			continue;
		fputs(first ? "" : ",", t->out);
		first = false;
		p2pg_cli_json_string(t->out, name);
		fputc(':', t->out);
		if (sqlite3_column_type(st, c) == SQLITE_INTEGER)
			fprintf(t->out, "%lld", sqlite3_column_int64(st, c));
		else if (sqlite3_column_type(st, c) == SQLITE_FLOAT)
			fprintf(t->out, "%.6g", sqlite3_column_double(st, c));
		else
			p2pg_cli_json_string(t->out, p2pg_cli_col(st, c));
	}
	fputs("}", t->out);
}

static void failures(struct trace *t, sqlite3 *db)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(
		db,
		"SELECT process_id, started_ns, json_extract(evidence, '$.p2p_probe') "
		"AS probe, api, status, error_name, device, peer_device, action, "
		"rule_id, diagnosis, advice, args, python_stack, backtrace "
		"FROM failures WHERE started_ns IS NOT NULL ORDER BY started_ns",
		-1, &st, NULL) != SQLITE_OK)
		return;
	while (sqlite3_step(st) == SQLITE_ROW) {
		const char *probe = p2pg_cli_col(st, 2);
		char name[256];
		if (probe)
			snprintf(name, sizeof(name), "probe %d->%d: %s", sqlite3_column_int(st, 6),
				 sqlite3_column_int(st, 7), probe);
		else
			snprintf(name, sizeof(name), "%s failed: %s", p2pg_cli_col(st, 3) ?: "?",
				 p2pg_cli_col(st, 5) ?: "error");
		event_sep(t);
		fprintf(t->out, "{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"%s\",\"name\":",
			probe ? "probe" : "failure");
		p2pg_cli_json_string(t->out, name);
		fprintf(t->out, ",\"pid\":%" PRId64 ",\"tid\":%" PRId64 ",\"ts\":%.3f,",
			(int64_t)sqlite3_column_int64(st, 0),
			FAILURE_TID + (int64_t)sqlite3_column_int64(st, 0),
			ts_us(t, sqlite3_column_int64(st, 1)));
		row_args(t, st);
		fputs("}", t->out);
	}
}

/* crashes and stalls: whatever columns the table has (both grow), as process-wide instants. */
static void instants(struct trace *t, sqlite3 *db, const char *table, const char *what)
{
	if (!p2pg_cli_has_table(db, table) || !p2pg_cli_has_column(db, table, "started_ns"))
		return;
	char sql[128];
	snprintf(sql, sizeof(sql), "SELECT * FROM %s WHERE started_ns IS NOT NULL", table);
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		return;
	int pcol = -1, tcol = -1, scol = -1;
	for (int c = 0; c < sqlite3_column_count(st); c++) {
		const char *n = sqlite3_column_name(st, c);
		if (strcmp(n, "process_id") == 0)
			pcol = c;
		else if (strcmp(n, "started_ns") == 0)
			tcol = c;
		else if (strcmp(n, "signal") == 0)
			scol = c;
	}
	if (pcol < 0 || tcol < 0)
		return;
	while (sqlite3_step(st) == SQLITE_ROW) {
		char name[128];
		if (scol >= 0)
			snprintf(name, sizeof(name), "%s: signal %d (%s)", what,
				 sqlite3_column_int(st, scol),
				 strsignal(sqlite3_column_int(st, scol)));
		else
			snprintf(name, sizeof(name), "%s", what);
		event_sep(t);
		fprintf(t->out, "{\"ph\":\"i\",\"s\":\"p\",\"cat\":\"%s\",\"name\":", what);
		p2pg_cli_json_string(t->out, name);
		fprintf(t->out, ",\"pid\":%" PRId64 ",\"tid\":%" PRId64 ",\"ts\":%.3f,",
			(int64_t)sqlite3_column_int64(st, pcol),
			(int64_t)sqlite3_column_int64(st, pcol),
			ts_us(t, sqlite3_column_int64(st, tcol)));
		row_args(t, st);
		fputs("}", t->out);
	}
}

static int64_t earliest_ns(sqlite3 *db)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(db, "SELECT min(started_ns) FROM processes", -1, &st, NULL) !=
		SQLITE_OK ||
	    sqlite3_step(st) != SQLITE_ROW)
		return 0;
	return sqlite3_column_int64(st, 0);
}

static int write_trace(sqlite3 *db, FILE *out)
{
	struct trace t = {.out = out, .base_ns = earliest_ns(db), .first = true};
	fputs("{\"displayTimeUnit\":\"ns\",\"otherData\":{\"producer\":\"p2pguard " P2PGUARD_VERSION
	      "\",\"ts_zero_unix_ns\":\"",
	      out);
	fprintf(out, "%" PRId64 "\"},\"traceEvents\":[", t.base_ns);
	processes(&t, db);
	transfers(&t, db);
	failures(&t, db);
	instants(&t, db, "crashes", "crash");
	instants(&t, db, "stalls", "stall");
	fputs("\n]}\n", out);
	free(t.tracks);
	return ferror(out) ? -EIO : 0;
}

static void usage(FILE *out)
{
	fputs(
	    "Usage: p2pguard trace [DATABASE] [-o FILE]\n"
	    "\n"
	    "Writes the database as Chrome trace-event JSON (ui.perfetto.dev, chrome://tracing):\n"
	    "a process per guarded process (rank in its name), a track per stream and device\n"
	    "pair, each transfer a slice over its GPU time where known (args.timing = gpu; host\n"
	    "time otherwise), failures, probe verdicts, crashes and stalls as instant events.\n"
	    "-o FILE: write there (default: standard output).\n",
	    out);
}

int p2pg_cmd_trace(int argc, char **argv)
{
	const char *db_arg = NULL, *out_path = NULL;
	for (int k = 1; k < argc; k++) {
		if (strcmp(argv[k], "--help") == 0 || strcmp(argv[k], "-h") == 0) {
			usage(stdout);
			return 0;
		} else if (strcmp(argv[k], "-o") == 0 || strcmp(argv[k], "--output") == 0) {
			if (++k == argc) {
				fprintf(stderr, "p2pguard trace: %s needs a file name\n",
					argv[k - 1]);
				return 2;
			}
			out_path = argv[k];
		} else if (argv[k][0] == '-') {
			return p2pg_cli_unknown_option("trace", argv[k]);
		} else if (db_arg) {
			fprintf(stderr,
				"p2pguard trace: one database only (p2pguard merge joins them)\n");
			return 2;
		} else {
			db_arg = argv[k];
		}
	}
	const char *db_path = p2pg_cli_db_path(db_arg);
	_cleanup_sqlite_ sqlite3 *db = NULL;
	if (p2pg_cli_open_read(db_path, &db) < 0)
		return 2;
	FILE *out = stdout;
	if (out_path && strcmp(out_path, "-") != 0) {
		out = fopen(out_path, "we");
		if (!out) {
			fprintf(stderr, "p2pguard trace: cannot write %s: %s\n", out_path,
				strerror(errno));
			return 2;
		}
	}
	int r = write_trace(db, out);
	if (out != stdout && fclose(out) != 0)
		r = -EIO;
	if (r < 0) {
		fprintf(stderr, "p2pguard trace: cannot write %s\n", out_path ?: "standard output");
		return 2;
	}
	return 0;
}
