/* SPDX-License-Identifier: MIT */
/*
 * The drainer's look at the GPU after each import: the GPU times of the rows waiting for one
 * (their events asked, CUPTI's records matched), the stalls row of a copy that never finishes,
 * and NCCL's operations in flight.
 */
#include <stdlib.h>
#include <time.h>

#include "cleanup.h"
#include "clock.h"
#include "cupti_timing.h"
#include "driver.h"
#include "nccl_watch.h"
#include "notice.h"
#include "spool.h"
#include "spool_blob.h"
#include "recorder-private.h"
#include "row_times.h"
#include "store.h"
#include "timing.h"

struct pending {
	int64_t row;
	uint32_t serial; /* the row's record (transfers.thread_serial, seq) */
	uint64_t seq;
	unsigned slot;
	uint64_t started_ns; /* CLOCK_REALTIME, the copy's start */
	bool stalled;	     /* its stalls row is written */
	uint64_t gpu_ns;     /* read from the events, not yet written (the database was busy) */
};

void p2pg_recorder_watch_nccl(const struct p2pg_nccl_watch *w)
{
	atomic_store(&p2pg_rec.nccl, w);
}

/* NCCL's operations in flight, about every 100 ms, and once more at the end. */
void p2pg_drainer_watch_nccl(sqlite3 *db, int64_t process_id, bool final)
{
	const struct p2pg_nccl_watch *w = atomic_load(&p2pg_rec.nccl);
	uint64_t mono = p2pg_now_ns();
	if (!w || process_id == 0 || (!final && mono - p2pg_rec.nccl_watched_ns < 100000000ull))
		return;
	p2pg_rec.nccl_watched_ns = mono;
	struct p2pg_spool_layout *spool = atomic_load(&p2pg_rec.spool);
	struct p2pg_nccl_watch_pass pass = {
	    .process_id = process_id,
	    .boot_id = spool ? spool->header.boot_id : NULL,
	    .stall_s = p2pg_rec.settings.stall_s,
	    .rules_dir = p2pg_rec.settings.rules_dir,
	    .diagnosis = p2pg_rec.hooks.nccl_stall_diagnosis,
	    .final = final,
	};
	p2pg_nccl_watch_run(db, w, &pass);
}

/* Longer than any copy should wait behind the work queued before it; a copy that does wait longer
 * only costs the rest of the process CUPTI's times (sampled events instead). */
#define CUPTI_SILENCE_NS (10 * 1000000000ull)

/* CUPTI starts at the program's cuInit, which may come after the drainer's start or its last look.
 */
void p2pg_drainer_match_needed(void)
{
	if (p2pg_rec.match)
		return;
	p2pg_rec.match = p2pg_gpu_match_new();
	p2pg_rec.cupti_heard_ns = p2pg_now_ns();
}

/* false: out of memory, nothing kept. */
static bool pending_add(const struct pending *p)
{
	if (p2pg_rec.npending == p2pg_rec.cap_pending) {
		size_t cap = p2pg_rec.cap_pending ? p2pg_rec.cap_pending * 2 : 256;
		struct pending *grown = realloc(p2pg_rec.pending, cap * sizeof(*grown));
		if (!grown)
			return false;
		p2pg_rec.pending = grown;
		p2pg_rec.cap_pending = cap;
	}
	p2pg_rec.pending[p2pg_rec.npending++] = *p;
	return true;
}

void p2pg_drainer_on_timed(void *userdata, const struct p2pg_pending_timing *t)
{
	(void)userdata;
	int64_t row = t->row;
	uint32_t slot = t->slot;
	if (t->cupti) {
		p2pg_drainer_match_needed();
		struct p2pg_gpu_row r = {
		    .row = row,
		    .serial = t->serial,
		    .seq = t->seq,
		    .started_ns = t->started_ns,
		    .bytes = t->bytes,
		    .context_id = t->cupti_context,
		    .stream_id = slot,
		    .src_device = t->src_device,
		    .dst_device = t->dst_device,
		};
		if (row && p2pg_rec.match)
			p2pg_gpu_match_row(p2pg_rec.match,
					   &r); /* out of memory: the row keeps no time */
		return;
	}
	if (row == 0) {
		/* Summarised: no row to put the time in. The pair may be reused at once (a new
		 * record of the same events supersedes the old). */
		p2pg_timing_cancel((int)slot);
		return;
	}
	struct pending p = {.row = row,
			    .serial = t->serial,
			    .seq = t->seq,
			    .slot = slot,
			    .started_ns = t->started_ns};
	if (!pending_add(&p))
		p2pg_timing_cancel((int)slot); /* the time is lost, the pair must not be */
}

/* The database was replaced: the rows waiting for a GPU time are rows of the old file, and their
 * ids name other rows in the new one (another copy's, another process's). Their times are let go:
 * unread event pairs are freed, CUPTI's queues keep their order with rows that write nowhere. */
void p2pg_drainer_forget_rows(void)
{
	/* A pair already read is free, and maybe reused. */
	for (size_t k = 0; k < p2pg_rec.npending; k++)
		if (!p2pg_rec.pending[k].gpu_ns)
			p2pg_timing_cancel((int)p2pg_rec.pending[k].slot);
	p2pg_rec.npending = 0;
	p2pg_gpu_match_forget_rows(p2pg_rec.match);
}

/*
 * A timed peer copy unfinished after P2PGUARD_STALL_S: one stalls row, written now, while the
 * program may be stuck waiting for it, so that a job killed in its hang leaves the reason. The
 * diagnosis is the knowledge base's for a P2P copy that never completes; a copy that did not go
 * over P2P gets a plainer one (the P2P path is not what waits).
 */
static void record_stall(sqlite3 *db, struct pending *p, uint64_t now_ns)
{
	p->stalled = true;
	_cleanup_sqlite_stmt_ sqlite3_stmt *q = NULL;
	bool p2p = false;
	if (sqlite3_prepare_v2(db, "SELECT path = 'p2p' FROM transfers WHERE id = ?1", -1, &q,
			       NULL) == SQLITE_OK) {
		sqlite3_bind_int64(q, 1, p->row);
		p2p = sqlite3_step(q) == SQLITE_ROW && sqlite3_column_int(q, 0);
	}
	const char *rule_id, *root_cause, *advice;
	if (p2p && p2pg_rec.hooks.stall_diagnosis &&
	    p2pg_rec.hooks.stall_diagnosis(p2pg_rec.settings.rules_dir, &rule_id, &root_cause,
					   &advice))
		p2pg_store_add_stall(db, p->row, now_ns, p2pg_rec.settings.stall_s, rule_id,
				     root_cause, advice);
	else
		p2pg_store_add_stall(
		    db, p->row, now_ns, p2pg_rec.settings.stall_s, NULL,
		    "A peer copy that did not use the P2P path has not finished: the GPU, or "
		    "work enqueued before it on its stream, is stuck (see the stream's other rows)",
		    NULL);
}

/* One transaction for a pass's writes, begun at the first: a database another rank holds locked is
 * waited for once a pass (the connection's busy timeout, 100 ms), not once per row, and not at all
 * when the pass's import has just waited for it in vain. */
struct write_pass {
	sqlite3 *db;
	bool tried, began;
};

static bool write_begin(struct write_pass *w)
{
	if (!w->tried) {
		w->tried = true;
		w->began = !p2pg_rec.pass_busy &&
			   sqlite3_exec(w->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) == SQLITE_OK;
	}
	return w->began;
}

/* Asks the events of the rows waiting for a GPU time; report: this is the exit's last pass. */
void p2pg_drainer_poll_timings(sqlite3 *db, struct p2pg_exit_report *report)
{
	/* Asking an event is harmless, but while another thread of the program captures a graph in
	 * global mode the driver may refuse calls from any thread that has not relaxed its own
	 * capture mode: this thread never captures anything, so it relaxes once. */
	static bool relaxed;
	if (!relaxed && p2pg_drv.cuThreadExchangeStreamCaptureMode) {
		CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
		p2pg_drv.cuThreadExchangeStreamCaptureMode(&mode);
		relaxed = true;
	}
	size_t kept = 0;
	struct write_pass w = {db, false, false};
	uint64_t now = p2pg_realtime_ns(); /* one clock read a pass: thousands of copies may wait */
	if (report)
		report->pending = p2pg_rec.npending;
	for (size_t k = 0; k < p2pg_rec.npending; k++) {
		struct pending *p = &p2pg_rec.pending[k];
		/* Exit may begin during the pass: from then on no CUDA call. */
		if (!p->gpu_ns && atomic_load(&p2pg_rec.exiting)) {
			p2pg_rec.pending[kept++] = *p;
			continue;
		}
		int error = 0;
		enum p2pg_timing_poll st = P2PG_TIMING_DONE;
		if (!p->gpu_ns)
			st = p2pg_timing_poll(p->slot, &p->gpu_ns, &error);
		if (st == P2PG_TIMING_NOT_READY) {
			if (report)
				report->unfinished++;
			if (!p->stalled && now > p->started_ns &&
			    now - p->started_ns >=
				(uint64_t)p2pg_rec.settings.stall_s * 1000000000ull) {
				if (write_begin(&w))
					record_stall(db, p, now);
			}
			p2pg_rec.pending[kept++] = *p;
			continue;
		}
		if (st == P2PG_TIMING_GONE) {
			if (report && error && !report->failed++)
				report->first_error = error;
			continue;
		}
		/* The events are free again; a time the busy database could not take now waits
		 * with its row for the next pass. */
		if (!write_begin(&w) || p2pg_store_set_gpu_ns(db, p->row, p->gpu_ns) < 0) {
			p2pg_rec.pending[kept++] = *p;
			continue;
		}
		if (report)
			report->resolved++;
	}
	if (w.began && sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
		/* Rolled back: the times read this pass are lost with it (their events are free
		 * again); rare enough (a commit that fails after BEGIN IMMEDIATE) to be left. */
		sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
	}
	p2pg_rec.npending = kept;
}

/*
 * The exit's last pass with CUDA, after the rows' times were asked: times read whose rows the
 * database would not take (another rank's lock) go into blobs of the spool, imported into their
 * rows by the next reader (src/record/row_times.h).
 */
void p2pg_drainer_spool_row_times(struct p2pg_exit_report *report)
{
	struct p2pg_spool_blob *blob = NULL;
	size_t kept = 0;
	for (size_t k = 0; k < p2pg_rec.npending; k++) {
		struct pending *p = &p2pg_rec.pending[k];
		if (!p->gpu_ns) {
			p2pg_rec.pending[kept++] = *p;
			continue;
		}
		if (blob && !p2pg_row_times_add(blob, p->row, p->serial, p->seq, p->gpu_ns)) {
			p2pg_spool_blob_publish(blob);
			blob = NULL;
		}
		if (!blob) {
			blob = p2pg_recorder_blob();
			if (!blob) { /* counted as a dropped record; the time is lost */
				p2pg_rec.pending[kept++] = *p;
				continue;
			}
			blob->kind = P2PG_BLOB_ROW_TIMES;
			blob->tid = p2pg_tid();
			blob->started_ns = p2pg_realtime_ns();
			p2pg_row_times_add(blob, p->row, p->serial, p->seq, p->gpu_ns);
		}
		if (report)
			report->spooled_rows++;
	}
	if (blob)
		p2pg_spool_blob_publish(blob);
	p2pg_rec.npending = kept;
}

/*
 * A copy may still run when the program ends without synchronising its device (a peer copy's
 * stream on one device, the program's last wait on another): the runtime's teardown, which comes
 * next, destroys its events, and the GPU time with them. So the exit asks again, each
 * millisecond, for at most this long: a copy about to finish costs the exit the time it still
 * runs; one that never finishes (a hang) costs it this much and keeps no time.
 */
#define EXIT_TIMING_WAIT_NS (100 * 1000000ull)

void p2pg_drainer_finish_timings(sqlite3 *db, struct p2pg_exit_report *report)
{
	uint64_t until = p2pg_now_ns() + EXIT_TIMING_WAIT_NS;
	while (report->unfinished > 0 && p2pg_rec.npending > 0 && p2pg_now_ns() < until &&
	       !atomic_load(&p2pg_rec.exiting)) {
		struct timespec ms = {0, 1000000};
		nanosleep(&ms, NULL);
		struct p2pg_exit_report again = {0};
		p2pg_drainer_poll_timings(db, &again);
		report->resolved += again.resolved;
		report->unfinished = again.unfinished;
		if (again.failed && !report->failed)
			report->first_error = again.first_error;
		report->failed += again.failed;
	}
}

static void cupti_found(void *arg, const struct p2pg_gpu_row *r, uint64_t gpu_ns)
{
	struct write_pass *w = arg;
	if (r->row == 0) /* a row of a database that was replaced */
		return;
	if (write_begin(w) && p2pg_store_set_gpu_ns(w->db, r->row, gpu_ns) == 0)
		return;
	/* The database is busy: the time waits, already read, with the rows' event times (its
	 * record left the match's queues). */
	struct pending p = {.row = r->row,
			    .serial = r->serial,
			    .seq = r->seq,
			    .started_ns = r->started_ns,
			    .gpu_ns = gpu_ns};
	pending_add(&p); /* out of memory: the row keeps no time */
}

/*
 * CUPTI's records for the rows waiting: asked for at every pass while rows wait, matched, written
 * in one transaction. Records of copies that found no row in a minute are let go, and rows whose
 * record never came keep no GPU time. final: exit has begun, so no flush (what CUPTI delivered by
 * itself is still matched).
 */
void p2pg_drainer_collect_cupti(sqlite3 *db, bool final, struct p2pg_exit_report *report)
{
	uint64_t now = p2pg_realtime_ns();
	/* What CUPTI handed over by itself is taken at every pass (it must not pile up while no
	 * row waits); it is asked for more only while rows wait. */
	size_t rows = p2pg_gpu_match_rows_waiting(p2pg_rec.match);
	bool waiting = rows > 0;
	if (report)
		report->cupti_rows = rows;
	uint64_t mono = p2pg_now_ns(); /* the silence is timed by a clock that is never set */
	if (p2pg_cupti_collect(p2pg_rec.match, !final && waiting) > 0 || !waiting) {
		p2pg_rec.cupti_heard_ns = mono;
	} else if (p2pg_cupti_active() && mono - p2pg_rec.cupti_heard_ns > CUPTI_SILENCE_NS) {
		/* Rows have waited that long while CUPTI handed over nothing: a profiler
		 * (PyTorch's, say) registered its own activity callbacks, which leaves the guard's
		 * none, and may have switched copy tracing off when it stopped. A copy that never
		 * finishes looks the same from here (CUPTI records only finished copies), and so
		 * does one that leaves no record, which is why no stalls row is written from
		 * CUPTI's silence (docs/robustness.md, "Hangs": copies timed by CUPTI are not
		 * watched). */
		p2pg_cupti_give_up();
		if (!p2pg_rec.settings.quiet)
			p2pg_notice(
			    "GPU times of peer copies: CUPTI has delivered nothing for %d s "
			    "(another CUPTI client, such as a profiler, took it over, or the "
			    "copies waited for have not finished); timing events sampled instead",
			    (int)(CUPTI_SILENCE_NS / 1000000000ull));
	}
	struct write_pass pass = {db, false, false};
	p2pg_gpu_match_run(p2pg_rec.match, now, 60000000000ull, cupti_found, &pass);
	if (pass.began)
		sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
	if (report)
		report->cupti_left = p2pg_gpu_match_rows_waiting(p2pg_rec.match);
}
