/* SPDX-License-Identifier: MIT */
/*
 * The cost of reading the calling thread's Python stack on the failure path (and in the crash
 * handler, which uses the same writer). A library for bench_pystack.py, which calls it through
 * ctypes from a chosen Python depth, with the GIL released (CDLL) or held (PyDLL).
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "pystack.h"

#define BENCH_EXPORT __attribute__((visibility("default")))

static double now_ns(clockid_t clock)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

BENCH_EXPORT double bench_python_stack(int iterations, int signal_safe, int *ret_frames,
				       double *ret_cpu_ns);

/* Nanoseconds per capture (the mean over iterations), wall clock, and in *ret_cpu_ns the calling
 * thread's CPU time (system calls included), which a busy machine disturbs less; *ret_frames:
 * lines in the last capture. */
BENCH_EXPORT double bench_python_stack(int iterations, int signal_safe, int *ret_frames,
				       double *ret_cpu_ns)
{
	static char text[6 << 10]; /* the failure path's room for the Python stack */
	p2pg_python_stack_prepare();
	double start = now_ns(CLOCK_MONOTONIC), cpu_start = now_ns(CLOCK_THREAD_CPUTIME_ID);
	for (int k = 0; k < iterations; k++) {
		if (signal_safe)
			p2pg_python_stack_signal_safe(text, sizeof(text));
		else
			p2pg_python_stack(text, sizeof(text));
	}
	double elapsed = now_ns(CLOCK_MONOTONIC) - start;
	double cpu = now_ns(CLOCK_THREAD_CPUTIME_ID) - cpu_start;
	int frames = 0;
	for (const char *p = text; (p = strchr(p, '\n')); p++)
		frames++;
	*ret_frames = frames;
	*ret_cpu_ns = iterations > 0 ? cpu / iterations : 0;
	return iterations > 0 ? elapsed / iterations : 0;
}
