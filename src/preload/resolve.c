/* SPDX-License-Identifier: MIT */
#include "resolve.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <string.h>

#include "driver.h"

/* The C names of three wrappers differ from the ABI names they are exported under. */
static const char *abi_name(const char *name)
{
	if (strcmp(name, "cuMemcpyBatchAsync_v1") == 0)
		return "cuMemcpyBatchAsync";
	if (strcmp(name, "cuGetProcAddress_v1") == 0)
		return "cuGetProcAddress";
	if (strcmp(name, "cuIpcOpenMemHandle_v1") == 0)
		return "cuIpcOpenMemHandle";
	return name;
}

const struct p2pg_hook *p2pg_hook_by_name(const char *name)
{
	/* dlsym is called for every symbol a program looks up: reject the common case cheaply. */
	if (!name || name[0] != 'c' || name[1] != 'u')
		return NULL;
	for (size_t k = 0; k < p2pg_nhooks; k++)
		if (strcmp(abi_name(p2pg_hooks[k].name), name) == 0)
			return &p2pg_hooks[k];
	return NULL;
}

bool p2pg_is_wrapper(const void *fn)
{
	for (size_t k = 0; k < p2pg_nhooks; k++)
		if (p2pg_hooks[k].wrapper == fn)
			return true;
	return false;
}

static const char *library_soname(enum p2pg_library library)
{
	return library == P2PG_LIB_DRIVER ? "libcuda.so.1" : NULL;
}

/* Handles of a libcudart the process loaded, whatever its major version. */
static void *loaded_runtime(void)
{
	static const char *const names[] = {"libcudart.so.13", "libcudart.so.12",
					    "libcudart.so.11.0", "libcudart.so"};
	for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
		void *h = dlopen(names[k], RTLD_NOW | RTLD_NOLOAD);
		if (h)
			return h;
	}
	return NULL;
}

void *p2pg_resolve_real(const char *name, void *_Atomic *slot, enum p2pg_library library)
{
	void *fn = atomic_load_explicit(slot, memory_order_acquire);
	if (__builtin_expect(fn != NULL, 1))
		return fn;
	const char *abi = abi_name(name);
	fn = p2pg_real_dlsym(RTLD_NEXT, abi);
	if (!fn) {
		/* A library opened with RTLD_LOCAL (a runtime dlopens libcuda so) is not in the
		 * global scope: ask the already loaded library itself. Never load one here. */
		void *h = library == P2PG_LIB_DRIVER
			      ? dlopen(library_soname(library), RTLD_NOW | RTLD_NOLOAD)
			      : loaded_runtime();
		if (h) {
			fn = p2pg_real_dlsym(h, abi);
			dlclose(h);
		}
	}
	if (fn && !p2pg_is_wrapper(fn)) {
		void *expected = NULL;
		if (!atomic_compare_exchange_strong(slot, &expected, fn))
			fn = expected;
		return fn;
	}
	return NULL;
}

void p2pg_remember_real(const struct p2pg_hook *hook, void *real)
{
	if (!real || p2pg_is_wrapper(real))
		return;
	void *expected = NULL;
	atomic_compare_exchange_strong(hook->real, &expected, real);
}
