/* SPDX-License-Identifier: MIT */
/*
 * NCCL's families in `p2pguard metrics`. Each rank counts its own operations (a send on the
 * sender's series, its receive on the receiver's), per communicator, kind and function, labelled
 * like the copy families: host and rank, the rank's GPU under dcgm-exporter's names (gpu,
 * UUID, pci_bus_id) and, for a send or receive or a two-rank collective, the other end's
 * (peer_rank, peer_Hostname, peer_gpu, peer_UUID, peer_pci_bus_id), found through the
 * communicator's hash in whichever process of the database recorded that rank. Bandwidth per pair
 * is rate(p2pguard_nccl_gpu_timed_bytes_total) / rate(p2pguard_nccl_gpu_seconds_total), by
 * func="Send" for one count per transfer.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "dbread.h"
#include "metrics.h"
#include "nccl_scan.h"

struct sample {
	char *labels;
	int64_t ops, bytes, gpu_timed, timed_bytes, gpu_ns;
};

/* The labels of one end of a series: a row of nccl_comms (-1: none). */
static void end_labels(struct rbuf *b, const struct nccl_scan *s, int row, bool peer)
{
	const struct nccl_row *r = row >= 0 ? &s->rows[row] : NULL;
	const struct cli_gpu *g = r && r->gpu >= 0 ? &s->gpus.v[r->gpu] : NULL;
	char num[16] = "";
	if (r && r->global_rank >= 0)
		snprintf(num, sizeof(num), "%d", r->global_rank);
	if (!peer) {
		metrics_label(b, METRICS_HOST, g ? g->host : "", true);
		metrics_label(b, "rank", num, false);
	} else {
		metrics_label(b, "peer_rank", num, false);
		metrics_label(b, "peer_" METRICS_HOST, g ? g->host : "", false);
	}
	metrics_gpu_labels(b, g, peer);
}

static void add_sample(void *to, const void *from)
{
	struct sample *t = to;
	const struct sample *f = from;
	t->ops += f->ops;
	t->bytes += f->bytes;
	t->gpu_timed += f->gpu_timed;
	t->timed_bytes += f->timed_bytes;
	t->gpu_ns += f->gpu_ns;
}

static void family_of(FILE *out, const struct sample *v, size_t n, const char *name,
		      const char *help, size_t field)
{
	metrics_family(out, name, help);
	for (size_t k = 0; k < n; k++) {
		const int64_t *x = (const int64_t *)((const char *)&v[k] + field);
		if (field == offsetof(struct sample, gpu_ns))
			fprintf(out, "%s{%s} %.9g\n", name, v[k].labels, (double)*x / 1e9);
		else
			fprintf(out, "%s{%s} %lld\n", name, v[k].labels, (long long)*x);
	}
}

int p2pg_metrics_nccl(sqlite3 *db, FILE *out)
{
	struct nccl_scan s;
	int r = nccl_scan_run(db, &s, true);
	if (r < 0 || !s.present) {
		nccl_scan_free(&s);
		return r;
	}
	struct sample *v = calloc(s.nseries ? s.nseries : 1, sizeof(*v));
	size_t n = 0;
	if (!v) {
		nccl_scan_free(&s);
		return -ENOMEM;
	}
	for (size_t k = 0; k < s.nseries; k++) {
		const struct nccl_series *se = &s.series[k];
		const struct nccl_row *row = &s.rows[se->row];
		const struct nccl_comm *c = &s.comms[row->comm];
		int peer_row = se->peer >= 0 && se->peer < c->rank_cap ? c->rank_row[se->peer] : -1;
		struct rbuf b = {0};
		end_labels(&b, &s, se->row, false);
		metrics_label(&b, "comm", c->hash, false);
		metrics_label(&b, "kind", se->kind, false);
		metrics_label(&b, "func", se->func, false);
		end_labels(&b, &s, se->peer >= 0 ? peer_row : -1, true);
		v[n++] = (struct sample){.labels = b.text ? b.text : strdup(""),
					 .ops = se->ops,
					 .bytes = se->bytes,
					 .gpu_timed = se->gpu_timed,
					 .timed_bytes = se->timed_bytes,
					 .gpu_ns = se->gpu_ns};
		if (!v[n - 1].labels) {
			r = -ENOMEM;
			goto out;
		}
	}
	n = metrics_merge_series(v, n, sizeof(*v), add_sample);
	family_of(out, v, n, "p2pguard_nccl_ops_total",
		  "Finished NCCL operations, each counted by the rank that recorded it (rows, "
		  "summary buckets, overflow), by host, rank, GPU, communicator, kind, function "
		  "and, for sends, receives and two-rank collectives, the other end.",
		  offsetof(struct sample, ops));
	family_of(out, v, n, "p2pguard_nccl_bytes_total",
		  "Bytes of the finished NCCL operations (count times the datatype's size).",
		  offsetof(struct sample, bytes));
	family_of(out, v, n, "p2pguard_nccl_ops_gpu_timed_total",
		  "Finished NCCL operations with a GPU time (their kernel's first channel's start "
		  "to its last channel's end): the only ones bandwidth is computed from.",
		  offsetof(struct sample, gpu_timed));
	family_of(out, v, n, "p2pguard_nccl_gpu_timed_bytes_total",
		  "Bytes of the NCCL operations with a GPU time (divide by "
		  "p2pguard_nccl_gpu_seconds_total for GB/s).",
		  offsetof(struct sample, timed_bytes));
	family_of(out, v, n, "p2pguard_nccl_gpu_seconds_total",
		  "GPU time of the NCCL operations that have one, waiting for the peer included.",
		  offsetof(struct sample, gpu_ns));
	static const char *const stall[] = {METRICS_HOST, "rank",	"comm",
					    "func",	  "peer_state", "rule"};
	if (p2pg_cli_has_table(db, "nccl_stalls"))
		metrics_counter(
		    out, db, "p2pguard_nccl_stalls_total",
		    "NCCL operations whose kernel ran P2PGUARD_STALL_S without finishing, by host, "
		    "rank, communicator, function, where the other ranks were and the rule.",
		    "SELECT p.hostname, p.rank, s.comm_hash, s.func, coalesce(s.peer_state, "
		    "'unknown'), coalesce(s.rule_id, 'none'), count(*) FROM nccl_stalls s JOIN "
		    "processes p ON p.id = s.process_id GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2, "
		    "3, "
		    "4, 5, 6",
		    stall, 6);
	static const char *const unreported[] = {METRICS_HOST, "rank", "comm", "func"};
	metrics_counter(
	    out, db, "p2pguard_nccl_ops_unreported_total",
	    "NCCL operations whose end NCCL never reported (their communicator or "
	    "process ended first).",
	    "SELECT p.hostname, p.rank, c.comm_hash, o.func, count(*) FROM nccl_ops o "
	    "JOIN nccl_comms c USING (process_id, comm_serial) JOIN processes p ON p.id "
	    "= o.process_id WHERE o.state = 'unreported' GROUP BY 1, 2, 3, 4 ORDER BY 1, "
	    "2, 3, 4",
	    unreported, 4);
	static const char *const untracked[] = {METRICS_HOST, "rank"};
	metrics_counter(out, db, "p2pguard_nccl_events_untracked_total",
			"NCCL events that found the guard's slots full (not recorded).",
			"SELECT p.hostname, p.rank, sum(c.events_untracked) FROM nccl_comms c JOIN "
			"processes p ON p.id = c.process_id GROUP BY 1, 2 ORDER BY 1, 2",
			untracked, 2);
out:
	for (size_t k = 0; k < n; k++)
		free(v[k].labels);
	free(v);
	nccl_scan_free(&s);
	if (r < 0)
		fprintf(stderr,
			"p2pguard metrics: cannot count NCCL's operations: out of memory\n");
	return r;
}
