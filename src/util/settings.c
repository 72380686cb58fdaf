/* SPDX-License-Identifier: MIT */
#include "settings.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdarg.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include "notice.h"

extern char **environ;

const char *p2pg_mode_name(enum p2pg_mode mode)
{
	switch (mode) {
	case P2PG_MODE_OBSERVE:
		return "observe";
	case P2PG_MODE_FALLBACK:
		return "fallback";
	case P2PG_MODE_STAGED:
		return "staged";
	}
	return "observe";
}

/*
 * Where the problems with the settings are said, and whether each line also says what is used
 * instead: the guard runs on with the default, but a command that refuses the value (p2pguard
 * run) runs nothing, and "using ..." would be untrue there.
 */
struct setting_problems {
	void (*say)(const char *line);
	bool with_fallback;
};

static void warnf(const struct setting_problems *warn, const char *fallback, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* One line: the problem (the variable, its value, what is accepted), then "; " and fallback. */
static void warnf(const struct setting_problems *warn, const char *fallback, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (warn->with_fallback && n >= 0 && (size_t)n < sizeof(line))
		snprintf(line + n, sizeof(line) - (size_t)n, "; %s", fallback);
	p2pg_keep_one_line(line);
	warn->say(line);
}

/* Equal but for the case of ASCII letters, as every accepted word is. By hand: strcasecmp would
 * fault in a page of libc and one of its locale's tables in every process that inherits the
 * preload and sets a variable. */
static bool same_word(const char *a, const char *b)
{
	for (;; a++, b++) {
		unsigned char x = (unsigned char)*a, y = (unsigned char)*b;
		x = x >= 'A' && x <= 'Z' ? (unsigned char)(x + 'a' - 'A') : x;
		y = y >= 'A' && y <= 'Z' ? (unsigned char)(y + 'a' - 'A') : y;
		if (x != y)
			return false;
		if (!x)
			return true;
	}
}

/* Returns the index of value in choices, or -1. */
static int choice(const char *value, const char *const *choices, int n)
{
	for (int k = 0; k < n; k++)
		if (same_word(value, choices[k]))
			return k;
	return -1;
}

static bool parse_bool(const char *value, bool *out)
{
	static const char *const yes[] = {"1", "yes", "true", "on"};
	static const char *const no[] = {"0", "no", "false", "off"};
	if (choice(value, yes, 4) >= 0) {
		*out = true;
		return true;
	}
	if (choice(value, no, 4) >= 0) {
		*out = false;
		return true;
	}
	return false;
}

static bool parse_ulong(const char *value, unsigned long long min, unsigned long long max,
			unsigned long long *out)
{
	char *end;
	errno = 0;
	if (!isdigit((unsigned char)value[0]))
		return false;
	unsigned long long v = strtoull(value, &end, 10);
	if (errno || *end || v < min || v > max)
		return false;
	*out = v;
	return true;
}

/* A rank as torchrun and MPI launchers write it: a decimal number from 0. */
static bool parse_rank(const char *value, int *out)
{
	unsigned long long n;
	if (!parse_ulong(value, 0, INT_MAX, &n))
		return false;
	*out = (int)n;
	return true;
}

/* "0-1,2-3": pairs of device ordinals. */
static unsigned parse_test_hooks(const char *value, const struct setting_problems *warn)
{
	static const char *const words[] = {"local-copies", "exit-report", "exit-early",
					    "ipc-owners-small"};
	unsigned hooks = 0;
	const char *p = value;
	while (*p) {
		size_t n = strcspn(p, ",");
		int k = 0;
		while (k < (int)(sizeof(words) / sizeof(words[0])) &&
		       (strlen(words[k]) != n || strncmp(p, words[k], n) != 0))
			k++;
		if (k < (int)(sizeof(words) / sizeof(words[0])))
			hooks |= 1u << k;
		else if (n > 0)
			warnf(warn, "it is left out",
			      "P2PGUARD_TEST=%s: \"%.*s\" is not understood (accepted: "
			      "local-copies, exit-report, exit-early, ipc-owners-small)",
			      value, (int)n, p);
		p += n;
		if (*p == ',')
			p++;
	}
	return hooks;
}

static bool parse_pairs(const char *value, unsigned char pairs[P2PG_MAX_DEVICES][P2PG_MAX_DEVICES])
{
	unsigned char parsed[P2PG_MAX_DEVICES][P2PG_MAX_DEVICES];
	memset(parsed, 0, sizeof(parsed));
	const char *p = value;
	if (!*p)
		return false;
	while (*p) {
		char *end;
		if (!isdigit((unsigned char)*p))
			return false;
		long a = strtol(p, &end, 10);
		if (*end != '-' || !isdigit((unsigned char)end[1]))
			return false;
		long b = strtol(end + 1, &end, 10);
		if (a < 0 || b < 0 || a >= P2PG_MAX_DEVICES || b >= P2PG_MAX_DEVICES || a == b)
			return false;
		parsed[a][b] = parsed[b][a] = 1;
		if (*end == ',') {
			end++;
			if (!*end)
				return false;
		} else if (*end) {
			return false;
		}
		p = end;
	}
	memcpy(pairs, parsed, sizeof(parsed));
	return true;
}

#define DEFAULT_DB "p2pguard.db"

/* p2pg_settings_parse on a zero-filled s. */
static void parse_zeroed(struct p2pg_settings *s, char *(*get)(const char *name),
			 const struct setting_problems *warn)
{
	s->enabled = true;
	s->mode = P2PG_MODE_OBSERVE;
	memcpy(s->db_path, DEFAULT_DB, sizeof(DEFAULT_DB));
	s->record = P2PG_RECORD_ALL;
	s->gpu_timing = P2PG_GPU_TIMING_SAMPLED;
	s->gpu_timing_interval_us = 50;
	s->gpu_timing_min_bytes = 1 << 20;
	s->staging_bytes = 256u << 20;
	s->pairs_all = true;
	s->backtraces = true;
	s->probe = true;
	s->probe_timeout_ms = 5000;
	s->stall_s = 30;
	s->nccl = true;
	s->rank = -1;
	s->local_rank = -1;

	const char *v;
	bool b;
	unsigned long long n;

	if ((v = get("P2PGUARD_DISABLE")) && *v) {
		if (parse_bool(v, &b))
			s->enabled = !b;
		else
			warnf(warn, "the guard stays on",
			      "P2PGUARD_DISABLE=%s is not understood (accepted: 0, 1)", v);
	}
	if ((v = get("P2PGUARD_MODE")) && *v) {
		static const char *const modes[] = {"observe", "fallback", "staged"};
		int k = choice(v, modes, 3);
		if (k >= 0)
			s->mode = (enum p2pg_mode)k;
		else
			warnf(
			    warn, "using observe",
			    "P2PGUARD_MODE=%s is not a mode (accepted: observe, fallback, staged)",
			    v);
	}
	if ((v = get("P2PGUARD_RUN_ID")) && *v) {
		/* What `p2pguard run` sets and `report --run` asks for; anything else would be
		 * stored as a run that no report can select. */
		if (strlen(v) == 16 && strspn(v, "0123456789abcdef") == 16)
			memcpy(s->run_id, v, 17);
		else
			warnf(warn, "not recorded",
			      "P2PGUARD_RUN_ID=%s is not a run id (16 hex digits in lower case, as "
			      "p2pguard run sets it)",
			      v);
	}
	if ((v = get("P2PGUARD_DB")) && *v) {
		/* SQLite would keep ":memory:" in this process only, each connection its own, and
		 * read "file:..." as a URI (another file, or memory again): the records would be
		 * nowhere a reader finds them. */
		if (strcmp(v, ":memory:") == 0 || strncmp(v, "file:", 5) == 0)
			warnf(warn, "using p2pguard.db",
			      "P2PGUARD_DB=%s is not a file name (an in-memory database or an "
			      "SQLite URI keeps the records where no reader finds them)",
			      v);
		else if (strlen(v) < sizeof(s->db_path))
			memcpy(s->db_path, v, strlen(v) + 1);
		else
			warnf(warn, "using p2pguard.db", "P2PGUARD_DB is longer than %zu bytes",
			      sizeof(s->db_path) - 1);
	}
	if ((v = get("P2PGUARD_RECORD")) && *v) {
		static const char *const records[] = {"all", "summary"};
		int k = choice(v, records, 2);
		if (k >= 0)
			s->record = (enum p2pg_record_mode)k;
		else
			warnf(warn, "using all",
			      "P2PGUARD_RECORD=%s is not understood (accepted: all, summary)", v);
	}
	if ((v = get("P2PGUARD_GPU_TIMING")) && *v) {
		static const char *const timings[] = {"off", "sampled", "all", "cupti"};
		int k = choice(v, timings, 4);
		if (k >= 0)
			s->gpu_timing = (enum p2pg_gpu_timing)k;
		else
			warnf(warn, "using sampled",
			      "P2PGUARD_GPU_TIMING=%s is not understood (accepted: off, sampled, "
			      "all, cupti)",
			      v);
	}
	if ((v = get("P2PGUARD_GPU_TIMING_INTERVAL_US")) && *v) {
		if (parse_ulong(v, 0, 60000000, &n))
			s->gpu_timing_interval_us = (unsigned)n;
		else
			warnf(warn, "using 50",
			      "P2PGUARD_GPU_TIMING_INTERVAL_US=%s is not a number of microseconds "
			      "from 0 to 60000000",
			      v);
	}
	if ((v = get("P2PGUARD_STAGING_MB")) && *v) {
		if (parse_ulong(v, 1, 1 << 20, &n))
			s->staging_bytes = (size_t)n << 20;
		else
			warnf(warn, "using 256",
			      "P2PGUARD_STAGING_MB=%s is not a number of MiB from 1 to 1048576", v);
	}
	if ((v = get("P2PGUARD_PAIRS")) && *v) {
		if (strcasecmp(v, "all") == 0)
			s->pairs_all = true;
		else if (parse_pairs(v, s->pairs))
			s->pairs_all = false;
		else
			warnf(warn, "using all",
			      "P2PGUARD_PAIRS=%s is not understood (accepted: all, or device pairs "
			      "such as 0-1,2-3)",
			      v);
	}
	if ((v = get("P2PGUARD_BACKTRACE")) && *v) {
		if (parse_bool(v, &b))
			s->backtraces = b;
		else
			warnf(warn, "using 1",
			      "P2PGUARD_BACKTRACE=%s is not understood (accepted: 0, 1)", v);
	}
	if ((v = get("P2PGUARD_PROBE")) && *v) {
		if (parse_bool(v, &b))
			s->probe = b;
		else
			warnf(warn, "using 1",
			      "P2PGUARD_PROBE=%s is not understood (accepted: 0, 1)", v);
	}
	if ((v = get("P2PGUARD_PROBE_TIMEOUT_MS")) && *v) {
		if (parse_ulong(v, 10, 600000, &n))
			s->probe_timeout_ms = (unsigned)n;
		else
			warnf(warn, "using 5000",
			      "P2PGUARD_PROBE_TIMEOUT_MS=%s is not a number of milliseconds from "
			      "10 to 600000",
			      v);
	}
	if ((v = get("P2PGUARD_STALL_S")) && *v) {
		if (parse_ulong(v, 1, 86400, &n))
			s->stall_s = (unsigned)n;
		else
			warnf(warn, "using 30",
			      "P2PGUARD_STALL_S=%s is not a number of seconds from 1 to 86400", v);
	}
	if ((v = get("P2PGUARD_QUIET")) && *v) {
		if (parse_bool(v, &b))
			s->quiet = b;
		else
			warnf(warn, "using 0",
			      "P2PGUARD_QUIET=%s is not understood (accepted: 0, 1)", v);
	}
	if ((v = get("P2PGUARD_NCCL")) && *v) {
		if (parse_bool(v, &b))
			s->nccl = b;
		else
			warnf(warn, "using 1",
			      "P2PGUARD_NCCL=%s is not understood (accepted: 0, 1)", v);
	}
	if ((v = get("P2PGUARD_RULES")) && *v) {
		snprintf(s->rules_dir, sizeof(s->rules_dir), "%s", v);
		s->rules_dir_set = true;
	}
	if ((v = get("P2PGUARD_TEST")) && *v)
		s->test_hooks = parse_test_hooks(v, warn);
	if ((v = get("RANK")) && *v && !parse_rank(v, &s->rank))
		warnf(warn, "the processes row has no rank",
		      "RANK=%s is not a rank (a decimal number from 0)", v);
	if ((v = get("LOCAL_RANK")) && *v && !parse_rank(v, &s->local_rank))
		warnf(warn, "the processes row has no local rank",
		      "LOCAL_RANK=%s is not a rank (a decimal number from 0)", v);
}

int p2pg_settings_absolute(char *path, size_t len)
{
	if (path[0] == '/' || path[0] == '\0')
		return 0;
	/* In place, without printf: this runs in every process's constructor, and each page of
	 * stack or of libc's printf it touches is a page fault paid by /bin/true too. */
	char cwd[PATH_MAX];
	if (!getcwd(cwd, sizeof(cwd)))
		return -errno;
	size_t dir = strcmp(cwd, "/") == 0 ? 0 : strlen(cwd);
	size_t name = strlen(path);
	if (dir + 1 + name >= len)
		return -ENAMETOOLONG;
	memmove(path + dir + 1, path, name + 1);
	memcpy(path, cwd, dir);
	path[dir] = '/';
	return 0;
}

bool p2pg_settings_pair_selected(const struct p2pg_settings *s, int a, int b)
{
	if (a < 0 || b < 0 || a == b)
		return false;
	if (s->pairs_all)
		return true;
	if (a >= P2PG_MAX_DEVICES || b >= P2PG_MAX_DEVICES)
		return false;
	return s->pairs[a][b] != 0;
}

/* The process's settings: read once from the environment, at the preload constructor. */
struct p2pg_settings p2pg_process_settings;

static void settings_warn(const char *line)
{
	p2pg_notice("%s", line);
}

char *p2pg_env_get(const char *name)
{
	for (char **entry = environ; entry && *entry; entry++) {
		const char *e = *entry, *n = name;
		while (*n && *e == *n)
			e++, n++;
		if (!*n && *e == '=')
			return (char *)e + 1;
	}
	return NULL;
}

void p2pg_settings_parse(struct p2pg_settings *s, char *(*get)(const char *name),
			 void (*warn)(const char *line))
{
	memset(s, 0, sizeof(*s));
	parse_zeroed(s, get, &(struct setting_problems){warn, true});
}

void p2pg_settings_check(struct p2pg_settings *s, char *(*get)(const char *name),
			 void (*refuse)(const char *line))
{
	memset(s, 0, sizeof(*s));
	parse_zeroed(s, get, &(struct setting_problems){refuse, false});
}

void p2pg_settings_load(void)
{
	struct p2pg_settings *s = &p2pg_process_settings;
	/* The process's settings are a static, zero until this one read at load: no memset of its
	 * 12 KB, whose pages every process that inherits the preload would otherwise pay for. */
	parse_zeroed(s, p2pg_env_get, &(struct setting_problems){settings_warn, true});
	/* The database's folder is where the program starts: one that changes folder later would
	 * otherwise split its rows over two databases and leave a spool behind. */
	int r = p2pg_settings_absolute(s->db_path, sizeof(s->db_path));
	if (r < 0)
		p2pg_notice("the database %s cannot be named from the folder the program starts in "
			    "(%s); it is used as given, relative to wherever the program is",
			    s->db_path, strerror(-r));
	/* The flag, not rules_dir[0]: that byte is two pages into the struct, a page fault away. */
	if (s->rules_dir_set && p2pg_settings_absolute(s->rules_dir, sizeof(s->rules_dir)) < 0)
		p2pg_notice("P2PGUARD_RULES=%s cannot be named from the folder the program starts "
			    "in; it is used as given",
			    s->rules_dir);
}

void p2pg_settings_use(const struct p2pg_settings *s)
{
	p2pg_process_settings = *s;
}
