/* SPDX-License-Identifier: MIT */
/*
 * NCCL's operations in the trace: one track per rank's communicator (a process's nccl_comms row),
 * named by communicator, rank and GPU, under the process's own trace process. A finished
 * operation is a complete slice from NCCL's start of it (its enqueue) to the end NCCL saw (its
 * last kernel channel), as the host saw both; its GPU time, bytes, peer, algorithm and protocol
 * are args. Operations of one communicator overlap (a group's are in flight together), so a slice
 * that does not fit after the last one of a lane opens the next lane (a track of its own). An
 * operation that never finished is an instant at its start; a stall row, an instant when it was
 * written. Read once into memory and sorted here, like the transfers (trace_write.c).
 */
#include "trace_nccl.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "dbread.h"
#include "trace_read.h"

#define NCCL_TID  (1 << 28) /* + the track's index: unique in the whole trace (trace_write.c) */
#define MAX_LANES 64	    /* past this many in flight at once, a slice waits for a lane (below) */

struct op {
	int64_t start, dur, gpu_ns, host_ns, bytes, count, id, seq, thread;
	int32_t track, peer, root, channels;
	uint16_t func, kind, datatype, algorithm, protocol, state;
	bool done;
};

struct lane_track {
	int64_t process;
	int serial;
	int lane;      /* 0: the communicator's own track, k: its k-th overlap lane */
	int32_t first; /* the track of lane 0 */
	int64_t end;   /* the last slice's end on this lane */
	bool named;
};

struct trace_nccl {
	sqlite3 *db;
	const struct trace_options *opt;
	struct op *ops;
	size_t nops, capops;
	struct lane_track *tracks;
	size_t ntracks, captracks;
	struct imap index;
	struct trace_names names; /* interned texts */
	int64_t folded;
	size_t stalls;
	bool devices;
};

static int track_for(struct trace_nccl *n, int64_t process, int serial)
{
	uint64_t key = ((uint64_t)process << 16 | (uint16_t)serial) + 1;
	int32_t i = imap_get(&n->index, key);
	if (i >= 0)
		return i;
	if (n->ntracks == n->captracks) {
		size_t cap = n->captracks ? n->captracks * 2 : 64;
		struct lane_track *bigger = realloc(n->tracks, cap * sizeof(*bigger));
		if (!bigger)
			return -ENOMEM;
		n->tracks = bigger;
		n->captracks = cap;
	}
	if (imap_put(&n->index, key, (int32_t)n->ntracks) < 0)
		return -ENOMEM;
	n->tracks[n->ntracks] =
	    (struct lane_track){process, serial, 0, (int32_t)n->ntracks, INT64_MIN, false};
	return (int)n->ntracks++;
}

static int cmp_op(const void *a, const void *b)
{
	const struct op *x = a, *y = b;
	if (x->track != y->track)
		return x->track - y->track;
	if (x->start != y->start)
		return (x->start > y->start) - (x->start < y->start);
	return (x->id > y->id) - (x->id < y->id);
}

int trace_nccl_read(sqlite3 *db, const struct trace_options *opt, struct trace_nccl **ret,
		    struct report_progress *progress)
{
	*ret = NULL;
	if (!p2pg_cli_has_table(db, "nccl_ops") || !p2pg_cli_has_table(db, "nccl_comms"))
		return 0;
	struct trace_nccl *n = calloc(1, sizeof(*n));
	if (!n)
		return -ENOMEM;
	n->db = db;
	n->opt = opt;
	n->devices = p2pg_cli_has_table(db, "devices");
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(db,
			       "SELECT process_id, comm_serial, started_ns, ended_ns, host_ns, "
			       "gpu_ns, func, kind, bytes, count, datatype, peer, root, channels, "
			       "algorithm, protocol, state, op_seq, thread_id, id FROM nccl_ops "
			       "WHERE started_ns BETWEEN ?1 AND ?2",
			       -1, &st, NULL) != SQLITE_OK) {
		fprintf(stderr, "p2pguard trace: cannot read NCCL's operations: %s\n",
			sqlite3_errmsg(db));
		trace_nccl_free(n);
		return -EIO;
	}
	sqlite3_bind_int64(st, 1, opt->from_ns);
	sqlite3_bind_int64(st, 2, opt->to_ns);
	progress_stage(progress, "reading NCCL's operations", 0);
	int64_t last_process = -1;
	int last_serial = -1, track = -1;
	while (sqlite3_step(st) == SQLITE_ROW) {
		if (n->nops == n->capops) {
			size_t cap = n->capops ? n->capops * 2 : 4096;
			struct op *bigger = realloc(n->ops, cap * sizeof(*bigger));
			if (!bigger) {
				fprintf(
				    stderr,
				    "p2pguard trace: out of memory at %zu NCCL operations (narrow "
				    "with --from/--to, --rank or --limit)\n",
				    n->nops);
				trace_nccl_free(n);
				return -ENOMEM;
			}
			n->ops = bigger;
			n->capops = cap;
		}
		int64_t process = sqlite3_column_int64(st, 0);
		int serial = sqlite3_column_int(st, 1);
		if (process != last_process || serial != last_serial) {
			track = track_for(n, process, serial);
			if (track < 0) {
				trace_nccl_free(n);
				return -ENOMEM;
			}
			last_process = process;
			last_serial = serial;
		}
		const char *state = p2pg_cli_col(st, 16);
		bool done = state && strcmp(state, "done") == 0;
		int64_t start = sqlite3_column_int64(st, 2), host_ns = sqlite3_column_int64(st, 4);
		int64_t dur = sqlite3_column_type(st, 3) != SQLITE_NULL
				  ? sqlite3_column_int64(st, 3) - start
				  : host_ns;
		n->ops[n->nops++] =
		    (struct op){.start = start,
				.dur = dur > 0 ? dur : 0,
				.gpu_ns = sqlite3_column_int64(st, 5),
				.host_ns = host_ns,
				.bytes = sqlite3_column_int64(st, 8),
				.count = sqlite3_column_int64(st, 9),
				.id = sqlite3_column_int64(st, 19),
				.seq = sqlite3_column_int64(st, 17),
				.thread = sqlite3_column_int64(st, 18),
				.track = track,
				.peer = p2pg_cli_col_int_or(st, 11, -1),
				.root = p2pg_cli_col_int_or(st, 12, -1),
				.channels = sqlite3_column_int(st, 13),
				.func = trace_name(&n->names, p2pg_cli_col(st, 6) ?: "?"),
				.kind = trace_name(&n->names, p2pg_cli_col(st, 7)),
				.datatype = trace_name(&n->names, p2pg_cli_col(st, 10)),
				.algorithm = trace_name(&n->names, p2pg_cli_col(st, 14)),
				.protocol = trace_name(&n->names, p2pg_cli_col(st, 15)),
				.state = trace_name(&n->names, state),
				.done = done};
		if ((n->nops & 0xffff) == 0)
			progress_tick(progress, 0);
	}
	/* --limit N: the first N operations by start time, as for the transfers. */
	if (trace_keep_first(n->ops, &n->nops, sizeof(*n->ops), offsetof(struct op, start),
			     opt->limit, "NCCL operations") < 0) {
		trace_nccl_free(n);
		return -ENOMEM;
	}
	sort_n(n->ops, n->nops, sizeof(*n->ops), cmp_op);
	if (p2pg_cli_has_table(db, "nccl_stalls")) {
		_cleanup_sqlite_stmt_ sqlite3_stmt *ss = NULL;
		if (sqlite3_prepare_v2(
			db,
			"SELECT count(*) FROM nccl_stalls WHERE started_ns BETWEEN ?1 "
			"AND ?2",
			-1, &ss, NULL) == SQLITE_OK) {
			sqlite3_bind_int64(ss, 1, opt->from_ns);
			sqlite3_bind_int64(ss, 2, opt->to_ns);
			if (sqlite3_step(ss) == SQLITE_ROW)
				n->stalls = (size_t)sqlite3_column_int64(ss, 0);
		}
	}
	if (p2pg_cli_has_table(db, "nccl_op_summary"))
		n->folded +=
		    p2pg_cli_scalar(db, "SELECT coalesce(sum(count), 0) FROM nccl_op_summary");
	if (p2pg_cli_has_table(db, "nccl_op_overflow"))
		n->folded +=
		    p2pg_cli_scalar(db, "SELECT coalesce(sum(count), 0) FROM nccl_op_overflow");
	*ret = n;
	return 0;
}

size_t trace_nccl_count(const struct trace_nccl *n)
{
	return n ? n->nops + n->stalls : 0;
}

int64_t trace_nccl_folded(const struct trace_nccl *n)
{
	return n ? n->folded : 0;
}

/* "NCCL comm 5ed34fe53a096533 default_pg rank 3/16 GPU 3 (GPU-1a2b3c4d 00000000:18:00.0)" */
static void name_track(struct trace_nccl *n, struct trace_out *o, size_t k)
{
	struct lane_track *tr = &n->tracks[k];
	char name[320];
	int len = snprintf(name, sizeof(name), "NCCL comm");
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(n->db,
			       "SELECT c.comm_hash, c.comm_name, c.rank, c.nranks, c.device, "
			       "c.uuid, c.pci_bus_id FROM nccl_comms c WHERE c.process_id = ?1 AND "
			       "c.comm_serial = ?2",
			       -1, &st, NULL) == SQLITE_OK) {
		sqlite3_bind_int64(st, 1, tr->process);
		sqlite3_bind_int(st, 2, tr->serial);
		if (sqlite3_step(st) == SQLITE_ROW) {
			len += snprintf(name + len, sizeof(name) - (size_t)len, " %s",
					p2pg_cli_col(st, 0) ?: "?");
			if (p2pg_cli_col(st, 1) && len < (int)sizeof(name))
				len += snprintf(name + len, sizeof(name) - (size_t)len, " %.60s",
						p2pg_cli_col(st, 1));
			if (len < (int)sizeof(name))
				len += snprintf(name + len, sizeof(name) - (size_t)len,
						" rank %s/%s GPU %s", p2pg_cli_col(st, 2) ?: "?",
						p2pg_cli_col(st, 3) ?: "?",
						p2pg_cli_col(st, 4) ?: "?");
			if (p2pg_cli_col(st, 5) && len < (int)sizeof(name))
				len +=
				    snprintf(name + len, sizeof(name) - (size_t)len, " (%.12s %s)",
					     p2pg_cli_col(st, 5), p2pg_cli_col(st, 6) ?: "?");
		} else {
			len += snprintf(name + len, sizeof(name) - (size_t)len, " #%d (no row)",
					tr->serial);
		}
	}
	if (tr->lane && len < (int)sizeof(name))
		snprintf(name + len, sizeof(name) - (size_t)len, " (overlap %d)", tr->lane + 1);
	/* sort index: after the copies' streams, in the order read */
	trace_put_track_meta(o, tr->process, (int64_t)k + NCCL_TID, name, (int64_t)k + 1000000);
	tr->named = true;
}

/* The lane a slice goes to: slices of one track must nest or follow, and NCCL's operations
 * overlap (a group's run together; the host enqueues ahead of the GPU), so one that starts before
 * a lane's last slice ends takes the next lane. With MAX_LANES lanes busy, the slice is drawn from
 * when the first lane frees (*start moves; its args keep NCCL's start). */
static int lane_for(struct trace_nccl *n, struct trace_out *o, int track, int64_t *start,
		    int64_t end)
{
	int32_t k = track, earliest = track;
	for (int lane = 0;; lane++) {
		struct lane_track *tr = &n->tracks[k];
		if (tr->end <= *start) {
			tr->end = end;
			return k;
		}
		if (tr->end < n->tracks[earliest].end)
			earliest = k;
		int32_t next = -1;
		for (size_t j = (size_t)k + 1; j < n->ntracks; j++)
			if (n->tracks[j].first == track && n->tracks[j].lane == lane + 1) {
				next = (int32_t)j;
				break;
			}
		if (next < 0 && lane + 1 < MAX_LANES) {
			if (n->ntracks == n->captracks) {
				size_t cap = n->captracks * 2;
				struct lane_track *bigger =
				    realloc(n->tracks, cap * sizeof(*bigger));
				if (!bigger)
					next = -1;
				else {
					n->tracks = bigger;
					n->captracks = cap;
				}
			}
			if (n->ntracks < n->captracks) {
				struct lane_track *first = &n->tracks[track];
				n->tracks[n->ntracks] =
				    (struct lane_track){first->process, first->serial, lane + 1,
							track,		INT64_MIN,     false};
				next = (int32_t)n->ntracks++;
				name_track(n, o, (size_t)next);
			}
		}
		if (next < 0) {
			struct lane_track *busy = &n->tracks[earliest];
			*start = busy->end;
			busy->end = end > busy->end ? end : busy->end;
			return earliest;
		}
		k = next;
	}
}

static void op_event(struct trace_nccl *n, struct trace_out *o, const struct op *op, int tid,
		     int64_t drawn_from, int64_t base_ns)
{
	const char *func = trace_name_text(&n->names, op->func);
	trace_sep(o);
	if (op->done) {
		TRACE_PUTS(o, "{\"ph\":\"X\",\"cat\":\"nccl\",\"name\":");
		trace_put_json(o, func);
	} else {
		/* never finished: where it started, and in what state the database left it */
		char name[96];
		snprintf(name, sizeof(name), "%s (%s: no end recorded)", func,
			 trace_name_text(&n->names, op->state) ?: "?");
		TRACE_PUTS(o, "{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"nccl\",\"name\":");
		trace_put_json(o, name);
	}
	TRACE_PUTS(o, ",\"pid\":");
	trace_put_i64(o, n->tracks[tid].process);
	TRACE_PUTS(o, ",\"tid\":");
	trace_put_i64(o, tid + NCCL_TID);
	TRACE_PUTS(o, ",\"ts\":");
	trace_put_us(o, drawn_from - base_ns);
	if (op->done) {
		int64_t dur = op->start + op->dur - drawn_from;
		TRACE_PUTS(o, ",\"dur\":");
		trace_put_us(o, dur > 0 ? dur : 0);
	}
	TRACE_PUTS(o, ",\"args\":{\"bytes\":");
	trace_put_i64(o, op->bytes);
	trace_put_text_arg(o, "kind", trace_name_text(&n->names, op->kind));
	if (op->peer >= 0)
		trace_put_int_arg(o, "peer", op->peer);
	if (op->root >= 0)
		trace_put_int_arg(o, "root", op->root);
	trace_put_int_arg(o, "op_seq", op->seq);
	trace_put_int_arg(o, "count", op->count);
	trace_put_text_arg(o, "datatype", trace_name_text(&n->names, op->datatype));
	trace_put_int_arg(o, "channels", op->channels);
	trace_put_text_arg(o, "algorithm", trace_name_text(&n->names, op->algorithm));
	trace_put_text_arg(o, "protocol", trace_name_text(&n->names, op->protocol));
	trace_put_text_arg(o, "state", trace_name_text(&n->names, op->state));
	/* The slice is the host's view (NCCL's start to the end it saw); the GPU's time is here,
	 * and GB/s only from it. */
	if (op->done)
		TRACE_PUTS(o, ",\"timing\":\"host\"");
	trace_put_int_arg(o, "host_ns", op->host_ns);
	if (drawn_from != op->start) /* every lane was busy: drawn from when one freed */
		trace_put_int_arg(o, "started_ns", op->start);
	if (op->gpu_ns > 0) {
		trace_put_int_arg(o, "gpu_ns", op->gpu_ns);
		TRACE_PUTS(o, ",\"GPU GB/s\":");
		trace_put_us(o, (int64_t)llround((double)op->bytes / (double)op->gpu_ns * 1000.0));
	}
	trace_put_int_arg(o, "thread_id", op->thread);
	trace_put_int_arg(o, "nccl_op_id", op->id);
	TRACE_PUTS(o, "}}");
}

static void stalls(struct trace_nccl *n, struct trace_out *o, int64_t base_ns)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (!n->stalls ||
	    sqlite3_prepare_v2(n->db,
			       "SELECT * FROM nccl_stalls WHERE started_ns BETWEEN ?1 AND ?2 ORDER "
			       "BY started_ns, id",
			       -1, &st, NULL) != SQLITE_OK)
		return;
	sqlite3_bind_int64(st, 1, n->opt->from_ns);
	sqlite3_bind_int64(st, 2, n->opt->to_ns);
	int col[8];
	static const char *const names[8] = {"process_id", "comm_serial", "started_ns",
					     "running_ns", "waited_ns",	  "func",
					     "op_seq",	   "peer_state"};
	for (int k = 0; k < 8; k++) {
		col[k] = -1;
		for (int c = 0; c < sqlite3_column_count(st); c++)
			if (strcmp(sqlite3_column_name(st, c), names[k]) == 0)
				col[k] = c;
		if (col[k] < 0)
			return;
	}
	while (sqlite3_step(st) == SQLITE_ROW) {
		int track =
		    track_for(n, sqlite3_column_int64(st, col[0]), sqlite3_column_int(st, col[1]));
		if (track < 0)
			return;
		if (!n->tracks[track].named)
			name_track(n, o, (size_t)track);
		/* when the row was written: the kernel's start plus how long it had run */
		int64_t at =
		    sqlite3_column_type(st, col[3]) != SQLITE_NULL
			? sqlite3_column_int64(st, col[3]) + sqlite3_column_int64(st, col[4])
			: sqlite3_column_int64(st, col[2]);
		char name[160];
		snprintf(name, sizeof(name), "NCCL stall: %s #%lld, the other ranks %s",
			 p2pg_cli_col(st, col[5]) ?: "?", sqlite3_column_int64(st, col[6]),
			 p2pg_cli_col(st, col[7]) ?: "unknown");
		trace_sep(o);
		TRACE_PUTS(o, "{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"nccl_stall\",\"name\":");
		trace_put_json(o, name);
		TRACE_PUTS(o, ",\"pid\":");
		trace_put_i64(o, n->tracks[track].process);
		TRACE_PUTS(o, ",\"tid\":");
		trace_put_i64(o, track + NCCL_TID);
		TRACE_PUTS(o, ",\"ts\":");
		trace_put_us(o, at - base_ns);
		TRACE_PUTS(o, ",");
		trace_put_row_args(o, st);
		TRACE_PUTS(o, "}");
	}
}

void trace_nccl_write(struct trace_nccl *n, struct trace_out *o, int64_t base_ns,
		      struct report_progress *progress)
{
	if (!n)
		return;
	size_t named = n->ntracks;
	for (size_t k = 0; k < named; k++)
		name_track(n, o, k);
	progress_stage(progress, "writing NCCL's operations", (int64_t)n->nops);
	for (size_t k = 0; k < n->nops; k++) {
		const struct op *op = &n->ops[k];
		int64_t from = op->start;
		int tid =
		    op->done ? lane_for(n, o, op->track, &from, op->start + op->dur) : op->track;
		op_event(n, o, op, tid, from, base_ns);
		if ((k & 0xffff) == 0)
			progress_tick(progress, (int64_t)k);
	}
	stalls(n, o, base_ns);
}

void trace_nccl_free(struct trace_nccl *n)
{
	if (!n)
		return;
	trace_names_free(&n->names);
	free(n->ops);
	free(n->tracks);
	imap_free(&n->index);
	free(n);
}
