/* SPDX-License-Identifier: MIT */
#include "reentry.h"

#include <stddef.h>

static __thread int own_depth __attribute__((tls_model("initial-exec")));

static int *own_depth_of(void)
{
	return &own_depth;
}

static int *(*depth_of)(void) = own_depth_of;

void p2pg_reentry_set_depth(int *(*depth)(void))
{
	depth_of = depth ? depth : own_depth_of;
}

void p2pg_reentry_enter(void)
{
	(*depth_of())++;
}

void p2pg_reentry_leave(void)
{
	(*depth_of())--;
}

void p2pg_reentry_mark_own_thread(void)
{
	*depth_of() = 1;
}
