/* SPDX-License-Identifier: MIT */
/*
 * The recorder: the only writer of records. Records go into the calling thread's spool ring; the
 * drainer thread (the only writer of SQLite in the process) moves them into the database.
 */
#pragma once

#include <cuda.h>
#include <stdbool.h>
#include <stdint.h>

#include "p2pguard/spool.h"
#include "settings.h"

struct sqlite3;
struct p2pg_nccl_watch;

/*
 * What the recorder needs from the knowledge base above it, handed down by whoever configures it
 * (the guard, `p2pguard topo`): record/ never reaches up to diagnose/. Both run in the drainer.
 */
struct p2pg_recorder_hooks {
	/* Called once, before database_opened, with no lock a fork() waits for held: reads what the
	 * hooks below need (the rules, a user's folder included). */
	void (*prepare)(const char *rules_dir);
	/* The database is open (again, when the file at its path was replaced): write what it
	 * holds beside the records (which rule set diagnosed them). */
	void (*database_opened)(struct sqlite3 *db, const char *rules_dir);
	/* After each pass: the rows written may name rules the database lacks (the rules table
	 * holds those its rows name). Cheap when the pass wrote nothing. */
	void (*rows_written)(struct sqlite3 *db);
	/* The diagnosis of a P2P copy that never completes; false: none (a plainer text is used).
	 * The strings live as long as the process. */
	bool (*stall_diagnosis)(const char *rules_dir, const char **rule_id,
				const char **root_cause, const char **advice);
	/* The diagnosis of an NCCL operation whose kernel never finishes, from where its peers
	 * were (peer_state: waiting, ahead, unknown, elsewhere, gone); false: none. */
	bool (*nccl_stall_diagnosis)(const char *rules_dir, const char *func,
				     const char *peer_state, const char **rule_id,
				     const char **root_cause, const char **advice);
};

/* Prepares the recorder; the spool and the drainer start with the first record. Never fails.
 * hooks may be NULL (no rules table, plain stall texts). */
void p2pg_recorder_configure(const struct p2pg_settings *s, const char *mode_name,
			     const struct p2pg_recorder_hooks *hooks);
/* Whether the guard configured the recorder: it started, and records. */
bool p2pg_recorder_configured(void);

/*
 * Publishes r (tid filled in here). Returns its sequence number in the thread's ring and stores the
 * ring's serial in *ret_serial; P2PG_SEQ_FOLDED when the ring was full and it went into the
 * thread's overflow aggregates (counted, no row of its own); UINT64_MAX when it could not be kept
 * (counted as dropped, or no spool could be made — reported once on stderr).
 */
uint64_t p2pg_record(struct p2pg_record *r, uint32_t *ret_serial);

/*
 * NCCL's profiler plugin hands over its operations in flight: from now on the drainer watches them
 * (nccl_watch.h) about ten times a second, and writes what still runs when the process ends.
 */
void p2pg_recorder_watch_nccl(const struct p2pg_nccl_watch *w);

/* A blob slot for a failure or a crash, or NULL (spool unavailable, or every slot waits). */
struct p2pg_spool_blob *p2pg_recorder_blob(void);
/* The spool folder of this process's database ("" when there is none); files other processes of
 * the same database share live there too. */
const char *p2pg_recorder_spool_dir(void);

/* Async-signal-safe: the spool if one exists, else NULL. */
struct p2pg_spool_layout *p2pg_recorder_spool_signal_safe(void);

/* The process uses CUDA (its first cuInit): its spool, and so its processes row and crash rows,
 * exist from now on, whether or not it ever makes a peer call. */
void p2pg_recorder_process_seen(void);

/*
 * Async-signal-safe, for a fatal signal's handler after it published its crash blob: waits, up to
 * timeout_ns, for the drainer (another thread) to finish an import pass begun after this call, so
 * that the crash and every record published before it are in the database, and then, within the
 * same bound, for that pass's GPU times (the events of copies that completed, CUPTI's finished
 * records). Returns whether the import was done: false at once when no drainer runs (or its
 * database cannot be opened) and when the caller is the drainer, false when the time ran out
 * before the import.
 */
bool p2pg_recorder_await_signal_safe(uint64_t timeout_ns);

/* The program's first cuInit succeeded: the drainer records the devices the process sees and
 * the physical GPU behind each (record/devices.h), once. */
void p2pg_recorder_driver_ready(void);

/* Stores the driver version in the process row once known. */
void p2pg_recorder_set_driver_version(int version);

/* fork: the child starts with no spool, no drainer, no connection; the parent's stay the parent's.
 */
void p2pg_recorder_atfork_child(void);

/*
 * When the guard registers the exit's last pass with CUDA (the GPU times pending at exit: events
 * asked, CUPTI's buffers handed over). exit() runs atexit handlers last registered first, and the
 * CUDA runtime registers the one that destroys its primary contexts (and their events) when it
 * initialises; the driver registers its own in cuInit. So the guard registers after both: when the
 * program's first cuInit has returned and again at its first GPU-timed copy (by then any runtime
 * the copy went through has initialised). START is the guard's own start, used only under
 * P2PGUARD_TEST=exit-early, to show what the teardown leaves.
 */
enum p2pg_exit_arm {
	P2PG_EXIT_ARM_START,
	P2PG_EXIT_ARM_DRIVER_READY,
	P2PG_EXIT_ARM_TIMED_COPY,
};
void p2pg_recorder_arm_exit(enum p2pg_exit_arm when);

/* Called by an atexit handler registered when the guard starts (so run after the runtime's): from
 * then on the drainer makes no CUDA call, whether or not the last pass above ran. */
void p2pg_recorder_exit_begins(void);

/* Exit: a final drain, bounded to one second; no CUDA call. */
void p2pg_recorder_shutdown(void);

/* Thread id, cached per thread (one system call per thread). */
uint32_t p2pg_tid(void);
/* The same from a signal handler: the cached value, or a raw gettid. */
uint32_t p2pg_tid_signal_safe(void);
