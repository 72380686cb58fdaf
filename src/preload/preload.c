/* SPDX-License-Identifier: MIT */
/*
 * The constructor and destructor of libp2pguard.so. Every process that inherits LD_PRELOAD runs
 * them, CUDA or not, so they do next to nothing: the settings (environment variables only) and
 * the offer to be NCCL's profiler plugin. glibc's dlsym is found at the first dlsym call
 * (dlsym.c), not here: looking it up faults in pages of libc that a process making no dlsym call
 * never needs. The core, its libraries, the fatal-signal handlers, the spool and the drainer come
 * at the first CUDA entry (core_link.c). No CUDA call happens in either; at exit, the core's
 * bounded final flush where it started.
 */
#include "entry.h"

__attribute__((constructor)) static void p2pguard_load(void)
{
	p2pg_init_early();
	p2pg_nccl_offer();
}

__attribute__((destructor)) static void p2pguard_unload(void)
{
	p2pg_core_shutdown();
}
