/* SPDX-License-Identifier: MIT */
/* The failure path: a failed (or absorbed) peer call becomes a failure record with its evidence,
 * its knowledge-base diagnosis and where it came from. Costs nothing while nothing fails. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

enum p2pg_action {
	P2PG_ACTION_PASSED = 0,	  /* the caller got the real status */
	P2PG_ACTION_ABSORBED = 1, /* the caller got success; the pair's copies are staged */
	P2PG_ACTION_STAGED =
	    2, /* the guard answered for a staged pair without calling the driver */
	P2PG_ACTION_REPORTED =
	    3, /* the guard changed the answer (can-access 0 for a staged pair) */
};

const char *p2pg_action_name(unsigned action);

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
};

void p2pg_failure_record(const struct p2pg_failure *f);

/* Loads the rule set on first use (builtin plus P2PGUARD_RULES); backtraces: P2PGUARD_BACKTRACE. */
void p2pg_failure_configure(const char *user_rules_dir, bool backtraces);
