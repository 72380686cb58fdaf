/* SPDX-License-Identifier: MIT */
/*
 * Making NCCL load the guard as its profiler plugin, with no step of the user's: the preload
 * constructor points NCCL_PROFILER_PLUGIN at the guard's own library (by its absolute path,
 * which NCCL dlopens as given; the loaded copy is the one it gets) before NCCL can read it, at its
 * first communicator. A value the user set is kept in P2PGUARD_NCCL_CHAIN, and the guard feeds
 * that plugin (chain.c); a child process inherits both variables, so it does the same.
 */
#include "nccl_activate.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "nccl_plugin.h"
#include "notice.h"
#include "settings.h"

/* The same file, however it is named. */
static bool same_file(const char *a, const char *b)
{
	struct stat x, y;
	return stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

void p2pg_nccl_activate(bool (*guard_up)(void))
{
	p2pg_nccl_guard_up = guard_up;
	const struct p2pg_settings *s = p2pg_settings_get();
	if (!s->enabled || !s->nccl)
		return;
	Dl_info info;
	char self[PATH_MAX];
	if (!dladdr((const void *)p2pg_nccl_activate, &info) || !info.dli_fname ||
	    !realpath(info.dli_fname, self)) {
		p2pg_notice("cannot find the guard's own library to offer it to NCCL; NCCL's "
			    "operations are not recorded");
		return;
	}
	const char *user = getenv("NCCL_PROFILER_PLUGIN");
	/* "none": the user turned NCCL's profiler plugins off, the guard's included. */
	if (user && strcasecmp(user, "none") == 0)
		return;
	if (user && *user && !same_file(user, self)) {
		if (setenv("P2PGUARD_NCCL_CHAIN", user, 1) < 0)
			return;
	}
	setenv("NCCL_PROFILER_PLUGIN", self, 1);
}
