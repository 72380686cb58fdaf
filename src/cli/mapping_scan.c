/* SPDX-License-Identifier: MIT */
/*
 * Cross-process mappings read once (mapping_scan.h): one grouped pass over peer_mappings, the
 * ordinals of each process turned into physical GPUs through the devices table. The pairs follow
 * the view mapping_pairs (src/record/schema.sql); the tests compare the two.
 */
#include "mapping_scan.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "dbread.h"

#define OPENED MAPPING_OPENED_SQL("m")

struct device {
	int physical; /* -1: unknown */
	char *uuid, *bus;
};

struct maps {
	struct imap procs;	  /* processes.id + 1 -> procs */
	struct imap device_index; /* (process << 16 | ordinal) + 1 -> devices */
	struct imap gpus;	  /* (proc << 16 | ordinal) + 1 -> gpu */
	struct imap pairs;	  /* (host << 42 | owner + 1 << 21 | accessor + 1) + 1 -> pairs */
	struct device *devices;
	size_t ndevices, capdevices;
	const char **hosts; /* distinct hostnames (the procs' strings) */
	size_t nhosts;
	int *exports; /* (gpu, proc) pairs before the GPUs are ordered */
	size_t nexports, capexports;
};

static int load_processes(sqlite3 *db, struct mapping_scan *s)
{
	struct maps *m = s->maps;
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(db, "SELECT id, pid, rank, hostname FROM processes ORDER BY id", -1,
			       &st, NULL) != SQLITE_OK)
		return -EIO;
	size_t cap = 0;
	while (sqlite3_step(st) == SQLITE_ROW) {
		if (array_grow(&s->procs, &cap, s->nprocs, sizeof(*s->procs)) < 0)
			return -ENOMEM;
		struct mapping_process *p = &s->procs[s->nprocs];
		*p = (struct mapping_process){.id = sqlite3_column_int64(st, 0),
					      .pid = sqlite3_column_int(st, 1),
					      .rank = p2pg_cli_col_int_or(st, 2, -1),
					      .host = p2pg_cli_col_dup(st, 3)};
		if (imap_put(&m->procs, (uint64_t)p->id + 1, (int32_t)s->nprocs) < 0)
			return -ENOMEM;
		s->nprocs++;
	}
	return 0;
}

static int load_devices(sqlite3 *db, struct maps *m)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (!p2pg_cli_has_table(db, "devices"))
		return 0;
	if (sqlite3_prepare_v2(db,
			       "SELECT process_id, ordinal, physical_index, uuid, pci_bus_id FROM "
			       "devices",
			       -1, &st, NULL) != SQLITE_OK)
		return -EIO;
	while (sqlite3_step(st) == SQLITE_ROW) {
		if (array_grow(&m->devices, &m->capdevices, m->ndevices, sizeof(*m->devices)) < 0)
			return -ENOMEM;
		m->devices[m->ndevices] =
		    (struct device){.physical = p2pg_cli_col_int_or(st, 2, -1),
				    .uuid = p2pg_cli_col_dup(st, 3),
				    .bus = p2pg_cli_col_dup(st, 4)};
		uint64_t key = ((uint64_t)sqlite3_column_int64(st, 0) << 16 |
				(uint16_t)sqlite3_column_int(st, 1)) +
			       1;
		if (imap_put(&m->device_index, key, (int32_t)m->ndevices++) < 0)
			return -ENOMEM;
	}
	return 0;
}

/* The physical GPU of a process's ordinal in *ret_gpu: the devices table's where it has the
 * process's row, else the host and the ordinal (as the view's coalesce does); -1 for no ordinal.
 * Returns 0 or -ENOMEM. */
static int gpu_of(struct mapping_scan *s, int proc, int ordinal, int *ret_gpu)
{
	struct maps *m = s->maps;
	*ret_gpu = -1;
	if (ordinal < 0)
		return 0;
	uint64_t key = ((uint64_t)proc << 16 | (uint16_t)ordinal) + 1;
	int32_t cached = imap_get(&m->gpus, key);
	if (cached >= 0) {
		*ret_gpu = cached;
		return 0;
	}
	int32_t d =
	    imap_get(&m->device_index, ((uint64_t)s->procs[proc].id << 16 | (uint16_t)ordinal) + 1);
	const struct device *dev = d >= 0 ? &m->devices[d] : NULL;
	bool physical = dev && dev->physical >= 0;
	int gpu = cli_gpus_add(&s->gpus, s->procs[proc].host, dev ? dev->uuid : NULL,
			       dev ? dev->bus : NULL, physical ? dev->physical : ordinal, physical);
	if (gpu < 0 || imap_put(&m->gpus, key, gpu) < 0)
		return -ENOMEM;
	*ret_gpu = gpu;
	return 0;
}

static int host_index(struct maps *m, const char *host)
{
	for (size_t k = 0; k < m->nhosts; k++)
		if ((!host && !m->hosts[k]) || (host && m->hosts[k] && !strcmp(host, m->hosts[k])))
			return (int)k;
	const char **bigger = realloc(m->hosts, (m->nhosts + 1) * sizeof(*bigger));
	if (!bigger)
		return -ENOMEM;
	m->hosts = bigger;
	m->hosts[m->nhosts] = host;
	return (int)m->nhosts++;
}

static int add_proc(struct mapping_procs *p, int proc)
{
	for (size_t k = 0; k < p->n; k++)
		if (p->v[k] == proc)
			return 0;
	if (array_grow(&p->v, &p->cap, p->n, sizeof(int)) < 0)
		return -ENOMEM;
	p->v[p->n++] = proc;
	return 0;
}

static struct mapping_pair *pair_for(struct mapping_scan *s, int proc, int owner, int accessor)
{
	struct maps *m = s->maps;
	int host = host_index(m, s->procs[proc].host);
	if (host < 0)
		return NULL;
	uint64_t key =
	    ((uint64_t)host << 42 | (uint64_t)(owner + 1) << 21 | (uint64_t)(accessor + 1)) + 1;
	int32_t i = imap_get(&m->pairs, key);
	if (i >= 0)
		return &s->pairs[i];
	if (array_grow(&s->pairs, &s->cappairs, s->npairs, sizeof(*s->pairs)) < 0 ||
	    imap_put(&m->pairs, key, (int32_t)s->npairs) < 0)
		return NULL;
	s->pairs[s->npairs] = (struct mapping_pair){.host = s->procs[proc].host,
						    .owner = owner,
						    .accessor = accessor,
						    .first_ns = INT64_MAX};
	return &s->pairs[s->npairs++];
}

static unsigned handle_bit(const char *name)
{
	static const char *const names[] = {"ipc", "posix_fd", "fabric"};
	if (!name)
		return MAPPING_HANDLE_NONE;
	for (unsigned k = 0; k < 3; k++)
		if (strcmp(name, names[k]) == 0)
			return 1u << k;
	return MAPPING_HANDLE_OTHER;
}

static void add_counts(struct mapping_counts *to, const struct mapping_counts *c)
{
	to->opened += c->opened;
	to->closed += c->closed;
	to->bytes += c->bytes;
	to->cross_process += c->cross_process;
	to->failed += c->failed;
	to->lived_ns += c->lived_ns;
}

static int read_groups(sqlite3 *db, struct mapping_scan *s)
{
	struct maps *m = s->maps;
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(
		db,
		"SELECT m.process_id, m.owner_device, m.accessor_device, m.handle_type, "
		"sum(" OPENED "), sum(" OPENED
		" AND m.ended_ns IS NOT NULL), coalesce(sum(CASE WHEN " OPENED
		" THEN m.bytes END), 0), sum(" OPENED " AND m.cross_process), sum(m.status != 0), "
		"coalesce(sum(CASE WHEN " OPENED " AND m.ended_ns IS NOT NULL THEN m.ended_ns - "
		"m.started_ns END), 0), min(m.started_ns) FROM peer_mappings m WHERE m.status != 0 "
		"OR " OPENED " GROUP BY 1, 2, 3, 4",
		-1, &st, NULL) != SQLITE_OK)
		return -EIO;
	while (sqlite3_step(st) == SQLITE_ROW) {
		int32_t proc = imap_get(&m->procs, (uint64_t)sqlite3_column_int64(st, 0) + 1);
		if (proc < 0)
			continue; /* a row of a process not chosen (or with no processes row) */
		int owner = p2pg_cli_col_int_or(st, 1, -1),
		    accessor = p2pg_cli_col_int_or(st, 2, -1);
		int og, ag;
		if (gpu_of(s, proc, owner, &og) < 0 || gpu_of(s, proc, accessor, &ag) < 0)
			return -ENOMEM;
		struct mapping_pair *p = pair_for(s, proc, og, ag);
		if (!p || array_grow(&s->groups, &s->capgroups, s->ngroups, sizeof(*s->groups)) < 0)
			return -ENOMEM;
		struct mapping_group *g = &s->groups[s->ngroups++];
		*g = (struct mapping_group){.proc = proc,
					    .owner = owner,
					    .accessor = accessor,
					    .handle = handle_bit(p2pg_cli_col(st, 3)),
					    .pair = (int)(p - s->pairs),
					    .c = {.opened = sqlite3_column_int64(st, 4),
						  .closed = sqlite3_column_int64(st, 5),
						  .bytes = sqlite3_column_int64(st, 6),
						  .cross_process = sqlite3_column_int64(st, 7),
						  .failed = sqlite3_column_int64(st, 8),
						  .lived_ns = sqlite3_column_int64(st, 9)}};
		add_counts(&p->c, &g->c);
		add_counts(&s->total, &g->c);
		p->handles |= g->handle;
		int64_t first = sqlite3_column_int64(st, 10);
		if (first < p->first_ns)
			p->first_ns = first;
		if (add_proc(&p->by, proc) < 0)
			return -ENOMEM;
	}
	return 0;
}

static int read_exports(sqlite3 *db, struct mapping_scan *s)
{
	struct maps *m = s->maps;
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(db,
			       "SELECT process_id, owner_device, count(*) FROM peer_mappings WHERE "
			       "event = 'export' AND status = 0 GROUP BY 1, 2",
			       -1, &st, NULL) != SQLITE_OK)
		return -EIO;
	while (sqlite3_step(st) == SQLITE_ROW) {
		int32_t proc = imap_get(&m->procs, (uint64_t)sqlite3_column_int64(st, 0) + 1);
		if (proc < 0)
			continue;
		s->exports += sqlite3_column_int64(st, 2);
		int gpu;
		if (gpu_of(s, proc, p2pg_cli_col_int_or(st, 1, -1), &gpu) < 0)
			return -ENOMEM;
		if (gpu < 0)
			continue;
		if (array_grow(&m->exports, &m->capexports, m->nexports + 1, sizeof(int)) < 0)
			return -ENOMEM;
		m->exports[m->nexports++] = gpu;
		m->exports[m->nexports++] = proc;
	}
	return 0;
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

static const struct mapping_scan *sorting; /* qsort has no context argument */

static int cmp_pair(const void *a, const void *b)
{
	const struct mapping_pair *x = &sorting->pairs[*(const int *)a],
				  *y = &sorting->pairs[*(const int *)b];
	int c = strcmp(x->host ? x->host : "", y->host ? y->host : "");
	if (c)
		return c;
	/* unknown GPUs (-1) last */
	if (x->owner != y->owner)
		return (unsigned)x->owner < (unsigned)y->owner ? -1 : 1;
	if (x->accessor != y->accessor)
		return (unsigned)x->accessor < (unsigned)y->accessor ? -1 : 1;
	return 0;
}

/* GPUs by host and index, pairs by host, owner and accessor; every index renumbered. */
static int order(struct mapping_scan *s)
{
	struct maps *m = s->maps;
	int *moved = NULL;
	if (cli_gpus_order(&s->gpus, &moved) < 0)
		return -ENOMEM;
	for (size_t k = 0; k < s->npairs; k++) {
		struct mapping_pair *p = &s->pairs[k];
		if (p->owner >= 0)
			p->owner = moved[p->owner];
		if (p->accessor >= 0)
			p->accessor = moved[p->accessor];
		sort_n(p->by.v, p->by.n, sizeof(int), cmp_int);
	}
	s->exporters = calloc(s->gpus.n ? s->gpus.n : 1, sizeof(*s->exporters));
	int *pos = malloc((s->npairs ? s->npairs : 1) * sizeof(int));
	int *at = malloc((s->npairs ? s->npairs : 1) * sizeof(int));
	struct mapping_pair *sorted = malloc((s->npairs ? s->npairs : 1) * sizeof(*sorted));
	int r = s->exporters && pos && at && sorted ? 0 : -ENOMEM;
	for (size_t k = 0; r == 0 && k < m->nexports; k += 2)
		r = add_proc(&s->exporters[moved[m->exports[k]]], m->exports[k + 1]);
	for (size_t g = 0; r == 0 && g < s->gpus.n; g++)
		sort_n(s->exporters[g].v, s->exporters[g].n, sizeof(int), cmp_int);
	if (r == 0) {
		for (size_t k = 0; k < s->npairs; k++)
			pos[k] = (int)k;
		sorting = s;
		sort_n(pos, s->npairs, sizeof(int), cmp_pair);
		for (size_t k = 0; k < s->npairs; k++) {
			sorted[k] = s->pairs[pos[k]];
			at[pos[k]] = (int)k;
		}
		free(s->pairs);
		s->pairs = sorted;
		s->cappairs = s->npairs;
		sorted = NULL;
		for (size_t k = 0; k < s->ngroups; k++)
			s->groups[k].pair = at[s->groups[k].pair];
	}
	free(moved);
	free(pos);
	free(at);
	free(sorted);
	return r;
}

int mapping_scan_run(sqlite3 *db, struct mapping_scan *s)
{
	memset(s, 0, sizeof(*s));
	if (!p2pg_cli_has_table(db, "peer_mappings"))
		return 0;
	s->present = true;
	s->maps = calloc(1, sizeof(struct maps));
	if (!s->maps)
		return -ENOMEM;
	int r = load_processes(db, s);
	if (r == 0)
		r = load_devices(db, s->maps);
	if (r == 0)
		r = read_groups(db, s);
	if (r == 0)
		r = read_exports(db, s);
	if (r == 0)
		r = order(s);
	if (r < 0) {
		fprintf(stderr, "p2pguard: cannot read the cross-process mappings: %s\n",
			r == -ENOMEM ? "out of memory" : sqlite3_errmsg(db));
		mapping_scan_free(s);
		return r;
	}
	s->rows = p2pg_cli_scalar(db, "SELECT count(*) FROM peer_mappings");
	if (p2pg_cli_has_table(db, "mapping_counts"))
		s->own_calls =
		    p2pg_cli_scalar(db, "SELECT coalesce(sum(calls), 0) FROM mapping_counts");
	return 0;
}

void mapping_scan_free(struct mapping_scan *s)
{
	struct maps *m = s->maps;
	if (m) {
		for (size_t k = 0; k < m->ndevices; k++) {
			free(m->devices[k].uuid);
			free(m->devices[k].bus);
		}
		free(m->devices);
		free(m->hosts);
		free(m->exports);
		imap_free(&m->procs);
		imap_free(&m->device_index);
		imap_free(&m->gpus);
		imap_free(&m->pairs);
		free(m);
	}
	for (size_t k = 0; k < s->npairs; k++)
		free(s->pairs[k].by.v);
	for (size_t g = 0; s->exporters && g < s->gpus.n; g++)
		free(s->exporters[g].v);
	free(s->exporters);
	for (size_t k = 0; k < s->nprocs; k++)
		free(s->procs[k].host);
	free(s->procs);
	free(s->pairs);
	free(s->groups);
	cli_gpus_free(&s->gpus);
	memset(s, 0, sizeof(*s));
}

const char *mapping_handle_name(unsigned handle)
{
	switch (handle) {
	case MAPPING_HANDLE_IPC:
		return "ipc";
	case MAPPING_HANDLE_POSIX_FD:
		return "posix_fd";
	case MAPPING_HANDLE_FABRIC:
		return "fabric";
	case MAPPING_HANDLE_OTHER:
		return "other";
	}
	return "none";
}

void mapping_handles_text(unsigned handles, char *buf, size_t len)
{
	size_t at = 0;
	buf[0] = '\0';
	for (unsigned bit = 1; bit <= MAPPING_HANDLE_NONE && at < len; bit <<= 1)
		if (handles & bit)
			at += (size_t)snprintf(buf + at, len - at, "%s%s", at ? "," : "",
					       mapping_handle_name(bit));
	if (!handles)
		snprintf(buf, len, "-");
}

void mapping_who(const struct mapping_scan *s, const struct mapping_procs *p, struct rbuf *b)
{
	int *ranks = malloc((p->n ? p->n : 1) * sizeof(int));
	size_t n = 0, pids = 0;
	for (size_t k = 0; ranks && k < p->n; k++) {
		const struct mapping_process *proc = &s->procs[p->v[k]];
		if (proc->rank >= 0)
			ranks[n++] = proc->rank;
		else
			pids++;
	}
	if (n) {
		rbuf_printf(b, "rank%s ", n == 1 ? "" : "s");
		fmt_ranges(b, ranks, n);
	}
	for (size_t k = 0, said = 0; pids && k < p->n; k++) {
		const struct mapping_process *proc = &s->procs[p->v[k]];
		if (proc->rank >= 0)
			continue;
		if (said++ == 0)
			rbuf_printf(b, "%s%s ", n ? ", " : "", pids == 1 ? "pid" : "pids");
		else
			rbuf_printf(b, ",");
		rbuf_printf(b, "%d", proc->pid);
	}
	if (p->n == 0)
		rbuf_printf(b, "-");
	free(ranks);
}
