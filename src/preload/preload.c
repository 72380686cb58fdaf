/* SPDX-License-Identifier: MIT */
/*
 * The constructor and destructor of libp2pguard.so. No CUDA call happens in either: settings,
 * signal handlers and the offer to be NCCL's profiler plugin at load, the bounded final flush at
 * exit.
 */
#include "crash.h"
#include "guard.h"
#include "nccl_activate.h"
#include "resolve.h"
#include "settings.h"

__attribute__((constructor)) static void p2pguard_load(void)
{
	p2pg_dlsym_prepare();
	p2pg_init_early();
	const struct p2pg_settings *s = p2pg_settings_get();
	if (s->enabled)
		p2pg_crash_install();
	p2pg_nccl_activate(p2pg_init_slow);
}

__attribute__((destructor)) static void p2pguard_unload(void)
{
	p2pg_guard_shutdown();
}
