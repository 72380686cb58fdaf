/* SPDX-License-Identifier: MIT */
/*
 * The re-entrancy depth belongs to the entry points (preload/entry.h): above 0, a CUDA call on
 * that thread is the guard's own (or SQLite's, libunwind's, NVML's while the guard works) and goes
 * straight through. The entry points count it around each call; the core, loaded beside them,
 * reaches the same per-thread counter through the function the preload hands down when it starts
 * the core: to mark a thread of its own (the drainer) for good, or to do the guard's work on a
 * thread that is not inside an entry point (NCCL's plugin calls). Where nothing was handed down
 * (the CLI, the tests) a counter of the core's own stands in.
 */
#pragma once

/* depth: the calling thread's counter; NULL: the core's own. */
void p2pg_reentry_set_depth(int *(*depth)(void));
/* What the calling thread does from here to leave() is the guard's own. */
void p2pg_reentry_enter(void);
void p2pg_reentry_leave(void);
/* The calling thread is the guard's: every CUDA call it makes passes through the entry points. */
void p2pg_reentry_mark_own_thread(void);
