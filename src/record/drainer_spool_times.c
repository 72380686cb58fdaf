/* SPDX-License-Identifier: MIT */
/*
 * The exit's GPU times for records the database has not taken. When another rank holds the
 * database's lock through the exit (or the database never opened), the last copies' records stay
 * in the spool for whoever imports it later; their timing events die with the process's contexts
 * right after the exit's last pass with CUDA. So that pass reads the events of those records and
 * writes each time into its record in the spool (p2pg_spool_record_set_gpu_ns), where `p2pguard
 * recover`, or this drainer's own last import, finds it.
 */
#include <stdlib.h>
#include <time.h>

#include "clock.h"
#include "recorder-private.h"
#include "spool.h"
#include "spool_ring.h"
#include "store.h"
#include "timing.h"

/* The same bound as the rows' own wait at exit: a copy about to finish is waited for, a copy that
 * never finishes costs the exit this much and keeps no time. */
#define SPOOL_TIMES_WAIT_NS (100 * 1000000ull)
/* Reading the rings: 128 full ones are 8 M records. The exit's last pass has a second in all. */
#define SPOOL_TIMES_SCAN_NS (300 * 1000000ull)

/* Exit has begun (the exit's wait for this pass ran out): no CUDA call from here on. */
static bool too_late(void)
{
	return atomic_load(&p2pg_rec.exiting);
}

struct waiting {
	int ring;
	uint64_t seq;
};

/* The first record of ring k that no import has taken: the importer's watermark once it has read
 * the ring (records before it are rows, whose times are the pending list's), else the tail. */
static uint64_t first_unimported(const struct p2pg_importer *im, int k,
				 const struct p2pg_spool_thread *t)
{
	uint64_t from = atomic_load_explicit(&t->tail, memory_order_relaxed);
	if (im && im->serial[k] == atomic_load_explicit(&t->serial, memory_order_relaxed) &&
	    im->imported[k] > from)
		from = im->imported[k];
	return from;
}

static bool event_timed(const struct p2pg_record *r)
{
	return r->kind == P2PG_REC_TRANSFER && r->status == 0 && (r->flags & P2PG_REC_F_TIMED) &&
	       !(r->flags & P2PG_REC_F_CUPTI) && r->gpu_ns == 0;
}

/* Asks the copy's events once: true when it is settled (its time written, or none will come). */
static bool settle(struct p2pg_spool_thread *t, uint64_t seq, struct p2pg_exit_report *report)
{
	const struct p2pg_record *r = &t->rec[seq & (P2PG_SPOOL_RING - 1)];
	uint64_t gpu_ns = 0;
	int error = 0;
	switch (p2pg_timing_poll((unsigned)r->value, &gpu_ns, &error)) {
	case P2PG_TIMING_NOT_READY:
		return false;
	case P2PG_TIMING_DONE:
		p2pg_spool_record_set_gpu_ns(t, seq, gpu_ns);
		if (report)
			report->spooled++;
		return true;
	case P2PG_TIMING_GONE:
		if (report && error && !report->failed++)
			report->first_error = error;
		return true;
	}
	return true;
}

void p2pg_drainer_time_unimported(struct p2pg_spool_layout *spool, const struct p2pg_importer *im,
				  struct p2pg_exit_report *report)
{
	if (!spool)
		return;
	struct waiting *waiting = NULL;
	size_t nwaiting = 0, cap = 0;
	uint64_t scan_until = p2pg_now_ns() + SPOOL_TIMES_SCAN_NS;
	bool stopped = false;
	for (int k = 0; k < P2PG_SPOOL_THREADS && !stopped; k++) {
		if (!p2pg_spool_ring_in_file(&spool->header, k))
			continue;
		struct p2pg_spool_thread *t = &spool->threads[k];
		uint64_t head = atomic_load_explicit(&t->head, memory_order_acquire);
		uint64_t from = first_unimported(im, k, t);
		if (from >= head || head - from > P2PG_SPOOL_RING)
			continue;
		for (uint64_t seq = from; seq < head; seq++) {
			if ((seq - from) % 4096 == 4095 &&
			    (too_late() || p2pg_now_ns() >= scan_until)) {
				stopped = true;
				break;
			}
			if (!event_timed(&t->rec[seq & (P2PG_SPOOL_RING - 1)]))
				continue;
			if (too_late()) {
				stopped = true;
				break;
			}
			if (settle(t, seq, report))
				continue;
			if (nwaiting == cap) {
				size_t grown_cap = cap ? cap * 2 : 64;
				struct waiting *grown =
				    realloc(waiting, grown_cap * sizeof(*grown));
				if (!grown)
					continue; /* this copy keeps no time; the others do */
				waiting = grown;
				cap = grown_cap;
			}
			waiting[nwaiting++] = (struct waiting){k, seq};
		}
	}
	/* Copies still running (the program's last wait was on another device): asked again each
	 * millisecond until they finish or the bound passes. */
	uint64_t until = p2pg_now_ns() + SPOOL_TIMES_WAIT_NS;
	while (nwaiting > 0 && p2pg_now_ns() < until && !too_late()) {
		struct timespec ms = {0, 1000000};
		nanosleep(&ms, NULL);
		size_t kept = 0;
		for (size_t i = 0; i < nwaiting; i++)
			if (!settle(&spool->threads[waiting[i].ring], waiting[i].seq, report))
				waiting[kept++] = waiting[i];
		nwaiting = kept;
	}
	if (report)
		report->spool_left += nwaiting;
	free(waiting);
}
