/* SPDX-License-Identifier: MIT */
/* One line per check, TAP style; the exit status counts failures. */
#pragma once

#include <stdio.h>

static int tap_failed;

#define CHECK(cond, ...)                                \
	do {                                            \
		int _ok = !!(cond);                     \
		printf("%s - ", _ok ? "ok" : "not ok"); \
		printf(__VA_ARGS__);                    \
		printf("\n");                           \
		if (!_ok)                               \
			tap_failed++;                   \
	} while (0)

#define TAP_DONE() (printf("%d failed\n", tap_failed), tap_failed ? 1 : 0)
