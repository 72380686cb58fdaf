/* SPDX-License-Identifier: MIT */
/*
 * The report's one pass over the transfers. A database of millions of rows is read once, in rowid
 * order, with no index and no sort in SQLite (a GROUP BY or a window over every row took seconds);
 * the percentiles are sorted here, per pair and path.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "dbread.h"
#include "report.h"

const char *const report_path_names[RP_PATHS] = {"p2p", "driver", "staged", "captured", "other"};

struct maps {
	struct imap lines, bw, procs, series;
	const char *last_api;
	size_t last_api_len;
	int last_api_index;
};

static int path_index(const char *path)
{
	for (int k = 0; k < RP_OTHER; k++)
		if (path && strcmp(path, report_path_names[k]) == 0)
			return k;
	return RP_OTHER;
}

static int api_index(struct report_scan *s, const char *api)
{
	struct maps *m = s->maps;
	size_t len = strlen(api);
	if (m->last_api && m->last_api_len == len && memcmp(m->last_api, api, len) == 0)
		return m->last_api_index;
	for (size_t k = 0; k < s->napis; k++)
		if (strcmp(s->apis[k], api) == 0) {
			m->last_api = s->apis[k];
			m->last_api_len = len;
			m->last_api_index = (int)k;
			return (int)k;
		}
	char **bigger = realloc(s->apis, (s->napis + 1) * sizeof(*bigger));
	char *copy = strdup(api);
	if (!bigger || !copy) {
		free(copy);
		if (bigger)
			s->apis = bigger;
		return -1;
	}
	s->apis = bigger;
	s->apis[s->napis] = copy;
	m->last_api = copy;
	m->last_api_len = len;
	m->last_api_index = (int)s->napis;
	return (int)s->napis++;
}

static uint64_t pair_key(int src, int dst)
{
	return ((uint64_t)(uint16_t)src << 16 | (uint16_t)dst) + 1;
}

static struct report_line *line_for(struct report_scan *s, int src, int dst, int path, int api)
{
	struct maps *m = s->maps;
	uint64_t key =
	    (pair_key(src, dst) << 24 | (uint64_t)path << 20 | (uint64_t)(api & 0xfffff));
	int32_t i = imap_get(&m->lines, key);
	if (i >= 0)
		return &s->lines[i];
	if (array_grow(&s->lines, &s->caplines, s->nlines, sizeof(*s->lines)) < 0 ||
	    imap_put(&m->lines, key, (int32_t)s->nlines) < 0)
		return NULL;
	s->lines[s->nlines] = (struct report_line){src, dst, path, s->apis[api], {0}};
	return &s->lines[s->nlines++];
}

static struct report_bw *bw_for(struct report_scan *s, int src, int dst, int path)
{
	struct maps *m = s->maps;
	uint64_t key = pair_key(src, dst) << 4 | (uint64_t)path;
	int32_t i = imap_get(&m->bw, key);
	if (i >= 0)
		return &s->bw[i];
	if (array_grow(&s->bw, &s->capbw, s->nbw, sizeof(*s->bw)) < 0 ||
	    imap_put(&m->bw, key, (int32_t)s->nbw) < 0)
		return NULL;
	s->bw[s->nbw] = (struct report_bw){.src = src, .dst = dst, .path = path};
	return &s->bw[s->nbw++];
}

static struct report_series *series_for(struct report_scan *s, int src, int dst)
{
	struct maps *m = s->maps;
	int32_t i = imap_get(&m->series, pair_key(src, dst));
	if (i >= 0)
		return &s->series[i];
	if (array_grow(&s->series, &s->capseries, s->nseries, sizeof(*s->series)) < 0 ||
	    imap_put(&m->series, pair_key(src, dst), (int32_t)s->nseries) < 0)
		return NULL;
	s->series[s->nseries] = (struct report_series){.src = src, .dst = dst};
	return &s->series[s->nseries++];
}

struct report_process *report_scan_process(const struct report_scan *s, int64_t id)
{
	struct maps *m = s->maps;
	int32_t i = m ? imap_get(&m->procs, (uint64_t)id + 1) : -1;
	return i >= 0 ? &s->procs[i] : NULL;
}

static void add_counts(struct report_counts *to, const struct report_counts *c)
{
	to->calls += c->calls;
	to->bytes += c->bytes;
	to->failed += c->failed;
	to->folded += c->folded;
	to->gpu_timed += c->gpu_timed;
	to->synchronous += c->synchronous;
}

static void add_device(struct report_scan *s, int d)
{
	for (size_t k = 0; k < s->ndevices; k++)
		if (s->devices[k] == d)
			return;
	if (s->ndevices < sizeof(s->devices) / sizeof(s->devices[0]))
		s->devices[s->ndevices++] = d;
}

static int load_processes(sqlite3 *db, struct report_scan *s)
{
	struct maps *m = s->maps;
	char sql[512];
	snprintf(sql, sizeof(sql),
		 "SELECT id, pid, hostname, rank, local_rank, mode, cmdline, started_ns, "
		 "records_dropped, recovered, %s, %s FROM processes ORDER BY coalesce(rank, 1 << "
		 "30), id",
		 p2pg_cli_has_column(db, "processes", "records_invalid") ? "records_invalid" : "0",
		 p2pg_cli_has_column(db, "processes", "run_id") ? "run_id" : "NULL");
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		return -EIO;
	size_t cap = 0;
	while (sqlite3_step(st) == SQLITE_ROW) {
		if (array_grow(&s->procs, &cap, s->nprocs, sizeof(*s->procs)) < 0)
			return -ENOMEM;
		struct report_process *p = &s->procs[s->nprocs];
		*p = (struct report_process){
		    .id = sqlite3_column_int64(st, 0),
		    .pid = sqlite3_column_int(st, 1),
		    .host = p2pg_cli_col_dup(st, 2),
		    .rank = p2pg_cli_col_int_or(st, 3, -1),
		    .local_rank = p2pg_cli_col_int_or(st, 4, -1),
		    .mode = p2pg_cli_col_dup(st, 5),
		    .cmdline = p2pg_cli_col_dup(st, 6),
		    .started_ns = sqlite3_column_int64(st, 7),
		    .dropped = sqlite3_column_int64(st, 8),
		    .recovered = sqlite3_column_int(st, 9) != 0,
		    .invalid = sqlite3_column_int64(st, 10),
		    .run_id = p2pg_cli_col_dup(st, 11),
		};
		if (p->rank < -1)
			p->rank = -1;
		if (imap_put(&m->procs, (uint64_t)p->id + 1, (int32_t)s->nprocs) < 0)
			return -ENOMEM;
		s->nprocs++;
	}
	return 0;
}

/* Processes with a row in table: they made a peer call (their rows say so). */
static void mark_peer_calls(sqlite3 *db, struct report_scan *s, const char *table)
{
	if (!p2pg_cli_has_table(db, table))
		return;
	char sql[128];
	snprintf(sql, sizeof(sql), "SELECT DISTINCT process_id FROM %s", table);
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		return;
	while (sqlite3_step(st) == SQLITE_ROW) {
		struct report_process *p = report_scan_process(s, sqlite3_column_int64(st, 0));
		if (p)
			p->peer_calls = true;
	}
}

/* Summary buckets and overflow aggregates: calls without a row each. */
static int add_aggregates(sqlite3 *db, struct report_scan *s, const char *sql, bool folded)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		return 0; /* an older database without the table */
	while (sqlite3_step(st) == SQLITE_ROW) {
		int src = sqlite3_column_int(st, 1), dst = sqlite3_column_int(st, 2);
		int path = path_index(p2pg_cli_col(st, 3));
		int api = api_index(s, p2pg_cli_col(st, 4) ?: "?");
		struct report_counts c = {.calls = sqlite3_column_int64(st, 5),
					  .bytes = sqlite3_column_int64(st, 6),
					  .failed = sqlite3_column_int64(st, 7)};
		if (folded)
			c.folded = c.calls;
		struct report_line *l = api >= 0 ? line_for(s, src, dst, path, api) : NULL;
		struct report_bw *b = bw_for(s, src, dst, path);
		if (!l || !b)
			return -ENOMEM;
		add_counts(&l->c, &c);
		add_counts(&b->c, &c);
		add_counts(&s->total, &c);
		struct report_process *p = report_scan_process(s, sqlite3_column_int64(st, 0));
		if (p) {
			add_counts(&p->c, &c);
			p->peer_calls = true;
		}
		add_device(s, src);
		add_device(s, dst);
	}
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return (x > y) - (x < y);
}

static int cmp_intp(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

static int cmp_line(const void *a, const void *b)
{
	const struct report_line *x = a, *y = b;
	if (x->src != y->src)
		return x->src - y->src;
	if (x->dst != y->dst)
		return x->dst - y->dst;
	if (x->path != y->path)
		return x->path - y->path;
	return strcmp(x->api, y->api);
}

static int cmp_bw(const void *a, const void *b)
{
	const struct report_bw *x = a, *y = b;
	if (x->src != y->src)
		return x->src - y->src;
	if (x->dst != y->dst)
		return x->dst - y->dst;
	return x->path - y->path;
}

double report_percentile(const double *sorted, size_t n, double p)
{
	if (n == 0)
		return NAN;
	size_t r = (size_t)(p * (double)n + 0.5);
	if (r < 1)
		r = 1;
	if (r > n)
		r = n;
	return round(sorted[r - 1] * 1000.0) / 1000.0;
}

int report_scan_run(sqlite3 *db, struct report_scan *s, bool with_series,
		    struct report_progress *progress)
{
	memset(s, 0, sizeof(*s));
	s->t_first = INT64_MAX;
	s->t_last = INT64_MIN;
	s->maps = calloc(1, sizeof(struct maps));
	if (!s->maps)
		return -ENOMEM;
	/* Declared before the first jump to fail, which finalizes it. */
	_cleanup_sqlite_stmt_ sqlite3_stmt *transfers = NULL;
	int r = load_processes(db, s);
	if (r == -EIO)
		fprintf(stderr, "p2pguard: cannot read the processes: %s\n", sqlite3_errmsg(db));
	if (r < 0)
		goto fail;

	/* The transfer rows of processes recorded in summary mode are in their buckets already. */
	struct imap summary = {0};
	if (p2pg_cli_has_table(db, "transfer_summary")) {
		_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
		if (sqlite3_prepare_v2(db, "SELECT DISTINCT process_id FROM transfer_summary", -1,
				       &st, NULL) == SQLITE_OK)
			while (sqlite3_step(st) == SQLITE_ROW)
				imap_put(&summary, (uint64_t)sqlite3_column_int64(st, 0) + 1, 1);
	}

	int64_t total = 0;
	{
		_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
		if (sqlite3_prepare_v2(db, "SELECT max(rowid) FROM main.transfers", -1, &st,
				       NULL) == SQLITE_OK &&
		    sqlite3_step(st) == SQLITE_ROW)
			total = sqlite3_column_int64(st, 0);
	}
	if (progress)
		progress_stage(progress, "reading transfers", total);

	if (sqlite3_prepare_v2(db,
			       "SELECT process_id, src_device, dst_device, path, api, bytes, "
			       "status, gpu_ns, started_ns, instr(api, 'Async') = 0, id "
			       "FROM transfers",
			       -1, &transfers, NULL) != SQLITE_OK) {
		fprintf(stderr, "p2pguard: cannot read the transfers: %s\n", sqlite3_errmsg(db));
		r = -EIO;
		imap_free(&summary);
		goto fail;
	}
	struct report_process *proc = NULL;
	int64_t rows = 0;
	int rc;
	while ((rc = sqlite3_step(transfers)) == SQLITE_ROW) {
		int64_t pid = sqlite3_column_int64(transfers, 0);
		if (!proc || proc->id != pid)
			proc = report_scan_process(s, pid);
		if (sqlite3_column_type(transfers, 1) == SQLITE_NULL ||
		    sqlite3_column_type(transfers, 2) == SQLITE_NULL)
			continue;
		int src = sqlite3_column_int(transfers, 1), dst = sqlite3_column_int(transfers, 2);
		int path = path_index(p2pg_cli_col(transfers, 3));
		const char *api_name = p2pg_cli_col(transfers, 4);
		int api = api_index(s, api_name ? api_name : "?");
		int64_t bytes = sqlite3_column_int64(transfers, 5),
			gpu_ns = sqlite3_column_int64(transfers, 7);
		bool ok = sqlite3_column_int(transfers, 6) == 0,
		     sync = sqlite3_column_int(transfers, 9) != 0;
		bool in_summary = imap_get(&summary, (uint64_t)pid + 1) >= 0;
		struct report_counts c = {0};
		if (!in_summary)
			c = (struct report_counts){.calls = 1, .bytes = bytes, .failed = !ok};
		bool timed = ok && gpu_ns > 0;
		if (timed)
			*(sync ? &c.synchronous : &c.gpu_timed) = 1;
		struct report_line *l = api >= 0 ? line_for(s, src, dst, path, api) : NULL;
		struct report_bw *b = bw_for(s, src, dst, path);
		if (!l || !b) {
			r = -ENOMEM;
			break;
		}
		add_counts(&l->c, &c);
		add_counts(&b->c, &c);
		add_counts(&s->total, &c);
		if (proc) {
			add_counts(&proc->c, &c);
			proc->peer_calls = true;
		}
		int64_t t = sqlite3_column_int64(transfers, 8);
		if (sqlite3_column_type(transfers, 8) != SQLITE_NULL) {
			s->t_first = t < s->t_first ? t : s->t_first;
			s->t_last = t > s->t_last ? t : s->t_last;
		}
		add_device(s, src);
		add_device(s, dst);
		if (timed && report_path_has_bandwidth(path)) {
			double gbps = (double)bytes / (double)gpu_ns;
			if (array_grow(&b->gbps, &b->cap, b->n, sizeof(double)) < 0) {
				r = -ENOMEM;
				break;
			}
			b->gbps[b->n++] = gbps;
			b->timed_bytes += bytes;
			if (proc &&
			    array_grow(&proc->gbps, &proc->cap, proc->n, sizeof(float)) == 0)
				proc->gbps[proc->n++] = (float)gbps;
		}
		if (with_series) {
			struct report_series *ser = series_for(s, src, dst);
			if (!ser) {
				r = -ENOMEM;
				break;
			}
			if (bytes > 0)
				ser->sizes[63 - __builtin_clzll((unsigned long long)bytes)]++;
			if (timed && report_path_has_bandwidth(path) &&
			    sqlite3_column_type(transfers, 8) != SQLITE_NULL) {
				if (array_grow(&ser->s, &ser->cap, ser->n, sizeof(*ser->s)) < 0) {
					r = -ENOMEM;
					break;
				}
				ser->s[ser->n++] = (struct report_sample){
				    t, (float)((double)bytes / (double)gpu_ns), (uint8_t)path};
			}
		}
		if ((++rows & 0xffff) == 0 && progress)
			progress_tick(progress, sqlite3_column_int64(transfers, 10));
	}
	imap_free(&summary);
	if (r < 0)
		goto fail;
	if (rc != SQLITE_DONE) {
		fprintf(stderr, "p2pguard: cannot read the transfers: %s\n", sqlite3_errmsg(db));
		r = -EIO;
		goto fail;
	}
	if (progress)
		progress_stage(progress, "reading summaries and overflow", 0);
	r = add_aggregates(db, s,
			   "SELECT process_id, src_device, dst_device, path, api, count, bytes, "
			   "failures FROM transfer_summary",
			   false);
	if (r == 0)
		r = add_aggregates(db, s,
				   "SELECT process_id, src_device, dst_device, path, api, count, "
				   "bytes, 0 FROM transfer_overflow",
				   true);
	if (r < 0)
		goto fail;
	mark_peer_calls(db, s, "peer_access");
	mark_peer_calls(db, s, "failures");

	for (size_t k = 0; k < s->nbw; k++)
		sort_n(s->bw[k].gbps, s->bw[k].n, sizeof(double), cmp_double);
	for (size_t k = 0; k < s->nprocs; k++)
		sort_n(s->procs[k].gbps, s->procs[k].n, sizeof(float), cmp_float);
	/* The lookup tables hold indices: sorting comes after the last lookup by pair. */
	struct maps *m = s->maps;
	imap_free(&m->lines);
	imap_free(&m->bw);
	imap_free(&m->series);
	m->lines = m->bw = m->series = (struct imap){0};
	sort_n(s->lines, s->nlines, sizeof(*s->lines), cmp_line);
	sort_n(s->bw, s->nbw, sizeof(*s->bw), cmp_bw);
	sort_n(s->devices, s->ndevices, sizeof(int), cmp_intp);
	return 0;
fail:
	if (r == -ENOMEM)
		fprintf(stderr, "p2pguard: out of memory reading the transfers\n");
	report_scan_free(s);
	return r;
}

void report_scan_free(struct report_scan *s)
{
	for (size_t k = 0; k < s->nbw; k++)
		free(s->bw[k].gbps);
	for (size_t k = 0; k < s->nprocs; k++) {
		struct report_process *p = &s->procs[k];
		free(p->host);
		free(p->mode);
		free(p->cmdline);
		free(p->run_id);
		free(p->gbps);
	}
	for (size_t k = 0; k < s->nseries; k++)
		free(s->series[k].s);
	for (size_t k = 0; k < s->napis; k++)
		free(s->apis[k]);
	struct maps *m = s->maps;
	if (m) {
		imap_free(&m->lines);
		imap_free(&m->bw);
		imap_free(&m->procs);
		imap_free(&m->series);
	}
	free(s->maps);
	free(s->apis);
	free(s->lines);
	free(s->bw);
	free(s->procs);
	free(s->series);
	memset(s, 0, sizeof(*s));
}
