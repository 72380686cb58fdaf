/* SPDX-License-Identifier: MIT */
#include "spool.h"

#include "clock.h"
#include "crc32c.h"
#include "safe_path.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int p2pg_spool_dir_for(const char *db_path, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s.spool", db_path);
	return (n < 0 || (size_t)n >= len) ? -ENAMETOOLONG : 0;
}

void p2pg_boot_id(char *buf, size_t len)
{
	snprintf(buf, len, "unknown");
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	char id[64];
	ssize_t n = read(fd, id, sizeof(id) - 1);
	close(fd);
	if (n <= 0)
		return;
	id[n] = '\0';
	id[strcspn(id, "\n")] = '\0';
	snprintf(buf, len, "%s", id);
}

struct p2pg_spool_layout *p2pg_spool_map(int fd)
{
	p2pg_crc32c_init();
	void *p = mmap(NULL, P2PG_SPOOL_MAP_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p != MAP_FAILED)
		madvise(p, P2PG_SPOOL_MAP_SIZE, MADV_RANDOM); /* advice only: failure is harmless */
	return p;
}

int p2pg_spool_grow(int fd, size_t offset, size_t len)
{
	/* The limit is asked before each growth, not cached: the program may change it. A growth
	 * the limit forbids would be refused with SIGXFSZ, whose default action ends the process.
	 */
	struct rlimit limit;
	if (getrlimit(RLIMIT_FSIZE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY &&
	    (uint64_t)offset + len > (uint64_t)limit.rlim_cur)
		return -EFBIG;
	int e = posix_fallocate(fd, (off_t)offset, (off_t)len);
	return e == 0 ? 0 : -e;
}

uint32_t p2pg_spool_header_crc(const struct p2pg_spool_header *h)
{
	return p2pg_crc32c(0, (const char *)h + sizeof(h->magic),
			   offsetof(struct p2pg_spool_header, header_crc) - sizeof(h->magic));
}

int p2pg_spool_dir_open(const char *dir, bool create, char *why, size_t why_len)
{
	snprintf(why, why_len, "%s", "");
	/* The folders on the way: no other user's link (safe_path.h). */
	int r = p2pg_path_check(dir, false, why, why_len);
	if (r < 0)
		return r;
	if (create && mkdir(dir, 0700) < 0 && errno != EEXIST) {
		int e = errno;
		snprintf(why, why_len, "%s", strerror(e));
		return -e;
	}
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		struct stat st;
		if (lstat(dir, &st) == 0 && S_ISLNK(st.st_mode))
			snprintf(why, why_len,
				 "it is a symbolic link (refused: records would go "
				 "where it points)");
		else
			snprintf(why, why_len, "%s", strerror(e));
		return e == ELOOP ? -ELOOP : -e;
	}
	struct stat st;
	if (fstat(fd, &st) < 0) {
		int e = errno;
		close(fd);
		snprintf(why, why_len, "%s", strerror(e));
		return -e;
	}
	if (st.st_uid != geteuid()) {
		close(fd);
		snprintf(
		    why, why_len,
		    "it belongs to uid %u, not to this process's uid %u (refused: another user "
		    "could read or plant records)",
		    (unsigned)st.st_uid, (unsigned)geteuid());
		return -EPERM;
	}
	if ((st.st_mode & 077) && fchmod(fd, 0700) < 0) {
		int e = errno;
		close(fd);
		snprintf(why, why_len, "cannot keep other users out of it: %s", strerror(e));
		return -e;
	}
	return fd;
}

struct p2pg_spool_layout *p2pg_spool_create(const char *dir, const struct p2pg_process_info *info,
					    int *ret_fd, char *ret_path, size_t path_len, char *why,
					    size_t why_len)
{
	char reason[256];
	int dfd = p2pg_spool_dir_open(dir, true, reason, sizeof(reason));
	if (dfd < 0) {
		snprintf(why, why_len, "%s", reason);
		errno = -dfd;
		return NULL;
	}

	char boot[40];
	p2pg_boot_id(boot, sizeof(boot));
	uint64_t started = p2pg_realtime_ns();
	char name[64], path[PATH_MAX];
	snprintf(name, sizeof(name), "%d-%llu" P2PG_SPOOL_SUFFIX, (int)getpid(),
		 (unsigned long long)started);
	int n = snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (n < 0 || (size_t)n >= sizeof(path)) {
		close(dfd);
		snprintf(why, why_len, "%s", strerror(ENAMETOOLONG));
		errno = ENAMETOOLONG;
		return NULL;
	}

	/* Relative to the folder checked above, never through a link, never an existing file; made
	 * under a name recovery does not look at, and given its own once locked, sized and headed:
	 * a recoverer never takes the lock of a file still being made (and deletes it as empty). */
	char made[80];
	snprintf(made, sizeof(made), "%s.new", name);
	struct p2pg_spool_layout *spool = MAP_FAILED;
	int e = 0;
	int fd = openat(dfd, made, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		e = errno;
		goto fail;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		e = errno;
		goto fail;
	}
	/* The header and the first blob slots are written from the start (a crash handler writes
	 * a blob): the file holds them now, or there is no spool. Rings and more blob slots come
	 * as they are needed. */
	int r = p2pg_spool_grow(fd, 0, P2PG_SPOOL_INITIAL_SIZE);
	if (r < 0) {
		e = -r;
		goto fail;
	}
	spool = p2pg_spool_map(fd);
	if (spool == MAP_FAILED) {
		e = errno;
		goto fail;
	}

	struct p2pg_spool_header *h = &spool->header;
	h->header_size = sizeof(*h);
	h->threads = P2PG_SPOOL_THREADS;
	h->ring = P2PG_SPOOL_RING;
	h->blobs = P2PG_SPOOL_BLOBS;
	h->blob_size = P2PG_SPOOL_BLOB_SIZE;
	h->aggs = P2PG_SPOOL_AGGS;
	h->reserve = P2PG_SPOOL_RESERVE;
	h->thread_size = sizeof(struct p2pg_spool_thread);
	h->blob_step = P2PG_SPOOL_BLOB_STEP;
	h->pid = (int32_t)getpid();
	h->started_ns = started;
	snprintf(h->boot_id, sizeof(h->boot_id), "%s", boot);
	snprintf(h->hostname, sizeof(h->hostname), "%s", info->hostname);
	h->rank = info->rank;
	h->local_rank = info->local_rank;
	snprintf(h->mode, sizeof(h->mode), "%s", info->mode);
	h->record = (uint32_t)info->record + 1;
	snprintf(h->guard_version, sizeof(h->guard_version), "%s", P2PGUARD_VERSION);
	snprintf(h->cmdline, sizeof(h->cmdline), "%s", info->cmdline);
	snprintf(h->run_id, sizeof(h->run_id), "%s", info->run_id);
	h->header_crc = p2pg_spool_header_crc(h);
	atomic_store(&h->blobs_in_file, P2PG_SPOOL_BLOB_STEP);
	/* The magic goes last: a reader ignores a file whose header is not complete. */
	atomic_thread_fence(memory_order_release);
	memcpy(h->magic, P2PG_SPOOL_MAGIC, sizeof(h->magic));

	if (renameat(dfd, made, dfd, name) < 0) {
		e = errno;
		goto fail;
	}
	close(dfd);

	*ret_fd = fd;
	if (ret_path)
		snprintf(ret_path, path_len, "%s", path);
	return spool;

fail:
	if (spool != MAP_FAILED)
		munmap(spool, P2PG_SPOOL_MAP_SIZE);
	if (fd >= 0) {
		close(fd);
		unlinkat(dfd, made, 0);
	}
	close(dfd);
	if (e == EFBIG)
		snprintf(why, why_len,
			 "the file size limit (RLIMIT_FSIZE, `ulimit -f`) leaves no room for its "
			 "%zu KiB",
			 (size_t)P2PG_SPOOL_INITIAL_SIZE >> 10);
	else
		snprintf(why, why_len, "%s", strerror(e));
	errno = e;
	return NULL;
}

/* A ring of the thread that claims it: a new serial keys its records apart from the ring's
 * earlier owners' (a reused ring continues its counters: head == tail here). */
static struct p2pg_spool_thread *take_ring(struct p2pg_spool_layout *spool,
					   struct p2pg_spool_thread *t, uint32_t tid)
{
	atomic_store_explicit(&t->serial, atomic_fetch_add(&spool->header.next_serial, 1) + 1,
			      memory_order_relaxed);
	atomic_store_explicit(&t->tid, tid, memory_order_relaxed);
	return t;
}

struct p2pg_spool_thread *p2pg_spool_claim_thread(struct p2pg_spool_layout *spool, int fd,
						  uint32_t tid)
{
	struct p2pg_spool_header *h = &spool->header;
	/* A free ring the file holds (its thread ended and the drainer took everything). Only rings
	 * in the file are looked at: the others' pages may lie past its end. */
	for (int k = 0; k < P2PG_SPOOL_THREADS; k++) {
		if (!p2pg_spool_ring_in_file(h, k))
			continue;
		struct p2pg_spool_thread *t = &spool->threads[k];
		uint32_t expected = P2PG_SLOT_FREE;
		if (atomic_load_explicit(&t->state, memory_order_relaxed) == P2PG_SLOT_FREE &&
		    atomic_compare_exchange_strong(&t->state, &expected, P2PG_SLOT_ACTIVE))
			return take_ring(spool, t, tid);
	}
	/* A new ring: its index taken first, so that threads growing the file at once grow it for
	 * different rings. The file only ever grows (fallocate never shrinks it). */
	uint32_t k = atomic_load(&h->rings_added);
	do {
		if (k >= P2PG_SPOOL_THREADS) {
			errno = 0;
			return NULL;
		}
	} while (!atomic_compare_exchange_weak(&h->rings_added, &k, k + 1));
	/* The ring's end first: it extends the file, and the file size limit is asked of the whole
	 * ring, whose slots later get their blocks within the file's size. */
	const size_t ring = offsetof(struct p2pg_spool_layout, threads[k]);
	int r = p2pg_spool_grow(fd, ring + offsetof(struct p2pg_spool_thread, agg),
				sizeof(struct p2pg_spool_thread) -
				    offsetof(struct p2pg_spool_thread, agg));
	if (r == 0)
		r = p2pg_spool_grow(fd, ring,
				    offsetof(struct p2pg_spool_thread, rec[P2PG_SPOOL_RING_FIRST]));
	if (r == 0)
		r = p2pg_spool_grow(fd, ring + offsetof(struct p2pg_spool_thread, crc),
				    P2PG_SPOOL_RING_FIRST * sizeof(uint32_t));
	if (r < 0) {
		/* Given back when no later thread took one meanwhile, so a disk that gets room
		 * again is used from the same place. */
		uint32_t next = k + 1;
		atomic_compare_exchange_strong(&h->rings_added, &next, k);
		errno = -r;
		return NULL;
	}
	struct p2pg_spool_thread *t = &spool->threads[k];
	atomic_store_explicit(&t->records_in_file, P2PG_SPOOL_RING_FIRST, memory_order_relaxed);
	atomic_store_explicit(&t->state, P2PG_SLOT_ACTIVE, memory_order_relaxed);
	take_ring(spool, t, tid);
	/* Published last: from now on the drainer reads this ring. */
	atomic_fetch_or_explicit(&h->rings_in_file[k >> 6], 1ull << (k & 63), memory_order_release);
	return t;
}

uint64_t p2pg_spool_ring_grow(const struct p2pg_spool_layout *spool, int fd,
			      struct p2pg_spool_thread *t)
{
	uint64_t have = atomic_load_explicit(&t->records_in_file, memory_order_relaxed);
	if (have >= P2PG_SPOOL_RING || (t->grow_wait && --t->grow_wait))
		return have;
	size_t ring = (size_t)((const char *)t - (const char *)spool);
	uint64_t want = have * 2 < P2PG_SPOOL_RING ? have * 2 : P2PG_SPOOL_RING;
	int r = p2pg_spool_grow(fd, ring + offsetof(struct p2pg_spool_thread, rec[have]),
				(want - have) * sizeof(struct p2pg_record));
	if (r == 0)
		r = p2pg_spool_grow(fd, ring + offsetof(struct p2pg_spool_thread, crc[have]),
				    (want - have) * sizeof(uint32_t));
	if (r < 0) {
		t->grow_wait = P2PG_SPOOL_RING_FIRST;
		return have;
	}
	uint64_t now = want == P2PG_SPOOL_RING ? P2PG_SPOOL_RING_WHOLE : want;
	atomic_store_explicit(&t->records_in_file, now, memory_order_relaxed);
	return now;
}
