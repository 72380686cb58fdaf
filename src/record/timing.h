/* SPDX-License-Identifier: MIT */
/* GPU timing of asynchronous copies with pooled event pairs (see timing.c for why and how). */
#pragma once

#include <cuda.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "settings.h"

void p2pg_timing_configure(enum p2pg_gpu_timing mode, uint64_t interval_ns, size_t min_bytes);

/* Hot path. now_ns: the copy's start (p2pg_now_ns). Returns a slot index and the end event to
 * record after the copy, or -1 (untimed). */
int p2pg_timing_begin(CUstream stream, size_t bytes, uint64_t now_ns, CUevent *ret_end);
/* Records the end event; true when the slot now waits for the drainer. */
bool p2pg_timing_finish(int slot, CUevent end, CUstream stream);
/* The copy failed or was not a copy after all: the slot is free again. */
void p2pg_timing_cancel(int slot);

enum p2pg_timing_poll {
	P2PG_TIMING_NOT_READY,
	P2PG_TIMING_DONE,
	P2PG_TIMING_GONE, /* failed or unknown: no time will come */
};

/* Drainer: asks (never waits) whether the copy finished. DONE and GONE free the slot; for GONE,
 * *ret_error is the driver's answer that ended it (0 when the slot itself was gone). */
enum p2pg_timing_poll p2pg_timing_poll(unsigned slot, uint64_t *ret_ns, int *ret_error);

void p2pg_timing_reset_after_fork(void);
