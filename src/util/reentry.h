/* SPDX-License-Identifier: MIT */
/*
 * Threads of the guard's own. The re-entrancy depth belongs to the entry points (preload/entry.h):
 * above 0, a CUDA call on that thread is the guard's own (or SQLite's, libunwind's, NVML's while
 * the guard works) and goes straight through. The entry points count it around each call; a
 * thread the guard starts (the drainer) is marked for good through the function the preload hands
 * down when it starts the core. Where nothing was handed down (the CLI, tests) there are no entry
 * points, and marking does nothing.
 */
#pragma once

void p2pg_reentry_set_marker(void (*mark_own_thread)(void));
/* The calling thread is the guard's: every CUDA call it makes passes through the entry points. */
void p2pg_reentry_mark_own_thread(void);
