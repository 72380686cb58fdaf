/* SPDX-License-Identifier: MIT */
/*
 * NCCL's operations read once (nccl_scan.h). The device pairs follow the nccl_pair_bandwidth
 * view's definition exactly (src/record/schema.sql); the tests compare the two.
 */
#include "nccl_scan.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "dbread.h"
#include "report.h"

struct maps {
	struct imap rows, funcs, pairs, series, physical, procs;
	int64_t *proc_ids; /* processes: id, hostname, rank */
	char **proc_hosts;
	int *proc_ranks;
	size_t nprocs;
};

/* Kinds and functions: a few distinct names, compared by pointer once interned. */
static const char *intern(struct nccl_scan *s, const char *name)
{
	if (!name)
		name = "?";
	for (size_t k = 0; k < s->nnames; k++)
		if (strcmp(s->names[k], name) == 0)
			return s->names[k];
	char **bigger = realloc(s->names, (s->nnames + 1) * sizeof(*bigger));
	if (!bigger)
		return NULL;
	s->names = bigger;
	char *copy = strdup(name);
	if (!copy)
		return NULL;
	s->names[s->nnames++] = copy;
	return copy;
}

static size_t name_index(const struct nccl_scan *s, const char *interned)
{
	for (size_t k = 0; k < s->nnames; k++)
		if (s->names[k] == interned)
			return k;
	return 0;
}

static int load_processes(sqlite3 *db, struct maps *m)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(db, "SELECT id, hostname, rank FROM processes", -1, &st, NULL) !=
	    SQLITE_OK)
		return -EIO;
	size_t cap = 0, cap2 = 0, cap3 = 0;
	while (sqlite3_step(st) == SQLITE_ROW) {
		if (array_grow(&m->proc_ids, &cap, m->nprocs, sizeof(int64_t)) < 0 ||
		    array_grow(&m->proc_hosts, &cap2, m->nprocs, sizeof(char *)) < 0 ||
		    array_grow(&m->proc_ranks, &cap3, m->nprocs, sizeof(int)) < 0)
			return -ENOMEM;
		m->proc_ids[m->nprocs] = sqlite3_column_int64(st, 0);
		m->proc_hosts[m->nprocs] = p2pg_cli_col_dup(st, 1);
		m->proc_ranks[m->nprocs] = p2pg_cli_col_int_or(st, 2, -1);
		if (imap_put(&m->procs, (uint64_t)m->proc_ids[m->nprocs] + 1, (int32_t)m->nprocs) <
		    0)
			return -ENOMEM;
		m->nprocs++;
	}
	return 0;
}

/* nvidia-smi's index of each process's ordinals, from the devices table where there is one. */
static void load_physical(sqlite3 *db, struct maps *m)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (!p2pg_cli_has_table(db, "devices") ||
	    sqlite3_prepare_v2(db,
			       "SELECT process_id, ordinal, physical_index FROM devices WHERE "
			       "physical_index IS NOT NULL",
			       -1, &st, NULL) != SQLITE_OK)
		return;
	while (sqlite3_step(st) == SQLITE_ROW)
		imap_put(&m->physical,
			 ((uint64_t)sqlite3_column_int64(st, 0) << 16 |
			  (uint16_t)sqlite3_column_int(st, 1)) +
			     1,
			 sqlite3_column_int(st, 2));
}

static int load_comms(sqlite3 *db, struct nccl_scan *s)
{
	struct maps *m = s->maps;
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(
		db,
		"SELECT process_id, comm_serial, comm_hash, comm_name, rank, nranks, device, uuid, "
		"pci_bus_id, hostname, started_ns, events_untracked, profiler_version FROM "
		"nccl_comms ORDER BY started_ns, process_id, comm_serial",
		-1, &st, NULL) != SQLITE_OK)
		return -EIO;
	size_t caprows = 0, capcomms = 0;
	while (sqlite3_step(st) == SQLITE_ROW) {
		const char *hash = p2pg_cli_col(st, 2) ?: "";
		size_t c = 0;
		while (c < s->ncomms && strncmp(s->comms[c].hash, hash, 16) != 0)
			c++;
		if (c == s->ncomms) {
			if (array_grow(&s->comms, &capcomms, s->ncomms, sizeof(*s->comms)) < 0)
				return -ENOMEM;
			struct nccl_comm *nc = &s->comms[s->ncomms++];
			*nc = (struct nccl_comm){.name = p2pg_cli_col_dup(st, 3),
						 .nranks = sqlite3_column_int(st, 5),
						 .started_ns = sqlite3_column_int64(st, 10)};
			snprintf(nc->hash, sizeof(nc->hash), "%.16s", hash);
		}
		struct nccl_comm *comm = &s->comms[c];
		int64_t process = sqlite3_column_int64(st, 0);
		int32_t p = imap_get(&m->procs, (uint64_t)process + 1);
		const char *host = p2pg_cli_col(st, 9);
		if (!host && p >= 0)
			host = m->proc_hosts[p];
		int ordinal = p2pg_cli_col_int_or(st, 6, -1);
		int32_t physical =
		    ordinal < 0
			? -1
			: imap_get(&m->physical, ((uint64_t)process << 16 | (uint16_t)ordinal) + 1);
		const char *uuid = p2pg_cli_col(st, 7);
		int gpu = -1;
		if (ordinal >= 0 || uuid) {
			gpu = cli_gpus_add(&s->gpus, host, uuid, p2pg_cli_col(st, 8),
					   physical >= 0 ? physical : ordinal, physical >= 0);
			if (gpu < 0)
				return -ENOMEM;
		}
		if (array_grow(&s->rows, &caprows, s->nrows, sizeof(*s->rows)) < 0)
			return -ENOMEM;
		int rank = p2pg_cli_col_int_or(st, 4, -1);
		s->rows[s->nrows] = (struct nccl_row){.process = process,
						      .serial = sqlite3_column_int(st, 1),
						      .rank = rank,
						      .comm = (int)c,
						      .gpu = gpu,
						      .global_rank = p >= 0 ? m->proc_ranks[p] : -1,
						      .started_ns = sqlite3_column_int64(st, 10)};
		if (imap_put(&m->rows,
			     ((uint64_t)process << 16 | (uint16_t)s->rows[s->nrows].serial) + 1,
			     (int32_t)s->nrows) < 0)
			return -ENOMEM;
		if (rank >= 0 && rank < (1 << 24)) {
			if (rank >= comm->rank_cap) {
				int cap = rank + 1 > comm->nranks ? rank + 1 : comm->nranks;
				int *bigger = realloc(comm->rank_row, (size_t)cap * sizeof(int));
				if (!bigger)
					return -ENOMEM;
				for (int k = comm->rank_cap; k < cap; k++)
					bigger[k] = -1;
				comm->rank_row = bigger;
				comm->rank_cap = cap;
			}
			comm->recorded += comm->rank_row[rank] < 0;
			/* rows come by start: the newest row of a rank wins, as in the view */
			comm->rank_row[rank] = (int)s->nrows;
		}
		comm->untracked += sqlite3_column_int64(st, 11);
		if (sqlite3_column_int(st, 12) > comm->profiler_version)
			comm->profiler_version = sqlite3_column_int(st, 12);
		s->nrows++;
	}
	return 0;
}

static struct nccl_func *func_for(struct nccl_scan *s, int comm, const char *kind, const char *func)
{
	struct maps *m = s->maps;
	uint64_t key = ((uint64_t)(comm + 1) << 20 | (uint64_t)name_index(s, kind) << 10 |
			(uint64_t)name_index(s, func)) +
		       1;
	int32_t i = imap_get(&m->funcs, key);
	if (i >= 0)
		return &s->funcs[i];
	if (array_grow(&s->funcs, &s->capfuncs, s->nfuncs, sizeof(*s->funcs)) < 0 ||
	    imap_put(&m->funcs, key, (int32_t)s->nfuncs) < 0)
		return NULL;
	s->funcs[s->nfuncs] = (struct nccl_func){.comm = comm, .kind = kind, .func = func};
	return &s->funcs[s->nfuncs++];
}

static struct nccl_pair *pair_for(struct nccl_scan *s, int src, int dst, bool coll)
{
	struct maps *m = s->maps;
	uint64_t key = ((uint64_t)(uint32_t)(src + 1) << 33 | (uint64_t)(uint32_t)(dst + 1) << 1 |
			(uint64_t)coll) +
		       1;
	int32_t i = imap_get(&m->pairs, key);
	if (i >= 0)
		return &s->pairs[i];
	if (array_grow(&s->pairs, &s->cappairs, s->npairs, sizeof(*s->pairs)) < 0 ||
	    imap_put(&m->pairs, key, (int32_t)s->npairs) < 0)
		return NULL;
	s->pairs[s->npairs] = (struct nccl_pair){.src = src, .dst = dst, .coll = coll};
	return &s->pairs[s->npairs++];
}

static struct nccl_series *series_for(struct nccl_scan *s, int row, const char *kind,
				      const char *func, int peer)
{
	struct maps *m = s->maps;
	uint64_t key = ((uint64_t)(uint32_t)(row + 1) << 40 | (uint64_t)name_index(s, kind) << 34 |
			(uint64_t)name_index(s, func) << 28 | (uint64_t)((peer + 1) & 0xfffffff)) +
		       1;
	int32_t i = imap_get(&m->series, key);
	if (i >= 0)
		return &s->series[i];
	if (array_grow(&s->series, &s->capseries, s->nseries, sizeof(*s->series)) < 0 ||
	    imap_put(&m->series, key, (int32_t)s->nseries) < 0)
		return NULL;
	s->series[s->nseries] =
	    (struct nccl_series){.row = row, .peer = peer, .kind = kind, .func = func};
	return &s->series[s->nseries++];
}

/* Finished operations of one (row, kind, function, peer): count is 1 for a row of nccl_ops.
 * gpu_ns > 0: all of them have this much GPU time in all. */
struct part {
	int row;
	const char *kind, *func;
	int peer;
	int64_t count, bytes, gpu_ns;
	bool folded; /* overflow: no row of their own */
	bool sample; /* a row of nccl_ops: its GB/s is a sample of its pair */
};

static int add_part(struct nccl_scan *s, const struct part *p, bool with_series)
{
	const struct nccl_row *row = p->row >= 0 ? &s->rows[p->row] : NULL;
	bool timed = p->gpu_ns > 0;
	struct nccl_func *f = func_for(s, row ? row->comm : -1, p->kind, p->func);
	if (!f)
		return -ENOMEM;
	f->ops += p->count;
	f->bytes += p->bytes;
	f->folded += p->folded ? p->count : 0;
	if (timed) {
		f->gpu_timed += p->count;
		f->timed_bytes += p->bytes;
		f->gpu_ns += p->gpu_ns;
	}
	s->ops += p->count;
	s->bytes += p->bytes;
	s->gpu_timed += timed ? p->count : 0;

	/* The pair, as the view places it. */
	int src_rank = -1, dst_rank = -1, side = 0, peer = -1;
	bool coll = false;
	const struct nccl_comm *comm = row ? &s->comms[row->comm] : NULL;
	if (row && strcmp(p->func, "Send") == 0) {
		src_rank = row->rank;
		dst_rank = peer = p->peer;
	} else if (row && strcmp(p->func, "Recv") == 0) {
		src_rank = peer = p->peer;
		dst_rank = row->rank;
		side = 1;
	} else if (row && (strcmp(p->kind, "coll") == 0 || strcmp(p->kind, "ce") == 0) &&
		   comm->nranks == 2 && (row->rank == 0 || row->rank == 1)) {
		src_rank = row->rank;
		dst_rank = peer = 1 - row->rank;
		coll = true;
	}
	if (src_rank >= 0 || dst_rank >= 0) {
		int src =
		    src_rank >= 0 && src_rank < comm->rank_cap && comm->rank_row[src_rank] >= 0
			? s->rows[comm->rank_row[src_rank]].gpu
			: -1;
		int dst =
		    dst_rank >= 0 && dst_rank < comm->rank_cap && comm->rank_row[dst_rank] >= 0
			? s->rows[comm->rank_row[dst_rank]].gpu
			: -1;
		struct nccl_pair *pr = pair_for(s, src, dst, coll);
		if (!pr)
			return -ENOMEM;
		pr->ops[side] += p->count;
		pr->bytes[side] += p->bytes;
		if (p->sample && timed) {
			pr->timed[side]++;
			if (array_grow(&pr->gbps[side], &pr->cap[side], pr->n[side],
				       sizeof(double)) < 0)
				return -ENOMEM;
			pr->gbps[side][pr->n[side]++] = (double)p->bytes / (double)p->gpu_ns;
		}
	}
	if (with_series && p->row >= 0) {
		struct nccl_series *se = series_for(s, p->row, p->kind, p->func, peer);
		if (!se)
			return -ENOMEM;
		se->ops += p->count;
		se->bytes += p->bytes;
		if (timed) {
			se->gpu_timed += p->count;
			se->timed_bytes += p->bytes;
			se->gpu_ns += p->gpu_ns;
		}
	}
	return 0;
}

static int row_of(struct nccl_scan *s, int64_t process, int serial)
{
	struct maps *m = s->maps;
	return imap_get(&m->rows, ((uint64_t)process << 16 | (uint16_t)serial) + 1);
}

static int read_ops(sqlite3 *db, struct nccl_scan *s, bool with_series)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(db,
			       "SELECT process_id, comm_serial, kind, func, peer, bytes, gpu_ns, "
			       "state FROM nccl_ops",
			       -1, &st, NULL) != SQLITE_OK)
		return -EIO;
	int64_t last_process = -1;
	int last_serial = -1, row = -1;
	const char *kind = NULL, *func = NULL;
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t process = sqlite3_column_int64(st, 0);
		int serial = sqlite3_column_int(st, 1);
		if (process != last_process || serial != last_serial) {
			row = row_of(s, process, serial);
			last_process = process;
			last_serial = serial;
		}
		const char *k = p2pg_cli_col(st, 2) ?: "?", *fn = p2pg_cli_col(st, 3) ?: "?";
		if (!kind || strcmp(kind, k) != 0)
			kind = intern(s, k);
		if (!func || strcmp(func, fn) != 0)
			func = intern(s, fn);
		if (!kind || !func)
			return -ENOMEM;
		const char *state = p2pg_cli_col(st, 7) ?: "";
		if (strcmp(state, "done") != 0) {
			struct nccl_func *f =
			    func_for(s, row >= 0 ? s->rows[row].comm : -1, kind, func);
			if (!f)
				return -ENOMEM;
			bool running = strcmp(state, "running") == 0;
			f->running += running;
			f->unreported += !running;
			s->running += running;
			s->unreported += !running;
			continue;
		}
		struct part p = {.row = row,
				 .kind = kind,
				 .func = func,
				 .peer = sqlite3_column_type(st, 4) == SQLITE_NULL
					     ? -1
					     : sqlite3_column_int(st, 4),
				 .count = 1,
				 .bytes = sqlite3_column_int64(st, 5),
				 .gpu_ns = sqlite3_column_int64(st, 6),
				 .sample = true};
		if (p.gpu_ns < 0)
			p.gpu_ns = 0;
		int r = add_part(s, &p, with_series);
		if (r < 0)
			return r;
	}
	return rc == SQLITE_DONE ? 0 : -EIO;
}

/* Summary buckets and overflow aggregates: operations without a row each. A bucket's GPU time
 * counts only when every operation in it had one (its bytes are then all timed bytes). */
static int read_aggregates(sqlite3 *db, struct nccl_scan *s, bool with_series)
{
	static const char *const sql[] = {
	    "SELECT process_id, comm_serial, kind, func, peer, count, bytes, gpu_ns_total, "
	    "gpu_timed FROM nccl_op_summary",
	    "SELECT process_id, comm_serial, CASE WHEN func IN ('Send', 'Recv') THEN 'p2p' ELSE "
	    "'coll' END, func, peer, count, bytes, 0, 0 FROM nccl_op_overflow"};
	static const char *const tables[] = {"nccl_op_summary", "nccl_op_overflow"};
	for (int q = 0; q < 2; q++) {
		_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
		if (!p2pg_cli_has_table(db, tables[q]))
			continue;
		if (sqlite3_prepare_v2(db, sql[q], -1, &st, NULL) != SQLITE_OK)
			return -EIO;
		while (sqlite3_step(st) == SQLITE_ROW) {
			const char *kind = intern(s, p2pg_cli_col(st, 2));
			const char *func = intern(s, p2pg_cli_col(st, 3));
			if (!kind || !func)
				return -ENOMEM;
			int64_t count = sqlite3_column_int64(st, 5);
			struct part p = {.row = row_of(s, sqlite3_column_int64(st, 0),
						       sqlite3_column_int(st, 1)),
					 .kind = kind,
					 .func = func,
					 .peer = sqlite3_column_int(st, 4),
					 .count = count,
					 .bytes = sqlite3_column_int64(st, 6),
					 .folded = q == 1};
			if (count > 0 && sqlite3_column_int64(st, 8) == count)
				p.gpu_ns = sqlite3_column_int64(st, 7);
			int r = add_part(s, &p, with_series);
			if (r < 0)
				return r;
		}
	}
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static int cmp_pair(const void *a, const void *b)
{
	const struct nccl_pair *x = a, *y = b;
	/* unknown GPUs (-1) last */
	unsigned xs = (unsigned)x->src, ys = (unsigned)y->src, xd = (unsigned)x->dst,
		 yd = (unsigned)y->dst;
	if (xs != ys)
		return xs < ys ? -1 : 1;
	if (xd != yd)
		return xd < yd ? -1 : 1;
	return (int)x->coll - (int)y->coll;
}

static int cmp_func(const void *a, const void *b)
{
	const struct nccl_func *x = a, *y = b;
	unsigned xc = (unsigned)x->comm, yc = (unsigned)y->comm;
	if (xc != yc)
		return xc < yc ? -1 : 1;
	int c = strcmp(x->func, y->func);
	return c ? c : strcmp(x->kind, y->kind);
}

/* GPUs in host and index order; every index that names one renumbered. */
static int order_gpus(struct nccl_scan *s)
{
	int *moved = NULL;
	if (cli_gpus_order(&s->gpus, &moved) < 0)
		return -ENOMEM;
	for (size_t k = 0; k < s->nrows; k++)
		if (s->rows[k].gpu >= 0)
			s->rows[k].gpu = moved[s->rows[k].gpu];
	for (size_t k = 0; k < s->npairs; k++) {
		if (s->pairs[k].src >= 0)
			s->pairs[k].src = moved[s->pairs[k].src];
		if (s->pairs[k].dst >= 0)
			s->pairs[k].dst = moved[s->pairs[k].dst];
	}
	free(moved);
	return 0;
}

int nccl_scan_run(sqlite3 *db, struct nccl_scan *s, bool with_series)
{
	memset(s, 0, sizeof(*s));
	if (!p2pg_cli_has_table(db, "nccl_comms") || !p2pg_cli_has_table(db, "nccl_ops"))
		return 0;
	s->present = true;
	s->maps = calloc(1, sizeof(struct maps));
	if (!s->maps)
		return -ENOMEM;
	struct maps *m = s->maps;
	int r = load_processes(db, m);
	if (r == 0) {
		load_physical(db, m);
		r = load_comms(db, s);
	}
	if (r == 0)
		r = read_ops(db, s, with_series);
	if (r == 0)
		r = read_aggregates(db, s, with_series);
	if (r == 0)
		r = order_gpus(s);
	if (r < 0) {
		fprintf(stderr, "p2pguard: cannot read NCCL's operations: %s\n",
			r == -ENOMEM ? "out of memory" : sqlite3_errmsg(db));
		nccl_scan_free(s);
		return r;
	}
	for (size_t k = 0; k < s->npairs; k++) {
		struct nccl_pair *p = &s->pairs[k];
		for (int side = 0; side < 2; side++)
			sort_n(p->gbps[side], p->n[side], sizeof(double), cmp_double);
		p->side =
		    p->ops[1] > p->ops[0] || (p->ops[1] == p->ops[0] && p->timed[1] > p->timed[0]);
	}
	/* The lookup tables hold indices: sorting comes after the last lookup. */
	imap_free(&m->funcs);
	imap_free(&m->pairs);
	imap_free(&m->series);
	m->funcs = m->pairs = m->series = (struct imap){0};
	sort_n(s->pairs, s->npairs, sizeof(*s->pairs), cmp_pair);
	sort_n(s->funcs, s->nfuncs, sizeof(*s->funcs), cmp_func);
	return 0;
}

void nccl_scan_free(struct nccl_scan *s)
{
	struct maps *m = s->maps;
	cli_gpus_free(&s->gpus);
	for (size_t k = 0; k < s->ncomms; k++) {
		free(s->comms[k].name);
		free(s->comms[k].rank_row);
	}
	for (size_t k = 0; k < s->npairs; k++) {
		free(s->pairs[k].gbps[0]);
		free(s->pairs[k].gbps[1]);
	}
	for (size_t k = 0; k < s->nnames; k++)
		free(s->names[k]);
	if (m) {
		for (size_t k = 0; k < m->nprocs; k++)
			free(m->proc_hosts[k]);
		free(m->proc_ids);
		free(m->proc_hosts);
		free(m->proc_ranks);
		imap_free(&m->rows);
		imap_free(&m->funcs);
		imap_free(&m->pairs);
		imap_free(&m->series);
		imap_free(&m->physical);
		imap_free(&m->procs);
		free(m);
	}
	free(s->comms);
	free(s->rows);
	free(s->funcs);
	free(s->pairs);
	free(s->series);
	free(s->names);
	memset(s, 0, sizeof(*s));
}

double nccl_pair_percentile(const struct nccl_pair *p, double q)
{
	return report_percentile(p->gbps[p->side], p->n[p->side], q);
}

bool nccl_scan_has_process(const struct nccl_scan *s, int64_t process)
{
	for (size_t k = 0; k < s->nrows; k++)
		if (s->rows[k].process == process)
			return true;
	return false;
}
