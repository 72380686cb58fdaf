/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"

int p2pg_cli_recover(const char *db_path, bool quiet);
int p2pg_cli_report(const char *db_path, bool brief);

/* libp2pguard.so beside this program: in the build tree, or installed. */
static bool find_library(char *buf, size_t len)
{
	const char *env = getenv("P2PGUARD_LIB");
	if (env && *env) {
		snprintf(buf, len, "%s", env);
		return access(buf, R_OK) == 0;
	}
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return false;
	exe[n] = '\0';
	char *slash = strrchr(exe, '/');
	if (!slash)
		return false;
	*slash = '\0';
	static const char *const candidates[] = {
	    "../preload/libp2pguard.so", "../lib/libp2pguard.so",
	    "../lib/x86_64-linux-gnu/libp2pguard.so", "../lib64/libp2pguard.so"};
	for (size_t k = 0; k < sizeof(candidates) / sizeof(candidates[0]); k++) {
		char path[PATH_MAX + 64];
		snprintf(path, sizeof(path), "%s/%s", exe, candidates[k]);
		if (access(path, R_OK) == 0 && realpath(path, buf))
			return true;
	}
	return false;
}

/*
 * The length of the sanitizer runtimes (libasan, ...) that LD_PRELOAD starts with. The guard goes
 * first in the program, except before those: a sanitizer runtime has to be the first object in a
 * process, and an instrumented program or an instrumented guard cannot start without it there.
 */
static size_t sanitizer_prefix(const char *list)
{
	static const char *const runtimes[] = {"libasan.",	     "libhwasan.",
					       "libtsan.",	     "libclang_rt.asan",
					       "libclang_rt.hwasan", "libclang_rt.tsan"};
	size_t end = 0;
	for (;;) {
		size_t start = end + strspn(list + end, ": ");
		size_t len = strcspn(list + start, ": ");
		if (len == 0)
			return end;
		const char *base = list + start;
		for (size_t i = 0; i < len; i++)
			if (list[start + i] == '/')
				base = list + start + i + 1;
		bool runtime = false;
		for (size_t k = 0; k < sizeof(runtimes) / sizeof(runtimes[0]); k++)
			runtime = runtime || strncmp(base, runtimes[k], strlen(runtimes[k])) == 0;
		if (!runtime)
			return end;
		end = start + len;
	}
}

static void usage(FILE *out)
{
	fputs("Usage: p2pguard run [--db PATH] [--mode observe|fallback|staged] [--pairs "
	      "all|0-1,...]\n"
	      "                    [--record all|summary] [--quiet] [--] CMD [ARG...]\n",
	      out);
}

int p2pg_cmd_run(int argc, char **argv)
{
	const char *db = NULL;
	bool quiet = false;
	int k = 1;
	for (; k < argc; k++) {
		const char *a = argv[k];
		const char *var = NULL;
		if (strcmp(a, "--") == 0) {
			k++;
			break;
		}
		if (a[0] != '-')
			break;
		if (strcmp(a, "--quiet") == 0) {
			quiet = true;
			continue;
		}
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			usage(stdout);
			return 0;
		}
		if (strcmp(a, "--db") == 0)
			var = "P2PGUARD_DB";
		else if (strcmp(a, "--mode") == 0)
			var = "P2PGUARD_MODE";
		else if (strcmp(a, "--pairs") == 0)
			var = "P2PGUARD_PAIRS";
		else if (strcmp(a, "--record") == 0)
			var = "P2PGUARD_RECORD";
		if (!var) {
			fprintf(stderr, "p2pguard run: unknown option %s (p2pguard run --help)\n",
				a);
			return 2;
		}
		if (k + 1 >= argc) {
			fprintf(stderr, "p2pguard run: %s needs a value\n", a);
			return 2;
		}
		const char *value = argv[++k];
		if (strcmp(var, "P2PGUARD_DB") == 0)
			db = value;
		else
			setenv(var, value, 1);
	}
	if (k >= argc) {
		usage(stderr);
		return 2;
	}

	char lib[PATH_MAX];
	if (!find_library(lib, sizeof(lib))) {
		fprintf(stderr, "p2pguard: cannot find libp2pguard.so (set P2PGUARD_LIB)\n");
		return 2;
	}
	/* The database path must mean the same file to the program whatever its working directory.
	 */
	char db_abs[PATH_MAX];
	const char *db_path = p2pg_cli_db_path(db);
	if (db_path[0] != '/') {
		char cwd[PATH_MAX];
		if (!getcwd(cwd, sizeof(cwd)) || snprintf(db_abs, sizeof(db_abs), "%s/%s", cwd,
							  db_path) >= (int)sizeof(db_abs)) {
			fprintf(stderr, "p2pguard: database path too long\n");
			return 2;
		}
		db_path = db_abs;
	}
	setenv("P2PGUARD_DB", db_path, 1);

	const char *old = getenv("LD_PRELOAD");
	char preload[2 * PATH_MAX];
	size_t keep = old ? sanitizer_prefix(old) : 0;
	if (keep)
		snprintf(preload, sizeof(preload), "%.*s:%s%s", (int)keep, old, lib, old + keep);
	else if (old && *old)
		snprintf(preload, sizeof(preload), "%s:%s", lib, old);
	else
		snprintf(preload, sizeof(preload), "%s", lib);
	setenv("LD_PRELOAD", preload, 1);

	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		fprintf(stderr, "p2pguard: fork: %s\n", strerror(errno));
		return 2;
	}
	if (pid == 0) {
		execvp(argv[k], argv + k);
		fprintf(stderr, "p2pguard: cannot run %s: %s\n", argv[k], strerror(errno));
		_exit(127);
	}
	/* The program owns the terminal's interrupts; the guard only waits for it. */
	signal(SIGINT, SIG_IGN);
	signal(SIGQUIT, SIG_IGN);
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	unsetenv("LD_PRELOAD");

	/* A program that crashed or was killed left its spool: import it before reporting. */
	p2pg_cli_recover(db_path, true);
	if (!quiet)
		p2pg_cli_report(db_path, true);

	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status)) {
		fprintf(stderr, "p2pguard: %s ended by signal %d (%s)\n", argv[k], WTERMSIG(status),
			strsignal(WTERMSIG(status)));
		return 128 + WTERMSIG(status);
	}
	return 1;
}
