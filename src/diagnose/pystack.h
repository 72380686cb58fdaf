/* SPDX-License-Identifier: MIT */
/* Python stacks: what the interpreter was running when a call failed or a signal came. */
#pragma once

#include <stddef.h>

/*
 * The Python stack of the calling thread, innermost frame first, one a line:
 * "train.py:42 in forward". Found through the interpreter's exports at run time (libpython is never
 * linked): with its signal-safe traceback writer where the interpreter exports one (3.8-3.12), or
 * by walking the thread's frames from the interpreter's debug offsets (3.13, 3.14), whether or not
 * the thread holds the GIL; else through the frame API, only while the thread holds the GIL.
 * Returns the length written, 0 when there is no Python stack to read.
 */
size_t p2pg_python_stack(char *buf, size_t len);

/* Looks up the interpreter's traceback writer, for p2pg_python_stack_signal_safe. Not
 * async-signal-safe (dlsym); cheap once found. */
void p2pg_python_stack_prepare(void);

/*
 * Async-signal-safe: the same as p2pg_python_stack, through the traceback writer or the debug
 * offsets found by the last p2pg_python_stack_prepare (nothing when neither was). Takes no lock
 * and allocates nothing; uses a pipe (or a memfd) for the writer's text.
 */
size_t p2pg_python_stack_signal_safe(char *buf, size_t len);

/* The writer's text ("  File \"x.py\", line N in f" lines) turned into ours, in place; whole lines
 * only, capped. Async-signal-safe. Returns the new length. */
size_t p2pg_python_stack_convert(char *text, size_t n);
