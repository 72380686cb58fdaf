/* SPDX-License-Identifier: MIT */
/*
 * What the recorder's files share and nobody else needs: its state, written by the record path
 * (recorder.c), the drainer (drainer.c, drainer_timing.c) and the exit (recorder_exit.c), and the
 * functions one of them calls in another.
 */
#pragma once

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "recorder.h"
#include "store.h"

struct p2pg_gpu_match;
struct pending; /* drainer_timing.c: a row waiting for its events' time */

/* What the exit's last GPU-time pass found, for P2PGUARD_TEST=exit-report. */
struct p2pg_exit_report {
	size_t pending;	     /* event-timed rows waiting when it began */
	size_t resolved;     /* of those, read and written */
	size_t unfinished;   /* still running on the GPU */
	size_t failed;	     /* the driver refused to answer */
	int first_error;     /* its first refusal */
	size_t cupti_rows;   /* rows waiting for a CUPTI record when it began */
	size_t cupti_left;   /* of those, still without one after it */
	size_t spooled;	     /* times written into records the database had not taken */
	size_t spool_left;   /* such records' copies still running when the wait ended */
	size_t spooled_rows; /* times read whose rows the database would not take, into the spool */
};

struct p2pg_recorder_state {
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

	/* The exit's request for a last pass that resolves the GPU times (p2pg_rec.lock): asked,
	 * answered, and the drainer's answer's signal. */
	uint64_t flush_asked, flush_answered;
	pthread_cond_t flushed;
	struct p2pg_exit_report exit_report; /* what that pass found (P2PGUARD_TEST=exit-report) */

	/* drainer-private */
	bool pass_busy; /* this pass's import found the database locked: no more waits this pass */
	struct pending *pending;
	size_t npending, cap_pending;
	struct p2pg_gpu_match *match; /* CUPTI timing: rows and records waiting for each other */
	uint64_t cupti_heard_ns;      /* monotonic: CUPTI last delivered, or no row waited */
	_Atomic(const struct p2pg_nccl_watch *) nccl;
	uint64_t nccl_watched_ns; /* monotonic: the last look at NCCL's operations */
};
extern struct p2pg_recorder_state p2pg_rec;

/* recorder.c: the process's device count, for the importers' checks. */
void p2pg_recorder_note_device_count(struct p2pg_spool_layout *spool);

/* drainer.c: starts the drainer thread once the spool exists; false when it cannot. */
bool p2pg_drainer_start(void);

/* drainer_timing.c: after each import, the GPU's side of the rows. */
void p2pg_drainer_match_needed(void);
/* The importer's on_timed: a row waits for its GPU time (events or CUPTI). */
void p2pg_drainer_on_timed(void *userdata, const struct p2pg_pending_timing *t);
/* The database was replaced: the rows waiting for a GPU time are let go. */
void p2pg_drainer_forget_rows(void);
void p2pg_drainer_poll_timings(sqlite3 *db, struct p2pg_exit_report *report);
/* The exit's last pass: the copies the first poll found still running are asked again, for at
 * most EXIT_TIMING_WAIT_NS. */
void p2pg_drainer_finish_timings(sqlite3 *db, struct p2pg_exit_report *report);
/* The exit's last pass: times read that the database would not take go into the spool. */
void p2pg_drainer_spool_row_times(struct p2pg_exit_report *report);
/* drainer_spool_times.c: the exit's last pass with CUDA writes the GPU times of the event-timed
 * copies whose records no import has taken (im: the drainer's importer, NULL without a database)
 * into those records in the spool. */
void p2pg_drainer_time_unimported(struct p2pg_spool_layout *spool, const struct p2pg_importer *im,
				  struct p2pg_exit_report *report);
void p2pg_drainer_collect_cupti(sqlite3 *db, bool final, struct p2pg_exit_report *report);
void p2pg_drainer_watch_nccl(sqlite3 *db, int64_t process_id, bool final);
