/* Minimal test output for the conformance programs: one line per check, "ok - ..." or
 * "not ok - ...", and a non-zero exit status when anything failed. Header-only so each program
 * stays a single C file that builds against nothing but the CUDA headers. */
#ifndef CONFORMANCE_TAP_H
#define CONFORMANCE_TAP_H

#include <stdarg.h>
#include <stdio.h>

static int tap_failed;

__attribute__((format(printf, 2, 3))) static inline int check(int ok, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs(ok ? "ok - " : "not ok - ", stdout);
	vprintf(fmt, ap);
	fputc('\n', stdout);
	va_end(ap);
	fflush(stdout);
	if (!ok)
		tap_failed++;
	return ok;
}

/* Compares two codes and names both in the line, so a failure says what came back. */
__attribute__((format(printf, 3, 4))) static inline int check_code(int got, int want,
								   const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs(got == want ? "ok - " : "not ok - ", stdout);
	vprintf(fmt, ap);
	printf(" (got %d, want %d)\n", got, want);
	va_end(ap);
	fflush(stdout);
	if (got != want)
		tap_failed++;
	return got == want;
}

__attribute__((format(printf, 1, 2))) static inline void skip(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("ok - # SKIP ", stdout);
	vprintf(fmt, ap);
	fputc('\n', stdout);
	va_end(ap);
	fflush(stdout);
}

static inline int tap_finish(void)
{
	printf("# %s: %d failed\n", tap_failed ? "FAIL" : "PASS", tap_failed);
	return tap_failed ? 1 : 0;
}

#endif
