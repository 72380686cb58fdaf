/* SPDX-License-Identifier: MIT */
/*
 * The database as Prometheus text exposition (format 0.0.4): the copy families, labelled by host,
 * rank, device pair and path and by the physical GPUs under dcgm-exporter's label names, then
 * NCCL's (metrics_nccl.c) and the mappings' (metrics_mappings.c), all written with the pieces
 * of metrics_text.c. Used by `p2pguard metrics` (cmd_metrics.c) and its scrape server
 * (metrics_serve.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "cli.h"
#include "dbread.h"
#include "metrics.h"
#include "report.h"
#include "safe_path.h"

/* The copies of one (process, pair, path), then of one label set. */
struct copies {
	int64_t process;
	int src, dst, path;
	char *labels;
	int64_t calls, bytes, failed, timed, timed_bytes, timed_ns, folded;
};

struct copy_table {
	struct copies *v;
	size_t n, cap;
	struct imap index;
};

static struct copies *copies_for(struct copy_table *t, int64_t process, int src, int dst, int path)
{
	uint64_t key = ((uint64_t)process << 36 | (uint64_t)(uint16_t)src << 20 |
			(uint64_t)(uint16_t)dst << 4 | (uint64_t)path) +
		       1;
	int32_t i = imap_get(&t->index, key);
	if (i >= 0)
		return &t->v[i];
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 256;
		struct copies *bigger = realloc(t->v, cap * sizeof(*bigger));
		if (!bigger)
			return NULL;
		t->v = bigger;
		t->cap = cap;
	}
	if (imap_put(&t->index, key, (int32_t)t->n) < 0)
		return NULL;
	t->v[t->n] = (struct copies){.process = process, .src = src, .dst = dst, .path = path};
	return &t->v[t->n++];
}

static int path_of(const char *path)
{
	for (int k = 0; k < RP_OTHER; k++)
		if (path && strcmp(path, report_path_names[k]) == 0)
			return k;
	return RP_OTHER;
}

/* Rows, summary buckets (whose processes' rows they already count) and overflow aggregates. */
static int read_copies(sqlite3 *db, struct copy_table *t)
{
	struct imap summary = {0};
	_cleanup_sqlite_stmt_ sqlite3_stmt *sum = NULL, *st = NULL;
	if (sqlite3_prepare_v2(db, "SELECT DISTINCT process_id FROM transfer_summary", -1, &sum,
			       NULL) == SQLITE_OK)
		while (sqlite3_step(sum) == SQLITE_ROW)
			imap_put(&summary, (uint64_t)sqlite3_column_int64(sum, 0) + 1, 1);
	if (sqlite3_prepare_v2(
		db,
		"SELECT process_id, src_device, dst_device, path, bytes, status, gpu_ns "
		"FROM transfers WHERE src_device IS NOT NULL AND dst_device IS NOT NULL",
		-1, &st, NULL) != SQLITE_OK) {
		imap_free(&summary);
		return -EIO;
	}
	int r = 0;
	while (sqlite3_step(st) == SQLITE_ROW) {
		int64_t process = sqlite3_column_int64(st, 0);
		struct copies *c =
		    copies_for(t, process, sqlite3_column_int(st, 1), sqlite3_column_int(st, 2),
			       path_of(p2pg_cli_col(st, 3)));
		if (!c) {
			r = -ENOMEM;
			break;
		}
		int64_t bytes = sqlite3_column_int64(st, 4), ns = sqlite3_column_int64(st, 6);
		bool ok = sqlite3_column_int(st, 5) == 0;
		if (imap_get(&summary, (uint64_t)process + 1) < 0) {
			c->calls++;
			c->bytes += bytes;
			c->failed += !ok;
		}
		if (ok && ns > 0) {
			c->timed++;
			c->timed_bytes += bytes;
			c->timed_ns += ns;
		}
	}
	imap_free(&summary);
	static const char *const aggregates[] = {
	    "SELECT process_id, src_device, dst_device, path, count, bytes, failures, 0 FROM "
	    "transfer_summary",
	    "SELECT process_id, src_device, dst_device, path, count, bytes, 0, count FROM "
	    "transfer_overflow"};
	for (int a = 0; a < 2 && r == 0; a++) {
		_cleanup_sqlite_stmt_ sqlite3_stmt *ag = NULL;
		if (sqlite3_prepare_v2(db, aggregates[a], -1, &ag, NULL) != SQLITE_OK)
			continue; /* an older database without the table */
		while (sqlite3_step(ag) == SQLITE_ROW) {
			struct copies *c =
			    copies_for(t, sqlite3_column_int64(ag, 0), sqlite3_column_int(ag, 1),
				       sqlite3_column_int(ag, 2), path_of(p2pg_cli_col(ag, 3)));
			if (!c) {
				r = -ENOMEM;
				break;
			}
			c->calls += sqlite3_column_int64(ag, 4);
			c->bytes += sqlite3_column_int64(ag, 5);
			c->failed += sqlite3_column_int64(ag, 6);
			c->folded += sqlite3_column_int64(ag, 7);
		}
	}
	return r;
}

/* Each entry's label text: host, rank, pair, path, and the physical GPUs where known. */
static int label_copies(sqlite3 *db, struct copy_table *t, bool devices)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *proc = NULL, *dev = NULL;
	if (sqlite3_prepare_v2(db, "SELECT hostname, rank FROM processes WHERE id = ?1", -1, &proc,
			       NULL) != SQLITE_OK ||
	    (devices &&
	     sqlite3_prepare_v2(db,
				"SELECT physical_index, uuid, pci_bus_id FROM devices WHERE "
				"process_id = ?1 AND ordinal = ?2",
				-1, &dev, NULL) != SQLITE_OK))
		return -EIO;
	for (size_t k = 0; k < t->n; k++) {
		struct copies *c = &t->v[k];
		struct rbuf b = {0};
		char num[16];
		sqlite3_reset(proc);
		sqlite3_bind_int64(proc, 1, c->process);
		bool found = sqlite3_step(proc) == SQLITE_ROW;
		metrics_label(&b, METRICS_HOST, found ? p2pg_cli_col(proc, 0) : "", true);
		metrics_label(&b, "rank", found ? p2pg_cli_col(proc, 1) : "", false);
		snprintf(num, sizeof(num), "%d", c->src);
		metrics_label(&b, "src", num, false);
		snprintf(num, sizeof(num), "%d", c->dst);
		metrics_label(&b, "dst", num, false);
		metrics_label(&b, "path", report_path_names[c->path], false);
		if (devices) {
			static const char *const names[2][3] = {
			    {"gpu", "UUID", "pci_bus_id"},
			    {"peer_gpu", "peer_UUID", "peer_pci_bus_id"}};
			for (int end = 0; end < 2; end++) {
				sqlite3_reset(dev);
				sqlite3_bind_int64(dev, 1, c->process);
				sqlite3_bind_int(dev, 2, end ? c->dst : c->src);
				bool known = sqlite3_step(dev) == SQLITE_ROW;
				for (int n = 0; n < 3; n++)
					metrics_label(&b, names[end][n],
						      known ? p2pg_cli_col(dev, n) : "", false);
			}
		}
		c->labels = b.text ? b.text : strdup("");
		if (!c->labels)
			return -ENOMEM;
	}
	return 0;
}

static int cmp_labels(const void *a, const void *b)
{
	return strcmp(((const struct copies *)a)->labels, ((const struct copies *)b)->labels);
}

static void copy_family(FILE *out, const struct copy_table *t, const char *name, const char *help,
			size_t field)
{
	metrics_family(out, name, help);
	for (size_t k = 0; k < t->n; k++) {
		const int64_t *v = (const int64_t *)((const char *)&t->v[k] + field);
		if (field == offsetof(struct copies, timed_ns))
			fprintf(out, "%s{%s} %.9g\n", name, t->v[k].labels, (double)*v / 1e9);
		else
			fprintf(out, "%s{%s} %lld\n", name, t->v[k].labels, (long long)*v);
	}
}

static void copy_families(FILE *out, struct copy_table *t)
{
	/* Entries of equal labels (a rank that ran twice) are one series. */
	sort_n(t->v, t->n, sizeof(*t->v), cmp_labels);
	size_t m = 0;
	for (size_t k = 0; k < t->n; k++) {
		if (m && strcmp(t->v[m - 1].labels, t->v[k].labels) == 0) {
			struct copies *to = &t->v[m - 1];
			to->calls += t->v[k].calls;
			to->bytes += t->v[k].bytes;
			to->failed += t->v[k].failed;
			to->timed += t->v[k].timed;
			to->timed_bytes += t->v[k].timed_bytes;
			to->timed_ns += t->v[k].timed_ns;
			to->folded += t->v[k].folded;
			free(t->v[k].labels);
			continue;
		}
		t->v[m++] = t->v[k];
	}
	t->n = m;
	copy_family(out, t, "p2pguard_peer_copies_total",
		    "Cross-device copy calls, every one counted once (rows, summary buckets, "
		    "overflow), by host, rank, device pair and path.",
		    offsetof(struct copies, calls));
	copy_family(out, t, "p2pguard_peer_copy_bytes_total",
		    "Bytes of all the cross-device copy calls.", offsetof(struct copies, bytes));
	copy_family(out, t, "p2pguard_peer_copy_failures_total",
		    "Cross-device copy calls that returned an error.",
		    offsetof(struct copies, failed));
	copy_family(out, t, "p2pguard_peer_copies_timed_total",
		    "Successful copies whose copy time is known (a GPU time, asynchronous or "
		    "synchronous): the only ones bandwidth is computed from.",
		    offsetof(struct copies, timed));
	copy_family(out, t, "p2pguard_peer_copy_timed_bytes_total",
		    "Bytes of the copies whose copy time is known (divide by "
		    "p2pguard_peer_copy_seconds_total for bandwidth).",
		    offsetof(struct copies, timed_bytes));
	copy_family(out, t, "p2pguard_peer_copy_seconds_total",
		    "GPU time of the copies whose copy time is known; copies without one add "
		    "nothing.",
		    offsetof(struct copies, timed_ns));
	metrics_family(
	    out, "p2pguard_peer_copies_untimed_total",
	    "Successful copies without a copy time (not GPU-timed, in overflow or in summary "
	    "buckets): counted, never divided.");
	for (size_t k = 0; k < t->n; k++) {
		const struct copies *c = &t->v[k];
		long long untimed = c->calls - c->failed - c->timed;
		fprintf(out, "p2pguard_peer_copies_untimed_total{%s} %lld\n", c->labels,
			untimed > 0 ? untimed : 0);
	}
	copy_family(out, t, "p2pguard_peer_copies_folded_total",
		    "Copy calls that found their thread's ring full: counted in transfer_overflow "
		    "(also in p2pguard_peer_copies_total), no row.",
		    offsetof(struct copies, folded));
}

/* Processes that made no peer call, per host: no copy counted above, no peer-access call, no
 * failure. Read here from what was counted: a NOT EXISTS per process over an unindexed transfers
 * table took seconds on a million rows. */
static void idle_processes(FILE *out, sqlite3 *db, const struct copy_table *t)
{
	struct imap busy = {0};
	for (size_t k = 0; k < t->n; k++)
		imap_put(&busy, (uint64_t)t->v[k].process + 1, 1);
	static const char *const busy_sql[] = {"SELECT DISTINCT process_id FROM peer_access",
					       "SELECT DISTINCT process_id FROM failures"};
	for (int q = 0; q < 2; q++) {
		_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
		if (sqlite3_prepare_v2(db, busy_sql[q], -1, &st, NULL) == SQLITE_OK)
			while (sqlite3_step(st) == SQLITE_ROW)
				imap_put(&busy, (uint64_t)sqlite3_column_int64(st, 0) + 1, 1);
	}
	metrics_family(
	    out, "p2pguard_processes_without_peer_calls_total",
	    "Guarded processes that made no peer call (no transfer, peer access or failure).");
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(db, "SELECT hostname, id FROM processes ORDER BY 1", -1, &st,
			       NULL) != SQLITE_OK) {
		imap_free(&busy);
		return;
	}
	char *host = NULL;
	long long idle = 0;
	bool any = false;
	for (;;) {
		bool row = sqlite3_step(st) == SQLITE_ROW;
		const char *h = row ? p2pg_cli_col(st, 0) : NULL;
		if (any && (!row || strcmp(h ? h : "", host ? host : "") != 0)) {
			struct rbuf b = {0};
			metrics_label(&b, METRICS_HOST, host, true);
			fprintf(out, "p2pguard_processes_without_peer_calls_total{%s} %lld\n",
				rbuf_str(&b), idle);
			rbuf_free(&b);
			idle = 0;
		}
		if (!row)
			break;
		if (!any || strcmp(h ? h : "", host ? host : "") != 0) {
			free(host);
			host = h ? strdup(h) : NULL;
		}
		any = true;
		idle += imap_get(&busy, (uint64_t)sqlite3_column_int64(st, 1) + 1) < 0;
	}
	free(host);
	imap_free(&busy);
}

int p2pg_metrics_write(sqlite3 *db, FILE *out)
{
	struct copy_table t = {0};
	int r = read_copies(db, &t);
	if (r == 0)
		r = label_copies(db, &t, p2pg_cli_has_table(db, "devices"));
	if (r < 0) {
		fprintf(stderr, "p2pguard metrics: cannot count the copies: %s\n",
			r == -ENOMEM ? "out of memory" : sqlite3_errmsg(db));
		goto out;
	}
	copy_families(out, &t);

	static const char *const rule[] = {METRICS_HOST, "rank", "api", "rule", "error"};
	metrics_counter(
	    out, db, "p2pguard_failures_total",
	    "Failed peer calls and probe findings, by host, rank, API, knowledge-base rule and "
	    "error.",
	    "SELECT p.hostname, p.rank, f.api, coalesce(f.rule_id, 'none'), "
	    "coalesce(f.error_name, f.status), count(*) FROM failures f JOIN processes p ON p.id "
	    "= f.process_id GROUP BY 1, 2, 3, 4, 5 ORDER BY 1, 2, 3, 4, 5",
	    rule, 5);
	static const char *const verdict[] = {METRICS_HOST, "src", "dst", "verdict"};
	metrics_counter(
	    out, db, "p2pguard_probe_verdicts_total",
	    "Health-probe findings other than ok, by device pair and verdict.",
	    "SELECT p.hostname, f.device, f.peer_device, json_extract(f.evidence, "
	    "'$.p2p_probe'), count(*) FROM failures f JOIN processes p ON p.id = f.process_id "
	    "WHERE json_valid(f.evidence) AND json_extract(f.evidence, '$.p2p_probe') IS NOT "
	    "NULL GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4",
	    verdict, 4);
	static const char *const sig[] = {METRICS_HOST, "rank", "signal"};
	metrics_counter(
	    out, db, "p2pguard_crashes_total",
	    "Guarded processes that died of a fatal signal, by host, rank and signal number.",
	    "SELECT p.hostname, p.rank, c.signal, count(*) FROM crashes c JOIN processes p ON "
	    "p.id = c.process_id GROUP BY 1, 2, 3 ORDER BY 1, 2, 3",
	    sig, 3);
	static const char *const spair[] = {METRICS_HOST, "rank", "src", "dst"};
	if (p2pg_cli_has_table(db, "stalls") && p2pg_cli_has_column(db, "stalls", "src_device"))
		metrics_counter(
		    out, db, "p2pguard_stalls_total",
		    "Peer copies still unfinished past P2PGUARD_STALL_S, by host, rank and "
		    "device pair.",
		    "SELECT p.hostname, p.rank, s.src_device, s.dst_device, count(*) FROM stalls s "
		    "JOIN processes p ON p.id = s.process_id GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, "
		    "4",
		    spair, 4);
	else
		metrics_family(
		    out, "p2pguard_stalls_total",
		    "Peer copies still unfinished past P2PGUARD_STALL_S (not recorded by this "
		    "database's guard).");
	static const char *const host[] = {METRICS_HOST};
	metrics_counter(
	    out, db, "p2pguard_records_dropped_total",
	    "Records lost because a thread's ring was full.",
	    "SELECT hostname, sum(records_dropped) FROM processes GROUP BY 1 ORDER BY 1", host, 1);
	metrics_counter(out, db, "p2pguard_processes_total", "Guarded processes recorded.",
			"SELECT hostname, count(*) FROM processes GROUP BY 1 ORDER BY 1", host, 1);
	idle_processes(out, db, &t);
	r = p2pg_metrics_nccl(db, out);
	if (r == 0)
		r = p2pg_metrics_mappings(db, out);
out:
	for (size_t k = 0; k < t.n; k++)
		free(t.v[k].labels);
	free(t.v);
	imap_free(&t.index);
	return r;
}

char *p2pg_metrics_render(const char *db_path, size_t *len)
{
	_cleanup_sqlite_ sqlite3 *db = NULL;
	if (p2pg_cli_open_read(db_path, &db) < 0)
		return NULL;
	char *buf = NULL;
	FILE *mem = open_memstream(&buf, len);
	if (!mem)
		return NULL;
	int r = p2pg_metrics_write(db, mem);
	if (fclose(mem) != 0 || r < 0) {
		free(buf);
		return NULL;
	}
	if (p2pg_cli_damage()) {
		fprintf(stderr, "p2pguard metrics: %s is damaged (%s); no metrics are written\n",
			db_path, p2pg_cli_damage());
		free(buf);
		return NULL;
	}
	return buf;
}
