/* SPDX-License-Identifier: MIT */
/*
 * The drainer: the thread that moves the spool's records into the database, pass after pass (5 ms
 * apart when idle). Its start, the lock a fork() waits for, the database's opening (and reopening,
 * when the file at the path is replaced), the spools of processes that are gone, and a fatal
 * signal's wait for a last import. What it does with the GPU after each import (times, stalls) is
 * drainer_timing.c.
 */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "clock.h"
#include "cupti_timing.h"
#include "devices.h"
#include "notice.h"
#include "recorder-private.h"
#include "reentry.h"
#include "spool.h"
#include "store.h"

static void *drainer_main(void *arg);

/*
 * Held by the drainer except while it waits between passes. A fork() in the middle of a pass would
 * copy SQLite's global mutexes (and, under ASan, the allocator's) held by a thread the child does
 * not have, and the child's own drainer, or its next malloc, would wait on them forever. So a fork
 * waits for the pass to end; and p2pg_drainer_start returns only once the new thread holds the
 * lock, so that a fork cannot come while the thread is still starting (ASan allocates then).
 */
static pthread_mutex_t pass_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t fork_handlers_once = PTHREAD_ONCE_INIT;
/* fork()s waiting for pass_lock: the drainer, which may take it again at once after a pass or a
 * transaction of an old spool's import, lets them have it first (a mutex is not fair). */
static _Atomic int forks_waiting;

static void fork_prepare(void)
{
	atomic_fetch_add(&forks_waiting, 1);
	pthread_mutex_lock(&pass_lock);
	atomic_fetch_sub(&forks_waiting, 1);
}

/* pass_lock released: lets a fork() that waits for it go first. */
static void wait_for_forks(void)
{
	while (atomic_load(&forks_waiting) > 0) {
		struct timespec nap = {0, 100000};
		nanosleep(&nap, NULL);
	}
}

/* Between two transactions of a pass: a fork() that waits goes first. */
static void let_forks_through(void)
{
	pthread_mutex_unlock(&pass_lock);
	wait_for_forks();
	pthread_mutex_lock(&pass_lock);
}

static void fork_release(void)
{
	pthread_mutex_unlock(&pass_lock);
}

static void install_fork_handlers(void)
{
	pthread_atfork(fork_prepare, fork_release, fork_release);
}

/* The drainer's thread must not take the program's signals, nor be seen by it in any way. */
bool p2pg_drainer_start(void)
{
	pthread_once(&fork_handlers_once, install_fork_handlers);
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	/* Room for the rules' regcomp() (failure.c reads them on a stack of at least 2 MiB, this
	 * one's): address space, used as needed. */
	pthread_attr_setstacksize(&attr, 4 << 20);
	sem_t started;
	sem_init(&started, 0, 0);
	int rc = pthread_create(&p2pg_rec.drainer, &attr, drainer_main, &started);
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc == 0)
		while (sem_wait(&started) < 0 && errno == EINTR)
			;
	sem_destroy(&started);
	if (rc != 0)
		return false;
	p2pg_rec.drainer_running = true;
	return true;
}

/* The drainer's sleep between tries: up to ms, or until shutdown wakes it. p2pg_rec.lock
 * held. */
static void nap_locked(long ms)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_nsec += ms * 1000 * 1000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	pthread_cond_timedwait(&p2pg_rec.wake, &p2pg_rec.lock, &until);
}

static bool database_replaced(const struct stat *opened)
{
	struct stat now;
	return stat(p2pg_rec.settings.db_path, &now) < 0 || now.st_ino != opened->st_ino ||
	       now.st_dev != opened->st_dev;
}

/* The database at the path is another file (or none): the next rows go to it (a new one is
 * made), as if this process had just started; what the old file held is the old file's. */
static void reopen_database(sqlite3 **db, struct p2pg_importer *im, struct stat *opened,
			    bool *know_file)
{
	char err[256];
	sqlite3_close(*db);
	*db = NULL;
	enum p2pg_record_mode record = im->record;
	p2pg_importer_release(im);
	p2pg_importer_init(im, record);
	im->on_timed = p2pg_drainer_on_timed;
	p2pg_drainer_forget_rows();
	if (p2pg_store_open_wait(p2pg_rec.settings.db_path, db, err, sizeof(err), 100) < 0) {
		p2pg_notice("the database %s was replaced and cannot be opened again (%s); records "
			    "stay in %s for `p2pguard recover`",
			    p2pg_rec.settings.db_path, err, p2pg_rec.spool_path);
		return;
	}
	sqlite3_busy_timeout(*db, 100);
	*know_file = stat(p2pg_rec.settings.db_path, opened) == 0;
	p2pg_notice("the database %s was deleted or replaced while the program ran; the records "
		    "from now on go to the file now there",
		    p2pg_rec.settings.db_path);
}

/* Drainer, pass_lock held: once per process, off the program's calls, the ordinals' physical
 * GPUs go into the spool (imported with the next pass, or by recovery). */
static void note_devices(struct p2pg_spool_layout *spool)
{
	if (!atomic_load(&p2pg_rec.devices_done) && !atomic_load(&p2pg_rec.exiting) &&
	    atomic_load(&p2pg_rec.driver_ready))
		atomic_store(&p2pg_rec.devices_done, p2pg_devices_record(spool));
}

static bool stop_requested(void)
{
	pthread_mutex_lock(&p2pg_rec.lock);
	bool stop = p2pg_rec.stop;
	pthread_mutex_unlock(&p2pg_rec.lock);
	return stop;
}

/* Between two transactions of an old spool's import: a fork() gets its turn, and the program's
 * exit (past the deadline, when one is set) or crash stops the import (the rest waits for the next
 * reader). */
static bool between_recovery_batches(void *userdata)
{
	const uint64_t *deadline = userdata;
	let_forks_through();
	if (*deadline)
		return p2pg_now_ns() < *deadline && !atomic_load(&p2pg_rec.crashing);
	return !stop_requested() && !atomic_load(&p2pg_rec.crashing);
}

/* Spools of processes that are gone (children that left with _exit, ranks that were killed),
 * imported a transaction at a time so that a fork() never waits for more than one. deadline: at
 * exit, when to stop (CLOCK_MONOTONIC); 0: until the program's exit begins. */
static int recover_others(sqlite3 *db, uint64_t deadline)
{
	struct p2pg_recovery r = {
	    .skip_path = p2pg_rec.spool_path,
	    .record = p2pg_rec.settings.record,
	    .between = between_recovery_batches,
	    .userdata = &deadline,
	};
	int n = p2pg_store_recover_dir_with(db, p2pg_rec.spool_dir, &r);
	static bool said;
	if (n < 0 && !said) {
		said = true;
		p2pg_notice(
		    "cannot import the spools of earlier processes in %s into %s (%s); they "
		    "stay for `p2pguard recover`",
		    p2pg_rec.spool_dir, p2pg_rec.settings.db_path,
		    r.error[0] ? r.error : strerror(-n));
	}
	return n;
}

/* Records one pass imports at most: a pass holds pass_lock, which a fork() waits for. */
#define PASS_BUDGET 65536
/* At exit, within p2pg_recorder_shutdown's one second: the last pass retries a busy database until
 * this long after the stop, and the spools of processes that are gone are imported until the
 * second bound. */
#define FINAL_PASS_NS	  600000000ull
#define FINAL_RECOVERY_NS 800000000ull

/* p2pg_rec.lock held. The exit's request for a last pass with CUDA, while no database is open: no
 * row has a GPU time to fill, so it is answered at once rather than after the exit's second. */
static void answer_flush_without_database(struct p2pg_spool_layout *spool)
{
	if (p2pg_rec.flush_asked > p2pg_rec.flush_answered) {
		/* Every record waits in the spool: their times go there with them. */
		p2pg_drainer_time_unimported(spool, NULL, &p2pg_rec.exit_report);
		atomic_store(&p2pg_rec.exiting, true);
		p2pg_rec.flush_answered = p2pg_rec.flush_asked;
		pthread_cond_broadcast(&p2pg_rec.flushed);
	}
}

/* While the database is opened: once the exit's last pass with CUDA has had its one wait for
 * another rank's lock (a lock held for a moment, as ranks sharing a database do, must not cost
 * the GPU times only this process can read), the stop or a crash ends the wait at once; the
 * records wait in the spool. */
static bool stop_begun(void *unused)
{
	(void)unused;
	return atomic_load(&p2pg_rec.exiting) || atomic_load(&p2pg_rec.crashing) ||
	       stop_requested();
}

static void *drainer_main(void *arg)
{
	/* Whatever the drainer calls (SQLite, the driver for event queries) must never be taken for
	 * the program's own calls. */
	p2pg_reentry_mark_own_thread();
	struct p2pg_spool_layout *spool = atomic_load(&p2pg_rec.spool);
	sqlite3 *db = NULL;
	char err[256];
	pthread_mutex_lock(&pass_lock);
	atomic_store(&p2pg_rec.drainer_tid, p2pg_tid());
	sem_post(arg); /* p2pg_drainer_start's, which returns now */
	/* Opening writes the schema: like a pass, it waits at most 100 ms for another rank's lock
	 * with pass_lock held, and tries again later with it released, until the program ends. */
	int rc;
	bool stopped = false;
	while ((rc = p2pg_store_open_until(p2pg_rec.settings.db_path, &db, err, sizeof(err), 100,
					   stop_begun, NULL)) == -EBUSY) {
		if (!atomic_load(&p2pg_rec.exiting) && !atomic_load(&p2pg_rec.crashing))
			p2pg_recorder_note_device_count(spool);
		note_devices(spool); /* into the spool, whatever the database does */
		pthread_mutex_unlock(&pass_lock);
		pthread_mutex_lock(&p2pg_rec.lock);
		answer_flush_without_database(spool);
		stopped = p2pg_rec.stop;
		if (!stopped)
			nap_locked(50);
		answer_flush_without_database(spool);
		pthread_mutex_unlock(&p2pg_rec.lock);
		pthread_mutex_lock(&pass_lock);
		if (stopped)
			break;
	}
	if (rc < 0) {
		atomic_store(&p2pg_rec.drainer_tid, 0);
		pthread_mutex_unlock(&pass_lock);
		/* Locked by other ranks until the program ended: nothing to say, the records
		 * wait in the spool for the next reader (which imports it first) and the
		 * process is not called recovered. */
		if (!stopped)
			p2pg_notice("cannot use the database %s (%s); records stay in %s for "
				    "`p2pguard recover`, the program runs on",
				    p2pg_rec.settings.db_path, err, p2pg_rec.spool_path);
		/* The spool is what recovery will read: the devices go there too, once the
		 * program's cuInit has made them readable (it may not have returned yet). */
		pthread_mutex_lock(&p2pg_rec.lock);
		while (!p2pg_rec.stop && !p2pg_rec.devices_done &&
		       !atomic_load(&p2pg_rec.exiting)) {
			pthread_mutex_unlock(&p2pg_rec.lock);
			pthread_mutex_lock(&pass_lock);
			note_devices(spool);
			pthread_mutex_unlock(&pass_lock);
			pthread_mutex_lock(&p2pg_rec.lock);
			if (!p2pg_rec.stop && !p2pg_rec.devices_done)
				nap_locked(50);
		}
		pthread_mutex_unlock(&p2pg_rec.lock);
		return NULL;
	}
	/* A pass holds pass_lock, which a fork() in the program waits for: a pass must never sit in
	 * SQLite's busy handler for long. Another rank holding the write lock costs at most 100 ms;
	 * the records wait in the ring for the next pass. */
	sqlite3_busy_timeout(db, 100);
	struct stat opened;
	bool know_file = stat(p2pg_rec.settings.db_path, &opened) == 0;
	struct p2pg_importer im;
	p2pg_importer_init(&im, p2pg_rec.settings.record);
	im.on_timed = p2pg_drainer_on_timed;
	im.budget = PASS_BUDGET;
	bool warned = false;
	bool crash_spooled = false;
	unsigned passes = 0;
	uint64_t stopped_at = 0;

	pthread_mutex_lock(&p2pg_rec.lock);
	for (;;) {
		bool stopping = p2pg_rec.stop;
		/* The exit's request for a last pass with CUDA: the runtime's teardown waits. */
		uint64_t flush =
		    p2pg_rec.flush_asked > p2pg_rec.flush_answered ? p2pg_rec.flush_asked : 0;
		pthread_mutex_unlock(&p2pg_rec.lock);

		if (p2pg_cupti_active())
			p2pg_drainer_match_needed();
		bool no_cuda = atomic_load(&p2pg_rec.exiting);
		if (!no_cuda && !atomic_load(&p2pg_rec.crashing))
			p2pg_recorder_note_device_count(spool);
		if (stopping && !stopped_at)
			stopped_at = p2pg_now_ns();

		/* Rows written into a database that was deleted or replaced under us would be lost
		 * with it: the records wait in the spool for the file now at the path. */
		if (know_file && database_replaced(&opened)) {
			reopen_database(&db, &im, &opened, &know_file);
			if (!db)
				break;
			if (passes > 0 && p2pg_rec.hooks.database_opened)
				p2pg_rec.hooks.database_opened(db, p2pg_rec.settings.rules_dir);
			im.budget = PASS_BUDGET;
		}
		uint64_t pass = atomic_fetch_add(&p2pg_rec.passes_begun, 1) + 1;
		atomic_thread_fence(memory_order_seq_cst); /* see p2pg_recorder_await_signal_safe */
		if (stopping) {
			/* The last pass takes everything, and a database locked by another rank is
			 * tried again until shortly before shutdown gives up on this thread. */
			im.budget = 0;
			uint64_t until = stopped_at + FINAL_PASS_NS;
			while ((rc = p2pg_store_import(db, spool, &im, false)) == -EBUSY &&
			       p2pg_now_ns() < until)
				let_forks_through();
		} else {
			rc = p2pg_store_import(db, spool, &im, false);
		}
		p2pg_rec.pass_busy = rc == -EBUSY;
		/* A crash waits for a pass that took everything published before it. */
		if (rc >= 0 && !im.more)
			atomic_store(&p2pg_rec.passes_imported, pass);
		/* A fatal signal's wait does not stop the GPU times: events are only asked, and
		 * what has completed is taken; the wait is bounded if the driver blocks. */
		no_cuda = atomic_load(&p2pg_rec.exiting);
		struct p2pg_exit_report report = {0};
		/* GPU times before the housekeeping below (the first pass writes the rules): a
		 * short program's copies are read while it still runs. */
		if (p2pg_rec.npending && !stopping && !no_cuda) {
			p2pg_drainer_poll_timings(db, flush ? &report : NULL);
			if (flush)
				p2pg_drainer_finish_timings(db, &report);
		}
		/* Records this pass could not take (another rank's lock, a failed write) and those
		 * published since keep their GPU times in the spool. */
		if (flush && !no_cuda)
			p2pg_drainer_time_unimported(spool, &im, &report);
		if (p2pg_rec.match)
			p2pg_drainer_collect_cupti(db, stopping || no_cuda, flush ? &report : NULL);
		/* Times read whose rows a busy database would not take: into the spool too. */
		if (flush)
			p2pg_drainer_spool_row_times(&report);
		/* A fatal signal while the database is locked: the process may be gone before
		 * another pass, so the times go where the records are, once for this crash. */
		bool crashing = atomic_load(&p2pg_rec.crashing);
		if (crashing && !crash_spooled && !no_cuda && (rc < 0 || im.more)) {
			p2pg_drainer_time_unimported(spool, &im, NULL);
			p2pg_drainer_spool_row_times(NULL);
			crash_spooled = true;
		}
		if (!crashing)
			crash_spooled = false; /* a previous handler recovered from that one */
		if (rc >= 0)
			p2pg_drainer_watch_nccl(db, im.process_id, stopping);
		atomic_store(&p2pg_rec.passes_timed, pass);
		note_devices(spool);
		if (flush) {
			/* The contexts go next: no CUDA call from here on. */
			atomic_store(&p2pg_rec.exiting, true);
			pthread_mutex_lock(&p2pg_rec.lock);
			p2pg_rec.flush_answered = flush;
			p2pg_rec.exit_report = report;
			pthread_cond_broadcast(&p2pg_rec.flushed);
			pthread_mutex_unlock(&p2pg_rec.lock);
		}
		if (passes++ == 0) {
			/* After the first pass, so that the program's early records never wait. The
			 * rules are read (a user's folder may be slow, or large) with pass_lock
			 * released: a fork() does not wait for them. */
			if (p2pg_rec.hooks.prepare) {
				pthread_mutex_unlock(&pass_lock);
				p2pg_rec.hooks.prepare(p2pg_rec.settings.rules_dir);
				pthread_mutex_lock(&pass_lock);
			}
			if (p2pg_rec.hooks.database_opened)
				p2pg_rec.hooks.database_opened(db, p2pg_rec.settings.rules_dir);
			int recovered =
			    recover_others(db, stopping ? stopped_at + FINAL_RECOVERY_NS : 0);
			if (recovered > 0 && !p2pg_rec.settings.quiet)
				p2pg_notice(
				    "imported the records of %d earlier process%s that ended "
				    "without a flush",
				    recovered, recovered == 1 ? "" : "es");
		} else if (stopping || passes % 200 == 0) {
			/* Children that left with _exit, ranks that were killed: their spools are
			 * imported by whoever is still alive, about once a second, and once more at
			 * exit, then only until shutdown's bound: this process's own last pass came
			 * first, and it is marked a clean exit whatever happens after. */
			recover_others(db, stopping ? stopped_at + FINAL_RECOVERY_NS : 0);
		}
		if (p2pg_rec.hooks.rows_written)
			p2pg_rec.hooks.rows_written(db);
		if (rc < 0 && rc != -EBUSY && !warned) {
			warned = true;
			p2pg_notice(
			    "writing to %s failed (%s); records stay in %s for `p2pguard recover`",
			    p2pg_rec.settings.db_path, im.error[0] ? im.error : strerror(-rc),
			    p2pg_rec.spool_path);
		}
		if (stopping) {
			p2pg_rec.drained_all = rc >= 0 && !im.more;
			break;
		}
		/* A busy pass means busy rings: go again at once rather than let them fill. */
		bool busy = rc >= 1024 || im.more;
		pthread_mutex_unlock(&pass_lock);
		wait_for_forks();
		pthread_mutex_lock(&p2pg_rec.lock);
		/* 5 ms between passes: a row is queryable well within 100 ms, and an idle process
		 * costs 200 wake-ups a second at most. */
		if (!p2pg_rec.stop && !busy && p2pg_rec.flush_asked == p2pg_rec.flush_answered)
			nap_locked(5);
		pthread_mutex_unlock(&p2pg_rec.lock);
		pthread_mutex_lock(&pass_lock);
		pthread_mutex_lock(&p2pg_rec.lock);
	}
	atomic_store(&p2pg_rec.drainer_tid, 0);
	p2pg_importer_release(&im);
	sqlite3_close(db);
	pthread_mutex_unlock(&pass_lock);
	return NULL;
}

bool p2pg_recorder_await_signal_safe(uint64_t timeout_ns)
{
	uint32_t drainer = atomic_load(&p2pg_rec.drainer_tid);
	/* No drainer (or one that could not open the database), or the drainer itself faulted:
	 * nobody to wait for. */
	if (!drainer || drainer == p2pg_tid_signal_safe())
		return false;
	atomic_store(&p2pg_rec.crashing, true);
	/* A pass that begins after this moment sees everything published before it. The fences
	 * here and in the drainer keep the blob's publication from being ordered after this read
	 * (a store then a load of another location may pass each other otherwise). */
	atomic_thread_fence(memory_order_seq_cst);
	uint64_t after = atomic_load(&p2pg_rec.passes_begun);
	uint64_t deadline = p2pg_now_ns() + timeout_ns;
	/* First the crash and every record before it; then, within the same bound, the GPU times
	 * of that pass: the copies that completed before the fault keep theirs. The drainer asks
	 * the events after the import, so a driver that blocks it there (the faulting thread held
	 * its lock) costs the time left, never the crash row. */
	bool imported = false;
	while (!(imported = atomic_load(&p2pg_rec.passes_imported) > after) ||
	       atomic_load(&p2pg_rec.passes_timed) <= after) {
		if (p2pg_now_ns() >= deadline || !atomic_load(&p2pg_rec.drainer_tid))
			break;
		struct timespec nap = {0, 1000000}; /* the drainer passes every 5 ms */
		nanosleep(&nap, NULL);
	}
	/* A previous handler may yet recover from the fault: the drainer goes on as before then. */
	atomic_store(&p2pg_rec.crashing, false);
	return imported || atomic_load(&p2pg_rec.passes_imported) > after;
}
