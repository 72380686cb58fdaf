/* SPDX-License-Identifier: MIT */
/*
 * The re-entrancy depth: above 0, a CUDA call on this thread is the guard's own (or SQLite's,
 * libunwind's, NVML's while the guard works) and goes straight through. The guard's entry points
 * count it; the drainer sets it for good, so it lives below both.
 */
#pragma once

/* initial-exec: the preload library must not need dynamic TLS (dlopen'ed after start). */
extern __thread int p2pg_depth __attribute__((tls_model("initial-exec")));
