/* SPDX-License-Identifier: MIT */
/*
 * P2PGUARD_* settings: read once, validated, with one clear stderr line for a bad value (the
 * default is used and the program runs on).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

enum p2pg_mode {
	P2PG_MODE_OBSERVE,  /* pass-through, record only */
	P2PG_MODE_FALLBACK, /* absorb unsupported enables, stage copies of pairs without P2P */
	P2PG_MODE_STAGED,   /* the chosen pairs never use P2P: the guard stages their copies */
};

enum p2pg_record_mode {
	P2PG_RECORD_ALL,     /* a row per call */
	P2PG_RECORD_SUMMARY, /* per-bucket aggregates, plus failures and outliers */
};

enum p2pg_gpu_timing {
	P2PG_GPU_TIMING_OFF,
	P2PG_GPU_TIMING_SAMPLED, /* large async copies, and a thread's small one per interval */
	P2PG_GPU_TIMING_ALL,
	P2PG_GPU_TIMING_CUPTI, /* every async peer copy by CUPTI's records (started at cuInit); the
				* rest, and everything where CUPTI cannot be had, SAMPLED */
};

#define P2PG_MAX_DEVICES 64

/* The scalars first and the large arrays last: the preload reads the settings in every process
 * that inherits it, and writing them then touches one page, not three. */
struct p2pg_settings {
	bool enabled; /* P2PGUARD_DISABLE=1 turns the guard into pure pass-through */
	enum p2pg_mode mode;
	enum p2pg_record_mode record;
	enum p2pg_gpu_timing gpu_timing;
	unsigned gpu_timing_interval_us; /* P2PGUARD_GPU_TIMING_INTERVAL_US */
	size_t gpu_timing_min_bytes; /* copies at least this large are always timed when sampling */
	size_t staging_bytes;	     /* P2PGUARD_STAGING_MB */
	bool pairs_all;		     /* P2PGUARD_PAIRS=all */
	bool backtraces;	     /* P2PGUARD_BACKTRACE */
	bool probe;		     /* P2PGUARD_PROBE: health probe at first enable in fallback */
	unsigned
	    probe_timeout_ms; /* P2PGUARD_PROBE_TIMEOUT_MS: a probe copy unfinished by then hangs */
	unsigned stall_s;     /* P2PGUARD_STALL_S: a timed peer copy unfinished this long stalls */
	bool quiet;	      /* P2PGUARD_QUIET: no startup banner or summary lines */
	bool nccl;	      /* P2PGUARD_NCCL: be NCCL's profiler plugin (src/nccl/) */
	unsigned test_hooks;  /* P2PGUARD_TEST: P2PG_TEST_* bits, for checks on real GPUs */
	int rank;	      /* RANK (torchrun's), -1 when unset or not a rank */
	int local_rank;	      /* LOCAL_RANK, likewise */
	bool rules_dir_set;   /* P2PGUARD_RULES is set: rules_dir holds it */
	char db_path[4096];
	/* P2PGUARD_PAIRS as a symmetric matrix; only read when !pairs_all */
	unsigned char pairs[P2PG_MAX_DEVICES][P2PG_MAX_DEVICES];
	char rules_dir[4096]; /* P2PGUARD_RULES, "" when unset */
	char run_id[17];      /* P2PGUARD_RUN_ID: 16 hex digits from `p2pguard run`, "" otherwise */
};

/*
 * P2PGUARD_TEST, comma-separated words: hooks for checking the guard itself on a machine with one
 * GPU (scripts/gpu-parts/truth.sh), never for production.
 */
enum p2pg_test_hook {
	/* A copy between two buffers of one device is recorded and timed as a peer copy would be
	 * ("local-copies"). */
	P2PG_TEST_LOCAL_COPIES = 1 << 0,
	/* The exit path says on stderr what it resolved of the GPU times pending at exit
	 * ("exit-report"). */
	P2PG_TEST_EXIT_REPORT = 1 << 1,
	/* The exit path is registered when the guard starts, before the CUDA runtime's exit
	 * handler, as before this release ("exit-early"): what the runtime's teardown leaves. */
	P2PG_TEST_EXIT_EARLY = 1 << 2,
	/* A new table of IPC handles' GPUs has 16 slots, so that a test fills it with a few
	 * handles ("ipc-owners-small"). */
	P2PG_TEST_IPC_OWNERS_SMALL = 1 << 3,
};

/*
 * Parses the environment into s. Each problem is reported through warn (one line, naming the
 * variable and the accepted values) and the default is kept. Never fails.
 */
void p2pg_settings_parse(struct p2pg_settings *s, char *(*get)(const char *name),
			 void (*warn)(const char *line));
/*
 * The same for a command that refuses a bad value instead of running on with the default: each
 * line names the variable, its value and the accepted values, not what would be used instead.
 */
void p2pg_settings_check(struct p2pg_settings *s, char *(*get)(const char *name),
			 void (*refuse)(const char *line));

/* getenv, by hand: the preload's constructor reads the environment with it in every process that
 * inherits LD_PRELOAD, and glibc's getenv is one more page of libc to fault in. Not for a program
 * with threads that change the environment (neither is getenv). */
char *p2pg_env_get(const char *name);

/* True when the pair (either order) is selected by P2PGUARD_PAIRS. */
bool p2pg_settings_pair_selected(const struct p2pg_settings *s, int a, int b);

const char *p2pg_mode_name(enum p2pg_mode mode);

/* Parses the process's environment into its settings, each problem one p2pguard: line, and makes
 * the database and rules paths absolute (against the folder the process starts in: a program that
 * changes folder later keeps writing to the same database). Once, from the preload constructor
 * (the guard's early start). */
void p2pg_settings_load(void);
/* The process's settings as another reading left them (the core: the preload's, from load). */
void p2pg_settings_use(const struct p2pg_settings *s);

/*
 * Makes path (a buffer of len bytes) absolute against the current folder, when it is relative.
 * Returns 0, or a negative errno (the folder cannot be named, or the result would not fit): path is
 * then unchanged.
 */
int p2pg_settings_absolute(char *path, size_t len);
/* The process's settings (all defaults before p2pg_settings_load). Inline, because every
 * intercepted copy asks for them; written only by p2pg_settings_load or p2pg_settings_use, before
 * the guard starts. */
extern struct p2pg_settings p2pg_process_settings;
static inline const struct p2pg_settings *p2pg_settings_get(void)
{
	return &p2pg_process_settings;
}
