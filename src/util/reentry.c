/* SPDX-License-Identifier: MIT */
#include "reentry.h"

static void (*marker)(void);

void p2pg_reentry_set_marker(void (*mark_own_thread)(void))
{
	marker = mark_own_thread;
}

void p2pg_reentry_mark_own_thread(void)
{
	if (marker)
		marker();
}
