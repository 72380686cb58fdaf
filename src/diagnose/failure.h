/* SPDX-License-Identifier: MIT */
/* The failure path: a failed (or absorbed) peer call becomes a failure record with its evidence,
 * its knowledge-base diagnosis and where it came from. Costs nothing while nothing fails. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "api.h"
#include "evidence.h"

struct p2pg_failure {
	unsigned api;
	int status;
	int device;
	int peer_device;
	unsigned long long flags;
	const char *args;
	unsigned action;
	uint32_t serial; /* of the failing call's record */
	uint64_t seq;
	uint64_t started_ns;
	int peers_enabled;
	int peer_access_enabled;
	const char *probe; /* "wrong_data" / "slow" from the health probe, or NULL */
	const struct p2pg_failure_mapping *mapping; /* a mapping call's own evidence, or NULL */
};

void p2pg_failure_record(const struct p2pg_failure *f);

/* Loads the rule set on first use (builtin plus P2PGUARD_RULES); backtraces: P2PGUARD_BACKTRACE. */
void p2pg_failure_configure(const char *user_rules_dir, bool backtraces);

/* The knowledge base's part of recording (the rules table, stall diagnoses): the hooks the guard
 * and `p2pguard topo` hand to p2pg_recorder_configure. */
struct p2pg_recorder_hooks;
extern const struct p2pg_recorder_hooks p2pg_knowledge_hooks;
