/* SPDX-License-Identifier: MIT */
/*
 * The trace itself (cmd_trace.c reads the options): the database as Chrome trace-event JSON (the
 * "JSON Object Format" that ui.perfetto.dev and chrome://tracing open). One trace process per
 * guarded process, named by rank, host and pid; one track per (stream, device pair), named with the
 * physical GPUs where the database knows them; each transfer a complete event; failures, probe
 * verdicts, crashes and stalls as instant events. Timestamps are microseconds from PyTorch's Kineto
 * base by default, so that a PyTorch profiler trace of the same run lines up with this one.
 *
 * A million rows make a quarter of a gigabyte of JSON: the rows are read once into memory, sorted
 * per track here (SQLite's sort took as long as the rest), and written through a buffer with
 * hand-made number formatting; filters (rank, pid, host, time, a limit) make it smaller.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cleanup.h"
#include "cli.h"
#include "dbread.h"
#include "report.h"
#include "trace.h"
#include "trace_mappings.h"
#include "trace_nccl.h"
#include "trace_out.h"
#include "trace_read.h"

/* Kineto makes every timestamp relative to the start of the current three-month interval of the
 * Unix clock (libkineto/src/output_json.h, ChromeTraceBaseTime: 7889238 s), so that traces of
 * several ranks share one base; we take the same base, from the earliest time in the trace. */
#define KINETO_INTERVAL_NS (7889238LL * 1000000000LL)
#define WARN_BYTES	   (256LL << 20) /* a trace larger than this is hard to open: said */
#define BYTES_PER_SLICE	   240		 /* what a transfer costs in the file, about */
#define BYTES_PER_NCCL	   420		 /* what an NCCL operation costs, about */
#define BYTES_PER_MAPPING  450		 /* what a mapping's slice or instant costs, about */

void trace_options_init(struct trace_options *o)
{
	memset(o, 0, sizeof(*o));
	o->clock = TRACE_CLOCK_KINETO;
	o->from_ns = INT64_MIN;
	o->to_ns = INT64_MAX;
}

/* ---- the trace ---- */

/* Thread ids, unique in the whole trace: importers (Perfetto's among them) key threads by tid
 * first, and a tid seen under two pids is taken for a thread that moved. A process's own events
 * use its database id as tid, as Chrome does for a main thread. */
#define STREAM_TID  (1 << 29) /* + the track's index */
#define FAILURE_TID (1 << 30) /* + the process's id */
#define MAX_LANES   16

struct row {
	int64_t start, dur, id, bytes, thread;
	int32_t track, status;
	uint16_t api;
	uint8_t path, gpu_timed;
};

struct track {
	int64_t process, stream;
	int src, dst;
	int32_t first_lane; /* the track whose lanes this one continues, or itself */
	int lane;
	int64_t end;
};

struct trace {
	sqlite3 *db;
	const struct trace_options *opt;
	int64_t base_ns;
	struct trace_out *out;
	struct track *tracks;
	size_t ntracks, captracks;
	struct imap track_index;
	struct row *rows;
	size_t nrows, caprows;
	char **apis;
	size_t napis;
	bool devices;
};

static int64_t ts(const struct trace *t, int64_t ns)
{
	return ns - t->base_ns;
}

static int track_of(struct trace *t, int64_t process, int64_t stream, int src, int dst)
{
	uint64_t key = (uint64_t)process * 0x9e3779b97f4a7c15ULL ^ (uint64_t)stream * 31 ^
		       (uint64_t)(uint16_t)src << 48 ^ (uint64_t)(uint16_t)dst << 32;
	key += key == 0;
	int32_t i = imap_get(&t->track_index, key);
	if (i >= 0 && t->tracks[i].process == process && t->tracks[i].stream == stream &&
	    t->tracks[i].src == src && t->tracks[i].dst == dst)
		return i;
	for (size_t k = 0; i >= 0 && k < t->ntracks; k++) /* a hash collision: look */
		if (t->tracks[k].process == process && t->tracks[k].stream == stream &&
		    t->tracks[k].src == src && t->tracks[k].dst == dst && t->tracks[k].lane == 0)
			return (int)k;
	if (t->ntracks == t->captracks) {
		size_t cap = t->captracks ? t->captracks * 2 : 64;
		struct track *bigger = realloc(t->tracks, cap * sizeof(*bigger));
		if (!bigger)
			return -1;
		t->tracks = bigger;
		t->captracks = cap;
	}
	if (i < 0 && imap_put(&t->track_index, key, (int32_t)t->ntracks) < 0)
		return -1;
	t->tracks[t->ntracks] =
	    (struct track){process, stream, src, dst, (int32_t)t->ntracks, 0, INT64_MIN};
	return (int)t->ntracks++;
}

static int api_of(struct trace *t, const char *api)
{
	for (size_t k = t->napis; k-- > 0;)
		if (strcmp(t->apis[k], api) == 0)
			return (int)k;
	char **bigger = realloc(t->apis, (t->napis + 1) * sizeof(*bigger));
	if (!bigger)
		return 0;
	t->apis = bigger;
	t->apis[t->napis] = strdup(api);
	return t->apis[t->napis] ? (int)t->napis++ : 0;
}

static int cmp_row(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	if (x->track != y->track)
		return x->track - y->track;
	if (x->start != y->start)
		return (x->start > y->start) - (x->start < y->start);
	return (x->id > y->id) - (x->id < y->id);
}

static int read_rows(struct trace *t, struct report_progress *progress)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(
		t->db,
		"SELECT process_id, coalesce(stream, 0), src_device, dst_device, "
		"started_ns, host_ns, gpu_ns, api, bytes, path, status, thread_id, id "
		"FROM transfers WHERE started_ns BETWEEN ?1 AND ?2",
		-1, &st, NULL) != SQLITE_OK) {
		fprintf(stderr, "p2pguard trace: cannot read the transfers: %s\n",
			sqlite3_errmsg(t->db));
		return -EIO;
	}
	sqlite3_bind_int64(st, 1, t->opt->from_ns);
	sqlite3_bind_int64(st, 2, t->opt->to_ns);
	progress_stage(progress, "reading transfers", 0);
	while (sqlite3_step(st) == SQLITE_ROW) {
		if (t->nrows == t->caprows) {
			size_t cap = t->caprows ? t->caprows * 2 : 4096;
			struct row *bigger = realloc(t->rows, cap * sizeof(*bigger));
			if (!bigger) {
				fprintf(stderr,
					"p2pguard trace: out of memory at %zu transfers (narrow "
					"with --from/--to, --rank or --limit)\n",
					t->nrows);
				return -ENOMEM;
			}
			t->rows = bigger;
			t->caprows = cap;
		}
		int track = track_of(t, sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1),
				     sqlite3_column_int(st, 2), sqlite3_column_int(st, 3));
		if (track < 0)
			return -ENOMEM;
		bool gpu = sqlite3_column_int64(st, 6) > 0;
		const char *path = p2pg_cli_col(st, 9);
		int p = RP_OTHER;
		for (int k = 0; k < RP_OTHER; k++)
			if (path && strcmp(path, report_path_names[k]) == 0)
				p = k;
		t->rows[t->nrows++] = (struct row){
		    .start = sqlite3_column_int64(st, 4),
		    .dur = gpu ? sqlite3_column_int64(st, 6) : sqlite3_column_int64(st, 5),
		    .id = sqlite3_column_int64(st, 12),
		    .bytes = sqlite3_column_int64(st, 8),
		    .thread = sqlite3_column_int64(st, 11),
		    .track = track,
		    .status = sqlite3_column_int(st, 10),
		    .api = (uint16_t)api_of(t, p2pg_cli_col(st, 7) ? p2pg_cli_col(st, 7) : "?"),
		    .path = (uint8_t)p,
		    .gpu_timed = gpu};
		if ((t->nrows & 0xffff) == 0)
			progress_tick(progress, 0);
	}
	/* --limit N: the first N transfers by start time. */
	if (trace_keep_first(t->rows, &t->nrows, sizeof(*t->rows), offsetof(struct row, start),
			     t->opt->limit, "transfers") < 0)
		return -ENOMEM;
	progress_stage(progress, "sorting transfers", 0);
	sort_n(t->rows, t->nrows, sizeof(*t->rows), cmp_row);
	return 0;
}

/* "GPU-1a2b3c4d 00000000:18:00.0" for a process's device ordinal, where the devices table knows
 * it ("" otherwise). */
static void physical_gpu(struct trace *t, int64_t process, int ordinal, char *buf, size_t len)
{
	buf[0] = '\0';
	if (!t->devices)
		return;
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(t->db,
			       "SELECT uuid, pci_bus_id, physical_index FROM devices WHERE "
			       "process_id = ?1 AND ordinal = ?2",
			       -1, &st, NULL) != SQLITE_OK)
		return;
	sqlite3_bind_int64(st, 1, process);
	sqlite3_bind_int(st, 2, ordinal);
	if (sqlite3_step(st) != SQLITE_ROW)
		return;
	const char *uuid = p2pg_cli_col(st, 0), *bus = p2pg_cli_col(st, 1);
	snprintf(buf, len, "%.12s %s", uuid ? uuid : "?", bus ? bus : "?");
	if (sqlite3_column_type(st, 2) != SQLITE_NULL && sqlite3_column_int(st, 2) != ordinal)
		snprintf(buf + strlen(buf), len - strlen(buf), " nvidia-smi %d",
			 sqlite3_column_int(st, 2));
}

/* "stream 0x7f00 GPU 0->1 (GPU-1a2b3c4d 00000000:18:00.0 -> GPU-5e6f7a8b 00000000:2A:00.0)" */
static void track_name(struct trace *t, size_t k)
{
	struct track *tr = &t->tracks[k];
	char src[80], dst[80], name[320];
	physical_gpu(t, tr->process, tr->src, src, sizeof(src));
	physical_gpu(t, tr->process, tr->dst, dst, sizeof(dst));
	int n = snprintf(name, sizeof(name), "stream 0x%" PRIx64 " GPU %d->%d",
			 (uint64_t)tr->stream, tr->src, tr->dst);
	if (src[0] && n < (int)sizeof(name))
		n += snprintf(name + n, sizeof(name) - (size_t)n, " (%s -> %s)", src,
			      dst[0] ? dst : "?");
	if (tr->lane && n < (int)sizeof(name))
		snprintf(name + n, sizeof(name) - (size_t)n, " (overlap %d)", tr->lane + 1);
	trace_put_track_meta(t->out, tr->process, (int64_t)k + STREAM_TID, name, (int64_t)k);
}

/* The lane (a track of its own) a slice goes to: slices of one track must nest or follow, so one
 * that overlaps the last without nesting opens the next lane. */
static int lane_for(struct trace *t, int track, int64_t start, int64_t end)
{
	int32_t k = track;
	for (int lane = 0;; lane++) {
		struct track *tr = &t->tracks[k];
		if (tr->end <= start || lane == MAX_LANES - 1) {
			if (end > tr->end)
				tr->end = end;
			return k;
		}
		/* the next lane of this track: made on first need */
		int32_t next = -1;
		for (size_t j = (size_t)k + 1; j < t->ntracks; j++)
			if (t->tracks[j].first_lane == track && t->tracks[j].lane == lane + 1) {
				next = (int32_t)j;
				break;
			}
		if (next < 0) {
			if (t->ntracks == t->captracks) {
				size_t cap = t->captracks * 2;
				struct track *bigger = realloc(t->tracks, cap * sizeof(*bigger));
				if (!bigger)
					return k;
				t->tracks = bigger;
				t->captracks = cap;
			}
			struct track *first = &t->tracks[track];
			t->tracks[t->ntracks] =
			    (struct track){first->process, first->stream, first->src, first->dst,
					   track,	   lane + 1,	  INT64_MIN};
			next = (int32_t)t->ntracks++;
			track_name(t, (size_t)next);
		}
		k = next;
	}
}

static void transfers(struct trace *t, struct report_progress *progress)
{
	struct trace_out *o = t->out;
	size_t named = t->ntracks;
	for (size_t k = 0; k < named; k++)
		track_name(t, k);
	progress_stage(progress, "writing transfers", (int64_t)t->nrows);
	for (size_t k = 0; k < t->nrows; k++) {
		const struct row *r = &t->rows[k];
		int tid = lane_for(t, r->track, r->start, r->start + r->dur);
		trace_sep(o);
		TRACE_PUTS(o, "{\"ph\":\"X\",\"cat\":\"transfer\",\"name\":\"");
		trace_put_str(o, t->apis[r->api]);
		TRACE_PUTS(o, "\",\"pid\":");
		trace_put_i64(o, t->tracks[tid].process);
		TRACE_PUTS(o, ",\"tid\":");
		trace_put_i64(o, tid + STREAM_TID);
		TRACE_PUTS(o, ",\"ts\":");
		trace_put_us(o, ts(t, r->start));
		TRACE_PUTS(o, ",\"dur\":");
		trace_put_us(o, r->dur);
		TRACE_PUTS(o, ",\"args\":{\"bytes\":");
		trace_put_i64(o, r->bytes);
		TRACE_PUTS(o, ",\"path\":\"");
		trace_put_str(o, report_path_names[r->path]);
		TRACE_PUTS(o, "\",\"src_device\":");
		trace_put_i64(o, t->tracks[tid].src);
		TRACE_PUTS(o, ",\"dst_device\":");
		trace_put_i64(o, t->tracks[tid].dst);
		TRACE_PUTS(o, ",\"status\":");
		trace_put_i64(o, r->status);
		/* GB/s only where the copy's time is known: a slice of host time is the enqueue. */
		if (r->gpu_timed && r->status == 0 && r->dur > 0) {
			TRACE_PUTS(o, ",\"GB/s\":");
			trace_put_us(o,
				     (int64_t)llround((double)r->bytes / (double)r->dur * 1000.0));
		}
		if (r->gpu_timed)
			TRACE_PUTS(o, ",\"timing\":\"gpu\",\"thread_id\":");
		else
			TRACE_PUTS(o, ",\"timing\":\"host\",\"thread_id\":");
		trace_put_i64(o, r->thread);
		TRACE_PUTS(o, ",\"transfer_id\":");
		trace_put_i64(o, r->id);
		TRACE_PUTS(o, "}}");
		if ((k & 0xffff) == 0)
			progress_tick(progress, (int64_t)k);
	}
}

static void processes(struct trace *t)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	/* Calls that found their ring full have no slice: each process says how many. */
	bool overflow = p2pg_cli_has_table(t->db, "transfer_overflow");
	if (sqlite3_prepare_v2(
		t->db,
		overflow ? "SELECT id, pid, hostname, rank, cmdline, mode, (SELECT "
			   "coalesce(sum(count), 0) FROM transfer_overflow o WHERE "
			   "o.process_id = p.id) FROM processes p ORDER BY coalesce(rank, 1 << "
			   "30), hostname, id"
			 : "SELECT id, pid, hostname, rank, cmdline, mode, 0 FROM processes "
			   "ORDER BY coalesce(rank, 1 << 30), hostname, id",
		-1, &st, NULL) != SQLITE_OK)
		return;
	struct trace_out *o = t->out;
	for (int order = 0; sqlite3_step(st) == SQLITE_ROW; order++) {
		int64_t id = sqlite3_column_int64(st, 0);
		bool rank =
		    sqlite3_column_type(st, 3) != SQLITE_NULL && sqlite3_column_int(st, 3) >= 0;
		char name[512];
		int n =
		    rank ? snprintf(name, sizeof(name), "rank %d ", sqlite3_column_int(st, 3)) : 0;
		snprintf(name + n, sizeof(name) - (size_t)n, "pid %d@%s %.200s",
			 sqlite3_column_int(st, 1), p2pg_cli_col(st, 2) ?: "?",
			 p2pg_cli_col(st, 4) ?: "");
		trace_sep(o);
		TRACE_PUTS(o, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":");
		trace_put_i64(o, id);
		TRACE_PUTS(o, ",\"tid\":");
		trace_put_i64(o, id);
		TRACE_PUTS(o, ",\"args\":{\"name\":");
		trace_put_json(o, name);
		TRACE_PUTS(o, "}}");
		trace_sep(o);
		TRACE_PUTS(o, "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":");
		trace_put_i64(o, id);
		TRACE_PUTS(o, ",\"tid\":");
		trace_put_i64(o, id);
		TRACE_PUTS(o, ",\"args\":{\"sort_index\":");
		trace_put_i64(o, order);
		TRACE_PUTS(o, "}}");
		char labels[256];
		n = rank ? snprintf(labels, sizeof(labels), "rank %d, ", sqlite3_column_int(st, 3))
			 : 0;
		n += snprintf(labels + n, sizeof(labels) - (size_t)n, "host %s, mode %s",
			      p2pg_cli_col(st, 2) ?: "?", p2pg_cli_col(st, 5) ?: "?");
		if (sqlite3_column_int64(st, 6) > 0 && n < (int)sizeof(labels))
			snprintf(labels + n, sizeof(labels) - (size_t)n,
				 ", %lld copy calls in transfer_overflow (no slice)",
				 sqlite3_column_int64(st, 6));
		trace_sep(o);
		TRACE_PUTS(o, "{\"ph\":\"M\",\"name\":\"process_labels\",\"pid\":");
		trace_put_i64(o, id);
		TRACE_PUTS(o, ",\"tid\":");
		trace_put_i64(o, id);
		TRACE_PUTS(o, ",\"args\":{\"labels\":");
		trace_put_json(o, labels);
		TRACE_PUTS(o, "}}");
		/* The track of the process's failures and probe verdicts. */
		trace_sep(o);
		TRACE_PUTS(o, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":");
		trace_put_i64(o, id);
		TRACE_PUTS(o, ",\"tid\":");
		trace_put_i64(o, FAILURE_TID + id);
		TRACE_PUTS(o, ",\"args\":{\"name\":\"failures and probe verdicts\"}}");
	}
}

static void failures(struct trace *t)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(
		t->db,
		"SELECT process_id, started_ns, json_extract(CASE WHEN json_valid(evidence) THEN "
		"evidence END, '$.p2p_probe') AS probe, api, status, error_name, device, "
		"peer_device, action, rule_id, diagnosis, advice, args, python_stack, backtrace "
		"FROM failures WHERE started_ns BETWEEN ?1 AND ?2 ORDER BY started_ns",
		-1, &st, NULL) != SQLITE_OK)
		return;
	sqlite3_bind_int64(st, 1, t->opt->from_ns);
	sqlite3_bind_int64(st, 2, t->opt->to_ns);
	struct trace_out *o = t->out;
	while (sqlite3_step(st) == SQLITE_ROW) {
		const char *probe = p2pg_cli_col(st, 2);
		char name[256];
		if (probe)
			snprintf(name, sizeof(name), "probe %d->%d: %s", sqlite3_column_int(st, 6),
				 sqlite3_column_int(st, 7), probe);
		else
			snprintf(name, sizeof(name), "%s failed: %s", p2pg_cli_col(st, 3) ?: "?",
				 p2pg_cli_col(st, 5) ?: "error");
		trace_sep(o);
		TRACE_PUTS(o, "{\"ph\":\"i\",\"s\":\"t\",\"cat\":");
		trace_put_str(o, probe ? "\"probe\"" : "\"failure\"");
		TRACE_PUTS(o, ",\"name\":");
		trace_put_json(o, name);
		TRACE_PUTS(o, ",\"pid\":");
		trace_put_i64(o, sqlite3_column_int64(st, 0));
		TRACE_PUTS(o, ",\"tid\":");
		trace_put_i64(o, FAILURE_TID + sqlite3_column_int64(st, 0));
		TRACE_PUTS(o, ",\"ts\":");
		trace_put_us(o, ts(t, sqlite3_column_int64(st, 1)));
		TRACE_PUTS(o, ",");
		trace_put_row_args(o, st);
		TRACE_PUTS(o, "}");
	}
}

/* crashes and stalls: whatever columns the table has (both grow), as process-wide instants. */
static void instants(struct trace *t, const char *table, const char *what)
{
	if (!p2pg_cli_has_table(t->db, table) || !p2pg_cli_has_column(t->db, table, "started_ns"))
		return;
	char sql[160];
	snprintf(sql, sizeof(sql),
		 "SELECT * FROM %s WHERE started_ns BETWEEN ?1 AND ?2 ORDER BY started_ns", table);
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(t->db, sql, -1, &st, NULL) != SQLITE_OK)
		return;
	sqlite3_bind_int64(st, 1, t->opt->from_ns);
	sqlite3_bind_int64(st, 2, t->opt->to_ns);
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
	struct trace_out *o = t->out;
	while (sqlite3_step(st) == SQLITE_ROW) {
		char name[128];
		if (scol >= 0)
			snprintf(name, sizeof(name), "%s: signal %d (%s)", what,
				 sqlite3_column_int(st, scol),
				 strsignal(sqlite3_column_int(st, scol)));
		else
			snprintf(name, sizeof(name), "%s", what);
		trace_sep(o);
		TRACE_PUTS(o, "{\"ph\":\"i\",\"s\":\"p\",\"cat\":");
		trace_put_json(o, what);
		TRACE_PUTS(o, ",\"name\":");
		trace_put_json(o, name);
		TRACE_PUTS(o, ",\"pid\":");
		trace_put_i64(o, sqlite3_column_int64(st, pcol));
		TRACE_PUTS(o, ",\"tid\":");
		trace_put_i64(o, sqlite3_column_int64(st, pcol));
		TRACE_PUTS(o, ",\"ts\":");
		trace_put_us(o, ts(t, sqlite3_column_int64(st, tcol)));
		TRACE_PUTS(o, ",");
		trace_put_row_args(o, st);
		TRACE_PUTS(o, "}");
	}
}

/* How many of the trace's transfer slices have a copy time, told apart as the report tells its
 * rows apart: a slice of host time looks like any other in a viewer, and a bandwidth read off an
 * untimed one (its enqueue) would be wrong, so the trace says how many there are. */
static void copy_counts(struct trace *t)
{
	int64_t gpu_timed = 0, synchronous = 0, untimed = 0, failed = 0;
	for (size_t k = 0; k < t->nrows; k++) {
		const struct row *r = &t->rows[k];
		if (r->status != 0)
			failed++;
		else if (!r->gpu_timed)
			untimed++;
		else if (strstr(t->apis[r->api], "Async"))
			gpu_timed++;
		else
			synchronous++;
	}
	struct trace_out *o = t->out;
	TRACE_PUTS(o, ",\"copies_gpu_timed\":");
	trace_put_i64(o, gpu_timed);
	TRACE_PUTS(o, ",\"copies_synchronous\":");
	trace_put_i64(o, synchronous);
	TRACE_PUTS(o, ",\"copies_untimed\":");
	trace_put_i64(o, untimed);
	TRACE_PUTS(o, ",\"copies_failed\":");
	trace_put_i64(o, failed);
	TRACE_PUTS(o, ",\"copies_means\":\"the transfer slices of this trace: successful "
		      "asynchronous copies with a GPU time (timing gpu), successful synchronous "
		      "ones with a GPU time (timing gpu), successful copies without one (timing "
		      "host: the call, no GB/s; counted, never divided) and failed calls; calls "
		      "in transfer_overflow or in summary buckets have no slice\"");
}

/* The transfers' ends per process, for the mappings still live at their process's end; then
 * their tracks. */
static int plan_mappings(struct trace *t, struct trace_mappings *m)
{
	int64_t *end = malloc((t->ntracks ? t->ntracks : 1) * sizeof(int64_t));
	if (!end)
		return -ENOMEM;
	for (size_t k = 0; k < t->ntracks; k++)
		end[k] = INT64_MIN;
	for (size_t k = 0; k < t->nrows; k++) {
		const struct row *r = &t->rows[k];
		if (r->start + r->dur > end[r->track])
			end[r->track] = r->start + r->dur;
	}
	for (size_t k = 0; k < t->ntracks; k++)
		if (end[k] != INT64_MIN)
			trace_mappings_note_end(m, t->tracks[k].process, end[k]);
	free(end);
	return trace_mappings_plan(m);
}

int trace_write(sqlite3 *db, const struct trace_options *opt, FILE *f)
{
	_cleanup_free_ struct trace_out *o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	*o = (struct trace_out){.f = f, .first = true};
	struct trace t = {
	    .db = db, .opt = opt, .out = o, .devices = p2pg_cli_has_table(db, "devices")};
	struct report_progress progress;
	progress_start(&progress, "p2pguard trace");
	progress_attach(&progress, db);
	int64_t first = p2pg_cli_scalar(db, "SELECT min(started_ns) FROM processes");
	static const char *const clock_names[] = {"kineto", "unix", "relative"};
	t.base_ns = opt->clock == TRACE_CLOCK_UNIX	 ? 0
		    : opt->clock == TRACE_CLOCK_RELATIVE ? first
		    : first >= 0 ? first / KINETO_INTERVAL_NS * KINETO_INTERVAL_NS
				 : 0;
	struct trace_nccl *nccl = NULL;
	struct trace_mappings *mappings = NULL;
	int r = read_rows(&t, &progress);
	if (r == 0)
		r = trace_nccl_read(db, opt, &nccl, &progress);
	if (r == 0)
		r = trace_mappings_read(db, opt, &mappings, &progress);
	if (r == 0 && mappings)
		r = plan_mappings(&t, mappings);
	if (r < 0)
		goto out;
	int64_t estimate = (int64_t)t.nrows * BYTES_PER_SLICE +
			   (int64_t)trace_nccl_count(nccl) * BYTES_PER_NCCL +
			   (int64_t)trace_mappings_count(mappings) * BYTES_PER_MAPPING;
	if (estimate > WARN_BYTES)
		fprintf(stderr,
			"p2pguard trace: %zu transfers, %zu NCCL operations and %zu mapping events "
			"make about %" PRId64 " MB of JSON, more than trace viewers open "
			"comfortably; narrow it with --rank, --pid, --host, --from/--to or "
			"--limit\n",
			t.nrows, trace_nccl_count(nccl), trace_mappings_count(mappings),
			estimate >> 20);
	TRACE_PUTS(o, "{\"displayTimeUnit\":\"ns\",\"baseTimeNanoseconds\":");
	trace_put_i64(o, t.base_ns);
	TRACE_PUTS(o,
		   ",\"otherData\":{\"producer\":\"p2pguard " P2PGUARD_VERSION "\",\"clock\":\"");
	trace_put_str(o, clock_names[opt->clock]);
	TRACE_PUTS(o, "\",\"ts_zero_unix_ns\":\"");
	trace_put_i64(o, t.base_ns);
	TRACE_PUTS(o, "\",\"calls_in_transfer_overflow\":");
	trace_put_i64(
	    o, p2pg_cli_has_table(db, "transfer_overflow")
		   ? p2pg_cli_scalar(db, "SELECT coalesce(sum(count), 0) FROM transfer_overflow")
		   : 0);
	TRACE_PUTS(
	    o, ",\"calls_in_transfer_overflow_means\":\"copy calls that found their thread's ring "
	       "full: counted, no row, so no slice\"");
	copy_counts(&t);
	if (nccl) {
		TRACE_PUTS(o, ",\"nccl_ops_folded\":");
		trace_put_i64(o, trace_nccl_folded(nccl));
		TRACE_PUTS(o,
			   ",\"nccl_ops_folded_means\":\"NCCL operations in summary buckets "
			   "(P2PGUARD_RECORD=summary) or found their thread's ring full: counted "
			   "in nccl_op_summary and nccl_op_overflow, no row, so no slice\"");
	}
	if (mappings) {
		TRACE_PUTS(o, ",\"mappings_without_track\":");
		trace_put_i64(o, trace_mappings_without_lane(mappings));
		TRACE_PUTS(o, ",\"mappings_without_track_means\":\"mappings that overlapped more "
			      "others of their process than its mapping tracks hold: instants at "
			      "their start, their end in args\"");
	}
	TRACE_PUTS(o, "},\"traceEvents\":[");
	processes(&t);
	transfers(&t, &progress);
	trace_nccl_write(nccl, o, t.base_ns, &progress);
	trace_mappings_write(mappings, o, t.base_ns, &progress);
	progress_stage(&progress, "writing failures, crashes and stalls", 0);
	failures(&t);
	instants(&t, "crashes", "crash");
	instants(&t, "stalls", "stall");
	TRACE_PUTS(o, "\n]}\n");
	trace_flush(o);
	r = o->written < 0 || ferror(f) ? -EIO : 0;
out:
	progress_end(&progress);
	trace_nccl_free(nccl);
	trace_mappings_free(mappings);
	free(t.tracks);
	free(t.rows);
	imap_free(&t.track_index);
	for (size_t k = 0; k < t.napis; k++)
		free(t.apis[k]);
	free(t.apis);
	return r;
}
