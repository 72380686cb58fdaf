/* SPDX-License-Identifier: MIT */
/*
 * `report` in each of its forms (text, --json, --html), and what `run` shows after the program.
 *
 * Every form reads the transfers once (report_scan.c): calls, bytes and failures per device pair,
 * path and API as peer_totals counts them (rows, summary buckets, overflow aggregates), and
 * bandwidth only from copies with a GPU time, asynchronous or synchronous (a synchronous call
 * between devices returns before its copy ends: its duration is not the copy's). A copy without a
 * GPU time is counted as untimed and never divided.
 */
#pragma once

#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "mapping_scan.h"
#include "nccl_scan.h"
#include "report_format.h"

enum { RP_P2P, RP_DRIVER, RP_STAGED, RP_CAPTURED, RP_OTHER, RP_PATHS };
extern const char *const report_path_names[RP_PATHS];
/* Only these paths move data the guard can time as a peer copy: bandwidth is given for them. */
static inline bool report_path_has_bandwidth(int path)
{
	return path == RP_P2P || path == RP_DRIVER || path == RP_STAGED;
}

/* The figures of one group of copies. untimed = calls - failed - gpu_timed - synchronous. */
struct report_counts {
	int64_t calls, bytes, failed;
	int64_t folded;	     /* calls with no row of their own (transfer_overflow) */
	int64_t gpu_timed;   /* successful asynchronous copies with a GPU time */
	int64_t synchronous; /* successful synchronous copies with a GPU time */
};

static inline int64_t report_untimed(const struct report_counts *c)
{
	int64_t n = c->calls - c->failed - c->gpu_timed - c->synchronous;
	return n > 0 ? n : 0;
}

/* One (src, dst, path, api). */
struct report_line {
	int src, dst, path;
	const char *api;
	struct report_counts c;
};

/* One (src, dst, path): the copies and their bandwidth. */
struct report_bw {
	int src, dst, path;
	struct report_counts c;
	double *gbps; /* the timed copies' GB/s, sorted */
	size_t n, cap;
	int64_t timed_bytes;
};

/* Nearest-rank percentile (as the peer_bandwidth view computes it), rounded to 3 decimals; NaN
 * when nothing was timed. */
double report_percentile(const double *sorted, size_t n, double p);

struct report_process {
	int64_t id;
	int pid, rank, local_rank; /* -1: unknown */
	char *host, *mode, *cmdline, *run_id;
	int64_t started_ns, dropped, invalid;
	bool recovered, peer_calls;
	struct report_counts c;
	float *gbps; /* timed copies' GB/s (sorted after the scan) */
	size_t n, cap;
};

/* A timed copy, for charts over time. */
struct report_sample {
	int64_t t;
	float gbps;
	uint8_t path;
};

/* One (src, dst) for the HTML charts: every timed copy, and the sizes of every copy. */
struct report_series {
	int src, dst;
	struct report_sample *s;
	size_t n, cap;
	uint64_t sizes[64]; /* copies by floor(log2(bytes)) */
};

struct report_progress;

struct report_scan {
	struct report_line *lines;
	size_t nlines, caplines;
	struct report_bw *bw;
	size_t nbw, capbw;
	struct report_process *procs;
	size_t nprocs;
	struct report_series *series; /* only when asked for */
	size_t nseries, capseries;
	struct report_counts total;
	int64_t t_first, t_last; /* of the transfer rows */
	int devices[256];	 /* device ordinals seen, sorted */
	size_t ndevices;
	char **apis; /* interned API names */
	size_t napis;
	void *maps; /* the scan's lookup tables */
};

/*
 * Reads what the report needs from db (processes, transfers once, summary buckets, overflow) into
 * scan. with_series: keep every timed copy per pair (the HTML's charts). Returns 0 or -EIO/-ENOMEM
 * after saying why on stderr.
 */
int report_scan_run(sqlite3 *db, struct report_scan *scan, bool with_series,
		    struct report_progress *progress);
void report_scan_free(struct report_scan *scan);
struct report_process *report_scan_process(const struct report_scan *scan, int64_t id);

/* Progress on stderr once a command has taken over a second: redrawn on one line on a terminal,
 * one line per stage otherwise. */
struct report_progress {
	const char *command; /* "p2pguard report" */
	int64_t start_ns, quiet_ns;
	const char *stage;
	int64_t total, done;
	bool tty, shown, stage_said;
	int64_t last_draw_ns;
};
void progress_start(struct report_progress *p, const char *command);
void progress_stage(struct report_progress *p, const char *stage, int64_t total);
void progress_tick(struct report_progress *p, int64_t done);
void progress_end(struct report_progress *p);
/* Ticks p from inside SQLite's long statements. */
void progress_attach(struct report_progress *p, sqlite3 *db);

struct report_options {
	const char *db_path;
	const char *run_id;		 /* only the processes of this `p2pguard run` */
	int64_t run_started_ns, run_pid; /* for a run whose guard did not store run ids */
	bool verbose;			 /* pids, every pair */
	bool brief;			 /* after `run`: advice and details left to `report` */
};

/* What the report forms share once the database is open. */
struct report {
	sqlite3 *db;
	const struct report_options *opt;
	struct report_scan scan;
	struct nccl_scan nccl;	      /* NCCL's operations (nothing when the database has none) */
	struct mapping_scan mappings; /* cross-process mappings (nothing without their tables) */
	struct report_progress progress;
	bool has_devices, has_stalls, has_overflow, crash_python;
	char selection[160]; /* "" or what the processes were chosen by, said in the report */
	int width;
};

/*
 * Opens the report: the database read (dead spools imported first), the processes chosen (all,
 * or those of a run: then every table is seen through temporary views that keep only their rows),
 * the transfers scanned. Returns 0, or 2 (the exit status) after saying why.
 */
int report_open(struct report *r, const struct report_options *opt, bool with_series);
void report_close(struct report *r);

/* The text report; run's report is the same with opt->brief. */
int report_text(struct report *r, FILE *out);
int report_json(struct report *r, FILE *out);
/* One self-contained HTML page. Returns 0 or a negative errno. */
int p2pg_report_html(struct report *r, FILE *out);

/* Shared queries. */
/* Failures grouped by call, answer, rule and action across pairs, ranks and hosts; in order of
 * their first occurrence. */
#define REPORT_FAILURE_GROUPS_SQL                                                               \
	"SELECT min(f.id) AS first_id, count(*) AS count, count(DISTINCT f.process_id) AS "     \
	"processes, min(f.started_ns) AS first_ns, max(f.started_ns) AS last_ns, f.api, "       \
	"f.status, f.error_name, f.action, f.rule_id, "                                         \
	"json_extract(CASE WHEN json_valid(f.evidence) THEN f.evidence END, '$.p2p_probe') AS " \
	"probe, group_concat(DISTINCT f.device || ':' || f.peer_device) AS pairs, "             \
	"group_concat(DISTINCT p.rank) AS ranks, group_concat(DISTINCT p.hostname) AS hosts "   \
	"FROM failures f JOIN processes p ON p.id = f.process_id GROUP BY f.api, f.status, "    \
	"f.error_name, f.action, f.rule_id, probe ORDER BY first_ns, first_id"

/* The first failure's own text, and where the group's failures happened (most often first). */
#define REPORT_FAILURE_DETAIL_SQL                                                       \
	"SELECT f.diagnosis, f.advice, f.args, f.python_stack, f.backtrace, f.device, " \
	"f.peer_device, f.error_string FROM failures f WHERE f.id = ?1"
#define REPORT_FAILURE_WHERE_SQL                                                                  \
	"SELECT coalesce(nullif(substr(f.python_stack, 1, instr(f.python_stack || char(10), "     \
	"char(10)) - 1), ''), substr(f.backtrace, 1, instr(f.backtrace || char(10), char(10)) "   \
	"- 1)) AS place, count(*) FROM failures f WHERE f.api IS ?1 AND f.status IS ?2 AND "      \
	"f.error_name IS ?3 AND f.action IS ?4 AND f.rule_id IS ?5 AND json_extract(CASE WHEN "   \
	"json_valid(f.evidence) THEN f.evidence END, '$.p2p_probe') IS ?6 GROUP BY 1 ORDER BY 2 " \
	"DESC, 1 LIMIT 4"
/* Binds a REPORT_FAILURE_GROUPS_SQL row's group (api, status, error_name, action, rule_id, probe)
 * to REPORT_FAILURE_WHERE_SQL's parameters, the statement reset first. */
void report_bind_failure_places(sqlite3_stmt *places, sqlite3_stmt *group);

#define REPORT_PEER_ACCESS_SQL                                                                 \
	"SELECT api, status, coalesce(action, 'passed') AS action, count(*) AS calls, "        \
	"group_concat(DISTINCT device || ':' || peer_device) AS pairs, count(DISTINCT "        \
	"process_id) AS processes, min(result) AS min_answer, max(result) AS max_answer FROM " \
	"peer_access GROUP BY 1, 2, 3 ORDER BY min(id)"

/* Crash groups: (signal, top frames), the frames' text written by report_crash_key(). */
struct crash_group {
	int signal;
	char *key;	 /* the top frames, offsets dropped */
	char *where;	 /* the first crash's innermost frame and Python line */
	char *python;	 /* the first crash's Python stack */
	char *backtrace; /* the first crash's C stack */
	int count, processes;
	int64_t first_ns, last_ns;
	int *ranks;
	size_t nranks;
	char **hosts;
	size_t nhosts;
};

/* The database's crashes grouped; *ret_n groups. Returns NULL when there are none. */
struct crash_group *report_crash_groups(struct report *r, size_t *ret_n);
void report_crash_groups_free(struct crash_group *g, size_t n);

/* "0:1,2:3" (group_concat of pairs) into pairs; returns how many. */
size_t report_parse_pairs(const char *text, struct dev_pair **ret);
/* "3,4,7" into ints; returns how many. */
size_t report_parse_ints(const char *text, int **ret);
/* "a,b" into strings (one allocation each); returns how many. */
size_t report_parse_strings(const char *text, char ***ret);
void report_free_strings(char **s, size_t n);
