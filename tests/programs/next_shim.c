/* SPDX-License-Identifier: MIT */
/* A library that wraps getpid the way interposers do, finding the real one with
 * dlsym(RTLD_NEXT, ...). RTLD_NEXT means "after this library": a dlsym interposer that resolved it
 * relative to itself would hand this library its own getpid back, and the call would recurse. */
#include <dlfcn.h>
#include <sys/types.h>
#include <unistd.h>

__attribute__((visibility("default"))) int next_shim_calls;

__attribute__((visibility("default"))) pid_t getpid(void)
{
	static pid_t (*next)(void);
	if (!next)
		next = (pid_t(*)(void))dlsym(RTLD_NEXT, "getpid");
	next_shim_calls++;
	return next ? next() : -1;
}
