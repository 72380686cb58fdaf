/* SPDX-License-Identifier: MIT */
/*
 * Where a call came from: the C stack (libunwind) and, when the caller is Python, the Python stack.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define P2PG_BACKTRACE_MAX 48

/* The module of the entry points, when they live apart from this code (the preload over
 * libp2pguard-core.so): its frames lead every capture and are left out like the guard's own.
 * addr: any address in it. Before the first capture; not async-signal-safe. */
void p2pg_backtrace_entry_module(const void *addr);

/*
 * Captures the calling thread's return addresses with libunwind, leaving out the frames that belong
 * to libp2pguard.so itself. Returns the number of frames stored (0 when unwinding fails).
 */
int p2pg_backtrace_capture(uintptr_t *ips, int max);

/*
 * Formats frames, one a line: "#0 module+0xOFFSET symbol+0xOFF" (symbol when known). In-process
 * only (uses dladdr). Returns the length written, truncating to fit len.
 */
size_t p2pg_backtrace_format(const uintptr_t *ips, int n, char *buf, size_t len);

/* From a signal handler: the interrupted thread's frames, the interrupted instruction first, walked
 * from the handler's ucontext (its third argument). Async-signal-safe. Returns how many. */
int p2pg_backtrace_signal_safe(void *ucontext, uintptr_t *ips, int max);

/*
 * Async-signal-safe: for each address, finds its mapping in /proc/self/maps with open/read only and
 * writes "ADDRESS MODULE_PATH MODULE_BASE\n" lines into buf, so the frames can be symbolised after
 * the process is gone. Returns the length written.
 */
size_t p2pg_backtrace_raw_signal_safe(const uintptr_t *ips, int n, char *buf, size_t len);

/*
 * Turns the text written by p2pg_backtrace_raw_signal_safe into the format of
 * p2pg_backtrace_format, resolving symbols from the modules' ELF symbol tables on disk.
 * Returns the length written.
 */
size_t p2pg_backtrace_symbolise_raw(const char *raw, char *buf, size_t len);
