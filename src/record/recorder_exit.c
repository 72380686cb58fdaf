/* SPDX-License-Identifier: MIT */
/*
 * The recorder at the program's exit: the last pass with CUDA (the GPU times pending, before the
 * runtime's teardown) and the arming of its handler, then the final drain, bounded to a second.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "driver.h"
#include "notice.h"
#include "recorder-private.h"

static void report_exit(const struct p2pg_exit_report *r, bool answered, uint64_t took_ns)
{
	if (!answered) {
		p2pg_notice("test: exit: the drainer did not answer within 1 s; GPU times pending "
			    "at exit are not resolved");
		return;
	}
	const char *error = r->failed ? p2pg_cu_error_name(r->first_error) : "none";
	p2pg_notice("test: exit: event-timed copies pending %zu, resolved %zu, still running %zu, "
		    "unreadable %zu (first error %s); CUPTI-timed rows waiting %zu, left %zu; "
		    "times into the spool %zu, still running %zu; rows' times into the spool %zu; "
		    "%.2f ms",
		    r->pending, r->resolved, r->unfinished, r->failed, error, r->cupti_rows,
		    r->cupti_left, r->spooled, r->spool_left, r->spooled_rows,
		    (double)took_ns / 1e6);
}

/*
 * The exit's last pass with CUDA, from an exit handler that runs before the CUDA runtime's own
 * (registered after it: see p2pg_recorder_arm_exit). The runtime's handler destroys the primary
 * contexts, and their events with them; a program that synchronised and returned from main has
 * its copies finished, so their events answer now. The drainer imports what is published, asks
 * every event, asks those of copies still running again for up to 100 ms (the teardown destroys
 * their events), hands CUPTI's finished buffers over, writes what it found and stops calling
 * CUDA. Bounded: one second, then the exit goes on without it.
 */
static void exit_flush(void)
{
	static atomic_bool ran;
	if (atomic_exchange(&ran, true) || atomic_load(&p2pg_rec.exiting))
		return;
	bool answered = false;
	struct p2pg_exit_report report = {0};
	uint64_t began = p2pg_now_ns();
	if (atomic_load(&p2pg_rec.spool) && atomic_load(&p2pg_rec.drainer_tid)) {
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += 1;
		pthread_mutex_lock(&p2pg_rec.lock);
		uint64_t asked = ++p2pg_rec.flush_asked;
		pthread_cond_broadcast(&p2pg_rec.wake);
		while (p2pg_rec.flush_answered < asked && atomic_load(&p2pg_rec.drainer_tid))
			if (pthread_cond_timedwait(&p2pg_rec.flushed, &p2pg_rec.lock, &until) ==
			    ETIMEDOUT)
				break;
		answered = p2pg_rec.flush_answered >= asked;
		report = p2pg_rec.exit_report;
		pthread_mutex_unlock(&p2pg_rec.lock);
	} else if (atomic_load(&p2pg_rec.spool)) {
		/* No drainer (the database could not be used: every record is in the spool, for
		 * `p2pguard recover`): the copies' GPU times go there with them, read by this
		 * thread while the events still exist. */
		p2pg_drainer_time_unimported(atomic_load(&p2pg_rec.spool), NULL, &report);
		answered = true;
	}
	atomic_store(&p2pg_rec.exiting, true);
	if (p2pg_rec.settings.test_hooks & P2PG_TEST_EXIT_REPORT)
		report_exit(&report, answered, p2pg_now_ns() - began);
}

void p2pg_recorder_arm_exit(enum p2pg_exit_arm when)
{
	/* Each moment registers once; the handler runs once, at the first of them to come. */
	static atomic_uint armed;
	bool early = p2pg_rec.settings.test_hooks & P2PG_TEST_EXIT_EARLY;
	if (early != (when == P2PG_EXIT_ARM_START))
		return;
	unsigned bit = 1u << when;
	if (atomic_load_explicit(&armed, memory_order_relaxed) & bit ||
	    atomic_fetch_or(&armed, bit) & bit)
		return;
	int saved = errno;
	atexit(exit_flush);
	errno = saved;
}

void p2pg_recorder_exit_begins(void)
{
	atomic_store(&p2pg_rec.exiting, true);
}

void p2pg_recorder_shutdown(void)
{
	struct p2pg_spool_layout *spool = atomic_load(&p2pg_rec.spool);
	if (!spool)
		return;
	/* The process ends by exit(): whatever its last pass leaves behind (a database locked past
	 * the bound below), whoever imports it later knows it was not a crash. */
	atomic_store(&spool->header.clean_exit, 1);
	if (!p2pg_rec.drainer_running)
		return;
	pthread_mutex_lock(&p2pg_rec.lock);
	p2pg_rec.stop = true;
	pthread_cond_signal(&p2pg_rec.wake);
	pthread_mutex_unlock(&p2pg_rec.lock);

	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 1;
	if (pthread_timedjoin_np(p2pg_rec.drainer, NULL, &until) != 0) {
		/* Past the one-second bound the program's exit wins; the spool keeps the rest. */
		return;
	}
	p2pg_rec.drainer_running = false;
	if (p2pg_rec.drained_all)
		unlink(p2pg_rec.spool_path);
}
