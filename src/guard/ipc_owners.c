/* SPDX-License-Identifier: MIT */
/* The table of legacy IPC handles' GPUs (ipc_owners.h says why): a file in the spool folder,
 * open-addressed by a hash of the handle, written and read without a lock. */
#include "ipc_owners.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "driver.h"
#include "notice.h"
#include "recorder.h"
#include "spool.h"

/* 2 MiB of disk, given blocks when made. */
#define SLOTS	   65536u
#define MAX_PROBES 64u
#define MAGIC	   "P2PGIPC1"

/* A slot is claimed by its key (compare-and-swap from 0) and published by ready; a reader takes
 * the UUID only from a ready slot. A slot never changes once ready. */
struct slot {
	_Atomic uint64_t key;
	_Atomic uint64_t uuid[2];
	_Atomic uint32_t ready;
	uint32_t pad;
};
_Static_assert(sizeof(struct slot) == 32, "a slot is 32 bytes");

struct table {
	char magic[8];
	uint32_t slots;
	uint32_t pad[13];
	struct slot slot[SLOTS];
};

static struct table *table;
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;
/* Monotonic ns before which the file is not looked for again: by an importer (none was there),
 * by an exporter (it could not be made or used: each export would pay the attempt again). */
static _Atomic uint64_t retry_after[2];
static _Atomic bool said;

/* The UUIDs of this process's devices, read once each. */
#define CACHED_DEVICES 64
static _Atomic uint64_t uuid_cache[CACHED_DEVICES][2];
static _Atomic bool uuid_known[CACHED_DEVICES];

/* The handle's 64 bytes as one 64-bit key (never 0). */
static uint64_t key_of(const void *handle)
{
	uint64_t words[CU_IPC_HANDLE_SIZE / 8], h = 0x9e3779b97f4a7c15ull;
	memcpy(words, handle, sizeof(words));
	for (size_t k = 0; k < CU_IPC_HANDLE_SIZE / 8; k++) {
		h ^= words[k] + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
		h *= 0xff51afd7ed558ccdull;
		h ^= h >> 33;
	}
	return h ? h : 1;
}

static struct table *map_table(bool create)
{
	const char *dir = p2pg_recorder_spool_dir();
	if (!dir || !*dir)
		return NULL;
	char why[256];
	int dirfd = p2pg_spool_dir_open(dir, create, why, sizeof(why));
	if (dirfd < 0)
		return NULL;
	int fd = openat(dirfd, P2PG_IPC_OWNERS_FILE,
			O_RDWR | O_CLOEXEC | O_NOFOLLOW | (create ? O_CREAT : 0), 0600);
	close(dirfd);
	if (fd < 0)
		return NULL;
	struct stat st;
	struct table *t = NULL;
	/* A writer gives the whole file its blocks first: a store into a hole on a full disk would
	 * be a SIGBUS. A reader reads zeros from a hole. */
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
	    (create ? posix_fallocate(fd, 0, sizeof(struct table)) == 0
		    : (size_t)st.st_size >= sizeof(struct table))) {
		t = mmap(NULL, sizeof(struct table), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (t == MAP_FAILED)
			t = NULL;
	}
	close(fd);
	if (!t)
		return NULL;
	/* Written once by a writer that found the file new; a reader waits for it (looks again
	 * later), and another layout is left alone. */
	static const char zero[8];
	if (create && memcmp(t->magic, zero, sizeof(zero)) == 0) {
		t->slots = SLOTS;
		memcpy(t->magic, MAGIC, sizeof(t->magic));
	}
	if (memcmp(t->magic, MAGIC, sizeof(t->magic)) != 0 || t->slots != SLOTS) {
		munmap(t, sizeof(struct table));
		return NULL;
	}
	return t;
}

/* The table, mapped once. An importer that finds no file looks again 100 ms later at the earliest
 * (an exporter may make it meanwhile), so an open whose exporter is not guarded pays no file
 * lookup; an exporter that cannot make or use it tries again a second later. */
static struct table *get_table(bool create)
{
	struct table *t = __atomic_load_n(&table, __ATOMIC_ACQUIRE);
	if (t || p2pg_now_ns() < atomic_load(&retry_after[create]))
		return t;
	pthread_mutex_lock(&open_lock);
	if (!table) {
		struct table *made = map_table(create);
		if (made)
			__atomic_store_n(&table, made, __ATOMIC_RELEASE);
		else
			atomic_store(&retry_after[create],
				     p2pg_now_ns() + (create ? 1000000000ull : 100000000ull));
		if (!made && create && p2pg_recorder_spool_signal_safe() &&
		    !atomic_exchange(&said, true))
			p2pg_notice(
			    "CUDA IPC: cannot use the table of IPC handles' GPUs in %s; "
			    "other processes' opens of this process's handles name no owner",
			    p2pg_recorder_spool_dir());
	}
	/* (Without a spool the recorder has said why; the table lives beside the spools.) */
	t = table;
	pthread_mutex_unlock(&open_lock);
	return t;
}

static bool device_uuid(int device, uint64_t uuid[2])
{
	if (device >= 0 && device < CACHED_DEVICES && atomic_load(&uuid_known[device])) {
		uuid[0] = atomic_load_explicit(&uuid_cache[device][0], memory_order_relaxed);
		uuid[1] = atomic_load_explicit(&uuid_cache[device][1], memory_order_relaxed);
		return true;
	}
	CUdevice dev;
	CUuuid u;
	if (!p2pg_drv.cuDeviceGet || !p2pg_drv.cuDeviceGetUuid ||
	    p2pg_drv.cuDeviceGet(&dev, device) != CUDA_SUCCESS ||
	    p2pg_drv.cuDeviceGetUuid(&u, dev) != CUDA_SUCCESS)
		return false;
	memcpy(uuid, u.bytes, 16);
	if (device >= 0 && device < CACHED_DEVICES) {
		atomic_store_explicit(&uuid_cache[device][0], uuid[0], memory_order_relaxed);
		atomic_store_explicit(&uuid_cache[device][1], uuid[1], memory_order_relaxed);
		atomic_store(&uuid_known[device], true);
	}
	return true;
}

void p2pg_ipc_owners_note(const void *handle, int device)
{
	uint64_t uuid[2];
	if (!handle || device < 0 || !device_uuid(device, uuid))
		return;
	struct table *t = get_table(true);
	if (!t)
		return;
	uint64_t key = key_of(handle);
	for (uint32_t k = 0; k < MAX_PROBES; k++) {
		struct slot *s = &t->slot[(key + k) & (SLOTS - 1)];
		uint64_t seen = atomic_load_explicit(&s->key, memory_order_acquire);
		if (seen == key)
			return; /* the same handle again (the driver gives one per allocation) */
		if (seen == 0 && atomic_compare_exchange_strong(&s->key, &seen, key)) {
			atomic_store_explicit(&s->uuid[0], uuid[0], memory_order_relaxed);
			atomic_store_explicit(&s->uuid[1], uuid[1], memory_order_relaxed);
			atomic_store_explicit(&s->ready, 1, memory_order_release);
			return;
		}
		if (seen == key)
			return;
	}
	/* Full around this key: its importers will name no owner. */
}

int p2pg_ipc_owners_find(const void *handle)
{
	struct table *t = handle ? get_table(false) : NULL;
	if (!t)
		return -1;
	uint64_t key = key_of(handle), uuid[2];
	bool found = false;
	for (uint32_t k = 0; k < MAX_PROBES && !found; k++) {
		struct slot *s = &t->slot[(key + k) & (SLOTS - 1)];
		uint64_t seen = atomic_load_explicit(&s->key, memory_order_acquire);
		if (seen == 0)
			return -1;
		if (seen != key || !atomic_load_explicit(&s->ready, memory_order_acquire))
			continue;
		uuid[0] = atomic_load_explicit(&s->uuid[0], memory_order_relaxed);
		uuid[1] = atomic_load_explicit(&s->uuid[1], memory_order_relaxed);
		found = true;
	}
	if (!found)
		return -1;
	int devices = 0;
	if (p2pg_drv.cuDeviceGetCount(&devices) != CUDA_SUCCESS)
		return -1;
	for (int d = 0; d < devices; d++) {
		uint64_t mine[2];
		if (device_uuid(d, mine) && mine[0] == uuid[0] && mine[1] == uuid[1])
			return d;
	}
	return -1;
}
