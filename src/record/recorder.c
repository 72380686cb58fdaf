/* SPDX-License-Identifier: MIT */
#include "recorder.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "clock.h"
#include "cupti_timing.h"
#include "devices.h"
#include "driver.h"
#include "nccl_watch.h"
#include "notice.h"
#include "reentry.h"
#include "spool.h"
#include "store.h"
#include "timing.h"

struct pending {
	int64_t row;
	unsigned slot;
	uint64_t started_ns; /* CLOCK_REALTIME, the copy's start */
	bool stalled;	     /* its stalls row is written */
	uint64_t gpu_ns;     /* read from the events, not yet written (the database was busy) */
};

/* What the exit's last GPU-time pass found, for P2PGUARD_TEST=exit-report. */
struct p2pg_exit_report {
	size_t pending;	   /* event-timed rows waiting when it began */
	size_t resolved;   /* of those, read and written */
	size_t unfinished; /* still running on the GPU */
	size_t failed;	   /* the driver refused to answer */
	int first_error;   /* its first refusal */
	size_t cupti_rows; /* rows waiting for a CUPTI record when it began */
	size_t cupti_left; /* of those, still without one after it */
};

static struct {
	struct p2pg_settings settings;
	struct p2pg_recorder_hooks hooks;
	char mode_name[16];
	char spool_dir[PATH_MAX];
	char spool_path[PATH_MAX];

	pthread_mutex_t start_lock;
	_Atomic(struct p2pg_spool_layout *) spool;
	int spool_fd;
	bool spool_failed;

	pthread_mutex_t lock;
	pthread_cond_t wake;
	pthread_t drainer;
	bool drainer_running;
	bool stop;
	bool drained_all;     /* the last pass before shutdown imported everything */
	_Atomic bool exiting; /* exit has begun: the drainer makes no more CUDA calls */
	/* A fatal signal's handler waits for a final import: the drainer imports and asks the
	 * events it has, and starts nothing else (no other process's spool, no device count). */
	_Atomic bool crashing;
	_Atomic bool driver_ready; /* the program's cuInit succeeded: the devices can be read */
	_Atomic bool devices_done; /* drainer: the devices blob is published (or there is none) */
	/* A fatal signal's handler waits for a final import: the drainer's thread id while it runs
	 * and has a database or may still open one (0 otherwise), and its import passes, counted as
	 * they begin and as they succeed. */
	_Atomic uint32_t drainer_tid;
	_Atomic uint64_t passes_begun;
	_Atomic uint64_t passes_imported;
	_Atomic uint64_t passes_timed; /* passes whose GPU-time work (after the import) ended */

	/* The exit's request for a last pass that resolves the GPU times (rec.lock): asked,
	 * answered, and the drainer's answer's signal. */
	uint64_t flush_asked, flush_answered;
	pthread_cond_t flushed;
	struct p2pg_exit_report exit_report; /* what that pass found (P2PGUARD_TEST=exit-report) */

	/* drainer-private */
	struct pending *pending;
	size_t npending, cap_pending;
	struct p2pg_gpu_match *match; /* CUPTI timing: rows and records waiting for each other */
	uint64_t cupti_heard_ns;      /* monotonic: CUPTI last delivered, or no row waited */
	_Atomic(const struct p2pg_nccl_watch *) nccl;
	uint64_t nccl_watched_ns; /* monotonic: the last look at NCCL's operations */
} rec = {
    .start_lock = PTHREAD_MUTEX_INITIALIZER,
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .wake = PTHREAD_COND_INITIALIZER,
    .flushed = PTHREAD_COND_INITIALIZER,
    .spool_fd = -1,
};

static __thread struct p2pg_spool_thread *tls_ring __attribute__((tls_model("initial-exec")));
static __thread uint32_t tls_tid __attribute__((tls_model("initial-exec")));
static __thread bool tls_no_ring __attribute__((tls_model("initial-exec")));
static pthread_key_t ring_key;
static pthread_once_t ring_key_once = PTHREAD_ONCE_INIT;

uint32_t p2pg_tid(void)
{
	if (!tls_tid)
		tls_tid = (uint32_t)syscall(SYS_gettid);
	return tls_tid;
}

uint32_t p2pg_tid_signal_safe(void)
{
	return tls_tid ? tls_tid : (uint32_t)syscall(SYS_gettid);
}

static void ring_retire(void *ring)
{
	struct p2pg_spool_thread *t = ring;
	if (t)
		atomic_store_explicit(&t->state, P2PG_SLOT_RETIRED, memory_order_release);
}

static void make_ring_key(void)
{
	pthread_key_create(&ring_key, ring_retire);
}

static _Atomic bool configured;

bool p2pg_recorder_configured(void)
{
	return atomic_load(&configured);
}

void p2pg_recorder_configure(const struct p2pg_settings *s, const char *mode_name,
			     const struct p2pg_recorder_hooks *hooks)
{
	rec.settings = *s;
	if (hooks)
		rec.hooks = *hooks;
	snprintf(rec.mode_name, sizeof(rec.mode_name), "%s", mode_name);
	if (p2pg_spool_dir_for(s->db_path, rec.spool_dir, sizeof(rec.spool_dir)) < 0)
		rec.spool_dir[0] = '\0';
	p2pg_cupti_time_local_copies(s->test_hooks & P2PG_TEST_LOCAL_COPIES);
	/* With CUPTI, events still time what CUPTI cannot: staged copies, copies in a forked child.
	 */
	p2pg_timing_configure(s->gpu_timing == P2PG_GPU_TIMING_CUPTI ? P2PG_GPU_TIMING_SAMPLED
								     : s->gpu_timing,
			      (uint64_t)s->gpu_timing_interval_us * 1000, s->gpu_timing_min_bytes);
	atomic_store(&configured, true);
}

static void process_info(struct p2pg_process_info *info)
{
	memset(info, 0, sizeof(*info));
	if (gethostname(info->hostname, sizeof(info->hostname) - 1) < 0)
		snprintf(info->hostname, sizeof(info->hostname), "unknown");
	info->rank = rec.settings.rank;
	info->local_rank = rec.settings.local_rank;
	info->mode = rec.mode_name;
	info->record = rec.settings.record;
	/* The run this process belongs to (`p2pguard run` sets it for the whole process tree it
	 * starts): kept only when it looks like one, so that a stray value cannot pass for one. */
	const char *run = getenv("P2PGUARD_RUN_ID");
	size_t run_len = run ? strspn(run, "0123456789abcdefghijklmnopqrstuvwxyz-") : 0;
	if (run && run_len > 0 && run_len < sizeof(info->run_id) && run[run_len] == '\0')
		memcpy(info->run_id, run, run_len + 1);
	int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t n = read(fd, info->cmdline, sizeof(info->cmdline) - 1);
		close(fd);
		for (ssize_t k = 0; k < n - 1; k++)
			if (info->cmdline[k] == '\0')
				info->cmdline[k] = ' ';
		if (n > 0)
			info->cmdline[n] = '\0';
	}
}

static void *drainer_main(void *arg);

/*
 * Held by the drainer except while it waits between passes. A fork() in the middle of a pass would
 * copy SQLite's global mutexes (and, under ASan, the allocator's) held by a thread the child does
 * not have, and the child's own drainer, or its next malloc, would wait on them forever. So a fork
 * waits for the pass to end; and start_drainer returns only once the new thread holds the lock,
 * so that a fork cannot come while the thread is still starting (ASan allocates then).
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
static bool start_drainer(void)
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
	int rc = pthread_create(&rec.drainer, &attr, drainer_main, &started);
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc == 0)
		while (sem_wait(&started) < 0 && errno == EINTR)
			;
	sem_destroy(&started);
	if (rc != 0)
		return false;
	rec.drainer_running = true;
	return true;
}

static struct p2pg_spool_layout *spool_get(void)
{
	struct p2pg_spool_layout *spool = atomic_load_explicit(&rec.spool, memory_order_acquire);
	if (__builtin_expect(spool != NULL, 1))
		return spool;
	if (rec.spool_failed)
		return NULL;
	pthread_mutex_lock(&rec.start_lock);
	spool = atomic_load(&rec.spool);
	if (!spool && !rec.spool_failed) {
		struct p2pg_process_info info;
		process_info(&info);
		char why[256] = "path too long";
		spool = rec.spool_dir[0]
			    ? p2pg_spool_create(rec.spool_dir, &info, &rec.spool_fd, rec.spool_path,
						sizeof(rec.spool_path), why, sizeof(why))
			    : NULL;
		if (!spool) {
			/* Without a spool nothing can be recorded safely: the database is written
			 * only from the spool, so that nothing is ever half kept. */
			rec.spool_failed = true;
			p2pg_notice(
			    "cannot create the spool in %s: %s; this process's calls are not "
			    "recorded, the program runs on",
			    rec.spool_dir[0] ? rec.spool_dir : "(none)", why);
		} else {
			atomic_store_explicit(&rec.spool, spool, memory_order_release);
			if (!start_drainer())
				p2pg_notice(
				    "cannot start the drainer thread; records stay in %s until "
				    "`p2pguard recover`",
				    rec.spool_path);
		}
	}
	pthread_mutex_unlock(&rec.start_lock);
	return spool;
}

struct p2pg_spool_layout *p2pg_recorder_spool_signal_safe(void)
{
	return atomic_load_explicit(&rec.spool, memory_order_acquire);
}

/* The process's device count, for the importers' checks (a successful call names no device past
 * it). Asked by each thread's first record and by the drainer until known. */
static void note_device_count(struct p2pg_spool_layout *spool)
{
	if (atomic_load_explicit(&spool->header.device_count, memory_order_relaxed) ||
	    !p2pg_drv.cuDeviceGetCount)
		return;
	int n = 0;
	if (p2pg_drv.cuDeviceGetCount(&n) == CUDA_SUCCESS && n > 0)
		atomic_store(&spool->header.device_count, n);
}

static struct p2pg_spool_thread *ring_get(void)
{
	if (__builtin_expect(tls_ring != NULL, 1))
		return tls_ring;
	if (tls_no_ring)
		return NULL;
	struct p2pg_spool_layout *spool = spool_get();
	if (!spool)
		return NULL;
	errno = 0;
	tls_ring = p2pg_spool_claim_thread(spool, rec.spool_fd, p2pg_tid());
	if (!tls_ring) {
		tls_no_ring = true;
		static atomic_bool said;
		int e = errno;
		if (e && !atomic_exchange(&said, true))
			p2pg_notice(
			    "no room for a thread's records in %s (%s); its calls are counted "
			    "as dropped, the program runs on",
			    rec.spool_path,
			    e == EFBIG
				? "the file size limit, RLIMIT_FSIZE or `ulimit -f`, is reached"
				: strerror(e));
		return NULL;
	}
	pthread_once(&ring_key_once, make_ring_key);
	pthread_setspecific(ring_key, tls_ring);
	/* A thread's first record follows a call the driver answered: it is initialised, and the
	 * count is known for the records of a process that may be killed before its drainer asks.
	 */
	note_device_count(spool);
	return tls_ring;
}

uint64_t p2pg_record(struct p2pg_record *r, uint32_t *ret_serial)
{
	struct p2pg_spool_thread *t = ring_get();
	if (!t) {
		struct p2pg_spool_layout *spool = atomic_load(&rec.spool);
		if (spool)
			atomic_fetch_add_explicit(&spool->header.dropped_no_slot, 1,
						  memory_order_relaxed);
		return UINT64_MAX;
	}
	r->tid = tls_tid;
	if (ret_serial)
		*ret_serial = t->serial;
	return p2pg_spool_put(t, r);
}

void p2pg_recorder_watch_nccl(const struct p2pg_nccl_watch *w)
{
	atomic_store(&rec.nccl, w);
}

/* NCCL's operations in flight, about every 100 ms, and once more at the end. */
static void watch_nccl(sqlite3 *db, int64_t process_id, bool final)
{
	const struct p2pg_nccl_watch *w = atomic_load(&rec.nccl);
	uint64_t mono = p2pg_now_ns();
	if (!w || process_id == 0 || (!final && mono - rec.nccl_watched_ns < 100000000ull))
		return;
	rec.nccl_watched_ns = mono;
	struct p2pg_spool_layout *spool = atomic_load(&rec.spool);
	struct p2pg_nccl_watch_pass pass = {
	    .process_id = process_id,
	    .boot_id = spool ? spool->header.boot_id : NULL,
	    .stall_s = rec.settings.stall_s,
	    .rules_dir = rec.settings.rules_dir,
	    .diagnosis = rec.hooks.nccl_stall_diagnosis,
	    .final = final,
	};
	p2pg_nccl_watch_run(db, w, &pass);
}

struct p2pg_spool_blob *p2pg_recorder_blob(void)
{
	struct p2pg_spool_layout *spool = spool_get();
	if (!spool)
		return NULL;
	struct p2pg_spool_blob *blob = p2pg_spool_blob_claim(spool);
	/* The slots the file holds are all taken: more of them, if the file may grow. */
	if (!blob && p2pg_spool_blobs_grow(spool, rec.spool_fd) == 0)
		blob = p2pg_spool_blob_claim(spool);
	/* Every blob slot waiting for a starved drainer: this failure's entry is lost, and the
	 * loss is counted with the other records lost (processes.records_dropped). */
	if (!blob)
		atomic_fetch_add_explicit(&spool->header.dropped_no_slot, 1, memory_order_relaxed);
	return blob;
}

void p2pg_recorder_driver_ready(void)
{
	atomic_store(&rec.driver_ready, true);
}

void p2pg_recorder_set_driver_version(int version)
{
	struct p2pg_spool_layout *spool = spool_get();
	if (spool)
		atomic_store(&spool->header.driver_version, version);
}

/* ---- the drainer ---- */

/* Longer than any copy should wait behind the work queued before it; a copy that does wait longer
 * only costs the rest of the process CUPTI's times (sampled events instead). */
#define CUPTI_SILENCE_NS (10 * 1000000000ull)

/* CUPTI starts at the program's cuInit, which may come after the drainer's start or its last look.
 */
static void match_needed(void)
{
	if (rec.match)
		return;
	rec.match = p2pg_gpu_match_new();
	rec.cupti_heard_ns = p2pg_now_ns();
}

static void on_timed(void *userdata, const struct p2pg_pending_timing *t)
{
	(void)userdata;
	int64_t row = t->row;
	uint32_t slot = t->slot;
	if (t->cupti) {
		match_needed();
		struct p2pg_gpu_row r = {
		    .row = row,
		    .started_ns = t->started_ns,
		    .bytes = t->bytes,
		    .context_id = t->cupti_context,
		    .stream_id = slot,
		    .src_device = t->src_device,
		    .dst_device = t->dst_device,
		};
		if (row && rec.match)
			p2pg_gpu_match_row(rec.match,
					   &r); /* out of memory: the row keeps no time */
		return;
	}
	if (row == 0) {
		/* Summarised: no row to put the time in. The pair may be reused at once (a new
		 * record of the same events supersedes the old). */
		p2pg_timing_cancel((int)slot);
		return;
	}
	if (rec.npending == rec.cap_pending) {
		size_t cap = rec.cap_pending ? rec.cap_pending * 2 : 256;
		struct pending *grown = realloc(rec.pending, cap * sizeof(*grown));
		if (!grown) {
			p2pg_timing_cancel((int)slot); /* the time is lost, the pair must not be */
			return;
		}
		rec.pending = grown;
		rec.cap_pending = cap;
	}
	rec.pending[rec.npending++] =
	    (struct pending){.row = row, .slot = slot, .started_ns = t->started_ns};
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
	if (p2p && rec.hooks.stall_diagnosis &&
	    rec.hooks.stall_diagnosis(rec.settings.rules_dir, &rule_id, &root_cause, &advice))
		p2pg_store_add_stall(db, p->row, now_ns, rec.settings.stall_s, rule_id, root_cause,
				     advice);
	else
		p2pg_store_add_stall(
		    db, p->row, now_ns, rec.settings.stall_s, NULL,
		    "A peer copy that did not use the P2P path has not finished: the GPU, or "
		    "work enqueued before it on its stream, is stuck (see the stream's other rows)",
		    NULL);
}

/* Asks the events of the rows waiting for a GPU time; report: this is the exit's last pass. */
static void poll_timings(sqlite3 *db, struct p2pg_exit_report *report)
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
	bool began = false;
	uint64_t now = p2pg_realtime_ns(); /* one clock read a pass: thousands of copies may wait */
	if (report)
		report->pending = rec.npending;
	for (size_t k = 0; k < rec.npending; k++) {
		struct pending *p = &rec.pending[k];
		/* Exit may begin during the pass: from then on no CUDA call. */
		if (!p->gpu_ns && atomic_load(&rec.exiting)) {
			rec.pending[kept++] = *p;
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
			    now - p->started_ns >= (uint64_t)rec.settings.stall_s * 1000000000ull) {
				if (!began)
					began = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL,
							     NULL) == SQLITE_OK;
				if (began)
					record_stall(db, p, now);
			}
			rec.pending[kept++] = *p;
			continue;
		}
		if (st == P2PG_TIMING_GONE) {
			if (report && error && !report->failed++)
				report->first_error = error;
			continue;
		}
		if (!began)
			began = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) == SQLITE_OK;
		/* The events are free again; a time the busy database could not take now waits
		 * with its row for the next pass. */
		if (!began || p2pg_store_set_gpu_ns(db, p->row, p->gpu_ns) < 0) {
			rec.pending[kept++] = *p;
			continue;
		}
		if (report)
			report->resolved++;
	}
	if (began && sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
		/* Rolled back: the times read this pass are lost with it (their events are free
		 * again); rare enough (a commit that fails after BEGIN IMMEDIATE) to be left. */
		sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
	}
	rec.npending = kept;
}

struct cupti_pass {
	sqlite3 *db;
	bool began;
};

static void cupti_found(void *arg, int64_t row, uint64_t gpu_ns)
{
	struct cupti_pass *p = arg;
	if (!p->began)
		p->began = sqlite3_exec(p->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) == SQLITE_OK;
	if (p->began)
		p2pg_store_set_gpu_ns(p->db, row, gpu_ns);
}

/*
 * CUPTI's records for the rows waiting: asked for at every pass while rows wait, matched, written
 * in one transaction. Records of copies that found no row in a minute are let go, and rows whose
 * record never came keep no GPU time. final: exit has begun, so no flush (what CUPTI delivered by
 * itself is still matched).
 */
static void collect_cupti(sqlite3 *db, bool final, struct p2pg_exit_report *report)
{
	uint64_t now = p2pg_realtime_ns();
	/* What CUPTI handed over by itself is taken at every pass (it must not pile up while no
	 * row waits); it is asked for more only while rows wait. */
	size_t rows = p2pg_gpu_match_rows_waiting(rec.match);
	bool waiting = rows > 0;
	if (report)
		report->cupti_rows = rows;
	uint64_t mono = p2pg_now_ns(); /* the silence is timed by a clock that is never set */
	if (p2pg_cupti_collect(rec.match, !final && waiting) > 0 || !waiting) {
		rec.cupti_heard_ns = mono;
	} else if (p2pg_cupti_active() && mono - rec.cupti_heard_ns > CUPTI_SILENCE_NS) {
		/* Rows have waited that long while CUPTI handed over nothing: a profiler
		 * (PyTorch's, say) registered its own activity callbacks, which leaves the guard's
		 * none, and may have switched copy tracing off when it stopped. A copy that never
		 * finishes looks the same from here (CUPTI records only finished copies), and so
		 * does one that leaves no record, which is why no stalls row is written from
		 * CUPTI's silence (docs/robustness.md, "Hangs": copies timed by CUPTI are not
		 * watched). */
		p2pg_cupti_give_up();
		if (!rec.settings.quiet)
			p2pg_notice(
			    "GPU times of peer copies: CUPTI has delivered nothing for %d s "
			    "(another CUPTI client, such as a profiler, took it over, or the "
			    "copies waited for have not finished); timing events sampled instead",
			    (int)(CUPTI_SILENCE_NS / 1000000000ull));
	}
	struct cupti_pass pass = {db, false};
	p2pg_gpu_match_run(rec.match, now, 60000000000ull, cupti_found, &pass);
	if (pass.began)
		sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
	if (report)
		report->cupti_left = p2pg_gpu_match_rows_waiting(rec.match);
}

/* The drainer's sleep between tries: up to ms, or until shutdown wakes it. rec.lock
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
	pthread_cond_timedwait(&rec.wake, &rec.lock, &until);
}

static bool database_replaced(const struct stat *opened)
{
	struct stat now;
	return stat(rec.settings.db_path, &now) < 0 || now.st_ino != opened->st_ino ||
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
	im->on_timed = on_timed;
	if (p2pg_store_open_wait(rec.settings.db_path, db, err, sizeof(err), 100) < 0) {
		p2pg_notice("the database %s was replaced and cannot be opened again (%s); records "
			    "stay in %s for `p2pguard recover`",
			    rec.settings.db_path, err, rec.spool_path);
		return;
	}
	sqlite3_busy_timeout(*db, 100);
	*know_file = stat(rec.settings.db_path, opened) == 0;
	p2pg_notice("the database %s was deleted or replaced while the program ran; the records "
		    "from now on go to the file now there",
		    rec.settings.db_path);
}

/* Drainer, pass_lock held: once per process, off the program's calls, the ordinals' physical
 * GPUs go into the spool (imported with the next pass, or by recovery). */
static void note_devices(struct p2pg_spool_layout *spool)
{
	if (!atomic_load(&rec.devices_done) && !atomic_load(&rec.exiting) &&
	    atomic_load(&rec.driver_ready))
		atomic_store(&rec.devices_done, p2pg_devices_record(spool));
}

static bool stop_requested(void)
{
	pthread_mutex_lock(&rec.lock);
	bool stop = rec.stop;
	pthread_mutex_unlock(&rec.lock);
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
		return p2pg_now_ns() < *deadline && !atomic_load(&rec.crashing);
	return !stop_requested() && !atomic_load(&rec.crashing);
}

/* Spools of processes that are gone (children that left with _exit, ranks that were killed),
 * imported a transaction at a time so that a fork() never waits for more than one. deadline: at
 * exit, when to stop (CLOCK_MONOTONIC); 0: until the program's exit begins. */
static int recover_others(sqlite3 *db, uint64_t deadline)
{
	struct p2pg_recovery r = {
	    .skip_path = rec.spool_path,
	    .record = rec.settings.record,
	    .between = between_recovery_batches,
	    .userdata = &deadline,
	};
	int n = p2pg_store_recover_dir_with(db, rec.spool_dir, &r);
	static bool said;
	if (n < 0 && !said) {
		said = true;
		p2pg_notice(
		    "cannot import the spools of earlier processes in %s into %s (%s); they "
		    "stay for `p2pguard recover`",
		    rec.spool_dir, rec.settings.db_path, r.error[0] ? r.error : strerror(-n));
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

/* rec.lock held. The exit's request for a last pass with CUDA, while no database is open: no row
 * has a GPU time to fill, so it is answered at once rather than after the exit's second. */
static void answer_flush_without_database(void)
{
	if (rec.flush_asked > rec.flush_answered) {
		atomic_store(&rec.exiting, true);
		rec.flush_answered = rec.flush_asked;
		pthread_cond_broadcast(&rec.flushed);
	}
}

static void *drainer_main(void *arg)
{
	/* Whatever the drainer calls (SQLite, the driver for event queries) must never be taken for
	 * the program's own calls. */
	p2pg_reentry_mark_own_thread();
	struct p2pg_spool_layout *spool = atomic_load(&rec.spool);
	sqlite3 *db = NULL;
	char err[256];
	pthread_mutex_lock(&pass_lock);
	atomic_store(&rec.drainer_tid, p2pg_tid());
	sem_post(arg); /* start_drainer's, which returns now */
	/* Opening writes the schema: like a pass, it waits at most 100 ms for another rank's lock
	 * with pass_lock held, and tries again later with it released, until the program ends. */
	int rc;
	bool stopped = false;
	while ((rc = p2pg_store_open_wait(rec.settings.db_path, &db, err, sizeof(err), 100)) ==
	       -EBUSY) {
		if (!atomic_load(&rec.exiting) && !atomic_load(&rec.crashing))
			note_device_count(spool);
		note_devices(spool); /* into the spool, whatever the database does */
		pthread_mutex_unlock(&pass_lock);
		pthread_mutex_lock(&rec.lock);
		answer_flush_without_database();
		stopped = rec.stop;
		if (!stopped)
			nap_locked(50);
		answer_flush_without_database();
		pthread_mutex_unlock(&rec.lock);
		pthread_mutex_lock(&pass_lock);
		if (stopped)
			break;
	}
	if (rc < 0) {
		atomic_store(&rec.drainer_tid, 0);
		pthread_mutex_unlock(&pass_lock);
		/* Locked by other ranks until the program ended: nothing to say, the records
		 * wait in the spool for the next reader (which imports it first) and the
		 * process is not called recovered. */
		if (!stopped)
			p2pg_notice("cannot use the database %s (%s); records stay in %s for "
				    "`p2pguard recover`, the program runs on",
				    rec.settings.db_path, err, rec.spool_path);
		/* The spool is what recovery will read: the devices go there too, once the
		 * program's cuInit has made them readable (it may not have returned yet). */
		pthread_mutex_lock(&rec.lock);
		while (!rec.stop && !rec.devices_done && !atomic_load(&rec.exiting)) {
			pthread_mutex_unlock(&rec.lock);
			pthread_mutex_lock(&pass_lock);
			note_devices(spool);
			pthread_mutex_unlock(&pass_lock);
			pthread_mutex_lock(&rec.lock);
			if (!rec.stop && !rec.devices_done)
				nap_locked(50);
		}
		pthread_mutex_unlock(&rec.lock);
		return NULL;
	}
	/* A pass holds pass_lock, which a fork() in the program waits for: a pass must never sit in
	 * SQLite's busy handler for long. Another rank holding the write lock costs at most 100 ms;
	 * the records wait in the ring for the next pass. */
	sqlite3_busy_timeout(db, 100);
	struct stat opened;
	bool know_file = stat(rec.settings.db_path, &opened) == 0;
	struct p2pg_importer im;
	p2pg_importer_init(&im, rec.settings.record);
	im.on_timed = on_timed;
	im.budget = PASS_BUDGET;
	bool warned = false;
	unsigned passes = 0;
	uint64_t stopped_at = 0;

	pthread_mutex_lock(&rec.lock);
	for (;;) {
		bool stopping = rec.stop;
		/* The exit's request for a last pass with CUDA: the runtime's teardown waits. */
		uint64_t flush = rec.flush_asked > rec.flush_answered ? rec.flush_asked : 0;
		pthread_mutex_unlock(&rec.lock);

		if (p2pg_cupti_active())
			match_needed();
		bool no_cuda = atomic_load(&rec.exiting);
		if (!no_cuda && !atomic_load(&rec.crashing))
			note_device_count(spool);
		if (stopping && !stopped_at)
			stopped_at = p2pg_now_ns();

		/* Rows written into a database that was deleted or replaced under us would be lost
		 * with it: the records wait in the spool for the file now at the path. */
		if (know_file && database_replaced(&opened)) {
			reopen_database(&db, &im, &opened, &know_file);
			if (!db)
				break;
			im.budget = PASS_BUDGET;
		}
		uint64_t pass = atomic_fetch_add(&rec.passes_begun, 1) + 1;
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
		/* A crash waits for a pass that took everything published before it. */
		if (rc >= 0 && !im.more)
			atomic_store(&rec.passes_imported, pass);
		/* A fatal signal's wait does not stop the GPU times: events are only asked, and
		 * what has completed is taken; the wait is bounded if the driver blocks. */
		no_cuda = atomic_load(&rec.exiting);
		struct p2pg_exit_report report = {0};
		/* GPU times before the housekeeping below (the first pass writes the rules): a
		 * short program's copies are read while it still runs. */
		if (rec.npending && !stopping && !no_cuda)
			poll_timings(db, flush ? &report : NULL);
		if (rec.match)
			collect_cupti(db, stopping || no_cuda, flush ? &report : NULL);
		if (rc >= 0)
			watch_nccl(db, im.process_id, stopping);
		atomic_store(&rec.passes_timed, pass);
		note_devices(spool);
		if (flush) {
			/* The contexts go next: no CUDA call from here on. */
			atomic_store(&rec.exiting, true);
			pthread_mutex_lock(&rec.lock);
			rec.flush_answered = flush;
			rec.exit_report = report;
			pthread_cond_broadcast(&rec.flushed);
			pthread_mutex_unlock(&rec.lock);
		}
		if (passes++ == 0) {
			/* After the first pass, so that the program's early records never wait. The
			 * rules are read (a user's folder may be slow, or large) with pass_lock
			 * released: a fork() does not wait for them. */
			if (rec.hooks.prepare) {
				pthread_mutex_unlock(&pass_lock);
				rec.hooks.prepare(rec.settings.rules_dir);
				pthread_mutex_lock(&pass_lock);
			}
			if (rec.hooks.database_opened)
				rec.hooks.database_opened(db, rec.settings.rules_dir);
			int recovered =
			    recover_others(db, stopping ? stopped_at + FINAL_RECOVERY_NS : 0);
			if (recovered > 0 && !rec.settings.quiet)
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
		if (rc < 0 && rc != -EBUSY && !warned) {
			warned = true;
			p2pg_notice(
			    "writing to %s failed (%s); records stay in %s for `p2pguard recover`",
			    rec.settings.db_path, im.error[0] ? im.error : strerror(-rc),
			    rec.spool_path);
		}
		if (stopping) {
			rec.drained_all = rc >= 0 && !im.more;
			break;
		}
		/* A busy pass means busy rings: go again at once rather than let them fill. */
		bool busy = rc >= 1024 || im.more;
		pthread_mutex_unlock(&pass_lock);
		wait_for_forks();
		pthread_mutex_lock(&rec.lock);
		/* 5 ms between passes: a row is queryable well within 100 ms, and an idle process
		 * costs 200 wake-ups a second at most. */
		if (!rec.stop && !busy && rec.flush_asked == rec.flush_answered)
			nap_locked(5);
		pthread_mutex_unlock(&rec.lock);
		pthread_mutex_lock(&pass_lock);
		pthread_mutex_lock(&rec.lock);
	}
	atomic_store(&rec.drainer_tid, 0);
	p2pg_importer_release(&im);
	sqlite3_close(db);
	pthread_mutex_unlock(&pass_lock);
	return NULL;
}

void p2pg_recorder_process_seen(void)
{
	spool_get();
}

bool p2pg_recorder_await_signal_safe(uint64_t timeout_ns)
{
	uint32_t drainer = atomic_load(&rec.drainer_tid);
	/* No drainer (or one that could not open the database), or the drainer itself faulted:
	 * nobody to wait for. */
	if (!drainer || drainer == p2pg_tid_signal_safe())
		return false;
	atomic_store(&rec.crashing, true);
	/* A pass that begins after this moment sees everything published before it. The fences
	 * here and in the drainer keep the blob's publication from being ordered after this read
	 * (a store then a load of another location may pass each other otherwise). */
	atomic_thread_fence(memory_order_seq_cst);
	uint64_t after = atomic_load(&rec.passes_begun);
	uint64_t deadline = p2pg_now_ns() + timeout_ns;
	/* First the crash and every record before it; then, within the same bound, the GPU times
	 * of that pass: the copies that completed before the fault keep theirs. The drainer asks
	 * the events after the import, so a driver that blocks it there (the faulting thread held
	 * its lock) costs the time left, never the crash row. */
	bool imported = false;
	while (!(imported = atomic_load(&rec.passes_imported) > after) ||
	       atomic_load(&rec.passes_timed) <= after) {
		if (p2pg_now_ns() >= deadline || !atomic_load(&rec.drainer_tid))
			break;
		struct timespec nap = {0, 1000000}; /* the drainer passes every 5 ms */
		nanosleep(&nap, NULL);
	}
	/* A previous handler may yet recover from the fault: the drainer goes on as before then. */
	atomic_store(&rec.crashing, false);
	return imported || atomic_load(&rec.passes_imported) > after;
}

/* ---- exit ---- */

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
		    "%.2f ms",
		    r->pending, r->resolved, r->unfinished, r->failed, error, r->cupti_rows,
		    r->cupti_left, (double)took_ns / 1e6);
}

/*
 * The exit's last pass with CUDA, from an exit handler that runs before the CUDA runtime's own
 * (registered after it: see p2pg_recorder_arm_exit). The runtime's handler destroys the primary
 * contexts, and their events with them; a program that synchronised and returned from main has
 * its copies finished, so their events answer now. The drainer imports what is published, asks
 * every event (never waits for one), hands CUPTI's finished buffers over, writes what it found
 * and stops calling CUDA. Bounded: one second, then the exit goes on without it.
 */
static void exit_flush(void)
{
	static atomic_bool ran;
	if (atomic_exchange(&ran, true) || atomic_load(&rec.exiting))
		return;
	bool answered = false;
	struct p2pg_exit_report report = {0};
	uint64_t began = p2pg_now_ns();
	if (atomic_load(&rec.spool) && atomic_load(&rec.drainer_tid)) {
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += 1;
		pthread_mutex_lock(&rec.lock);
		uint64_t asked = ++rec.flush_asked;
		pthread_cond_broadcast(&rec.wake);
		while (rec.flush_answered < asked && atomic_load(&rec.drainer_tid))
			if (pthread_cond_timedwait(&rec.flushed, &rec.lock, &until) == ETIMEDOUT)
				break;
		answered = rec.flush_answered >= asked;
		report = rec.exit_report;
		pthread_mutex_unlock(&rec.lock);
	}
	atomic_store(&rec.exiting, true);
	if (rec.settings.test_hooks & P2PG_TEST_EXIT_REPORT)
		report_exit(&report, answered, p2pg_now_ns() - began);
}

void p2pg_recorder_arm_exit(enum p2pg_exit_arm when)
{
	/* Each moment registers once; the handler runs once, at the first of them to come. */
	static atomic_uint armed;
	bool early = rec.settings.test_hooks & P2PG_TEST_EXIT_EARLY;
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
	atomic_store(&rec.exiting, true);
}

void p2pg_recorder_shutdown(void)
{
	struct p2pg_spool_layout *spool = atomic_load(&rec.spool);
	if (!spool)
		return;
	/* The process ends by exit(): whatever its last pass leaves behind (a database locked past
	 * the bound below), whoever imports it later knows it was not a crash. */
	atomic_store(&spool->header.clean_exit, 1);
	if (!rec.drainer_running)
		return;
	pthread_mutex_lock(&rec.lock);
	rec.stop = true;
	pthread_cond_signal(&rec.wake);
	pthread_mutex_unlock(&rec.lock);

	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 1;
	if (pthread_timedjoin_np(rec.drainer, NULL, &until) != 0) {
		/* Past the one-second bound the program's exit wins; the spool keeps the rest. */
		return;
	}
	rec.drainer_running = false;
	if (rec.drained_all)
		unlink(rec.spool_path);
}

void p2pg_recorder_atfork_child(void)
{
	struct p2pg_spool_layout *spool = atomic_load(&rec.spool);
	if (spool)
		munmap(spool, P2PG_SPOOL_MAP_SIZE);
	/* Closing, not unlocking: the flock belongs to the parent's open file description. */
	if (rec.spool_fd >= 0)
		close(rec.spool_fd);
	atomic_store(&rec.spool, NULL);
	rec.spool_fd = -1;
	rec.spool_failed = false;
	rec.drainer_running = false;
	atomic_store(&rec.drainer_tid, 0); /* the parent's drainer is not in the child */
	rec.flush_asked = rec.flush_answered = 0;
	atomic_store(&rec.driver_ready, false); /* the child's own cuInit decides */
	atomic_store(&rec.devices_done, false);
	pthread_cond_init(&rec.flushed, NULL);
	rec.stop = false;
	rec.drained_all = false;
	rec.pending = NULL; /* the parent's list; the child starts its own */
	rec.npending = rec.cap_pending = 0;
	rec.match = NULL; /* the child has no CUPTI timing */
	/* The parent's NCCL operations are not the child's: its plugin registers again. */
	atomic_store(&rec.nccl, NULL);
	pthread_mutex_init(&rec.lock, NULL);
	pthread_mutex_init(&rec.start_lock, NULL);
	pthread_cond_init(&rec.wake, NULL);
	/* The forking thread's ring lies in the parent's spool, unmapped above: its thread-exit
	 * destructor must not retire it. */
	if (tls_ring)
		pthread_setspecific(ring_key, NULL);
	tls_ring = NULL;
	tls_tid = 0;
	tls_no_ring = false;
	p2pg_timing_reset_after_fork();
}
