/* SPDX-License-Identifier: MIT */
/* The pieces of Prometheus text exposition every family file writes with: labels, a family's
 * HELP and TYPE lines, a counter read by one query, series of equal labels merged, and a physical
 * GPU's labels under dcgm-exporter's names. */
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

void metrics_label(struct rbuf *b, const char *name, const char *value, bool first)
{
	rbuf_printf(b, "%s%s=\"", first ? "" : ",", name);
	for (const char *p = value ? value : ""; *p; p++) {
		if (*p == '\\' || *p == '"')
			rbuf_printf(b, "\\%c", *p);
		else if (*p == '\n')
			rbuf_printf(b, "\\n");
		else
			rbuf_printf(b, "%c", *p);
	}
	rbuf_printf(b, "\"");
}

void metrics_family(FILE *out, const char *name, const char *help)
{
	fprintf(out, "# HELP %s %s\n# TYPE %s counter\n", name, help, name);
}

void metrics_counter(FILE *out, sqlite3 *db, const char *name, const char *help, const char *sql,
		     const char *const *labels, int nlabels)
{
	metrics_family(out, name, help);
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		return;
	while (sqlite3_step(st) == SQLITE_ROW) {
		struct rbuf b = {0};
		for (int k = 0; k < nlabels; k++)
			metrics_label(&b, labels[k], p2pg_cli_col(st, k), k == 0);
		if (sqlite3_column_type(st, nlabels) == SQLITE_INTEGER)
			fprintf(out, "%s{%s} %lld\n", name, rbuf_str(&b),
				sqlite3_column_int64(st, nlabels));
		else
			fprintf(out, "%s{%s} %.9g\n", name, rbuf_str(&b),
				sqlite3_column_double(st, nlabels));
		rbuf_free(&b);
	}
}

static int cmp_labels_first(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

size_t metrics_merge_series(void *v, size_t n, size_t size, void (*add)(void *to, const void *from))
{
	char *base = v;
	sort_n(v, n, size, cmp_labels_first);
	size_t m = 0;
	for (size_t k = 0; k < n; k++) {
		char *sample = base + k * size;
		if (m && strcmp(*(char **)(base + (m - 1) * size), *(char **)sample) == 0) {
			add(base + (m - 1) * size, sample);
			free(*(char **)sample);
			continue;
		}
		if (m != k)
			memcpy(base + m * size, sample, size);
		m++;
	}
	return m;
}

void metrics_gpu_labels(struct rbuf *b, const struct cli_gpu *g, bool peer)
{
	char idx[16] = "";
	if (g && g->physical)
		snprintf(idx, sizeof(idx), "%d", g->index);
	metrics_label(b, peer ? "peer_gpu" : "gpu", idx, false);
	metrics_label(b, peer ? "peer_UUID" : "UUID", g ? g->uuid : "", false);
	metrics_label(b, peer ? "peer_pci_bus_id" : "pci_bus_id", g ? g->pci_bus_id : "", false);
}
