/* SPDX-License-Identifier: MIT */
/* Physical GPUs named across processes and hosts (gpus.h). */
#include "gpus.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dbread.h"

static uint64_t fnv(const char *a, const char *b, int n)
{
	uint64_t h = 1469598103934665603ULL;
	for (const char *p = a ? a : ""; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ULL;
	h = (h ^ 0x1f) * 1099511628211ULL;
	for (const char *p = b ? b : ""; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ULL;
	h = (h ^ (uint64_t)(uint32_t)n) * 1099511628211ULL;
	return h ? h : 1;
}

static bool same(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static bool is(const struct cli_gpu *x, const char *host, const char *uuid, int index)
{
	return same(x->host, host) && same(x->uuid, uuid) && (uuid || x->index == index);
}

int cli_gpus_add(struct cli_gpus *g, const char *host, const char *uuid, const char *pci_bus_id,
		 int index, bool physical)
{
	uint64_t key = fnv(host, uuid, uuid ? 0 : index + 1);
	int32_t i = imap_get(&g->index, key);
	if (i >= 0 && is(&g->v[i], host, uuid, index))
		return i;
	for (size_t k = 0; i >= 0 && k < g->n; k++) /* another GPU's key: look */
		if (is(&g->v[k], host, uuid, index))
			return (int)k;
	if (g->n == g->cap) {
		size_t cap = g->cap ? g->cap * 2 : 16;
		struct cli_gpu *bigger = realloc(g->v, cap * sizeof(*bigger));
		if (!bigger)
			return -ENOMEM;
		g->v = bigger;
		g->cap = cap;
	}
	struct cli_gpu *x = &g->v[g->n];
	*x = (struct cli_gpu){.host = host ? strdup(host) : NULL,
			      .uuid = uuid ? strdup(uuid) : NULL,
			      .pci_bus_id = pci_bus_id ? strdup(pci_bus_id) : NULL,
			      .index = index,
			      .physical = physical};
	if ((host && !x->host) || (uuid && !x->uuid) || (pci_bus_id && !x->pci_bus_id) ||
	    (i < 0 && imap_put(&g->index, key, (int32_t)g->n) < 0)) {
		free(x->host);
		free(x->uuid);
		free(x->pci_bus_id);
		return -ENOMEM;
	}
	return (int)g->n++;
}

static const struct cli_gpus *sorting; /* qsort has no context argument */

static int cmp_gpu(const void *a, const void *b)
{
	const struct cli_gpu *x = &sorting->v[*(const int *)a], *y = &sorting->v[*(const int *)b];
	int c = strcmp(x->host ? x->host : "", y->host ? y->host : "");
	if (c)
		return c;
	if (x->index != y->index)
		return x->index - y->index;
	return strcmp(x->uuid ? x->uuid : "", y->uuid ? y->uuid : "");
}

int cli_gpus_order(struct cli_gpus *g, int **ret_moved)
{
	size_t n = g->n ? g->n : 1;
	int *order = malloc(n * sizeof(int)), *moved = malloc(n * sizeof(int));
	struct cli_gpu *sorted = malloc(n * sizeof(*sorted));
	if (!order || !moved || !sorted) {
		free(order);
		free(moved);
		free(sorted);
		return -ENOMEM;
	}
	for (size_t k = 0; k < g->n; k++)
		order[k] = (int)k;
	sorting = g;
	sort_n(order, g->n, sizeof(int), cmp_gpu);
	for (size_t k = 0; k < g->n; k++) {
		moved[order[k]] = (int)k;
		sorted[k] = g->v[order[k]];
	}
	free(g->v);
	g->v = sorted;
	g->cap = g->n ? g->n : 1;
	/* The lookup, with the new indices (a key that two GPUs share finds the first: the look
	 * through every GPU finds the other). */
	imap_free(&g->index);
	g->index = (struct imap){0};
	for (size_t k = g->n; k-- > 0;) {
		const struct cli_gpu *x = &g->v[k];
		if (imap_put(&g->index, fnv(x->host, x->uuid, x->uuid ? 0 : x->index + 1),
			     (int32_t)k) < 0) {
			free(order);
			free(moved);
			return -ENOMEM;
		}
	}
	g->hosts = false;
	for (size_t k = 1; k < g->n; k++)
		if (!same(g->v[k].host, g->v[0].host))
			g->hosts = true;
	free(order);
	*ret_moved = moved;
	return 0;
}

void cli_gpus_name(const struct cli_gpus *g, int gpu, char *buf, size_t len)
{
	if (gpu < 0 || (size_t)gpu >= g->n) {
		snprintf(buf, len, "?");
		return;
	}
	const struct cli_gpu *x = &g->v[gpu];
	if (g->hosts)
		snprintf(buf, len, "%s GPU %d", x->host ? x->host : "?", x->index);
	else
		snprintf(buf, len, "GPU %d", x->index);
}

void cli_gpus_json(FILE *out, const struct cli_gpus *g, int gpu, const char *end)
{
	const struct cli_gpu *c = gpu >= 0 ? &g->v[gpu] : NULL;
	fprintf(out, "\"%s_gpu\": ", end);
	if (c)
		fprintf(out, "%d", c->index);
	else
		fputs("null", out);
	fprintf(out, ", \"%s_gpu_is_nvidia_smi_index\": %s, \"%s_uuid\": ", end,
		c && c->physical ? "true" : "false", end);
	p2pg_cli_json_string(out, c ? c->uuid : NULL);
	fprintf(out, ", \"%s_pci_bus_id\": ", end);
	p2pg_cli_json_string(out, c ? c->pci_bus_id : NULL);
}

void cli_gpus_free(struct cli_gpus *g)
{
	for (size_t k = 0; k < g->n; k++) {
		free(g->v[k].host);
		free(g->v[k].uuid);
		free(g->v[k].pci_bus_id);
	}
	free(g->v);
	imap_free(&g->index);
	*g = (struct cli_gpus){0};
}
