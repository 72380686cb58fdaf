/* SPDX-License-Identifier: MIT */
/* A few lines of test harness shared by the rules tests: checks that report and count instead of
 * aborting, so one run shows every failure. */
#pragma once

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int test_failures;

#define check(cond)                                                                              \
	do {                                                                                     \
		if (!(cond)) {                                                                   \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
			test_failures++;                                                         \
		}                                                                                \
	} while (0)

#define check_str(got, want)                                                                    \
	do {                                                                                    \
		const char *g_ = (got), *w_ = (want);                                           \
		if (!g_ || !w_ || strcmp(g_, w_) != 0) {                                        \
			fprintf(stderr, "%s:%d: got \"%s\", want \"%s\"\n", __FILE__, __LINE__, \
				g_ ? g_ : "(null)", w_ ? w_ : "(null)");                        \
			test_failures++;                                                        \
		}                                                                               \
	} while (0)

#define check_int(got, want)                                                                  \
	do {                                                                                  \
		long long g_ = (long long)(got), w_ = (long long)(want);                      \
		if (g_ != w_) {                                                               \
			fprintf(stderr, "%s:%d: %s is %lld, want %lld\n", __FILE__, __LINE__, \
				#got, g_, w_);                                                \
			test_failures++;                                                      \
		}                                                                             \
	} while (0)

#define RUN(test)                                                                     \
	do {                                                                          \
		int before_ = test_failures;                                          \
		test();                                                               \
		printf("%s %s\n", test_failures == before_ ? "ok  " : "FAIL", #test); \
	} while (0)
