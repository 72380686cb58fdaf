/* SPDX-License-Identifier: MIT */
/*
 * Cross-process mappings in `p2pguard metrics`. The mapping families count each process's
 * mappings (IPC opens and cuMemSetAccess grants, as mapping_scan.h defines them) per device pair
 * and handle type, labelled like the copy families: host and rank, the ordinals (owner: whose
 * memory; accessor: the device given access) and the physical GPUs under dcgm-exporter's names,
 * the accessor's (the recording rank's GPU, as NCCL's families name theirs) as gpu, UUID,
 * pci_bus_id and the owner's as peer_gpu, peer_UUID, peer_pci_bus_id. Mappings still live are a
 * gauge; the rest are counters. Exports are counted on the owner's series, a process's own
 * mappings of its own device per call and device.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "dbread.h"
#include "mapping_scan.h"
#include "metrics.h"

struct sample {
	char *labels;
	struct mapping_counts c;
};

static void ordinal_label(struct rbuf *b, const char *name, int ordinal)
{
	char num[16] = "";
	if (ordinal >= 0)
		snprintf(num, sizeof(num), "%d", ordinal);
	metrics_label(b, name, num, false);
}

/* The counts a family shows (a series' cross-process count and lifetime are not). */
static void add_sample(void *to, const void *from)
{
	struct mapping_counts *t = &((struct sample *)to)->c;
	const struct mapping_counts *f = &((const struct sample *)from)->c;
	t->opened += f->opened;
	t->closed += f->closed;
	t->bytes += f->bytes;
	t->failed += f->failed;
}

/* A family's lines, a sample for each series with mappings (for failures, with failed calls): a
 * pair that only failed has no mapping series, and the other way round. */
static void family(FILE *out, const struct sample *v, size_t n, const char *name, const char *type,
		   const char *help, int64_t (*value)(const struct mapping_counts *))
{
	fprintf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
	bool failures = strcmp(name, "p2pguard_peer_mapping_failures_total") == 0;
	for (size_t k = 0; k < n; k++)
		if (failures ? v[k].c.failed > 0 : v[k].c.opened > 0)
			fprintf(out, "%s{%s} %lld\n", name, v[k].labels, (long long)value(&v[k].c));
}

static int64_t opened(const struct mapping_counts *c)
{
	return c->opened;
}
static int64_t closed(const struct mapping_counts *c)
{
	return c->closed;
}
static int64_t live(const struct mapping_counts *c)
{
	return mapping_live(c);
}
static int64_t bytes(const struct mapping_counts *c)
{
	return c->bytes;
}
static int64_t failed(const struct mapping_counts *c)
{
	return c->failed;
}

/* The per-pair families, one series per (process, owner, accessor, handle type). */
static int pair_families(FILE *out, const struct mapping_scan *s)
{
	struct sample *v = calloc(s->ngroups ? s->ngroups : 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	size_t n = 0;
	int r = 0;
	for (size_t k = 0; k < s->ngroups; k++) {
		const struct mapping_group *g = &s->groups[k];
		const struct mapping_process *p = &s->procs[g->proc];
		const struct mapping_pair *pair = &s->pairs[g->pair];
		struct rbuf b = {0};
		char rank[16] = "";
		if (p->rank >= 0)
			snprintf(rank, sizeof(rank), "%d", p->rank);
		metrics_label(&b, METRICS_HOST, p->host, true);
		metrics_label(&b, "rank", rank, false);
		ordinal_label(&b, "owner", g->owner);
		ordinal_label(&b, "accessor", g->accessor);
		metrics_label(&b, "handle_type", mapping_handle_name(g->handle), false);
		metrics_gpu_labels(&b, pair->accessor >= 0 ? &s->gpus.v[pair->accessor] : NULL,
				   false);
		metrics_gpu_labels(&b, pair->owner >= 0 ? &s->gpus.v[pair->owner] : NULL, true);
		v[n++] = (struct sample){.labels = b.text ? b.text : strdup(""), .c = g->c};
		if (!v[n - 1].labels) {
			r = -ENOMEM;
			goto out;
		}
	}
	n = metrics_merge_series(v, n, sizeof(*v), add_sample);
	family(out, v, n, "p2pguard_peer_mappings_total", "counter",
	       "Mappings of another process's or device's memory (IPC opens, cuMemSetAccess "
	       "grants), by host, rank, device pair (owner: whose memory; accessor: the device "
	       "given access) and handle type; gpu is the accessor's, peer_gpu the owner's.",
	       opened);
	family(out, v, n, "p2pguard_peer_mappings_closed_total", "counter",
	       "Those mappings whose close or unmap was seen.", closed);
	family(out, v, n, "p2pguard_peer_mappings_live", "gauge",
	       "Those mappings not closed: still mapped when their process's records end (or now, "
	       "for a process still running).",
	       live);
	family(out, v, n, "p2pguard_peer_mapping_bytes_total", "counter",
	       "Bytes of the mappings (the range given access, or the IPC allocation's size).",
	       bytes);
	family(out, v, n, "p2pguard_peer_mapping_failures_total", "counter",
	       "Failed mapping calls (IPC get, open, close; cuMem export, import, map, access, "
	       "unmap, release), their pair as far as it is known (empty: unknown or none).",
	       failed);
out:
	for (size_t k = 0; k < n; k++)
		free(v[k].labels);
	free(v);
	return r;
}

int p2pg_metrics_mappings(sqlite3 *db, FILE *out)
{
	struct mapping_scan s;
	int r = mapping_scan_run(db, &s);
	if (r < 0 || !s.present) {
		mapping_scan_free(&s);
		return r;
	}
	r = pair_families(out, &s);
	mapping_scan_free(&s);
	if (r < 0) {
		fprintf(stderr, "p2pguard metrics: cannot count the mappings: out of memory\n");
		return r;
	}
	bool devices = p2pg_cli_has_table(db, "devices");
	/* the physical GPU of a row's device (its ordinal in column `ordinal` of alias x) */
#define GPU_OF(ordinal) \
	"LEFT JOIN devices d ON d.process_id = x.process_id AND d.ordinal = x." ordinal
	static const char *const exports[] = {METRICS_HOST, "rank", "owner",	 "handle_type",
					      "gpu",	    "UUID", "pci_bus_id"};
	metrics_counter(
	    out, db, "p2pguard_peer_mapping_exports_total",
	    "Memory made openable by other processes (cudaIpcGetMemHandle, "
	    "cuMemExportToShareableHandle), by host, rank, the memory's device (owner) and handle "
	    "type.",
	    devices
		? "SELECT p.hostname, p.rank, x.owner_device, x.handle_type, d.physical_index, "
		  "d.uuid, d.pci_bus_id, count(*) FROM peer_mappings x JOIN processes p ON p.id "
		  "= x.process_id " GPU_OF("owner_device") " WHERE x.event = 'export' AND "
							   "x.status = 0 GROUP BY x.process_id, "
							   "x.owner_device, x.handle_type ORDER BY "
							   "1, 2, 3, 4"
		: "SELECT p.hostname, p.rank, x.owner_device, x.handle_type, NULL, NULL, NULL, "
		  "count(*) FROM peer_mappings x JOIN processes p ON p.id = x.process_id WHERE "
		  "x.event = 'export' AND x.status = 0 GROUP BY x.process_id, x.owner_device, "
		  "x.handle_type ORDER BY 1, 2, 3, 4",
	    exports, 7);
	if (!p2pg_cli_has_table(db, "mapping_counts"))
		return 0;
	static const char *const own[] = {METRICS_HOST, "rank", "api",	     "device",
					  "gpu",	"UUID", "pci_bus_id"};
	static const char *const own_sql[2][2] = {
	    {"SELECT p.hostname, p.rank, x.api, x.device, NULL, NULL, NULL, sum(x.calls) FROM "
	     "mapping_counts x JOIN processes p ON p.id = x.process_id GROUP BY x.process_id, "
	     "x.api, x.device ORDER BY 1, 2, 3, 4",
	     "SELECT p.hostname, p.rank, x.api, x.device, NULL, NULL, NULL, sum(x.bytes) FROM "
	     "mapping_counts x JOIN processes p ON p.id = x.process_id GROUP BY x.process_id, "
	     "x.api, x.device ORDER BY 1, 2, 3, 4"},
	    {"SELECT p.hostname, p.rank, x.api, x.device, d.physical_index, d.uuid, d.pci_bus_id, "
	     "sum(x.calls) FROM mapping_counts x JOIN processes p ON p.id = x.process_id " GPU_OF(
		 "device") " GROUP BY x.process_id, x.api, x.device ORDER BY 1, 2, 3, 4",
	     "SELECT p.hostname, p.rank, x.api, x.device, d.physical_index, d.uuid, d.pci_bus_id, "
	     "sum(x.bytes) FROM mapping_counts x JOIN processes p ON p.id = x.process_id " GPU_OF(
		 "device") " GROUP BY x.process_id, x.api, x.device ORDER BY 1, 2, 3, 4"}};
#undef GPU_OF
	metrics_counter(out, db, "p2pguard_own_device_mapping_calls_total",
			"A process's own mappings of its own device's memory (PyTorch's expandable "
			"segments, NCCL's own buffers), counted, not rowed: successful calls by "
			"host, rank, call and device.",
			own_sql[devices][0], own, 7);
	metrics_counter(out, db, "p2pguard_own_device_mapping_bytes_total",
			"Bytes of those calls (0 for a release).", own_sql[devices][1], own, 7);
	return 0;
}
