/* SPDX-License-Identifier: MIT */
/*
 * Making NCCL load the guard as its profiler plugin, with no step of the user's: the constructor
 * points NCCL_PROFILER_PLUGIN at the guard's core (libp2pguard-core.so beside this library, by its
 * absolute path, which NCCL dlopens as given) before NCCL can read it, at its first communicator.
 * By then the process has entered CUDA and the core is loaded and started: NCCL's dlopen of the
 * same file gets that copy. A value the user set is kept in P2PGUARD_NCCL_CHAIN, and the core feeds
 * that plugin (src/nccl/chain.c); a child process inherits both variables, so it does the same.
 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "entry.h"
#include "notice.h"
#include "settings.h"

#define OFFER_NAME "NCCL_PROFILER_PLUGIN="

/*
 * NCCL_PROFILER_PLUGIN=<core>, and the environment array that carries it, in static storage:
 * setenv() would make this constructor the first malloc() of a process that may never make one
 * (/bin/true under an inherited LD_PRELOAD: about 20 us of heap set-up, paid by every shell and
 * tool of a job). glibc's setenv, putenv, unsetenv and clearenv accept an environ they did not
 * allocate: they copy it the next time they change it.
 */
static char offer_entry[sizeof(OFFER_NAME) + PATH_MAX];
static char *offer_environ[1024];

static void offer_to_environment(const char *core)
{
	size_t n = 0, at = SIZE_MAX;
	for (; environ[n]; n++)
		if (at == SIZE_MAX && strncmp(environ[n], OFFER_NAME, sizeof(OFFER_NAME) - 1) == 0)
			at = n;
	if (n + 2 > sizeof(offer_environ) / sizeof(offer_environ[0])) {
		setenv("NCCL_PROFILER_PLUGIN", core, 1); /* a huge environment: the usual way */
		return;
	}
	memcpy(offer_entry, OFFER_NAME, sizeof(OFFER_NAME) - 1);
	memcpy(offer_entry + sizeof(OFFER_NAME) - 1, core, strlen(core) + 1);
	memcpy(offer_environ, environ, n * sizeof(*environ));
	if (at == SIZE_MAX)
		at = n++;
	offer_environ[at] = offer_entry;
	offer_environ[n] = NULL;
	environ = offer_environ;
}

/* A core named relative to the working folder (LD_PRELOAD=./libp2pguard.so), made absolute. */
static bool resolve_in_place(char *path)
{
	char resolved[PATH_MAX];
	if (!realpath(path, resolved))
		return false;
	memcpy(path, resolved, strlen(resolved) + 1);
	return true;
}

/* The same file, however it is named. */
static bool same_file(const char *a, const char *b)
{
	struct stat x, y;
	return stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

void p2pg_nccl_offer(void)
{
	const struct p2pg_settings *s = p2pg_settings_get();
	if (!s->enabled || !s->nccl)
		return;
	/* A child of a guarded process inherits the offer: nothing to do, and nothing touched. */
	const char *user = p2pg_env_get("NCCL_PROFILER_PLUGIN");
	if (p2pg_core_path_is(user))
		return;
	/* Absolute as LD_PRELOAD gave it, as a rule: then no system call. */
	char core[PATH_MAX];
	if (p2pg_core_path(core, sizeof(core)) < 0 || (core[0] != '/' && !resolve_in_place(core))) {
		p2pg_notice(
		    "cannot find the guard's core (libp2pguard-core.so) to offer it to NCCL; "
		    "NCCL's operations are not recorded");
		return;
	}
	/* Set by the parent process already, the core named another way. */
	if (user && strcmp(user, core) == 0)
		return;
	/* "none": the user turned NCCL's profiler plugins off, the guard's included. */
	if (user && strcasecmp(user, "none") == 0)
		return;
	if (user && *user && !same_file(user, core)) {
		if (setenv("P2PGUARD_NCCL_CHAIN", user, 1) < 0)
			return;
	}
	offer_to_environment(core);
}
