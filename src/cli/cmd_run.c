/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "clock.h"
#include "dbread.h"
#include "report.h"
#include "settings.h"

int p2pg_cli_recover(const char *db_path, bool quiet);
int p2pg_cli_report(const struct report_options *opt);

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
	      "                    [--record all|summary] [--quiet] [--] CMD [ARG...]\n"
	      "\n"
	      "Runs CMD with libp2pguard.so preloaded (into CMD and every process it starts:\n"
	      "torchrun's ranks, a shell script's programs), waits for it, imports what a crashed\n"
	      "or killed process left in its spool, and reports what this run's processes did:\n"
	      "only them, told apart by the run id this command puts in their environment\n"
	      "(P2PGUARD_RUN_ID, stored in processes.run_id), not the rest of the database.\n"
	      "\n"
	      "  --db PATH      the database (default $P2PGUARD_DB, else ./p2pguard.db), made\n"
	      "                 absolute so that a program that changes directory keeps it\n"
	      "  --mode MODE    observe (record only, the default), fallback (a pair without P2P\n"
	      "                 is staged through host memory) or staged (the --pairs never use "
	      "P2P)\n"
	      "  --pairs PAIRS  all, or device pairs such as 0-1,2-3: where staged mode applies\n"
	      "  --record WHAT  all (a row per call) or summary (aggregates, plus failures)\n"
	      "  --quiet        no report after the program\n"
	      "\n"
	      "Each option sets the P2PGUARD_* variable of its name for CMD; a value the guard "
	      "would\n"
	      "not accept is refused here (exit 2) instead of costing a warning in every process.\n"
	      "The exit status is CMD's (128 + N when a signal N ended it, 127 when it cannot be\n"
	      "started); 2 for a usage error. The report: p2pguard report --run ID DB later.\n",
	      out);
}

static int bad_value;

/* What the options set, checked by the guard's own parser: only these variables are offered to
 * it, so whatever it says is about an option's value. */
static const char *const checked[] = {"P2PGUARD_MODE", "P2PGUARD_PAIRS", "P2PGUARD_RECORD"};
static const char *const option_names[] = {"--mode", "--pairs", "--record"};
static const char *option_values[3];

/* The parser's line names the variable the option sets ("P2PGUARD_MODE=bogus is not a mode
 * (accepted: ...)"): said here of the option the user typed. */
static void refuse(const char *line)
{
	const char *option = NULL;
	for (size_t k = 0; k < 3 && !option; k++)
		if (strncmp(line, checked[k], strlen(checked[k])) == 0 &&
		    line[strlen(checked[k])] == '=')
			option = option_names[k];
	if (option)
		fprintf(stderr, "p2pguard run: %s refused: %s\n", option, line);
	else
		fprintf(stderr, "p2pguard run: refused: %s\n", line);
	bad_value = 1;
}

static char *options_only(const char *name)
{
	for (size_t k = 0; k < 3; k++)
		if (strcmp(name, checked[k]) == 0)
			return (char *)option_values[k];
	return NULL;
}

/* A run id unique across hosts and time: the boot's randomness is not needed, 64 random bits
 * are. */
static void new_run_id(char *buf, size_t len)
{
	uint64_t bits = 0;
	if (getrandom(&bits, sizeof(bits), 0) != sizeof(bits))
		bits = p2pg_realtime_ns() ^ ((uint64_t)getpid() << 32);
	snprintf(buf, len, "%016" PRIx64, bits);
}

int p2pg_cmd_run(int argc, char **argv)
{
	const char *db = NULL;
	bool quiet = false;
	int k = 1;
	for (; k < argc; k++) {
		const char *a = argv[k];
		int var = -1;
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
		bool is_db = strcmp(a, "--db") == 0;
		if (strcmp(a, "--mode") == 0)
			var = 0;
		else if (strcmp(a, "--pairs") == 0)
			var = 1;
		else if (strcmp(a, "--record") == 0)
			var = 2;
		if (var < 0 && !is_db)
			return p2pg_cli_unknown_option("run", a);
		if (k + 1 >= argc) {
			fprintf(stderr, "p2pguard run: %s needs a value\n", a);
			return 2;
		}
		const char *value = argv[++k];
		if (is_db)
			db = value;
		else
			option_values[var] = value;
	}
	if (k >= argc) {
		usage(stderr);
		return 2;
	}
	struct p2pg_settings s;
	p2pg_settings_check(&s, options_only, refuse);
	if (bad_value)
		return 2;
	for (size_t v = 0; v < 3; v++)
		if (option_values[v])
			setenv(checked[v], option_values[v], 1);

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
	char run_id[32];
	new_run_id(run_id, sizeof(run_id));
	setenv("P2PGUARD_RUN_ID", run_id, 1);

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

	int64_t started = (int64_t)p2pg_realtime_ns();
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
	if (!quiet) {
		struct report_options opt = {
		    .db_path = db_path, .run_id = run_id, .run_started_ns = started, .brief = true};
		fflush(stdout);
		if (access(db_path, F_OK) == 0)
			p2pg_cli_report(&opt);
		else
			printf("p2pguard report: no database at %s (the program made no CUDA call "
			       "under the guard)\n",
			       db_path);
	}

	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status)) {
		fprintf(stderr, "p2pguard: %s ended by signal %d (%s)\n", argv[k], WTERMSIG(status),
			strsignal(WTERMSIG(status)));
		return 128 + WTERMSIG(status);
	}
	return 1;
}
