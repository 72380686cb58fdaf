/* SPDX-License-Identifier: MIT */
/*
 * The record path: configuration, the spool (made at the first record) and each thread's ring,
 * p2pg_record itself, blob slots, and the child's fresh start after a fork(). The drainer that
 * empties the spool is drainer.c; the exit, recorder_exit.c.
 */
#include "recorder.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cupti_timing.h"
#include "driver.h"
#include "notice.h"
#include "recorder-private.h"
#include "spool.h"
#include "spool_ring.h"
#include "spool_blob.h"
#include "timing.h"

struct p2pg_recorder_state p2pg_rec = {
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
	p2pg_rec.settings = *s;
	if (hooks)
		p2pg_rec.hooks = *hooks;
	snprintf(p2pg_rec.mode_name, sizeof(p2pg_rec.mode_name), "%s", mode_name);
	if (p2pg_spool_dir_for(s->db_path, p2pg_rec.spool_dir, sizeof(p2pg_rec.spool_dir)) < 0)
		p2pg_rec.spool_dir[0] = '\0';
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
	info->rank = p2pg_rec.settings.rank;
	info->local_rank = p2pg_rec.settings.local_rank;
	info->mode = p2pg_rec.mode_name;
	info->record = p2pg_rec.settings.record;
	/* The run this process belongs to (`p2pguard run` sets it for the whole process tree it
	 * starts), checked with the other settings. */
	memcpy(info->run_id, p2pg_rec.settings.run_id, sizeof(p2pg_rec.settings.run_id));
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

static struct p2pg_spool_layout *spool_get(void)
{
	struct p2pg_spool_layout *spool =
	    atomic_load_explicit(&p2pg_rec.spool, memory_order_acquire);
	if (__builtin_expect(spool != NULL, 1))
		return spool;
	if (p2pg_rec.spool_failed)
		return NULL;
	pthread_mutex_lock(&p2pg_rec.start_lock);
	spool = atomic_load(&p2pg_rec.spool);
	if (!spool && !p2pg_rec.spool_failed) {
		struct p2pg_process_info info;
		process_info(&info);
		char why[256] = "path too long";
		spool = p2pg_rec.spool_dir[0]
			    ? p2pg_spool_create(p2pg_rec.spool_dir, &info, &p2pg_rec.spool_fd,
						p2pg_rec.spool_path, sizeof(p2pg_rec.spool_path),
						why, sizeof(why))
			    : NULL;
		if (!spool) {
			/* Without a spool nothing can be recorded safely: the database is written
			 * only from the spool, so that nothing is ever half kept. */
			p2pg_rec.spool_failed = true;
			p2pg_notice(
			    "cannot create the spool in %s: %s; this process's calls are not "
			    "recorded, the program runs on",
			    p2pg_rec.spool_dir[0] ? p2pg_rec.spool_dir : "(none)", why);
		} else {
			atomic_store_explicit(&p2pg_rec.spool, spool, memory_order_release);
			if (!p2pg_drainer_start())
				p2pg_notice(
				    "cannot start the drainer thread; records stay in %s until "
				    "`p2pguard recover`",
				    p2pg_rec.spool_path);
		}
	}
	pthread_mutex_unlock(&p2pg_rec.start_lock);
	return spool;
}

struct p2pg_spool_layout *p2pg_recorder_spool_signal_safe(void)
{
	return atomic_load_explicit(&p2pg_rec.spool, memory_order_acquire);
}

/* The process's device count, for the importers' checks (a successful call names no device past
 * it). Asked by each thread's first record and by the drainer until known. */
void p2pg_recorder_note_device_count(struct p2pg_spool_layout *spool)
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
	tls_ring = p2pg_spool_claim_thread(spool, p2pg_rec.spool_fd, p2pg_tid());
	if (!tls_ring) {
		tls_no_ring = true;
		static atomic_bool said;
		int e = errno;
		if (e && !atomic_exchange(&said, true))
			p2pg_notice(
			    "no room for a thread's records in %s (%s); its calls are counted "
			    "as dropped, the program runs on",
			    p2pg_rec.spool_path,
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
	p2pg_recorder_note_device_count(spool);
	return tls_ring;
}

uint64_t p2pg_record(struct p2pg_record *r, uint32_t *ret_serial)
{
	struct p2pg_spool_thread *t = ring_get();
	if (!t) {
		struct p2pg_spool_layout *spool = atomic_load(&p2pg_rec.spool);
		if (spool)
			atomic_fetch_add_explicit(&spool->header.dropped_no_slot, 1,
						  memory_order_relaxed);
		return UINT64_MAX;
	}
	r->tid = tls_tid;
	if (ret_serial)
		*ret_serial = t->serial;
	return p2pg_spool_put(atomic_load_explicit(&p2pg_rec.spool, memory_order_relaxed),
			      p2pg_rec.spool_fd, t, r);
}

const char *p2pg_recorder_spool_dir(void)
{
	return p2pg_rec.spool_dir;
}

struct p2pg_spool_blob *p2pg_recorder_blob(void)
{
	struct p2pg_spool_layout *spool = spool_get();
	if (!spool)
		return NULL;
	struct p2pg_spool_blob *blob = p2pg_spool_blob_claim(spool);
	/* The slots the file holds are all taken: more of them, if the file may grow. */
	if (!blob && p2pg_spool_blobs_grow(spool, p2pg_rec.spool_fd) == 0)
		blob = p2pg_spool_blob_claim(spool);
	/* Every blob slot waiting for a starved drainer: this failure's entry is lost, and the
	 * loss is counted with the other records lost (processes.records_dropped). */
	if (!blob)
		atomic_fetch_add_explicit(&spool->header.dropped_no_slot, 1, memory_order_relaxed);
	return blob;
}

void p2pg_recorder_driver_ready(void)
{
	atomic_store(&p2pg_rec.driver_ready, true);
}

void p2pg_recorder_set_driver_version(int version)
{
	struct p2pg_spool_layout *spool = spool_get();
	if (spool)
		atomic_store(&spool->header.driver_version, version);
}

void p2pg_recorder_process_seen(void)
{
	spool_get();
}

void p2pg_recorder_atfork_child(void)
{
	struct p2pg_spool_layout *spool = atomic_load(&p2pg_rec.spool);
	if (spool)
		munmap(spool, P2PG_SPOOL_MAP_SIZE);
	/* Closing, not unlocking: the flock belongs to the parent's open file description. */
	if (p2pg_rec.spool_fd >= 0)
		close(p2pg_rec.spool_fd);
	atomic_store(&p2pg_rec.spool, NULL);
	p2pg_rec.spool_fd = -1;
	p2pg_rec.spool_failed = false;
	p2pg_rec.drainer_running = false;
	atomic_store(&p2pg_rec.drainer_tid, 0); /* the parent's drainer is not in the child */
	p2pg_rec.flush_asked = p2pg_rec.flush_answered = 0;
	atomic_store(&p2pg_rec.driver_ready, false); /* the child's own cuInit decides */
	atomic_store(&p2pg_rec.devices_done, false);
	pthread_cond_init(&p2pg_rec.flushed, NULL);
	p2pg_rec.stop = false;
	p2pg_rec.drained_all = false;
	p2pg_rec.pending = NULL; /* the parent's list; the child starts its own */
	p2pg_rec.npending = p2pg_rec.cap_pending = 0;
	p2pg_rec.match = NULL; /* the child has no CUPTI timing */
	/* The parent's NCCL operations are not the child's: its plugin registers again. */
	atomic_store(&p2pg_rec.nccl, NULL);
	pthread_mutex_init(&p2pg_rec.lock, NULL);
	pthread_mutex_init(&p2pg_rec.start_lock, NULL);
	pthread_cond_init(&p2pg_rec.wake, NULL);
	/* The forking thread's ring lies in the parent's spool, unmapped above: its thread-exit
	 * destructor must not retire it. */
	if (tls_ring)
		pthread_setspecific(ring_key, NULL);
	tls_ring = NULL;
	tls_tid = 0;
	tls_no_ring = false;
	p2pg_timing_reset_after_fork();
}
