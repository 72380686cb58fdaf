/* SPDX-License-Identifier: MIT */
/*
 * The spool: each guarded process's records, in a file mapping that outlives the process.
 *
 * A thread writes fixed-size records into its own ring (no lock, no allocation, no system call) and
 * publishes each with a release store of its head counter, its checksum beside it. The process's
 * drainer copies them into SQLite and advances the ring's tail only after the transaction
 * committed, storing the same watermark in the database inside that transaction. If the process
 * dies at any moment — SIGKILL included — the file holds every record whose call returned, and
 * whoever imports it (the next guard, or `p2pguard recover`) starts from the database's watermark:
 * nothing is lost, nothing doubled. A successful transfer that finds its ring full is folded into
 * the thread's overflow aggregates instead (struct p2pg_spool_agg), which are imported in the same
 * transaction.
 *
 * The file holds what the process uses: the header and the first P2PG_SPOOL_BLOB_STEP blob slots
 * when it is made, more blob slots when failures fill them, and a ring when a thread claims it. The
 * whole layout is mapped once (struct p2pg_spool_layout, about 576 MB of address space) but only
 * the part the file has is ever touched: the header says which rings (rings_in_file) and how many
 * blob slots (blobs_in_file) the file holds, set only after the file grew. Growth is never asked
 * past RLIMIT_FSIZE (the kernel would send SIGXFSZ).
 */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define P2PG_SPOOL_MAGIC "P2PGSPL6"
/* Spool files of this layout end in this; other versions' (".spool" up to P2PGSPL2, ".spool3"
 * before the overflow aggregates, ".spool4" before the checksums and the file sized to its use,
 * ".spool5" before an aggregate's counters were kept twice) are never opened by this one's
 * recovery, nor this one's by theirs. */
#define P2PG_SPOOL_SUFFIX  ".spool6"
#define P2PG_SPOOL_THREADS 128 /* thread rings per process */
/* Records per thread ring (4 MiB, a sparse file's pages touched as used); a power of two. A
 * burst of 65,536 copies at 2 us each (130 ms) fits while the drainer competes for the CPU. */
#define P2PG_SPOOL_RING 65536
/* Ring room only records that must keep their own row may take: failures and peer-access calls.
 * A successful transfer that finds less room than this is folded into its thread's overflow
 * aggregates instead, so a flood of copies can never leave a failure without its row. */
#define P2PG_SPOOL_RESERVE 1024
/* A ring's record slots (and their checksums) are given disk blocks this many at a time when the
 * ring is added, then doubling as the thread's first lap reaches them: a thread that records a
 * few calls holds about 280 KiB of disk, not the ring's 4.3 MiB. */
#define P2PG_SPOOL_RING_FIRST 4096
/* records_in_file once every slot of the ring has its blocks. */
#define P2PG_SPOOL_RING_WHOLE UINT64_MAX
/* Overflow aggregates per thread (distinct pair, API, path, status and size bucket); a power of
 * two. */
#define P2PG_SPOOL_AGGS	     256
#define P2PG_SPOOL_BLOBS     128 /* variable-size records: failures, crashes */
#define P2PG_SPOOL_BLOB_SIZE (24 << 10)
#define P2PG_SPOOL_BLOB_STEP 8 /* blob slots the file is made with and grows by */

enum p2pg_record_kind {
	P2PG_REC_TRANSFER = 1,
	P2PG_REC_PEER = 2,
	P2PG_REC_MAPPING = 3, /* a cross-process or VMM mapping call: src/record/mapping_record.h */
	/* NCCL's operations and communicators, as its profiler plugin hands them over; the fields'
	 * meaning is src/record/nccl_codes.h's. */
	P2PG_REC_NCCL_OP = 4,
	P2PG_REC_NCCL_COMM_END = 5,
};

enum p2pg_path {
	P2PG_PATH_P2P = 1,	/* peer access enabled between the pair at the time of the call */
	P2PG_PATH_DRIVER = 2,	/* the driver moved it through the host */
	P2PG_PATH_STAGED = 3,	/* the guard's engine moved it */
	P2PG_PATH_CAPTURED = 4, /* enqueued into a stream capture: no data moved yet */
};

/* One intercepted call. 64 bytes: one cache line per record. Its checksum is kept beside it
 * (struct p2pg_spool_thread's crc), so the record's fields stay what every kind needs. */
struct p2pg_record {
	uint64_t started_ns; /* CLOCK_REALTIME at the call's start */
	uint64_t host_ns;    /* time spent in the call */
	uint64_t bytes;
	uint64_t stream;
	uint32_t tid;
	uint16_t api;
	uint8_t kind;
	uint8_t path;
	int32_t status;	    /* what the caller got */
	int16_t src_device; /* peer calls: the device */
	int16_t dst_device; /* peer calls: the peer device */
	uint32_t flags;	    /* peer calls: the flags argument; transfers: P2PG_REC_F_* */
	int32_t value;	    /* can-access: the answer the caller got */
	uint64_t gpu_ns;    /* 0 = unknown */
};
_Static_assert(sizeof(struct p2pg_record) == 64, "records are one cache line");

#define P2PG_REC_F_TIMED 0x1u /* a timing event pair was recorded around the copy */
/* CUPTI traces the copy; value: CUPTI's ID of its stream; the flags' top 16 bits: the low 16 bits
 * of CUPTI's ID of the stream's context (process-unique, counted from 1) */
#define P2PG_REC_F_CUPTI	     0x2u
#define P2PG_REC_CUPTI_CONTEXT_SHIFT 16

/*
 * Successful transfers that found the ring full, summed per key. Only the owning thread writes an
 * aggregate: it fills the key and publishes it with a release store of used. Its counters are kept
 * twice: a fold writes the new totals into the slot the version does not name, then publishes them
 * by moving the version on. So a reader, and `p2pguard recover` after a SIGKILL anywhere in a
 * fold, reads whole calls: slot[version & 1] as it was when version was stored (a live reader
 * that sees the version move reads again). Every counter only grows while the thread owns the
 * ring, so the importer stores a snapshot with max() per column: a repeated snapshot never counts
 * a call twice, and the next one completes it.
 */
struct p2pg_spool_agg {
	_Atomic uint32_t used;
	int32_t status;
	uint16_t api;
	int16_t src_device;
	int16_t dst_device;
	uint8_t path;
	uint8_t size_bucket; /* floor(log2(bytes)), 0 for 0 and 1 byte */
	_Atomic uint64_t version;
	struct {
		_Atomic uint64_t count;
		_Atomic uint64_t bytes;
		_Atomic uint64_t host_ns;
	} slot[2];
};
_Static_assert(sizeof(struct p2pg_spool_agg) == 72, "aggregate size");

/* An aggregate's counters as one snapshot (src/record/spool_ring.h reads it). */
struct p2pg_spool_totals {
	uint64_t count, bytes, host_ns;
};

/* p2pg_spool_put's answer for a record folded into the aggregates: it has no sequence number. */
#define P2PG_SEQ_FOLDED (UINT64_MAX - 1)

struct p2pg_spool_thread {
	_Atomic uint64_t head;	/* records published by the thread */
	_Atomic uint64_t tail;	/* records persisted by the drainer */
	_Atomic uint32_t state; /* enum p2pg_slot_state */
	/* The process's thread number, part of every record's key; with tid, set by each new owner
	 * of the ring while the importer may be reading them. */
	_Atomic uint32_t serial;
	_Atomic uint64_t dropped; /* records lost: ring and aggregates full */
	_Atomic uint32_t tid;
	uint32_t
	    grow_wait; /* the owner's records before it asks for blocks again after a refusal */
	_Atomic uint64_t folded; /* records folded into agg, ever (the ring's owners together) */
	/* Slots rec[0..n) and crc[0..n) have disk blocks (P2PG_SPOOL_RING_WHOLE: all of them): the
	 * writer never stores into a hole, which on a full disk is a SIGBUS. Readers need not look:
	 * they read only published slots. */
	_Atomic uint64_t records_in_file;
	uint8_t pad[8];
	struct p2pg_record rec[P2PG_SPOOL_RING];
	/* Beside each record: the CRC32C of its 64 bytes xor its sequence number (the low 32 bits),
	 * written before the head that publishes it. A record that fails it (a bit flip, a zeroed
	 * page, a slot of an earlier lap read under a damaged head) is never imported. */
	uint32_t crc[P2PG_SPOOL_RING];
	struct p2pg_spool_agg agg[P2PG_SPOOL_AGGS];
	uint8_t
	    page_pad[1984]; /* a ring is whole pages: its growth never shares one with the next */
};
_Static_assert(sizeof(struct p2pg_spool_thread) % 4096 == 0, "a ring is whole pages");

enum p2pg_slot_state {
	P2PG_SLOT_FREE = 0,
	P2PG_SLOT_ACTIVE = 1,
	P2PG_SLOT_RETIRED = 2, /* the thread ended; free again once drained */
};

enum p2pg_blob_kind {
	P2PG_BLOB_FAILURE = 1,
	P2PG_BLOB_CRASH = 2,
	P2PG_BLOB_NCCL_COMM = 4, /* an NCCL communicator (src/record/nccl_codes.h) */
	/* The process's devices (record/devices.c): device = how many; per device five fields:
	 * ordinal, UUID, PCI bus id, name, physical index ("" where unknown). */
	P2PG_BLOB_DEVICES = 6,
	/* GPU times of rows the database could not take at the exit (src/record/row_times.h). */
	P2PG_BLOB_ROW_TIMES = 7,
};

enum p2pg_blob_state {
	P2PG_BLOB_EMPTY = 0,
	P2PG_BLOB_WRITING = 1,
	P2PG_BLOB_READY = 2,
	P2PG_BLOB_PERSISTED = 3,
};

/*
 * A variable-size record. text holds NUL-separated fields (see spool.c for the order per kind).
 * Keyed by (thread serial, seq) for failures — the seq of the failing call's record — and by
 * (tid, started_ns) for crashes. crc: the CRC32C of every byte from kind to length and of text's
 * first length bytes, whatever the kind, written by p2pg_spool_blob_publish before the blob is
 * READY.
 */
struct p2pg_spool_blob {
	_Atomic uint32_t state;
	uint32_t kind;
	uint32_t serial;
	uint32_t tid;
	uint64_t seq;
	uint64_t started_ns;
	int32_t status;
	int32_t signal;
	int32_t device;
	int32_t peer_device;
	uint32_t api;
	uint32_t length; /* of text */
	uint32_t crc;
	uint32_t pad;
	char text[P2PG_SPOOL_BLOB_SIZE - 64];
};
_Static_assert(sizeof(struct p2pg_spool_blob) == P2PG_SPOOL_BLOB_SIZE, "blob size");

struct p2pg_spool_header {
	/* Written once, before the magic, and covered by header_crc. */
	char magic[8];
	uint32_t header_size;
	uint32_t threads;
	uint32_t ring;
	uint32_t blobs;
	uint32_t blob_size;
	int32_t pid;
	uint64_t started_ns;
	char boot_id[40];
	char hostname[64];
	int32_t rank;
	int32_t local_rank;
	char mode[16];
	char guard_version[16];
	uint32_t record; /* the writer's P2PGUARD_RECORD (enum p2pg_record_mode) + 1; 0: not said */
	uint32_t aggs;
	uint32_t reserve;
	uint32_t thread_size; /* sizeof(struct p2pg_spool_thread) */
	uint32_t blob_step;
	uint32_t pad0;
	char cmdline[2048];
	char run_id[40]; /* P2PGUARD_RUN_ID, set by `p2pguard run` for the processes of one run */
	uint32_t header_crc; /* CRC32C of everything above after the magic */
	uint32_t pad1;
	/* Changed while the process lives. */
	_Atomic int32_t driver_version;
	/* The process's CUDA device count once known (0 before): a successful call names no device
	 * past it, so a record that does is damage. */
	_Atomic int32_t device_count;
	_Atomic uint32_t next_serial;
	/* The process ended by exit() (its last import may not have finished): not "recovered". */
	_Atomic uint32_t clean_exit;
	_Atomic uint64_t dropped_no_slot; /* records lost: no ring, no room, no blob slot */
	/* Bit k: ring k's space is in the file (set after the file grew to hold it). Nothing reads
	 * or writes a ring whose bit is clear: its pages may lie past the end of the file. */
	_Atomic uint64_t rings_in_file[2];
	_Atomic uint32_t rings_added;	/* rings claimed for growth so far (the next one's index) */
	_Atomic uint32_t blobs_in_file; /* blob slots [0, blobs_in_file) are in the file */
	uint8_t pad[4096 - 2352];
};
_Static_assert(sizeof(struct p2pg_spool_header) == 4096, "header is one page");
_Static_assert(offsetof(struct p2pg_spool_header, header_crc) == 2296, "header layout");
_Static_assert(offsetof(struct p2pg_spool_header, blobs_in_file) == 2348, "header layout");
/* Read by offset from outside C: scripts/spool-seed.py, tests/preload/test_damaged_spool.py
 * (rings_in_file, blobs_in_file), scripts/gpu-parts/spool-limits.sh (device_count). */
_Static_assert(offsetof(struct p2pg_spool_header, device_count) == 2308, "header layout");
_Static_assert(offsetof(struct p2pg_spool_header, rings_in_file) == 2328, "header layout");

/* The file's layout: header, blob slots, rings. A file holds a prefix of it, sparse where a ring
 * was never claimed. */
struct p2pg_spool_layout {
	struct p2pg_spool_header header;
	struct p2pg_spool_blob blobs[P2PG_SPOOL_BLOBS];
	struct p2pg_spool_thread threads[P2PG_SPOOL_THREADS];
};

/* The mapping's size: the layout whole. No file is this large unless all its rings are used. */
#define P2PG_SPOOL_MAP_SIZE sizeof(struct p2pg_spool_layout)
/* The file's size when made: the header and the first blob slots. */
#define P2PG_SPOOL_INITIAL_SIZE offsetof(struct p2pg_spool_layout, blobs[P2PG_SPOOL_BLOB_STEP])

static inline bool p2pg_spool_ring_in_file(const struct p2pg_spool_header *h, int k)
{
	return (atomic_load_explicit(&((struct p2pg_spool_header *)h)->rings_in_file[k >> 6],
				     memory_order_acquire) >>
		(k & 63)) &
	       1;
}

/* The spool folder for a database: "<db>.spool". */
int p2pg_spool_dir_for(const char *db_path, char *buf, size_t len);
