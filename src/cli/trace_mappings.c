/* SPDX-License-Identifier: MIT */
/*
 * Cross-process mappings in the trace: a "mappings" track per process, under the process's own
 * trace process. A mapping is a complete slice from its first call (an IPC open, a cuMem import,
 * a map, or a cuMemSetAccess of a process's own memory for another device) to the call that ended
 * it (close, release, unmap: ended_ns), the rows that share its mapping id (a map and the access
 * given to its range, an IPC handle opened twice) one slice; a mapping never closed runs to the
 * latest moment the trace knows of its process, named "(live)". Mappings overlap by the hundred
 * (NCCL maps every peer's buffer per channel at its start and keeps them), so a slice goes on the
 * first of the process's tracks where it follows the last slice or nests inside it (strictly:
 * viewers close equal ends in no agreed order); past MAX_LANES tracks it is an instant. Exports and
 * failed calls are instants, a failure's row in its args.
 */
#include "trace_mappings.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "dbread.h"
#include "trace_read.h"

/* + the track's index: unique in the whole trace beside the streams' (1 << 29), the failures'
 * (1 << 30) and NCCL's (1 << 28) ranges (trace_write.c, trace_nccl.c) */
#define MAPPING_TID (3 << 29)
#define MAX_LANES   128
#define NO_DEVICE   (-1)

enum { EV_SLICE, EV_EXPORT, EV_FAILED };

struct event {
	int64_t start, end; /* end: -1 never closed (live) */
	int64_t process, mapping_id, id, thread, bytes, address;
	int32_t owner, accessor, accessors; /* accessors: how many devices were given access */
	int32_t track;			    /* after planning: its lane */
	uint16_t api, handle, ended_by;	    /* interned texts, 0: none */
	int32_t flags, rows;
	uint8_t kind;
	bool cross_process;
	bool live;    /* never closed: drawn to its process's last moment */
	bool instant; /* a slice without a lane: drawn as an instant */
};

struct lane {
	int64_t process;
	int index;	      /* 0: the process's "mappings" track, k: its k-th overlap */
	int64_t *begin, *end; /* the open slices, outermost first */
	size_t depth, cap;
	bool named;
};

struct trace_mappings {
	sqlite3 *db;
	const struct trace_options *opt;
	struct event *ev;
	size_t n, cap;
	struct lane *lanes;
	size_t nlanes, caplanes;
	struct imap last_index; /* process + 1 -> last_ns */
	int64_t *last_ns;
	size_t nlast, caplast;
	struct trace_names names; /* interned texts */
	int64_t without_lane;
	bool devices;
};

static struct event *new_event(struct trace_mappings *m)
{
	if (m->n == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 1024;
		struct event *bigger = realloc(m->ev, cap * sizeof(*bigger));
		if (!bigger)
			return NULL;
		m->ev = bigger;
		m->cap = cap;
	}
	return &m->ev[m->n++];
}

void trace_mappings_note_end(struct trace_mappings *m, int64_t process, int64_t end_ns)
{
	if (!m)
		return;
	int32_t i = imap_get(&m->last_index, (uint64_t)process + 1);
	if (i >= 0) {
		if (end_ns > m->last_ns[i])
			m->last_ns[i] = end_ns;
		return;
	}
	if (m->nlast == m->caplast) {
		size_t cap = m->caplast ? m->caplast * 2 : 64;
		int64_t *bigger = realloc(m->last_ns, cap * sizeof(*bigger));
		if (!bigger)
			return; /* a live slice then ends at its own process's rows */
		m->last_ns = bigger;
		m->caplast = cap;
	}
	if (imap_put(&m->last_index, (uint64_t)process + 1, (int32_t)m->nlast) == 0)
		m->last_ns[m->nlast++] = end_ns;
}

/* By process, then start; at one start the longer first (it may hold the others). */
static int cmp_event(const void *a, const void *b)
{
	const struct event *x = a, *y = b;
	if (x->process != y->process)
		return (x->process > y->process) - (x->process < y->process);
	if (x->start != y->start)
		return (x->start > y->start) - (x->start < y->start);
	if (x->end != y->end)
		return (x->end < y->end) - (x->end > y->end);
	return (x->id > y->id) - (x->id < y->id);
}

/* The successful rows of one mapping (one process and mapping id, in start order) into one
 * slice. */
static int read_rows(struct trace_mappings *m, struct report_progress *progress)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(
		m->db,
		"SELECT id, process_id, mapping_id, api, event, status, owner_device, "
		"accessor_device, handle_type, flags, bytes, address, started_ns, host_ns, "
		"ended_ns, ended_by, cross_process, thread_id FROM peer_mappings WHERE started_ns "
		"BETWEEN ?1 AND ?2 AND (status != 0 OR event IN ('export', 'import', 'map', "
		"'access')) ORDER BY process_id, coalesce(mapping_id, -id), started_ns, id",
		-1, &st, NULL) != SQLITE_OK) {
		fprintf(stderr, "p2pguard trace: cannot read the mappings: %s\n",
			sqlite3_errmsg(m->db));
		return -EIO;
	}
	sqlite3_bind_int64(st, 1, m->opt->from_ns);
	sqlite3_bind_int64(st, 2, m->opt->to_ns);
	progress_stage(progress, "reading the mappings", 0);
	struct event *open = NULL; /* the slice being gathered */
	while (sqlite3_step(st) == SQLITE_ROW) {
		int64_t process = sqlite3_column_int64(st, 1);
		bool linked = sqlite3_column_type(st, 2) != SQLITE_NULL;
		int64_t mapping_id = linked ? sqlite3_column_int64(st, 2) : 0;
		const char *event = p2pg_cli_col(st, 4) ?: "";
		int status = sqlite3_column_int(st, 5);
		int accessor = p2pg_cli_col_int_or(st, 7, NO_DEVICE);
		int64_t start = sqlite3_column_int64(st, 12);
		int64_t ended =
		    sqlite3_column_type(st, 14) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 14);
		uint8_t kind = status != 0		      ? EV_FAILED
			       : strcmp(event, "export") == 0 ? EV_EXPORT
							      : EV_SLICE;
		if (kind == EV_SLICE && open && linked && open->process == process &&
		    open->mapping_id == mapping_id) {
			/* another row of the same mapping: the access to a map's range, a second
			 * open of one IPC handle */
			open->rows++;
			if (accessor != NO_DEVICE && accessor != open->accessor) {
				if (open->accessor == NO_DEVICE)
					open->accessor = accessor;
				open->accessors++;
			}
			if (sqlite3_column_int(st, 9) && !open->flags)
				open->flags = sqlite3_column_int(st, 9);
			if (ended > open->end)
				open->end = ended;
			open->live = open->end < 0;
			continue;
		}
		struct event *e = new_event(m);
		if (!e)
			return -ENOMEM;
		*e = (struct event){.start = start,
				    .end = kind == EV_SLICE ? ended : start,
				    .process = process,
				    .mapping_id = linked ? mapping_id : 0,
				    .id = sqlite3_column_int64(st, 0),
				    .thread = sqlite3_column_int64(st, 17),
				    .bytes = sqlite3_column_int64(st, 10),
				    .address = sqlite3_column_int64(st, 11),
				    .owner = p2pg_cli_col_int_or(st, 6, NO_DEVICE),
				    .accessor = accessor,
				    .accessors = accessor != NO_DEVICE,
				    .track = -1,
				    .api = trace_name(&m->names, p2pg_cli_col(st, 3) ?: "?"),
				    .handle = trace_name(&m->names, p2pg_cli_col(st, 8)),
				    .ended_by = trace_name(&m->names, p2pg_cli_col(st, 15)),
				    .flags = sqlite3_column_int(st, 9),
				    .rows = 1,
				    .kind = kind,
				    .cross_process = sqlite3_column_int(st, 16) != 0,
				    .live = kind == EV_SLICE && ended < 0};
		open = kind == EV_SLICE && linked ? e : NULL;
		/* its own rows are moments the trace knows of the process */
		trace_mappings_note_end(m, process, start + sqlite3_column_int64(st, 13));
		if ((m->n & 0xffff) == 0)
			progress_tick(progress, 0);
	}
	return 0;
}

int trace_mappings_read(sqlite3 *db, const struct trace_options *opt, struct trace_mappings **ret,
			struct report_progress *progress)
{
	*ret = NULL;
	if (!p2pg_cli_has_table(db, "peer_mappings"))
		return 0;
	struct trace_mappings *m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->db = db;
	m->opt = opt;
	m->devices = p2pg_cli_has_table(db, "devices");
	int r = read_rows(m, progress);
	if (r < 0) {
		if (r == -ENOMEM)
			fprintf(stderr, "p2pguard trace: out of memory at %zu mappings\n", m->n);
		trace_mappings_free(m);
		return r;
	}
	/* --limit N: the first N mapping events by start, as for the transfers. */
	if (trace_keep_first(m->ev, &m->n, sizeof(*m->ev), offsetof(struct event, start),
			     opt->limit, "mapping events") < 0) {
		trace_mappings_free(m);
		return -ENOMEM;
	}
	/* A crash is its process's last moment. */
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (p2pg_cli_has_table(db, "crashes") &&
	    sqlite3_prepare_v2(db, "SELECT process_id, max(started_ns) FROM crashes GROUP BY 1", -1,
			       &st, NULL) == SQLITE_OK)
		while (sqlite3_step(st) == SQLITE_ROW)
			trace_mappings_note_end(m, sqlite3_column_int64(st, 0),
						sqlite3_column_int64(st, 1));
	*ret = m;
	return 0;
}

size_t trace_mappings_count(const struct trace_mappings *m)
{
	return m ? m->n : 0;
}

int64_t trace_mappings_without_lane(const struct trace_mappings *m)
{
	return m ? m->without_lane : 0;
}

/* The latest moment known of a process: NCCL's operations (looked up here, by the index on
 * process_id), and what the notes said. */
static int64_t last_of(struct trace_mappings *m, int64_t process, sqlite3_stmt *nccl)
{
	int32_t i = imap_get(&m->last_index, (uint64_t)process + 1);
	int64_t last = i >= 0 ? m->last_ns[i] : 0;
	if (nccl) {
		sqlite3_reset(nccl);
		sqlite3_bind_int64(nccl, 1, process);
		if (sqlite3_step(nccl) == SQLITE_ROW && sqlite3_column_int64(nccl, 0) > last)
			last = sqlite3_column_int64(nccl, 0);
	}
	return last;
}

static int lane_push(struct lane *l, int64_t begin, int64_t end)
{
	if (l->depth == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 8;
		int64_t *b = realloc(l->begin, cap * sizeof(int64_t));
		if (!b)
			return -ENOMEM;
		l->begin = b;
		int64_t *e = realloc(l->end, cap * sizeof(int64_t));
		if (!e)
			return -ENOMEM;
		l->end = e;
		l->cap = cap;
	}
	l->begin[l->depth] = begin;
	l->end[l->depth++] = end;
	return 0;
}

/* The track of a slice [begin, end] among its process's lanes (from `first` on): the first where
 * it follows what is open, or nests strictly inside it; a new lane up to MAX_LANES; -1 none. */
static int lane_for(struct trace_mappings *m, size_t first, int64_t process, int64_t begin,
		    int64_t end)
{
	for (size_t k = first; k < m->nlanes; k++) {
		struct lane *l = &m->lanes[k];
		while (l->depth && l->end[l->depth - 1] <= begin)
			l->depth--;
		if (l->depth == 0 || (begin > l->begin[l->depth - 1] && end < l->end[l->depth - 1]))
			return lane_push(l, begin, end) < 0 ? -1 : (int)k;
	}
	if (m->nlanes - first >= MAX_LANES)
		return -1;
	if (m->nlanes == m->caplanes) {
		size_t cap = m->caplanes ? m->caplanes * 2 : 64;
		struct lane *bigger = realloc(m->lanes, cap * sizeof(*bigger));
		if (!bigger)
			return -1;
		m->lanes = bigger;
		m->caplanes = cap;
	}
	struct lane *l = &m->lanes[m->nlanes];
	*l = (struct lane){.process = process, .index = (int)(m->nlanes - first)};
	m->nlanes++;
	if (begin > end) /* only the lane: the process's "mappings" track */
		return (int)m->nlanes - 1;
	return lane_push(l, begin, end) < 0 ? -1 : (int)m->nlanes - 1;
}

int trace_mappings_plan(struct trace_mappings *m)
{
	if (!m)
		return 0;
	_cleanup_sqlite_stmt_ sqlite3_stmt *nccl = NULL;
	if (p2pg_cli_has_table(m->db, "nccl_ops"))
		(void)sqlite3_prepare_v2(
		    m->db,
		    "SELECT max(coalesce(ended_ns, started_ns + "
		    "coalesce(host_ns, 0))) FROM nccl_ops WHERE process_id = ?1",
		    -1, &nccl, NULL);
	/* Every live slice runs to its process's last moment (rows come by process). */
	int64_t process = INT64_MIN, last = 0;
	for (size_t k = 0; k < m->n; k++) {
		struct event *e = &m->ev[k];
		if (!e->live)
			continue;
		if (e->process != process) {
			process = e->process;
			last = last_of(m, process, nccl);
		}
		e->end = last > e->start ? last : e->start;
	}
	sort_n(m->ev, m->n, sizeof(*m->ev), cmp_event);
	size_t first = 0;
	process = INT64_MIN;
	for (size_t k = 0; k < m->n; k++) {
		struct event *e = &m->ev[k];
		if (e->process != process) {
			/* a new process: its "mappings" track first, its lanes after the last one's
			 */
			process = e->process;
			first = m->nlanes;
			if (lane_for(m, first, process, 1, 0) < 0)
				return -ENOMEM;
		}
		int lane = e->kind == EV_SLICE ? lane_for(m, first, process, e->start, e->end) : -1;
		e->instant = lane < 0;
		e->track = lane >= 0 ? lane : (int32_t)first;
		m->without_lane += e->kind == EV_SLICE && lane < 0;
	}
	return 0;
}

static void name_lane(struct trace_out *o, const struct lane *l, size_t k)
{
	char name[64];
	if (l->index)
		snprintf(name, sizeof(name), "mappings (overlap %d)", l->index + 1);
	else
		snprintf(name, sizeof(name), "mappings");
	/* sort index: after the copies' streams and NCCL's communicators */
	trace_put_track_meta(o, l->process, (int64_t)k + MAPPING_TID, name,
			     (int64_t)l->index + 2000000);
}

/* "GPU-1a2b3c4d 00000000:18:00.0" of a process's ordinal, where the devices table knows it. */
static void put_gpu_arg(struct trace_out *o, sqlite3_stmt *dev, const char *key, int64_t process,
			int ordinal)
{
	if (!dev || ordinal == NO_DEVICE)
		return;
	sqlite3_reset(dev);
	sqlite3_bind_int64(dev, 1, process);
	sqlite3_bind_int(dev, 2, ordinal);
	if (sqlite3_step(dev) != SQLITE_ROW || !p2pg_cli_col(dev, 0))
		return;
	char gpu[96];
	snprintf(gpu, sizeof(gpu), "%s %s", p2pg_cli_col(dev, 0), p2pg_cli_col(dev, 1) ?: "?");
	trace_put_text_arg(o, key, gpu);
}

static void device_text(char *buf, size_t len, int device, const char *none)
{
	if (device == NO_DEVICE)
		snprintf(buf, len, "%s", none);
	else
		snprintf(buf, len, "%d", device);
}

static void slice(struct trace_mappings *m, struct trace_out *o, const struct event *e,
		  sqlite3_stmt *dev, int64_t base_ns)
{
	char owner[16], accessor[16], name[160];
	device_text(owner, sizeof(owner), e->owner, "?");
	device_text(accessor, sizeof(accessor), e->accessor, "-");
	const char *handle = trace_name_text(&m->names, e->handle);
	int n = snprintf(name, sizeof(name), "%s GPU %s->%s%s", trace_name_text(&m->names, e->api),
			 owner, accessor, e->accessors > 1 ? "+" : "");
	if (handle && n < (int)sizeof(name))
		n += snprintf(name + n, sizeof(name) - (size_t)n, " (%s)", handle);
	if (e->live && n < (int)sizeof(name))
		n += snprintf(name + n, sizeof(name) - (size_t)n, " (live)");
	if (e->instant && n < (int)sizeof(name))
		snprintf(name + n, sizeof(name) - (size_t)n,
			 " (more than %d mappings at once: no track free)", MAX_LANES);
	trace_sep(o);
	if (e->instant)
		TRACE_PUTS(o, "{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"mapping\",\"name\":");
	else
		TRACE_PUTS(o, "{\"ph\":\"X\",\"cat\":\"mapping\",\"name\":");
	trace_put_json(o, name);
	TRACE_PUTS(o, ",\"pid\":");
	trace_put_i64(o, e->process);
	TRACE_PUTS(o, ",\"tid\":");
	trace_put_i64(o, e->track + MAPPING_TID);
	TRACE_PUTS(o, ",\"ts\":");
	trace_put_us(o, e->start - base_ns);
	if (!e->instant) {
		TRACE_PUTS(o, ",\"dur\":");
		trace_put_us(o, e->end - e->start);
	}
	TRACE_PUTS(o, ",\"args\":{\"bytes\":");
	trace_put_i64(o, e->bytes);
	if (e->owner != NO_DEVICE)
		trace_put_int_arg(o, "owner_device", e->owner);
	if (e->accessor != NO_DEVICE)
		trace_put_int_arg(o, "accessor_device", e->accessor);
	if (e->accessors > 1)
		trace_put_int_arg(o, "accessor_devices", e->accessors);
	put_gpu_arg(o, dev, "owner_gpu", e->process, e->owner);
	put_gpu_arg(o, dev, "accessor_gpu", e->process, e->accessor);
	trace_put_text_arg(o, "handle_type", handle);
	trace_put_int_arg(o, "flags", e->flags);
	trace_put_int_arg(o, "cross_process", e->cross_process);
	trace_put_int_arg(o, "rows", e->rows);
	if (e->mapping_id)
		trace_put_int_arg(o, "mapping_id", e->mapping_id);
	if (e->live) {
		TRACE_PUTS(o, ",\"ended\":\"not closed when its process's records end\"");
	} else {
		/* its end is the slice's (a Unix ns number is past what JSON readers hold exactly)
		 */
		trace_put_text_arg(o, "ended_by", trace_name_text(&m->names, e->ended_by));
	}
	if (e->address) {
		char addr[32];
		snprintf(addr, sizeof(addr), "0x%" PRIx64, (uint64_t)e->address);
		trace_put_text_arg(o, "address", addr);
	}
	TRACE_PUTS(o, ",\"timing\":\"host\"");
	trace_put_int_arg(o, "thread_id", e->thread);
	trace_put_int_arg(o, "peer_mappings_id", e->id);
	TRACE_PUTS(o, "}}");
}

/* An export, or a failed call with its whole row as args. */
static void instant(struct trace_mappings *m, struct trace_out *o, const struct event *e,
		    sqlite3_stmt *row, int64_t base_ns)
{
	char owner[16], accessor[16], name[160];
	device_text(owner, sizeof(owner), e->owner, "?");
	device_text(accessor, sizeof(accessor), e->accessor, "-");
	if (e->kind == EV_EXPORT)
		snprintf(name, sizeof(name), "%s export GPU %s (%s)",
			 trace_name_text(&m->names, e->api), owner,
			 trace_name_text(&m->names, e->handle) ?: "?");
	else
		snprintf(name, sizeof(name), "%s failed GPU %s->%s",
			 trace_name_text(&m->names, e->api), owner, accessor);
	trace_sep(o);
	TRACE_PUTS(o, "{\"ph\":\"i\",\"s\":\"t\",\"cat\":");
	trace_put_str(o, e->kind == EV_EXPORT ? "\"mapping\"" : "\"mapping_failure\"");
	TRACE_PUTS(o, ",\"name\":");
	trace_put_json(o, name);
	TRACE_PUTS(o, ",\"pid\":");
	trace_put_i64(o, e->process);
	TRACE_PUTS(o, ",\"tid\":");
	trace_put_i64(o, e->track + MAPPING_TID);
	TRACE_PUTS(o, ",\"ts\":");
	trace_put_us(o, e->start - base_ns);
	TRACE_PUTS(o, ",");
	sqlite3_reset(row);
	sqlite3_bind_int64(row, 1, e->id);
	if (row && sqlite3_step(row) == SQLITE_ROW) {
		trace_put_row_args(o, row);
	} else {
		TRACE_PUTS(o, "\"args\":{\"peer_mappings_id\":");
		trace_put_i64(o, e->id);
		TRACE_PUTS(o, "}");
	}
	TRACE_PUTS(o, "}");
}

void trace_mappings_write(struct trace_mappings *m, struct trace_out *o, int64_t base_ns,
			  struct report_progress *progress)
{
	if (!m)
		return;
	for (size_t k = 0; k < m->nlanes; k++)
		name_lane(o, &m->lanes[k], k);
	_cleanup_sqlite_stmt_ sqlite3_stmt *dev = NULL, *row = NULL;
	if (m->devices)
		(void)sqlite3_prepare_v2(
		    m->db,
		    "SELECT uuid, pci_bus_id FROM devices WHERE process_id = ?1 "
		    "AND ordinal = ?2",
		    -1, &dev, NULL);
	(void)sqlite3_prepare_v2(m->db, "SELECT * FROM peer_mappings WHERE id = ?1", -1, &row,
				 NULL);
	progress_stage(progress, "writing the mappings", (int64_t)m->n);
	for (size_t k = 0; k < m->n; k++) {
		const struct event *e = &m->ev[k];
		if (e->kind == EV_SLICE)
			slice(m, o, e, dev, base_ns);
		else
			instant(m, o, e, row, base_ns);
		if ((k & 0xffff) == 0)
			progress_tick(progress, (int64_t)k);
	}
}

void trace_mappings_free(struct trace_mappings *m)
{
	if (!m)
		return;
	for (size_t k = 0; k < m->nlanes; k++) {
		free(m->lanes[k].begin);
		free(m->lanes[k].end);
	}
	trace_names_free(&m->names);
	free(m->ev);
	free(m->lanes);
	free(m->last_ns);
	imap_free(&m->last_index);
	free(m);
}
