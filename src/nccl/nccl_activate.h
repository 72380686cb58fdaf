/* SPDX-License-Identifier: MIT */
/* What the preload layer asks of the NCCL room. */
#pragma once

#include <stdbool.h>

/*
 * From the preload constructor, after the settings: unless P2PGUARD_NCCL=0 (or the guard is off,
 * or the user set NCCL_PROFILER_PLUGIN=none), NCCL will load this library as its profiler plugin;
 * the user's own plugin, if set, is kept to be fed. guard_up starts the guard when NCCL makes its
 * first communicator and says whether it records. No CUDA call.
 */
void p2pg_nccl_activate(bool (*guard_up)(void));
