/* SPDX-License-Identifier: MIT */
/*
 * The database side of the recorder: the schema, and the import of spooled records into SQLite.
 * Used by the drainer inside a guarded process and by `p2pguard recover`.
 */
#pragma once

#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>

#include "p2pguard/spool.h"
#include "settings.h"

/* The schema this release writes (PRAGMA user_version; schema.sql sets it): 2. Schema 1 (0.1) is
 * migrated when opened; a newer one is refused. */
#define P2PG_SCHEMA_VERSION 2
/* PRAGMA application_id of a p2pguard database ("P2PG"), set since schema 2. */
#define P2PG_APPLICATION_ID 0x50325047u

/*
 * Opens (creating if needed) the database in WAL mode with a busy timeout and applies the schema,
 * migrating an earlier release's. Refuses, writing nothing, what is not ours (another program's
 * database, a newer p2pguard's: -EPERM, unless it holds no table at all) and a path another user
 * could have planted a link or a file on (safe_path.h: -EPERM). Returns 0, or a negative errno with
 * a human-readable reason in err (e.g. "file is not a database"). *ret_db is set only on success.
 */
int p2pg_store_open(const char *path, sqlite3 **ret_db, char *err, size_t err_len);
/* The same, waiting at most busy_ms for another connection's lock (-EBUSY past it). */
int p2pg_store_open_wait(const char *path, sqlite3 **ret_db, char *err, size_t err_len,
			 int busy_ms);
/* The same, giving up the wait (-EBUSY) as soon as give_up(arg) says so: a process that begins to
 * exit does not wait out busy_ms for another rank's lock. The connection returned waits busy_ms. */
int p2pg_store_open_until(const char *path, sqlite3 **ret_db, char *err, size_t err_len,
			  int busy_ms, bool (*give_up)(void *), void *arg);
/* Whether the database at path is one p2pg_store_open would write, without writing anything: 0, or
 * a negative errno with the reason in err. */
int p2pg_store_check(const char *path, char *err, size_t err_len);

struct p2pg_summary_bucket;
struct p2pg_nccl_import;

struct p2pg_pending_timing {
	int64_t row;		/* transfers.id; 0: summarised, no row */
	uint32_t slot;		/* the event pair; for a CUPTI-traced copy, CUPTI's stream ID */
	bool cupti;		/* P2PG_REC_F_CUPTI: the fields below identify the copy */
	uint16_t cupti_context; /* the low 16 bits of CUPTI's ID of the stream's context */
	int16_t src_device, dst_device;
	uint64_t started_ns, bytes;
	uint32_t serial; /* the row's record: its ring's thread serial and place (transfers.seq) */
	uint64_t seq;
};

/* What an importer remembers about one spool between passes. */
struct p2pg_importer {
	enum p2pg_record_mode record;
	int64_t process_id;		       /* 0 until the process row exists */
	uint64_t imported[P2PG_SPOOL_THREADS]; /* per ring: absolute count imported */
	uint32_t serial[P2PG_SPOOL_THREADS];   /* the serial imported[] refers to */
	uint64_t folded[P2PG_SPOOL_THREADS];   /* per ring: its folded counter at the last import
						  (UINT64_MAX: none yet) */
	uint64_t dropped_reported;
	/* Damaged records, rings and blobs skipped (a bit-flipped or zero-filled file): never rows.
	 * Stored in processes.records_invalid. */
	uint64_t invalid;
	uint64_t invalid_reported;
	bool ring_damaged[P2PG_SPOOL_THREADS];				/* counted once */
	uint64_t agg_damaged[P2PG_SPOOL_THREADS][P2PG_SPOOL_AGGS / 64]; /* counted once */
	bool blobs_cut;		     /* the file ends inside its blob slots: counted once */
	bool header_dropped_damaged; /* the header's drop counter is damage: counted once */
	/*
	 * The file's size, for a spool of a process that is gone (0: the importer's own process,
	 * whose header is believed). Rings and blob slots the header says the file holds but that
	 * lie past its end are damage (a truncated file): counted, never read.
	 */
	uint64_t file_size;
	bool truncated; /* set by an import that found the file shorter than its header says */
	/* Records one pass may import (0: all there are); more is set when some were left for the
	 * next pass. Bounds the time a pass holds the database and the drainer's pass lock. */
	uint64_t budget;
	bool more;
	/* Why the last import failed, read before its rollback (SQLite's message is gone after):
	 * the text and SQLite's primary result code. */
	char error[160];
	int error_code;
	struct p2pg_summary_bucket *buckets; /* summary mode */
	size_t nbuckets;
	/*
	 * Timed copies whose GPU time is not known yet (the owning process only): called after the
	 * transaction that wrote their rows committed, with the row, or with row 0 for a copy that
	 * got no row of its own (summary mode), whose event pair is then free again. slot: the
	 * record's event pair.
	 */
	void (*on_timed)(void *userdata, const struct p2pg_pending_timing *t);
	void *userdata;
	struct p2pg_pending_timing *timed; /* this pass's, handed over at commit */
	size_t ntimed, cap_timed;
	struct p2pg_nccl_import *nccl; /* NCCL's records (store_nccl.c) */
};

void p2pg_importer_init(struct p2pg_importer *im, enum p2pg_record_mode record);
void p2pg_importer_release(struct p2pg_importer *im);

/*
 * Imports what is new in spool in one transaction (BEGIN IMMEDIATE), then advances the rings'
 * tails. dead: the owner is gone (the tails are then only advisory). Returns the number of rows
 * written, or a negative errno (-EBUSY when the database stayed locked past the busy timeout:
 * nothing was lost, the next pass retries).
 */
int p2pg_store_import(sqlite3 *db, struct p2pg_spool_layout *spool, struct p2pg_importer *im,
		      bool dead);

/* Records one transaction of a dead process's import takes at most (about 3 ms of SQLite on a
 * quiet machine): a fork() waits for one transaction at the most. */
#define P2PG_RECOVER_BATCH 4096

/* How p2pg_store_recover_dir_with imports. */
struct p2pg_recovery {
	const char *skip_path;	      /* this process's own spool, or NULL */
	enum p2pg_record_mode record; /* for a file that does not say how (an older guard's) */
	/* Called between two transactions (each at most P2PG_RECOVER_BATCH records), so that the
	 * drainer can let a fork() through; false: stop now, the rest waits for the next try. NULL:
	 * go on. */
	bool (*between)(void *userdata);
	void *userdata;
	char error[160]; /* set when an import failed: SQLite's reason */
};

/*
 * Imports every spool file under dir whose owner is gone (its flock is free), then deletes it. A
 * file with damage (a header of another layout, a truncated file, records that fail their
 * checksum) is imported as far as it is intact and kept as "<file>.damaged", said in one line.
 * Each file is imported the way its writer recorded (all or summary). Returns the number of files
 * imported; -EBADMSG when the database itself is damaged, another negative errno when an import
 * failed otherwise (r->error says why; a database locked past its busy timeout is not a failure:
 * the file waits for the next try).
 */
int p2pg_store_recover_dir_with(sqlite3 *db, const char *dir, struct p2pg_recovery *r);
/* The same with no callback: skip_path and record as above. */
int p2pg_store_recover_dir(sqlite3 *db, const char *dir, const char *skip_path,
			   enum p2pg_record_mode record);

/* True when h describes this version's layout (magic, sizes and the checksum of its fields);
 * anything else is not read. */
bool p2pg_spool_header_valid(const struct p2pg_spool_header *h);

/* Stores the GPU time of a transfer once known. */
int p2pg_store_set_gpu_ns(sqlite3 *db, int64_t row, uint64_t gpu_ns);

/*
 * The transfer `row` has not finished now_ns (CLOCK_REALTIME) after its start: its stalls row, once
 * (a second call for the same row changes nothing). rule_id, diagnosis, advice may be NULL.
 * Returns 1 when a row was written, 0 when it existed already, or a negative errno.
 */
int p2pg_store_add_stall(sqlite3 *db, int64_t row, uint64_t now_ns, unsigned stall_s,
			 const char *rule_id, const char *diagnosis, const char *advice);

/* The schema as SQL text (src/record/schema.sql). */
extern const char p2pg_schema_sql[];
