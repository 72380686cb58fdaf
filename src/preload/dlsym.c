/* SPDX-License-Identifier: MIT */
/*
 * dlsym, interposed: a program that looks up a guarded CUDA function in libcuda or libcudart by
 * name (JAX does, and every runtime looks up cuGetProcAddress_v2 this way) gets the guard's
 * wrapper. Every other lookup returns exactly what glibc would.
 */
#include <dlfcn.h>
#include <link.h>
#include <string.h>

#include "driver.h"
#include "entry.h"

static bool from_cuda_library(void *fn, enum p2pg_library library)
{
	Dl_info info;
	if (!dladdr(fn, &info) || !info.dli_fname)
		return false;
	const char *base = strrchr(info.dli_fname, '/');
	base = base ? base + 1 : info.dli_fname;
	if (library == P2PG_LIB_DRIVER)
		return strncmp(base, "libcuda.so", 10) == 0;
	return strncmp(base, "libcudart.so", 12) == 0;
}

/*
 * RTLD_NEXT means "after the caller", and the real dlsym would take the guard for the caller. So
 * walk the link maps that follow the caller's object and ask each in turn, as the loader does.
 */
static void *lookup_next(const void *caller, const char *symbol)
{
	Dl_info info;
	struct link_map *map = NULL;
	if (!dladdr1(caller, &info, (void **)&map, RTLD_DL_LINKMAP) || !map)
		return NULL;
	for (struct link_map *l = map->l_next; l; l = l->l_next) {
		void *fn = p2pg_real_dlsym(l, symbol);
		if (fn)
			return fn;
	}
	return NULL;
}

P2PG_EXPORT void *dlsym(void *handle, const char *symbol)
{
	void *fn = handle == RTLD_NEXT ? lookup_next(__builtin_return_address(0), symbol)
				       : p2pg_real_dlsym(handle, symbol);
	if (!fn)
		return NULL;
	const struct p2pg_hook *hook = p2pg_hook_by_name(symbol);
	if (!hook || fn == hook->wrapper || !from_cuda_library(fn, hook->library))
		return fn;
	p2pg_remember_real(hook, fn);
	return hook->wrapper;
}
