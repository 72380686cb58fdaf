/* SPDX-License-Identifier: MIT */
/*
 * Grouping what repeats: crashes by signal and top frames (a hundred ranks dying in one place are
 * one story), and the lists that SQL's group_concat hands back.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "dbread.h"
#include "report.h"

#define TOP_FRAMES 3

size_t report_parse_ints(const char *text, int **ret)
{
	size_t n = 0, cap = 0;
	int *v = NULL;
	for (const char *p = text; p && *p;) {
		char *end;
		long x = strtol(p, &end, 10);
		if (end != p) {
			if (n == cap) {
				cap = cap ? cap * 2 : 16;
				int *bigger = realloc(v, cap * sizeof(*v));
				if (!bigger)
					break;
				v = bigger;
			}
			v[n++] = (int)x;
		}
		p = strchr(end, ',');
		p = p ? p + 1 : NULL;
	}
	*ret = v;
	return n;
}

size_t report_parse_pairs(const char *text, struct dev_pair **ret)
{
	size_t n = 0, cap = 0;
	struct dev_pair *v = NULL;
	for (const char *p = text; p && *p;) {
		int a, b;
		if (sscanf(p, "%d:%d", &a, &b) == 2) {
			if (n == cap) {
				cap = cap ? cap * 2 : 16;
				struct dev_pair *bigger = realloc(v, cap * sizeof(*v));
				if (!bigger)
					break;
				v = bigger;
			}
			v[n++] = (struct dev_pair){a, b};
		}
		p = strchr(p, ',');
		p = p ? p + 1 : NULL;
	}
	*ret = v;
	return n;
}

size_t report_parse_strings(const char *text, char ***ret)
{
	size_t n = 0, cap = 0;
	char **v = NULL;
	for (const char *p = text; p && *p;) {
		size_t len = strcspn(p, ",");
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			char **bigger = realloc(v, cap * sizeof(*v));
			if (!bigger)
				break;
			v = bigger;
		}
		v[n] = strndup(p, len);
		if (v[n])
			n++;
		p = p[len] ? p + len + 1 : NULL;
	}
	*ret = v;
	return n;
}

void report_free_strings(char **s, size_t n)
{
	for (size_t k = 0; k < n; k++)
		free(s[k]);
	free(s);
}

/*
 * The top frames of a backtrace ("#0 module+0xOFF symbol+0xOFF" lines) without their offsets,
 * which differ with every build and load address: "module symbol | module symbol | ...".
 */
static char *crash_key(const char *backtrace)
{
	struct rbuf b = {0};
	int frames = 0;
	for (const char *p = backtrace ? backtrace : ""; *p && frames < TOP_FRAMES;) {
		size_t len = strcspn(p, "\n");
		const char *q = p, *end = p + len;
		if (*q == '#')
			q += strcspn(q, " ");
		rbuf_printf(&b, "%s", frames ? " | " : "");
		while (q < end) {
			while (q < end && *q == ' ')
				q++;
			size_t w = 0;
			while (q + w < end && q[w] != ' ')
				w++;
			/* a word without its +0x... tail */
			size_t keep = w;
			for (size_t i = 0; i + 2 < w; i++)
				if (q[i] == '+' && q[i + 1] == '0' && q[i + 2] == 'x') {
					keep = i;
					break;
				}
			if (keep)
				rbuf_printf(&b, "%s%.*s", q == p ? "" : " ", (int)keep, q);
			q += w;
		}
		frames++;
		p = *end ? end + 1 : end;
	}
	if (!b.text)
		rbuf_printf(&b, "(no backtrace)");
	/* Leading blanks from the frame number's removal. */
	char *t = b.text;
	size_t lead = strspn(t, " ");
	memmove(t, t + lead, strlen(t + lead) + 1);
	return t;
}

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

static char *first_line(const char *text)
{
	if (!text || !*text)
		return NULL;
	return strndup(text, strcspn(text, "\n"));
}

static void add_unique_int(int **v, size_t *n, int x)
{
	for (size_t k = 0; k < *n; k++)
		if ((*v)[k] == x)
			return;
	int *bigger = realloc(*v, (*n + 1) * sizeof(int));
	if (!bigger)
		return;
	*v = bigger;
	(*v)[(*n)++] = x;
}

static void add_unique_str(char ***v, size_t *n, const char *s)
{
	if (!s)
		return;
	for (size_t k = 0; k < *n; k++)
		if (strcmp((*v)[k], s) == 0)
			return;
	char **bigger = realloc(*v, (*n + 1) * sizeof(char *));
	char *copy = strdup(s);
	if (!bigger || !copy) {
		free(copy);
		if (bigger)
			*v = bigger;
		return;
	}
	*v = bigger;
	(*v)[(*n)++] = copy;
}

struct crash_group *report_crash_groups(struct report *r, size_t *ret_n)
{
	*ret_n = 0;
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	char sql[256];
	snprintf(
	    sql, sizeof(sql),
	    "SELECT c.signal, c.backtrace, %s, c.started_ns, c.process_id FROM crashes c ORDER "
	    "BY c.started_ns, c.id",
	    r->crash_python ? "c.python_stack" : "NULL");
	if (sqlite3_prepare_v2(r->db, sql, -1, &st, NULL) != SQLITE_OK)
		return NULL;
	struct crash_group *g = NULL;
	size_t n = 0;
	/* The processes counted per group: a process dies once, but keep it exact. */
	int64_t **procs = NULL;
	size_t *nprocs = NULL;
	while (sqlite3_step(st) == SQLITE_ROW) {
		int sig = sqlite3_column_int(st, 0);
		_cleanup_free_ char *key = crash_key(p2pg_cli_col(st, 1));
		if (!key)
			continue;
		size_t k = 0;
		while (k < n && !(g[k].signal == sig && strcmp(g[k].key, key) == 0))
			k++;
		if (k == n) {
			struct crash_group *bigger = realloc(g, (n + 1) * sizeof(*g));
			int64_t **pb = realloc(procs, (n + 1) * sizeof(*pb));
			size_t *nb = realloc(nprocs, (n + 1) * sizeof(*nb));
			if (bigger)
				g = bigger;
			if (pb)
				procs = pb;
			if (nb)
				nprocs = nb;
			if (!bigger || !pb || !nb)
				break;
			const char *py = p2pg_cli_col(st, 2);
			g[n] = (struct crash_group){.signal = sig,
						    .key = key,
						    .python = py && *py ? strdup(py) : NULL,
						    .backtrace = dup_or_null(p2pg_cli_col(st, 1)),
						    .first_ns = sqlite3_column_int64(st, 3)};
			key = NULL;
			_cleanup_free_ char *py_where = first_line(py);
			_cleanup_free_ char *c_where = first_line(p2pg_cli_col(st, 1));
			g[n].where = py_where ? strdup(py_where) : c_where ? strdup(c_where) : NULL;
			procs[n] = NULL;
			nprocs[n] = 0;
			n++;
		}
		struct crash_group *c = &g[k];
		c->count++;
		c->last_ns = sqlite3_column_int64(st, 3);
		int64_t pid = sqlite3_column_int64(st, 4);
		bool seen = false;
		for (size_t j = 0; j < nprocs[k]; j++)
			seen = seen || procs[k][j] == pid;
		if (!seen) {
			int64_t *bigger = realloc(procs[k], (nprocs[k] + 1) * sizeof(int64_t));
			if (bigger) {
				procs[k] = bigger;
				procs[k][nprocs[k]++] = pid;
				c->processes++;
			}
		}
		const struct report_process *p = report_scan_process(&r->scan, pid);
		if (p && p->rank >= 0)
			add_unique_int(&c->ranks, &c->nranks, p->rank);
		if (p)
			add_unique_str(&c->hosts, &c->nhosts, p->host);
	}
	for (size_t k = 0; k < n; k++)
		free(procs[k]);
	free(procs);
	free(nprocs);
	*ret_n = n;
	return g;
}

void report_crash_groups_free(struct crash_group *g, size_t n)
{
	for (size_t k = 0; k < n; k++) {
		free(g[k].key);
		free(g[k].where);
		free(g[k].python);
		free(g[k].backtrace);
		free(g[k].ranks);
		report_free_strings(g[k].hosts, g[k].nhosts);
	}
	free(g);
}

void report_bind_failure_places(sqlite3_stmt *places, sqlite3_stmt *group)
{
	sqlite3_reset(places);
	for (int c = 1; c <= 6; c++) {
		int col = c + 4; /* api, status, error_name, action, rule_id, probe */
		if (sqlite3_column_type(group, col) == SQLITE_NULL)
			sqlite3_bind_null(places, c);
		else
			sqlite3_bind_value(places, c, sqlite3_column_value(group, col));
	}
}
