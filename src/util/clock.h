/* SPDX-License-Identifier: MIT */
/* The process's clocks: every room times something, so they live at the bottom. */
#pragma once

#include <stdint.h>

/* Both are async-signal-safe (clock_gettime is), so a crash handler may read them too. */

/* CLOCK_MONOTONIC in ns: durations, never set back. */
uint64_t p2pg_now_ns(void);
/* CLOCK_REALTIME in ns: the clock of the records' started_ns and of CUPTI's timestamps. */
uint64_t p2pg_realtime_ns(void);
