/* SPDX-License-Identifier: MIT */
/*
 * NCCL's operations in flight, as the drainer watches them. The profiler plugin (src/nccl/) keeps
 * each running operation in a slot of its own; it hands the drainer a way to list them
 * (p2pg_recorder_watch_nccl). The drainer writes an operation that runs long its nccl_ops row
 * early (state 'running', so that every rank's diagnosis sees where the others are), and one whose
 * kernel ran P2PGUARD_STALL_S without finishing its nccl_stalls row, with the diagnosis.
 */
#pragma once

#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct p2pg_nccl_inflight {
	uint64_t started_ns; /* CLOCK_REALTIME: NCCL started the operation */
	uint64_t running_ns; /* CLOCK_REALTIME: its first kernel channel started; 0: none yet */
	uint64_t seq, bytes;
	uint32_t flags; /* P2PG_NCCL_F_* (nccl_codes.h), channels done included */
	int32_t value;	/* peer or root rank */
	uint32_t tid;	/* the thread that started it */
	uint16_t comm_serial;
	uint8_t func, algo_proto;
	/* the plugin's own, handed back to mark */
	uint32_t slot, gen;
	uint32_t marks; /* P2PG_NCCL_MARK_* already set */
};

#define P2PG_NCCL_MARK_ROW   1u /* its 'running' row is in the database */
#define P2PG_NCCL_MARK_STALL 2u /* its nccl_stalls row is */

struct p2pg_nccl_watch {
	/* Copies up to max operations started before started_before (CLOCK_REALTIME) into out;
	 * returns how many. Lock-free; called by the drainer only. */
	size_t (*scan)(struct p2pg_nccl_inflight *out, size_t max, uint64_t started_before);
	/* The rows for that operation are committed; a slot reused since (another gen) is left. */
	void (*mark)(uint32_t slot, uint32_t gen, uint32_t marks);
};

/* What a watch pass needs from the recorder. */
struct p2pg_nccl_watch_pass {
	int64_t process_id;
	const char
	    *boot_id; /* this machine's: a peer process on it can be asked whether it lives */
	unsigned stall_s;
	const char *rules_dir;
	/* the knowledge base's diagnosis (struct p2pg_recorder_hooks), or NULL */
	bool (*diagnosis)(const char *rules_dir, const char *func, const char *peer_state,
			  const char **rule_id, const char **root_cause, const char **advice);
	bool final; /* the process is ending: whatever still runs is written as 'unreported' */
};

/*
 * One look at the operations in flight, in one transaction of its own: rows for those running
 * longer than a quarter of the stall time (at least 250 ms), a stalls row for each whose kernel ran
 * stall_s. Returns the rows written, or a negative errno (-EBUSY: the next pass tries again).
 */
int p2pg_nccl_watch_run(sqlite3 *db, const struct p2pg_nccl_watch *w,
			const struct p2pg_nccl_watch_pass *pass);
