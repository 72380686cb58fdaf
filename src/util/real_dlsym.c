/* SPDX-License-Identifier: MIT */
/*
 * glibc's own dlsym, past the guard's exported one: built into both the preload (its dlsym stub
 * and the core's loading) and the core (NVML, CUPTI and the driver are looked up with it).
 */
#include <dlfcn.h>

#include "driver.h"

typedef void *(*dlsym_fn)(void *, const char *);

P2PG_NO_ASAN static dlsym_fn find_real_dlsym(void)
{
	/* RTLD_NEXT from inside this library skips the guard's own exported dlsym. glibc 2.34 moved
	 * dlsym into libc under a new version; older glibc only has the original one. */
	dlsym_fn fn = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
	if (!fn)
		fn = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
	return fn;
}

P2PG_NO_ASAN void *p2pg_real_dlsym_function(void)
{
	return (void *)find_real_dlsym();
}

P2PG_NO_ASAN void *p2pg_real_dlsym(void *handle, const char *symbol)
{
	static dlsym_fn real;
	dlsym_fn fn = __atomic_load_n(&real, __ATOMIC_ACQUIRE);
	if (!fn) {
		fn = find_real_dlsym();
		if (!fn)
			return NULL;
		__atomic_store_n(&real, fn, __ATOMIC_RELEASE);
	}
	return fn(handle, symbol);
}
