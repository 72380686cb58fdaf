/* SPDX-License-Identifier: MIT */
/* The table of legacy IPC handles' GPUs (ipc_owners.h says why): a file in the spool folder,
 * open-addressed by a hash of the handle, written and read without a lock. */
#include "ipc_owners.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "driver.h"
#include "guard.h"
#include "notice.h"
#include "recorder.h"
#include "settings.h"
#include "spool.h"

/* 2.5 MiB of disk, given blocks when made. */
#define SLOTS	    65536u
#define SMALL_SLOTS 16u /* P2PGUARD_TEST=ipc-owners-small */
#define MAX_SLOTS   (1u << 20)
#define MAX_PROBES  64u
#define MAGIC	    "P2PGIPC2"

/*
 * A slot is guarded by seq, a sequence lock: 0 empty, odd while a writer fills it, even once
 * filled. A writer takes it by compare-and-swap of seq; a reader takes key and UUID only when seq
 * was the same even number before and after reading them. A slot never becomes empty again (a
 * probe stops at an empty slot), but one whose exporter has died may be taken by a new handle
 * when its probe window is full: the dead exporter's memory is gone, and so is its handle.
 */
struct slot {
	_Atomic uint32_t seq;
	_Atomic uint32_t pid;
	_Atomic uint64_t key;
	_Atomic uint64_t uuid[2];
	_Atomic uint64_t pid_space;
};
_Static_assert(sizeof(struct slot) == 40, "a slot is 40 bytes");

struct table {
	char magic[8];
	uint32_t slots;
	uint32_t pad[13];
	struct slot slot[];
};

static size_t table_bytes(uint32_t slots)
{
	return sizeof(struct table) + (size_t)slots * sizeof(struct slot);
}

static struct table *table;
/* Its slot count as checked when mapped: the file's own field is not read again. */
static uint32_t table_slots;
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;
/* Monotonic ns before which the file is not looked for again: by an importer (none was there),
 * by an exporter (it could not be made or used: each export would pay the attempt again). */
static _Atomic uint64_t retry_after[2];
static _Atomic bool said, said_full;

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
	size_t mapped = 0;
	/* A writer gives the whole file its blocks first: a store into a hole on a full disk would
	 * be a SIGBUS. A reader reads zeros from a hole. */
	uint32_t slots =
	    (p2pg_settings_get()->test_hooks & P2PG_TEST_IPC_OWNERS_SMALL) ? SMALL_SLOTS : SLOTS;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
	    (!create ||
	     (posix_fallocate(fd, 0, (off_t)table_bytes(slots)) == 0 && fstat(fd, &st) == 0)) &&
	    (size_t)st.st_size >= sizeof(struct table)) {
		mapped = (size_t)st.st_size;
		t = mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
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
		t->slots = slots;
		memcpy(t->magic, MAGIC, sizeof(t->magic));
	}
	if (memcmp(t->magic, MAGIC, sizeof(t->magic)) != 0 || t->slots < SMALL_SLOTS ||
	    t->slots > MAX_SLOTS || (t->slots & (t->slots - 1)) != 0 ||
	    table_bytes(t->slots) > mapped) {
		munmap(t, mapped);
		return NULL;
	}
	table_slots = t->slots; /* published with the table */
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

/* Where this process's pid means something: this boot of this host (its boot_id: a spool folder
 * on a shared file system may hold other hosts' slots) and this PID namespace (its inode).
 * 0 when unknown: then no other process's slot is judged. Not kept: a child may be in another
 * namespace than its parent. */
static uint64_t own_pid_space(void)
{
	static _Atomic uint64_t boot;
	uint64_t b = atomic_load_explicit(&boot, memory_order_relaxed);
	if (b == 0) {
		char id[64] = "";
		int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
		ssize_t n = fd >= 0 ? read(fd, id, sizeof(id) - 1) : -1;
		if (fd >= 0)
			close(fd);
		if (n <= 0)
			return 0;
		b = 0xcbf29ce484222325ull;
		for (ssize_t k = 0; k < n; k++)
			b = (b ^ (unsigned char)id[k]) * 0x100000001b3ull;
		atomic_store_explicit(&boot, b, memory_order_relaxed);
	}
	struct stat st;
	if (stat("/proc/self/ns/pid", &st) != 0)
		return 0;
	uint64_t space = (b ^ (uint64_t)st.st_ino) * 0x100000001b3ull;
	return space ? space : 1;
}

struct entry {
	uint64_t key, uuid[2], pid_space;
	uint32_t pid;
};

/* A consistent copy of a filled slot; false while it is empty or being written. */
static bool read_slot(struct slot *s, struct entry *e, uint32_t *seq)
{
	for (int tries = 0; tries < 4; tries++) {
		uint32_t before = atomic_load_explicit(&s->seq, memory_order_acquire);
		if (before == 0 || (before & 1))
			return false;
		/* Acquire: the count read again after them is read after them. */
		e->key = atomic_load_explicit(&s->key, memory_order_acquire);
		e->uuid[0] = atomic_load_explicit(&s->uuid[0], memory_order_acquire);
		e->uuid[1] = atomic_load_explicit(&s->uuid[1], memory_order_acquire);
		e->pid = atomic_load_explicit(&s->pid, memory_order_acquire);
		e->pid_space = atomic_load_explicit(&s->pid_space, memory_order_acquire);
		if (atomic_load_explicit(&s->seq, memory_order_relaxed) == before) {
			*seq = before;
			return true;
		}
	}
	return false;
}

/* Fills s, taken from seq (0 or even): false when another writer took it first. The fields are
 * release stores, so that a reader who sees any of them sees the odd count too (the
 * compare-and-swap alone does not order the stores after it). The count skips 0 when it wraps: 0
 * is an empty slot, which ends a probe. */
static bool write_slot(struct slot *s, uint32_t seq, const struct entry *e)
{
	if (!atomic_compare_exchange_strong(&s->seq, &seq, seq + 1))
		return false;
	atomic_store_explicit(&s->pid, e->pid, memory_order_release);
	atomic_store_explicit(&s->pid_space, e->pid_space, memory_order_release);
	atomic_store_explicit(&s->key, e->key, memory_order_release);
	atomic_store_explicit(&s->uuid[0], e->uuid[0], memory_order_release);
	atomic_store_explicit(&s->uuid[1], e->uuid[1], memory_order_release);
	atomic_store_explicit(&s->seq, seq + 2 ? seq + 2 : 2, memory_order_release);
	return true;
}

/* The slot's exporter has ended: a process of this namespace that no longer exists (a live one
 * of another user answers EPERM; a reused pid only delays the slot's reuse). */
static bool exporter_gone(const struct entry *e, const struct entry *mine)
{
	return e->pid_space != 0 && e->pid_space == mine->pid_space && e->pid != mine->pid &&
	       e->pid > 0 && e->pid <= INT_MAX && kill((pid_t)e->pid, 0) != 0 && errno == ESRCH;
}

static uint32_t probes(uint32_t slots)
{
	return slots < MAX_PROBES ? slots : MAX_PROBES;
}

void p2pg_ipc_owners_note(const void *handle, int device)
{
	struct entry mine = {.pid = (uint32_t)getpid(), .pid_space = own_pid_space()};
	if (!handle || device < 0 || !device_uuid(device, mine.uuid))
		return;
	struct table *t = get_table(true);
	if (!t)
		return;
	mine.key = key_of(handle);
	uint32_t mask = table_slots - 1, window = probes(table_slots);
	for (uint32_t k = 0; k < window; k++) {
		struct slot *s = &t->slot[(mine.key + k) & mask];
		struct entry e;
		uint32_t seq;
		if (atomic_load_explicit(&s->seq, memory_order_acquire) == 0) {
			if (write_slot(s, 0, &mine))
				return;
			k--; /* taken meanwhile: look at what it holds */
			continue;
		}
		if (!read_slot(s, &e, &seq) || e.key != mine.key)
			continue;
		/* The same handle again (the driver gives one per allocation), or a handle a
		 * process that has ended made before: it is this process's now. */
		if ((e.pid == mine.pid && e.pid_space == mine.pid_space &&
		     e.uuid[0] == mine.uuid[0] && e.uuid[1] == mine.uuid[1]) ||
		    write_slot(s, seq, &mine))
			return;
		k--;
	}
	/* The window is full: a slot of an exporter that has ended is taken. */
	for (uint32_t k = 0; k < window; k++) {
		struct slot *s = &t->slot[(mine.key + k) & mask];
		struct entry e;
		uint32_t seq;
		if (read_slot(s, &e, &seq) && exporter_gone(&e, &mine) && write_slot(s, seq, &mine))
			return;
	}
	if (p2pg_recorder_spool_signal_safe() && !atomic_exchange(&said_full, true))
		p2pg_notice("CUDA IPC: the table of IPC handles' GPUs in %s is full of live "
			    "processes' handles; other processes' opens of this process's newer "
			    "handles name no owner",
			    p2pg_recorder_spool_dir());
}

int p2pg_ipc_owners_find(const void *handle)
{
	struct table *t = handle ? get_table(false) : NULL;
	if (!t)
		return -1;
	uint64_t key = key_of(handle), uuid[2];
	uint32_t mask = table_slots - 1, window = probes(table_slots);
	bool found = false;
	for (uint32_t k = 0; k < window && !found; k++) {
		struct slot *s = &t->slot[(key + k) & mask];
		struct entry e;
		uint32_t seq;
		if (atomic_load_explicit(&s->seq, memory_order_acquire) == 0)
			return -1;
		if (!read_slot(s, &e, &seq) || e.key != key)
			continue;
		uuid[0] = e.uuid[0];
		uuid[1] = e.uuid[1];
		found = true;
	}
	if (!found)
		return -1;
	for (int d = 0, devices = p2pg_visible_devices(); d < devices; d++) {
		uint64_t mine[2];
		if (device_uuid(d, mine) && mine[0] == uuid[0] && mine[1] == uuid[1])
			return d;
	}
	return -1;
}
