/* SPDX-License-Identifier: MIT */
/*
 * Evidence for a failing peer call: what the driver, NVML, sysfs and the environment say about the
 * device pair. Gathered once per pair and cached; the call-specific facts are added on each
 * failure.
 */
#pragma once

#include "p2pguard/facts.h"

struct p2pg_failure_context {
	const char *api;	  /* "cudaDeviceEnablePeerAccess" */
	int status;		  /* the CUDA status the caller got */
	int device;		  /* the calling side; -1 when unknown */
	int peer_device;	  /* the other side; -1 when unknown */
	unsigned long long flags; /* the call's flags argument */
	int peers_enabled;	  /* peers the guard has seen enabled on device */
	int peer_access_enabled;  /* 1 when device already has access to peer_device, 0 no, -1
				     unknown */
};

/*
 * Fills facts for the failure. Never fails: a source that cannot be read (no NVML, no sysfs, driver
 * call failing) is itself recorded as a fact ("nvml": "unavailable"). Thread-safe.
 */
void p2pg_evidence_gather(const struct p2pg_failure_context *ctx, struct p2pg_facts *facts);

/* Forgets the per-pair cache (tests, and after fork). */
void p2pg_evidence_reset(void);
