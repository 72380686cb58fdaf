/* SPDX-License-Identifier: MIT */
/*
 * Finding the real functions behind the guard's exported symbols, and handing out the guard's
 * wrappers to programs that look functions up themselves (dlsym, cuGetProcAddress,
 * cudaGetDriverEntryPoint).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

enum p2pg_library {
	P2PG_LIB_DRIVER,  /* libcuda.so.1 */
	P2PG_LIB_RUNTIME, /* libcudart.so.* */
};

/* One exported symbol of the guard, by its exact ABI name. */
struct p2pg_hook {
	const char *name;
	void *wrapper;
	void *_Atomic *real;
	enum p2pg_library library;
};

/* Every exported hook (hooks.c). */
extern const struct p2pg_hook p2pg_hooks[];
extern const size_t p2pg_nhooks;

const struct p2pg_hook *p2pg_hook_by_name(const char *name);
bool p2pg_is_wrapper(const void *fn);

/*
 * The real function for a hook: the slot if filled, else looked up after the guard in the global
 * scope, else in the library the process already loaded (dlopen RTLD_NOLOAD). NULL if none.
 */
void *p2pg_resolve_real(const char *name, void *_Atomic *slot, enum p2pg_library library);

/* Remembers the real function for a hook if none is known yet (first lookup wins). */
void p2pg_remember_real(const struct p2pg_hook *hook, void *real);

#define P2PG_REAL(type, name, library) ((type)p2pg_resolve_real(#name, &p2pg_real_##name, library))

/*
 * What a driver entry-point lookup (cuGetProcAddress, cudaGetDriverEntryPoint) returned, made into
 * the guard's wrapper where the guard hooks that symbol in that ABI version and stream mode.
 * Returns fn unchanged for everything else.
 */
void *p2pg_wrap_driver_entry(const char *symbol, int cuda_version, bool per_thread, void *fn);
