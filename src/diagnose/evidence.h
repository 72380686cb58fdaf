/* SPDX-License-Identifier: MIT */
/*
 * Evidence for a failing peer call: what the driver, NVML, sysfs and the environment say about the
 * device pair. Gathered once per pair and cached; the call-specific facts are added on each
 * failure.
 */
#pragma once

#include <stdbool.h>

#include "p2pguard/facts.h"

/* What a failed cross-process or VMM mapping call adds to its evidence (evidence_process.c). */
struct p2pg_failure_mapping {
	const char *handle_type; /* "ipc", "posix_fd", "fabric"; NULL none */
	bool fd_import;		 /* an import of a POSIX file descriptor: fd is the descriptor */
	int fd;
	int mapped_peers; /* other devices whose memory the device reaches through live mappings */
	/* an export: the handle types the allocation was created with; -1 unknown */
	long long allocation_handle_types;
};

struct p2pg_failure_context {
	const char *api;	  /* "cudaDeviceEnablePeerAccess" */
	int status;		  /* the CUDA status the caller got */
	int device;		  /* the calling side; -1 when unknown */
	int peer_device;	  /* the other side; -1 when unknown */
	unsigned long long flags; /* the call's flags argument */
	int peers_enabled;	  /* peers the guard has seen enabled on device */
	int peer_access_enabled;  /* 1 when device already has access to peer_device, 0 no, -1
				     unknown */
	const struct p2pg_failure_mapping *mapping; /* NULL: not a mapping call */
};

/*
 * Fills facts for the failure. Never fails: a source that cannot be read (no NVML, no sysfs, driver
 * call failing) is itself recorded as a fact ("nvml": "unavailable"). Thread-safe.
 */
void p2pg_evidence_gather(const struct p2pg_failure_context *ctx, struct p2pg_facts *facts);

/* The facts of a mapping call's failure (evidence_process.c): its handle, the process's namespaces
 * and container, what pidfd_getfd needs, /dev/shm; and the guard's mode for every failure. */
void p2pg_evidence_process(const struct p2pg_failure_context *ctx, struct p2pg_facts *facts);

/* Forgets the per-pair cache (tests, and after fork). */
void p2pg_evidence_reset(void);
