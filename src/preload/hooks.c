/* SPDX-License-Identifier: MIT */
/* Every symbol the guard exports, by exact ABI name: what dlsym hands out in place of the real one.
 */
#include <cuda.h>
/* cudaGetDriverEntryPoint is deprecated, and still exported: the guard must hook it. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#include <cuda_runtime_api.h>

#include "driver_hooks.h"
#include "mapping_hooks.h"
#include "resolve.h"
#include "runtime_hooks.h"

#define DRIVER(name)  {#name, (void *)name, &p2pg_real_##name, P2PG_LIB_DRIVER},
#define RUNTIME(name) {#name, (void *)name, &p2pg_real_##name, P2PG_LIB_RUNTIME},

const struct p2pg_hook p2pg_hooks[] = {P2PG_DRIVER_HOOKS(DRIVER) P2PG_RUNTIME_HOOKS(
    RUNTIME) P2PG_MAPPING_DRIVER_HOOKS(DRIVER) P2PG_MAPPING_RUNTIME_HOOKS(RUNTIME)};

const size_t p2pg_nhooks = sizeof(p2pg_hooks) / sizeof(p2pg_hooks[0]);
