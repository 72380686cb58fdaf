/* SPDX-License-Identifier: MIT */
#pragma once

/* Installs the fatal-signal handlers (SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL), keeping the
 * previous ones to chain to. No CUDA call. */
void p2pg_crash_install(void);
