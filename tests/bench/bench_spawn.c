/* SPDX-License-Identifier: MIT */
/*
 * What LD_PRELOAD=libp2pguard.so costs a process: starts COMMAND N times bare and N times with the
 * guard preloaded, in interleaved rounds, and prints the wall time per process of each, their
 * medians over the rounds and the difference.
 *
 *   bench_spawn [--rounds R] [--runs N] [--env VAR=VALUE]... LIBRARY -- COMMAND [ARG...]
 *
 * Each process is started with posix_spawn and waited for before the next, so the figure is a
 * whole process's life: exec, the dynamic linker's work (loading the preload and whatever it
 * links), constructors, the program, exit and destructors. Rounds alternate which variant goes
 * first, so a drift of the machine's speed falls on both alike. The page faults a process (the
 * kernel's count, from wait4) say what the time alone cannot on a noisy machine: each page the
 * preload's loading and constructor touch is one, and a fault costs most in a virtual machine.
 */
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* The mean wall time of one process over runs starts, in microseconds; < 0 if one failed. Adds
 * the processes' minor page faults to *faults. */
static double run_batch(char **argv, char **envp, int runs, long *faults)
{
	double t0 = now_us();
	for (int k = 0; k < runs; k++) {
		pid_t pid;
		if (posix_spawnp(&pid, argv[0], NULL, NULL, argv, envp) != 0)
			return -1;
		int status;
		struct rusage usage;
		if (wait4(pid, &status, 0, &usage) < 0 || !WIFEXITED(status) ||
		    WEXITSTATUS(status) != 0)
			return -1;
		*faults += usage.ru_minflt;
	}
	return (now_us() - t0) / runs;
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), by_value);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* True when entry ("NAME=value") sets the variable that assignment sets. */
static bool same_name(const char *entry, const char *assignment)
{
	size_t n = strcspn(assignment, "=");
	return strncmp(entry, assignment, n) == 0 && entry[n] == '=';
}

/* environ without LD_PRELOAD and the variables extra sets, plus extra, plus preload when not
 * NULL. */
static char **make_env(const char *preload, char **extra, int nextra)
{
	size_t n = 0;
	while (environ[n])
		n++;
	char **env = calloc(n + (size_t)nextra + 2, sizeof(*env));
	if (!env)
		return NULL;
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		bool replaced = same_name(environ[i], "LD_PRELOAD=");
		for (int e = 0; e < nextra; e++)
			replaced |= same_name(environ[i], extra[e]);
		if (!replaced)
			env[k++] = environ[i];
	}
	for (int i = 0; i < nextra; i++)
		env[k++] = extra[i];
	if (preload) {
		size_t len = strlen(preload) + sizeof("LD_PRELOAD=");
		char *v = malloc(len);
		if (!v)
			return NULL;
		snprintf(v, len, "LD_PRELOAD=%s", preload);
		env[k++] = v;
	}
	return env;
}

int main(int argc, char **argv)
{
	int rounds = 5, runs = 200, nextra = 0, i = 1;
	char *extra[32];
	for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
		if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
			rounds = atoi(argv[++i]);
		else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc)
			runs = atoi(argv[++i]);
		else if (strcmp(argv[i], "--env") == 0 && i + 1 < argc && nextra < 32)
			extra[nextra++] = argv[++i];
		else if (argv[i][0] != '-')
			break;
		else
			goto usage;
	}
	if (i + 2 >= argc || strcmp(argv[i + 1], "--") != 0 || rounds < 1 || runs < 1)
		goto usage;
	const char *library = argv[i];
	char **command = &argv[i + 2];
	char **bare_env = make_env(NULL, extra, nextra),
	     **guard_env = make_env(library, extra, nextra);
	double *bare = calloc((size_t)rounds, sizeof(double));
	double *guarded = calloc((size_t)rounds, sizeof(double));
	double *diff = calloc((size_t)rounds, sizeof(double));
	if (!bare_env || !guard_env || !bare || !guarded || !diff)
		return 1;

	/* One unmeasured batch each: the page cache and the dynamic linker's cache warm. */
	long warm = 0, bare_faults = 0, guard_faults = 0;
	if (run_batch(command, bare_env, 3, &warm) < 0 ||
	    run_batch(command, guard_env, 3, &warm) < 0) {
		fprintf(stderr, "bench_spawn: %s did not run and exit 0\n", command[0]);
		return 1;
	}
	for (int r = 0; r < rounds; r++) {
		if (r % 2 == 0) {
			bare[r] = run_batch(command, bare_env, runs, &bare_faults);
			guarded[r] = run_batch(command, guard_env, runs, &guard_faults);
		} else {
			guarded[r] = run_batch(command, guard_env, runs, &guard_faults);
			bare[r] = run_batch(command, bare_env, runs, &bare_faults);
		}
		if (bare[r] < 0 || guarded[r] < 0) {
			fprintf(stderr, "bench_spawn: a run of %s failed\n", command[0]);
			return 1;
		}
		diff[r] = guarded[r] - bare[r];
		printf("round %d: bare %.1f us, guarded %.1f us, difference %+.1f us\n", r + 1,
		       bare[r], guarded[r], diff[r]);
	}
	double mb = median(bare, rounds), mg = median(guarded, rounds), md = median(diff, rounds);
	double processes = (double)rounds * runs;
	printf("| command | processes | bare us | guarded us | difference us (median of rounds) "
	       "| difference %% | page faults a process, bare / guarded |\n"
	       "|---|---|---|---|---|---|---|\n");
	printf("| `%s` | %d x %d | %.1f | %.1f | %+.1f | %+.1f%% | %.1f / %.1f |\n", command[0],
	       rounds, runs, mb, mg, md, 100.0 * md / mb, (double)bare_faults / processes,
	       (double)guard_faults / processes);
	return 0;
usage:
	fprintf(stderr,
		"usage: bench_spawn [--rounds R] [--runs N] [--env VAR=VALUE]... LIBRARY -- "
		"COMMAND [ARG...]\n");
	return 2;
}
