/* SPDX-License-Identifier: MIT */
/*
 * report --html: NCCL's section. The operations that did not finish come first (a hung job's
 * reason), then NCCL's traffic per device pair as a matrix of its own beside the copies' (its
 * GPUs are named by host, since an NCCL pair spans processes and hosts), every pair in a folded
 * table, the operations per function and per communicator, and the communicators.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "dbread.h"
#include "report_html.h"
#include "report_nccl.h"

#define MAX_MATRIX_GPUS 128 /* past this, the table only */
#define OPEN_ROWS	16  /* tables longer than this start folded */

/* Grouped as in the text: one hang is a row per rank. */
static void stalls(FILE *out, struct report *r)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL, *text = NULL;
	if (!p2pg_cli_has_table(r->db, "nccl_stalls") ||
	    sqlite3_prepare_v2(r->db, REPORT_NCCL_STALL_GROUPS_SQL, -1, &st, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(r->db, REPORT_NCCL_STALL_TEXT_SQL, -1, &text, NULL) != SQLITE_OK)
		return;
	int n = 0;
	while (sqlite3_step(st) == SQLITE_ROW) {
		if (n++ == 0)
			fputs("<h3 id=\"nccl-stalls\">Operations that did not finish</h3>\n", out);
		int count = sqlite3_column_int(st, 1);
		fprintf(out, "<div class=\"failure nccl-stall\" data-count=\"%d\" data-comm=\"",
			count);
		html_text(out, p2pg_cli_col(st, 2));
		fputs("\" data-func=\"", out);
		html_text(out, p2pg_cli_col(st, 4));
		fputs("\" data-ranks=\"", out);
		html_text(out, p2pg_cli_col(st, 9));
		fprintf(out, "\"><h3>%d. comm ", n);
		html_text(out, p2pg_cli_col(st, 2));
		fputs(": ", out);
		html_text(out, p2pg_cli_col(st, 4));
		if (strcmp(p2pg_cli_col(st, 3) ?: "", "p2p") == 0) {
			fputs(" (rank&#8594;peer ", out);
			html_text(out, p2pg_cli_col(st, 12));
			fputs(")", out);
		} else {
			fprintf(out, " #%lld", sqlite3_column_int64(st, 5));
		}
		fprintf(out, "<span class=\"count\">&#215;%d</span></h3><p class=\"when\">", count);
		if (sqlite3_column_type(st, 13) != SQLITE_NULL) {
			html_bytes(out, sqlite3_column_int64(st, 13));
			fputs("; ", out);
		}
		fprintf(out, "rank%s <b>", count == 1 ? "" : "s");
		html_text(out, p2pg_cli_col(st, 9));
		fprintf(out,
			"</b> of %s stuck in it, %s running up to %.1f s; the other ranks: "
			"<b class=\"peer-state\">",
			p2pg_cli_col(st, 8) ?: "?", count == 1 ? "its kernel" : "their kernels",
			(double)sqlite3_column_int64(st, 14) / 1e9);
		html_text(out, p2pg_cli_col(st, 6) ?: "unknown");
		fputs("</b>; started ", out);
		html_utc(out, sqlite3_column_int64(st, 15));
		fputs(" UTC</p><p class=\"on\">pids ", out);
		html_text(out, p2pg_cli_col(st, 10));
		fputs(" on ", out);
		html_text(out, p2pg_cli_col(st, 11));
		fputs("</p>", out);
		if (p2pg_cli_col(st, 7)) {
			fputs("<p>rule <code class=\"rule\">", out);
			html_text(out, p2pg_cli_col(st, 7));
			fputs("</code></p>", out);
		}
		sqlite3_reset(text);
		sqlite3_bind_int64(text, 1, sqlite3_column_int64(st, 0));
		if (sqlite3_step(text) == SQLITE_ROW) {
			fputs("<div class=\"diagnosis\"><b>Why</b><pre>", out);
			html_text(out, p2pg_cli_col(text, 0));
			fputs("</pre></div><div class=\"advice\"><b>What to do</b><pre>", out);
			html_text(out, p2pg_cli_col(text, 1));
			fputs("</pre></div><details><summary>Evidence (first rank)</summary><pre>",
			      out);
			html_text(out, p2pg_cli_col(text, 2));
			fputs("</pre></details>", out);
		}
		fputs("</div>\n", out);
	}
}

/* The kind whose p50 a compact cell shows: the one with more GPU-timed operations. */
static const struct nccl_pair *main_kind(const struct nccl_pair *a, const struct nccl_pair *b)
{
	if (!b)
		return a;
	return b->timed[b->side] > a->timed[a->side] ? b : a;
}

static void cell_title(FILE *out, const struct nccl_scan *s, const struct nccl_pair *const *p,
		       int n)
{
	char a[128], b[128];
	cli_gpus_name(&s->gpus, p[0]->src, a, sizeof(a));
	cli_gpus_name(&s->gpus, p[0]->dst, b, sizeof(b));
	html_text(out, a);
	fputs(" &#8594; ", out);
	html_text(out, b);
	for (int k = 0; k < n; k++) {
		char ops[32], by[32], untimed[32];
		fmt_count(ops, sizeof(ops), nccl_pair_ops(p[k]));
		fmt_bytes(by, sizeof(by), (double)nccl_pair_bytes(p[k]));
		fmt_count(untimed, sizeof(untimed), nccl_pair_untimed(p[k]));
		fprintf(out, "&#10;%s: %s operations, %s", p[k]->coll ? "coll" : "p2p", ops, by);
		if (p[k]->timed[p[k]->side])
			fprintf(out, "; p50 %.3f GB/s, p99 %.3f GB/s from %lld GPU-timed",
				nccl_pair_percentile(p[k], 0.5), nccl_pair_percentile(p[k], 0.99),
				(long long)p[k]->timed[p[k]->side]);
		fprintf(out, "; %s untimed", untimed);
	}
}

static void matrix(FILE *out, const struct nccl_scan *s)
{
	/* the GPUs that are an end of a pair, in host and index order */
	int *gpus = malloc((s->gpus.n ? s->gpus.n : 1) * sizeof(int));
	if (!gpus)
		return;
	size_t n = 0;
	for (size_t g = 0; g < s->gpus.n; g++) {
		bool used = false;
		for (size_t k = 0; k < s->npairs && !used; k++)
			used = s->pairs[k].src == (int)g || s->pairs[k].dst == (int)g;
		if (used)
			gpus[n++] = (int)g;
	}
	if (n == 0 || n > MAX_MATRIX_GPUS) {
		if (n)
			fprintf(
			    out,
			    "<p class=\"dim\">%zu GPUs: too many for a matrix; every pair is in "
			    "the table below.</p>\n",
			    n);
		free(gpus);
		return;
	}
	double vmax = 0;
	for (size_t k = 0; k < s->npairs; k++)
		if (s->pairs[k].timed[s->pairs[k].side])
			vmax = fmax(vmax, nccl_pair_percentile(&s->pairs[k], 0.5));
	bool compact = n > 8;
	fprintf(out,
		"<p class=\"dim\">Each cell: the p50 in GB/s of the NCCL operations from the row's "
		"GPU to the column's, %s; colour from red (slowest pair) to green (%.3g GB/s, the "
		"fastest); grey: operations but none GPU-timed. Hover a cell for both kinds' p50, "
		"p99, GPU-timed and untimed counts.</p>\n",
		compact ? "of the kind with more GPU-timed operations" : "per kind (p2p, coll)",
		vmax);
	fprintf(out,
		"<div class=\"scroll\"><table id=\"nccl-matrix\" class=\"matrix%s%s\" "
		"data-gpus=\"%zu\">",
		compact ? " compact" : "", n > 16 ? " dense" : "", n);
	html_gpu_matrix_head(out, &s->gpus, gpus, n, compact, "src&#8595; dst&#8594;");
	for (size_t si = 0; si < n; si++) {
		html_gpu_row_head(out, &s->gpus, gpus[si], compact);
		for (size_t di = 0; di < n; di++) {
			const struct nccl_pair *found[2];
			int nf = 0;
			/* pairs are sorted by source, destination and kind: few per source */
			for (size_t k = 0; k < s->npairs && nf < 2; k++)
				if (s->pairs[k].src == gpus[si] && s->pairs[k].dst == gpus[di])
					found[nf++] = &s->pairs[k];
			if (nf == 0) {
				fputs(si == di ? "<td class=\"self\">&#183;</td>"
					       : "<td class=\"none\">-</td>",
				      out);
				continue;
			}
			const struct nccl_pair *m = main_kind(found[0], nf > 1 ? found[1] : NULL);
			double p50 = m->timed[m->side] ? nccl_pair_percentile(m, 0.5) : NAN;
			fputs("<td data-src=\"", out);
			html_gpu_attr(out, &s->gpus, gpus[si]);
			fputs("\" data-dst=\"", out);
			html_gpu_attr(out, &s->gpus, gpus[di]);
			fputs("\" title=\"", out);
			cell_title(out, s, found, nf);
			fputs("\" style=\"", out);
			html_p50_colour(out, p50, vmax);
			fputs("\"", out);
			if (!isnan(p50))
				fprintf(out, " data-p50=\"%.3f\" data-kind=\"%s\"", p50,
					m->coll ? "coll" : "p2p");
			fputs(">", out);
			if (compact) {
				html_p50_compact(out, p50, n);
			} else {
				for (int k = 0; k < nf; k++) {
					html_p50_line(out, "data-kind",
						      found[k]->coll ? "coll" : "p2p",
						      nccl_pair_percentile(found[k], 0.5));
				}
			}
			fputs("</td>", out);
		}
		fputs("</tr>\n", out);
	}
	fputs("</table></div>\n", out);
	free(gpus);
}

static void gpu_cells(FILE *out, const struct nccl_scan *s, int gpu)
{
	const struct cli_gpu *g = gpu >= 0 ? &s->gpus.v[gpu] : NULL;
	fputs("<td>", out);
	html_text(out, g ? g->host : "?");
	fputs("</td><td>", out);
	if (g)
		fprintf(out, "%d", g->index);
	else
		fputs("?", out);
	/* the UUID's first group names the GPU in a line; all of it on hover */
	fputs("</td><td class=\"uuid\" title=\"", out);
	html_text(out, g ? g->uuid : NULL);
	fputs("\">", out);
	if (g && g->uuid) {
		char first[16];
		snprintf(first, sizeof(first), "%.12s", g->uuid);
		html_text(out, first);
	}
	fputs("</td>", out);
}

static void pair_table(FILE *out, const struct nccl_scan *s)
{
	fprintf(out,
		"<details id=\"nccl-pair-table\"%s><summary>All %zu NCCL pair lines "
		"(nccl_pair_bandwidth)</summary><div class=\"scroll\"><table class=\"num\"><tr>"
		"<th>src host</th><th>src GPU</th><th>src UUID</th><th>dst host</th>"
		"<th>dst GPU</th><th>dst UUID</th><th>kind</th><th>ops</th><th>bytes</th>"
		"<th>GPU-timed</th><th>untimed</th><th>p50 GB/s</th><th>p99 GB/s</th></tr>\n",
		s->npairs <= OPEN_ROWS ? " open" : "", s->npairs);
	for (size_t k = 0; k < s->npairs; k++) {
		const struct nccl_pair *p = &s->pairs[k];
		fputs("<tr>", out);
		gpu_cells(out, s, p->src);
		gpu_cells(out, s, p->dst);
		fprintf(out, "<td>%s</td><td>", p->coll ? "coll" : "p2p");
		html_count(out, nccl_pair_ops(p));
		fputs("</td><td>", out);
		html_bytes(out, nccl_pair_bytes(p));
		fputs("</td><td>", out);
		html_count(out, p->timed[p->side]);
		fputs("</td><td>", out);
		html_count(out, nccl_pair_untimed(p));
		if (p->timed[p->side])
			fprintf(out, "</td><td>%.3f</td><td>%.3f</td></tr>\n",
				nccl_pair_percentile(p, 0.5), nccl_pair_percentile(p, 0.99));
		else
			fputs("</td><td>-</td><td>-</td></tr>\n", out);
	}
	fputs("</table></div></details>\n", out);
}

static void gbps_cell(FILE *out, int64_t bytes, int64_t ns)
{
	if (ns > 0)
		fprintf(out, "<td>%.3f</td>", (double)bytes / (double)ns);
	else
		fputs("<td>-</td>", out);
}

/* Per function over every communicator, then per communicator and function (folded). */
static void operations(FILE *out, const struct nccl_scan *s)
{
	fputs("<div class=\"scroll\"><table id=\"nccl-funcs\" class=\"num\"><tr><th>operation"
	      "</th><th>kind</th><th>communicators</th><th>ops</th><th>bytes</th><th>GPU-timed"
	      "</th><th>GPU GB/s</th><th>still running</th><th>unreported</th><th>folded</th>"
	      "</tr>\n",
	      out);
	bool *done = calloc(s->nfuncs ? s->nfuncs : 1, sizeof(bool));
	if (!done)
		return;
	for (size_t k = 0; k < s->nfuncs; k++) {
		if (done[k])
			continue;
		struct nccl_func t = {.kind = s->funcs[k].kind, .func = s->funcs[k].func};
		size_t comms = 0;
		for (size_t j = k; j < s->nfuncs; j++) {
			const struct nccl_func *f = &s->funcs[j];
			if (f->func != t.func || f->kind != t.kind)
				continue;
			done[j] = true;
			comms++;
			t.ops += f->ops;
			t.bytes += f->bytes;
			t.gpu_timed += f->gpu_timed;
			t.timed_bytes += f->timed_bytes;
			t.gpu_ns += f->gpu_ns;
			t.folded += f->folded;
			t.running += f->running;
			t.unreported += f->unreported;
		}
		fputs("<tr><td>", out);
		html_text(out, t.func);
		fputs("</td><td>", out);
		html_text(out, t.kind);
		fprintf(out, "</td><td>%zu</td><td>", comms);
		html_count(out, t.ops);
		fputs("</td><td>", out);
		html_bytes(out, t.bytes);
		fputs("</td><td>", out);
		html_count(out, t.gpu_timed);
		fputs("</td>", out);
		gbps_cell(out, t.timed_bytes, t.gpu_ns);
		fprintf(out, "<td%s>%lld</td><td%s>%lld</td><td>%lld</td></tr>\n",
			t.running ? " class=\"bad\"" : "", (long long)t.running,
			t.unreported ? " class=\"bad\"" : "", (long long)t.unreported,
			(long long)t.folded);
	}
	free(done);
	fputs("</table></div>\n", out);

	fprintf(
	    out,
	    "<details id=\"nccl-ops-by-comm\"%s><summary>Per communicator and function (%zu "
	    "lines)</summary><div class=\"scroll\"><table id=\"nccl-ops\" class=\"num\"><tr>"
	    "<th>comm</th><th>name</th><th>ranks</th><th>operation</th><th>kind</th><th>ops</th>"
	    "<th>bytes</th><th>GPU-timed</th><th>GPU GB/s</th><th>still running</th>"
	    "<th>unreported</th><th>folded</th></tr>\n",
	    s->nfuncs <= OPEN_ROWS ? " open" : "", s->nfuncs);
	for (size_t k = 0; k < s->nfuncs; k++) {
		const struct nccl_func *f = &s->funcs[k];
		const struct nccl_comm *c = f->comm >= 0 ? &s->comms[f->comm] : NULL;
		fputs("<tr><td>", out);
		html_text(out, c ? c->hash : "?");
		fputs("</td><td>", out);
		html_text(out, c ? c->name : NULL);
		fprintf(out, "</td><td>%d</td><td>", c ? c->nranks : 0);
		html_text(out, f->func);
		fputs("</td><td>", out);
		html_text(out, f->kind);
		fputs("</td><td>", out);
		html_count(out, f->ops);
		fputs("</td><td>", out);
		html_bytes(out, f->bytes);
		fputs("</td><td>", out);
		html_count(out, f->gpu_timed);
		fputs("</td>", out);
		gbps_cell(out, f->timed_bytes, f->gpu_ns);
		fprintf(out, "<td>%lld</td><td>%lld</td><td>%lld</td></tr>\n",
			(long long)f->running, (long long)f->unreported, (long long)f->folded);
	}
	fputs("</table></div></details>\n", out);
}

static void communicators(FILE *out, struct report *r)
{
	const struct nccl_scan *s = &r->nccl;
	fprintf(out,
		"<details id=\"nccl-comms-list\"%s><summary>%zu communicators</summary><div "
		"class=\"scroll\"><table id=\"nccl-comms\" class=\"num\"><tr><th>comm</th>"
		"<th>name</th><th>ranks</th><th>recorded</th><th>rank: GPU</th><th>profiler</th>"
		"<th>events not recorded</th></tr>\n",
		s->ncomms <= OPEN_ROWS ? " open" : "", s->ncomms);
	for (size_t k = 0; k < s->ncomms; k++) {
		const struct nccl_comm *c = &s->comms[k];
		fputs("<tr><td>", out);
		html_text(out, c->hash);
		fputs("</td><td>", out);
		html_text(out, c->name);
		fprintf(out, "</td><td>%d</td><td%s>%d</td><td class=\"ranks\">", c->nranks,
			c->recorded < c->nranks ? " class=\"bad\"" : "", c->recorded);
		for (int rk = 0, shown = 0; rk < c->rank_cap; rk++) {
			if (c->rank_row[rk] < 0)
				continue;
			int gpu = s->rows[c->rank_row[rk]].gpu;
			char name[128] = "?";
			if (gpu >= 0)
				cli_gpus_name(&s->gpus, gpu, name, sizeof(name));
			fprintf(out, "%s%d: ", shown++ ? ", " : "", rk);
			html_text(out, name);
		}
		fprintf(out, "</td><td>v%d</td><td>%lld</td></tr>\n", c->profiler_version,
			(long long)c->untracked);
	}
	fputs("</table></div></details>\n", out);
	html_table(out, r->db, "nccl-chained",
		   "SELECT chained AS your_profiler_plugin_fed_by_the_guard, count(*) AS ranks "
		   "FROM nccl_comms WHERE chained IS NOT NULL GROUP BY 1 ORDER BY 1");
}

void p2pg_report_nccl_html(struct report *r, FILE *out)
{
	const struct nccl_scan *s = &r->nccl;
	if (!s->present || s->ncomms == 0) {
		fputs("<p class=\"dim\">No NCCL communicator was recorded: the program used no "
		      "NCCL, or an NCCL older than 2.27 (profiler v4), or the database predates "
		      "NCCL's profiler plugin.</p>\n",
		      out);
		return;
	}
	stalls(out, r);
	fputs("<p class=\"nccl-totals\">", out);
	html_count(out, s->ops);
	fputs(" finished operations, ", out);
	html_bytes(out, s->bytes);
	fputs(", ", out);
	html_count(out, s->gpu_timed);
	fputs(" of them GPU-timed", out);
	if (s->running)
		fprintf(out, "; <b class=\"bad\">%lld still running</b>", (long long)s->running);
	if (s->unreported)
		fprintf(out, "; %lld unreported (their process or communicator ended first)",
			(long long)s->unreported);
	fputs(".</p>\n<h3 id=\"nccl-pairs\">Traffic per device pair</h3>\n<p class=\"dim\">", out);
	html_text(out, REPORT_NCCL_BASIS);
	fputs("</p>\n", out);
	if (s->npairs == 0) {
		fputs(
		    "<p>No operation has a device pair: only collectives of communicators of more "
		    "than two ranks were recorded (counted per function below).</p>\n",
		    out);
	} else {
		matrix(out, s);
		pair_table(out, s);
	}
	fputs("<h3 id=\"nccl-operations\">Operations per function</h3>\n", out);
	operations(out, s);
	fputs("<h3 id=\"nccl-communicators\">Communicators</h3>\n", out);
	communicators(out, r);
}
