/* SPDX-License-Identifier: MIT */
/*
 * report --html: the cross-process mappings' section. Its totals, then the mappings per device
 * pair as a matrix per host (both GPUs of a mapping are ordinals of the process that made it, so of
 * its host: owner rows, accessor columns; each cell the mappings opened, tinted by what needs a
 * look: failed calls, then mappings still live at the end) and every pair in a table, pairs whose
 * GPU is unknown included; then a process's own mappings of its own device, per call, and the
 * rows per process, call and pair (folded).
 */
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "dbread.h"
#include "report_html.h"
#include "report_mappings.h"

#define MAX_HOST_MATRICES 16 /* hosts with a matrix of their own; the rest in the table */
#define OPEN_ROWS	  16 /* tables longer than this start folded */

static void html_who(FILE *out, const struct mapping_scan *s, const struct mapping_procs *p)
{
	struct rbuf b = {0};
	mapping_who(s, p, &b);
	html_text(out, rbuf_str(&b));
	rbuf_free(&b);
}

static const struct mapping_procs no_procs;

static const struct mapping_procs *exporters(const struct mapping_scan *s,
					     const struct mapping_pair *p)
{
	return p->owner >= 0 ? &s->exporters[p->owner] : &no_procs;
}

/* What a cell's tint says: failed calls first, then mappings live at the end, else all closed. */
static const char *state_of(const struct mapping_pair *p)
{
	if (p->c.failed)
		return "failed";
	if (mapping_live(&p->c))
		return "live";
	return p->c.opened ? "closed" : "none";
}

static void cell_title(FILE *out, const struct mapping_scan *s, const struct mapping_pair *p)
{
	char label[224], handles[64], bytes[32];
	report_mapping_pair_label(s, p, label, sizeof(label));
	mapping_handles_text(p->handles, handles, sizeof(handles));
	fmt_bytes(bytes, sizeof(bytes), (double)p->c.bytes);
	html_text(out, label);
	fprintf(out, "&#10;%lld opened, %lld closed, %lld live at the end, %s",
		(long long)p->c.opened, (long long)p->c.closed, (long long)mapping_live(&p->c),
		bytes);
	fprintf(out, "&#10;%lld failed calls; handles: %s&#10;by ", (long long)p->c.failed,
		handles);
	html_who(out, s, &p->by);
	fputs("&#10;memory exported by ", out);
	html_who(out, s, exporters(s, p));
}

/* One host's matrix: the known GPUs of pairs[from..to) (pairs of one host, sorted by owner and
 * accessor). */
static void host_matrix(FILE *out, const struct mapping_scan *s, size_t from, size_t to,
			bool compact, int *gpus)
{
	size_t n = 0;
	for (size_t g = 0; g < s->gpus.n; g++) {
		bool used = false;
		for (size_t k = from; k < to && !used; k++)
			used = s->pairs[k].owner >= 0 && s->pairs[k].accessor >= 0 &&
			       (s->pairs[k].owner == (int)g || s->pairs[k].accessor == (int)g);
		if (used)
			gpus[n++] = (int)g;
	}
	if (n == 0)
		return;
	/* one host: its GPUs' indices, without a row of hosts */
	struct cli_gpus one = s->gpus;
	one.hosts = false;
	compact = compact || n > 8;
	int64_t failed = 0, live = 0;
	for (size_t k = from; k < to; k++) {
		failed += s->pairs[k].c.failed;
		live += mapping_live(&s->pairs[k].c);
	}
	fputs("<div class=\"mapping-host\"><b>", out);
	html_text(out, s->pairs[from].host ? s->pairs[from].host : "?");
	/* what the host's pairs hold, those whose GPU is unknown included */
	if (failed)
		fprintf(out, " <span class=\"bad\">%lld failed</span>", (long long)failed);
	if (live)
		fprintf(out, " <span class=\"live\">%lld live</span>", (long long)live);
	fprintf(out,
		"</b><div class=\"scroll\"><table class=\"matrix mapping-matrix%s%s\" "
		"data-gpus=\"%zu\" data-host=\"",
		compact ? " compact" : "", n > 16 ? " dense" : "", n);
	html_text(out, s->pairs[from].host);
	fputs("\">", out);
	html_gpu_matrix_head(out, &one, gpus, n, compact, "owner&#8595; accessor&#8594;");
	for (size_t oi = 0; oi < n; oi++) {
		html_gpu_row_head(out, &one, gpus[oi], compact);
		for (size_t ai = 0; ai < n; ai++) {
			const struct mapping_pair *p = NULL;
			for (size_t k = from; k < to && !p; k++)
				if (s->pairs[k].owner == gpus[oi] &&
				    s->pairs[k].accessor == gpus[ai])
					p = &s->pairs[k];
			if (!p) {
				fputs(oi == ai ? "<td class=\"self\">&#183;</td>"
					       : "<td class=\"none\">-</td>",
				      out);
				continue;
			}
			fprintf(out, "<td class=\"map-%s\" data-owner=\"", state_of(p));
			html_gpu_attr(out, &s->gpus, gpus[oi]);
			fputs("\" data-accessor=\"", out);
			html_gpu_attr(out, &s->gpus, gpus[ai]);
			fprintf(out,
				"\" data-opened=\"%lld\" data-closed=\"%lld\" data-live=\"%lld\" "
				"data-failed=\"%lld\" title=\"",
				(long long)p->c.opened, (long long)p->c.closed,
				(long long)mapping_live(&p->c), (long long)p->c.failed);
			cell_title(out, s, p);
			fputs("\">", out);
			html_count(out, p->c.opened);
			if (!compact) {
				if (mapping_live(&p->c))
					fprintf(out, "<div class=\"sub\">%lld live</div>",
						(long long)mapping_live(&p->c));
				if (p->c.failed)
					fprintf(out, "<div class=\"sub bad\">%lld failed</div>",
						(long long)p->c.failed);
			}
			fputs("</td>", out);
		}
		fputs("</tr>\n", out);
	}
	fputs("</table></div></div>\n", out);
}

struct host_span {
	size_t from, to;
	int64_t failed, live;
};

/* Hosts that need a look first: failed calls, then live mappings, then by name. */
static int cmp_span(const void *a, const void *b)
{
	const struct host_span *x = a, *y = b;
	if ((x->failed > 0) != (y->failed > 0))
		return x->failed > 0 ? -1 : 1;
	if ((x->live > 0) != (y->live > 0))
		return x->live > 0 ? -1 : 1;
	return (x->from > y->from) - (x->from < y->from);
}

/* A matrix per host (both ends of a mapping are GPUs of one host): up to MAX_HOST_MATRICES, those
 * that need a look first. */
static void matrices(FILE *out, const struct mapping_scan *s)
{
	struct host_span *spans = calloc(s->npairs ? s->npairs : 1, sizeof(*spans));
	int *gpus = malloc((s->gpus.n ? s->gpus.n : 1) * sizeof(int));
	size_t nspans = 0;
	for (size_t k = 0; spans && gpus && k < s->npairs; k++) {
		const char *h = s->pairs[k].host ? s->pairs[k].host : "";
		if (nspans == 0 || strcmp(h, s->pairs[spans[nspans - 1].from].host ?: "") != 0)
			spans[nspans++] = (struct host_span){.from = k};
		struct host_span *sp = &spans[nspans - 1];
		sp->to = k + 1;
		sp->failed += s->pairs[k].c.failed;
		sp->live += mapping_live(&s->pairs[k].c);
	}
	if (!spans || !gpus) {
		free(spans);
		free(gpus);
		return;
	}
	sort_n(spans, nspans, sizeof(*spans), cmp_span);
	size_t shown = nspans < MAX_HOST_MATRICES ? nspans : MAX_HOST_MATRICES;
	fprintf(out,
		"<p class=\"dim\">%s each cell the mappings opened of the row's GPU's memory for "
		"the column's GPU; red: failed calls, yellow: mappings still live at the end, "
		"green: every one closed. Hover a cell for its counts, bytes, handle types and "
		"processes.%s</p>\n<div class=\"multiples\">",
		nspans > 1
		    ? "A matrix per host (both GPUs of a mapping are on the host of the "
		      "process that made it), those with failed calls or live mappings first;"
		    : "Each matrix:",
		nspans > shown ? " Past the first hosts, every pair is in the table below." : "");
	for (size_t k = 0; k < shown; k++)
		host_matrix(out, s, spans[k].from, spans[k].to, nspans > 1, gpus);
	fputs("</div>\n", out);
	if (nspans > shown)
		fprintf(out,
			"<p class=\"dim\" id=\"mapping-more-hosts\">%zu more hosts: in the table "
			"below.</p>\n",
			nspans - shown);
	free(spans);
	free(gpus);
}

/* A GPU's index, its UUID and PCI bus id on hover. */
static void gpu_cell(FILE *out, const struct mapping_scan *s, int gpu, bool none)
{
	const struct cli_gpu *g = gpu >= 0 ? &s->gpus.v[gpu] : NULL;
	if (!g) {
		fprintf(out, "<td class=\"dim\">%s</td>", none ? "-" : "?");
		return;
	}
	fputs("<td class=\"gpu\" title=\"", out);
	html_text(out, g->uuid ? g->uuid : "UUID unknown");
	fputs(" ", out);
	html_text(out, g->pci_bus_id);
	fprintf(out, "%s\">%d</td>", g->physical ? "" : " (CUDA ordinal)", g->index);
}

static void pair_table(FILE *out, const struct mapping_scan *s)
{
	fprintf(out,
		"<details id=\"mapping-pair-table\"%s><summary>All %zu mapping pair lines "
		"(mapping_pairs)</summary><div class=\"scroll\"><table class=\"num\"><tr>"
		"<th>host</th><th>owner</th><th>accessor</th><th>by</th><th>memory exported by</th>"
		"<th>opened</th>"
		"<th>closed</th><th>live</th><th>bytes</th><th>handles</th><th>failed</th>"
		"<th>mean life, ms</th></tr>\n",
		s->npairs <= OPEN_ROWS ? " open" : "", s->npairs);
	for (size_t k = 0; k < s->npairs; k++) {
		const struct mapping_pair *p = &s->pairs[k];
		char handles[64];
		mapping_handles_text(p->handles, handles, sizeof(handles));
		fputs("<tr><td>", out);
		html_text(out, p->host ? p->host : "?");
		fputs("</td>", out);
		gpu_cell(out, s, p->owner, false);
		gpu_cell(out, s, p->accessor, true);
		fputs("<td>", out);
		html_who(out, s, &p->by);
		fputs("</td><td>", out);
		html_who(out, s, exporters(s, p));
		fputs("</td><td>", out);
		html_count(out, p->c.opened);
		fputs("</td><td>", out);
		html_count(out, p->c.closed);
		fprintf(out, "</td><td%s>", mapping_live(&p->c) ? " class=\"map-live\"" : "");
		html_count(out, mapping_live(&p->c));
		fputs("</td><td>", out);
		html_bytes(out, p->c.bytes);
		fputs("</td><td>", out);
		html_text(out, handles);
		fprintf(out, "</td><td%s>", p->c.failed ? " class=\"map-failed\"" : "");
		html_count(out, p->c.failed);
		if (p->c.closed)
			fprintf(out, "</td><td>%.3f</td></tr>\n",
				(double)p->c.lived_ns / (double)p->c.closed / 1e6);
		else
			fputs("</td><td>-</td></tr>\n", out);
	}
	fputs("</table></div></details>\n", out);
}

void p2pg_report_mappings_html(struct report *r, FILE *out)
{
	const struct mapping_scan *s = &r->mappings;
	if (!s->present || (s->rows == 0 && s->own_calls == 0)) {
		fputs("<p class=\"dim\">No cross-process or VMM mapping was recorded: no process "
		      "opened another's memory (CUDA IPC) or mapped memory with cuMem, or the "
		      "database predates their recording.</p>\n",
		      out);
		return;
	}
	const struct mapping_counts *t = &s->total;
	fputs("<p class=\"mapping-totals\">", out);
	html_count(out, s->rows);
	fputs(" rows; <b id=\"n-mappings\">", out);
	html_count(out, t->opened);
	fputs("</b> mappings opened (IPC opens and cuMemSetAccess grants; cuMem imports and maps "
	      "lead to them), ",
	      out);
	html_count(out, t->closed);
	fputs(" closed, ", out);
	fprintf(out, "<b id=\"n-mappings-live\"%s>", mapping_live(t) ? " class=\"live\"" : "");
	html_count(out, mapping_live(t));
	fputs("</b> live at the end (still mapped when their process's records end), ", out);
	html_bytes(out, t->bytes);
	fprintf(out, "; <b id=\"n-mapping-failures\"%s>", t->failed ? " class=\"bad\"" : "");
	html_count(out, t->failed);
	fprintf(out, "</b> failed call%s (each with its failure, in Failures); ",
		t->failed == 1 ? "" : "s");
	html_count(out, s->exports);
	fputs(" exports; ", out);
	html_count(out, s->own_calls);
	fputs(" calls on a process's own memory of its own device, counted.</p>\n", out);
	fputs("<h3 id=\"mapping-pairs\">Per device pair, owner &#8594; accessor</h3>\n", out);
	if (s->npairs == 0) {
		fputs("<p>No mapping gave a device access to memory of another process or "
		      "device.</p>\n",
		      out);
	} else {
		matrices(out, s);
		pair_table(out, s);
	}
	fputs("<h3 id=\"mapping-own\">Own memory of its own device, counted</h3>\n", out);
	if (!p2pg_cli_has_table(r->db, "mapping_counts") ||
	    !html_table(out, r->db, "mapping-counts",
			"SELECT api, device AS memory_of_device, count(DISTINCT process_id) AS "
			"processes, sum(calls) AS calls, sum(bytes) AS bytes FROM mapping_counts "
			"GROUP BY api, device ORDER BY api, device"))
		fputs("<p class=\"dim\">None.</p>\n", out);
	fputs("<details id=\"mapping-groups\"><summary>Rows per process, call, pair and "
	      "status</summary>\n",
	      out);
	html_table(
	    out, r->db, "mapping-rows",
	    "SELECT p.pid, p.hostname, p.rank, m.api, m.event, m.status, "
	    "coalesce(m.owner_device, '?') || '->' || coalesce(m.accessor_device, '-') AS "
	    "pair, m.handle_type, count(*) AS calls, sum(m.bytes) AS bytes, "
	    "sum(m.event IN ('import', 'map', 'access') AND m.status = 0 AND m.ended_ns IS "
	    "NULL) AS live, max(m.ended_by) AS ended_by FROM peer_mappings m JOIN processes p "
	    "ON p.id = m.process_id GROUP BY m.process_id, m.api, m.event, m.owner_device, "
	    "m.accessor_device, m.handle_type, m.status ORDER BY min(m.started_ns)");
	fputs("</details>\n", out);
}
