/* SPDX-License-Identifier: MIT */
/*
 * report --html: one page that needs nothing but itself, from 2 GPUs to 64 and from one process
 * to a thousand. The charts are inline SVG written here (no script, no library): the page opens
 * offline, from a mail attachment or a CI artifact, and renders the same in any browser. What is
 * long folds away (<details>), the matrix scrolls inside its own box instead of wrapping, and
 * every figure says what it is computed from.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "dbread.h"
#include "report.h"
#include "report_chart.h"
#include "report_html.h"
#include "report_mappings.h"
#include "report_nccl.h"

#define MAX_DETAIL_PAIRS 64 /* pairs with a detail of their own; the rest are in the table */
#define MAX_MULTIPLES	 64 /* small multiples shown */

static const char *const path_colors[RP_PATHS] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd",
						  "#7f7f7f"};

static void card(FILE *out, const char *id, long long v, const char *label, const char *title)
{
	fprintf(out, "<div class=\"card\" title=\"%s\"><b id=\"%s\">", title, id);
	html_count(out, v);
	fprintf(out, "</b><span>%s</span></div>", label);
}

static void summary(FILE *out, struct report *r)
{
	const struct report_scan *s = &r->scan;
	long long idle = 0, dropped = 0, ranks = 0;
	size_t hosts = 0;
	for (size_t k = 0; k < s->nprocs; k++) {
		idle += !s->procs[k].peer_calls;
		dropped += s->procs[k].dropped;
		ranks += s->procs[k].rank >= 0;
		bool seen = false;
		for (size_t j = 0; j < k && !seen; j++)
			seen = s->procs[j].host && s->procs[k].host &&
			       strcmp(s->procs[j].host, s->procs[k].host) == 0;
		hosts += !seen;
	}
	fputs("<div class=\"cards\">", out);
	card(out, "n-processes", (long long)s->nprocs, "processes guarded", "rows of processes");
	card(out, "n-idle", idle, "made no peer call",
	     "processes with no transfer, peer-access or failure row");
	card(out, "n-hosts", (long long)hosts, "hosts", "distinct processes.hostname");
	card(out, "n-ranks", ranks, "with a rank", "processes with RANK set");
	card(out, "n-transfers", p2pg_cli_scalar(r->db, "SELECT count(*) FROM transfers"),
	     "transfer rows", "rows of transfers");
	card(out, "n-calls", s->total.calls, "copy calls",
	     "every call counted once: rows, summary buckets and overflow (peer_totals)");
	card(out, "n-timed", s->total.gpu_timed + s->total.synchronous, "timed copies",
	     "copies with a GPU time, asynchronous and synchronous: the only ones bandwidth is "
	     "computed from");
	card(out, "n-untimed", report_untimed(&s->total), "untimed copies",
	     "copies without a GPU time: counted, never divided");
	card(out, "n-folded", s->total.folded, "calls in overflow",
	     "calls that found their thread's ring full: counted in transfer_overflow, no row");
	card(out, "n-failures", p2pg_cli_scalar(r->db, "SELECT count(*) FROM failures"), "failures",
	     "rows of failures");
	card(out, "n-crashes", p2pg_cli_scalar(r->db, "SELECT count(*) FROM crashes"), "crashes",
	     "rows of crashes");
	card(out, "n-dropped", dropped, "records dropped", "sum of processes.records_dropped");
	if (r->nccl.present && r->nccl.ncomms) {
		card(out, "n-nccl-ops", r->nccl.ops, "NCCL operations",
		     "finished NCCL operations, rows, summary buckets and overflow (nccl_totals)");
		long long stalled = p2pg_cli_has_table(r->db, "nccl_stalls")
					? p2pg_cli_scalar(r->db, "SELECT count(*) FROM nccl_stalls")
					: 0;
		if (stalled)
			fputs(
			    "<a class=\"card bad\" href=\"#nccl-stalls\" title=\"NCCL operations "
			    "whose kernel did not finish (nccl_stalls)\"><b id=\"n-nccl-stalls\">",
			    out);
		else
			fputs("<div class=\"card\" title=\"NCCL operations whose kernel did not "
			      "finish (nccl_stalls)\"><b id=\"n-nccl-stalls\">",
			      out);
		html_count(out, stalled);
		fprintf(out, "</b><span>NCCL stalls</span></%s>", stalled ? "a" : "div");
	}
	const struct mapping_scan *m = &r->mappings;
	if (m->present && m->rows) {
		/* a link to the section, red when a mapping call failed */
		fprintf(out,
			"<a class=\"card%s\" href=\"#sec-mappings\" title=\"IPC opens and "
			"cuMemSetAccess grants of another process's or device's memory "
			"(peer_mappings); %lld live at the end, %lld failed calls\"><b "
			"id=\"n-card-mappings\">",
			m->total.failed ? " bad" : "", (long long)mapping_live(&m->total),
			(long long)m->total.failed);
		html_count(out, m->total.opened);
		fputs("</b><span>cross-process mappings</span></a>", out);
	}
	fputs("</div>\n", out);
}

/* The path whose bandwidth a cell shows: the one with the most timed copies. */
static const struct report_bw *main_path(const struct report_scan *s, size_t from, size_t to)
{
	const struct report_bw *best = NULL;
	for (size_t k = from; k < to; k++)
		if (report_path_has_bandwidth(s->bw[k].path) && (!best || s->bw[k].n > best->n))
			best = &s->bw[k];
	return best;
}

static void pair_title(FILE *out, const struct report_scan *s, size_t from, size_t to)
{
	fprintf(out, "GPU %d &#8594; GPU %d", s->bw[from].src, s->bw[from].dst);
	for (size_t k = from; k < to; k++) {
		const struct report_bw *b = &s->bw[k];
		char calls[32], untimed[32], by[32];
		fmt_count(calls, sizeof(calls), b->c.calls);
		fmt_count(untimed, sizeof(untimed), report_untimed(&b->c));
		fmt_bytes(by, sizeof(by), (double)b->c.bytes);
		fprintf(out, "&#10;%s: %s calls, %s", report_path_names[b->path], calls, by);
		if (b->n)
			fprintf(out, "; p50 %.3f GB/s, p99 %.3f GB/s from %zu timed",
				report_percentile(b->gbps, b->n, 0.5),
				report_percentile(b->gbps, b->n, 0.99), b->n);
		fprintf(out, "; %s untimed", untimed);
		if (b->c.failed)
			fprintf(out, "; %lld failed", (long long)b->c.failed);
	}
}

static void matrix(FILE *out, struct report *r)
{
	const struct report_scan *s = &r->scan;
	size_t n = s->ndevices;
	if (n == 0) {
		fputs("<p>No device pair was used.</p>\n", out);
		return;
	}
	double vmax = 0;
	for (size_t k = 0; k < s->nbw; k++)
		if (report_path_has_bandwidth(s->bw[k].path) && s->bw[k].n)
			vmax = fmax(vmax, report_percentile(s->bw[k].gbps, s->bw[k].n, 0.5));
	bool compact = n > 8;
	fprintf(
	    out,
	    "<p class=\"dim\">Each cell: the p50 in GB/s of the pair's copies whose copy time is "
	    "known (a GPU time), %s; colour from red (slowest pair) to green "
	    "(%.3g GB/s, the fastest); grey: copies but none timed. Hover a cell for every "
	    "path's p50, p99, timed and untimed counts; the table below the matrix has them "
	    "all.</p>\n",
	    n > 16    ? "of its most-timed path, rounded"
	    : compact ? "of its most-timed path"
		      : "per path",
	    vmax);
	fprintf(out,
		"<div class=\"scroll\"><table id=\"matrix\" class=\"matrix%s%s\" data-gpus=\"%zu\">"
		"<tr><th class=\"corner\">src&#8595; dst&#8594;</th>",
		compact ? " compact" : "", n > 16 ? " dense" : "", n);
	for (size_t d = 0; d < n; d++)
		fprintf(out, "<th class=\"col\">%s%d</th>", compact ? "" : "GPU ", s->devices[d]);
	fputs("</tr>\n", out);
	size_t k = 0;
	for (size_t si = 0; si < n; si++) {
		fprintf(out, "<tr><th>%s%d</th>", compact ? "" : "GPU ", s->devices[si]);
		for (size_t di = 0; di < n; di++) {
			int src = s->devices[si], dst = s->devices[di];
			while (k < s->nbw &&
			       (s->bw[k].src < src || (s->bw[k].src == src && s->bw[k].dst < dst)))
				k++;
			size_t end = k;
			while (end < s->nbw && s->bw[end].src == src && s->bw[end].dst == dst)
				end++;
			if (src == dst && end == k) {
				fputs("<td class=\"self\">&#183;</td>", out);
				continue;
			}
			if (end == k) {
				fprintf(out, "<td class=\"none\" data-pair=\"%d-%d\">-</td>", src,
					dst);
				continue;
			}
			const struct report_bw *m = main_path(s, k, end);
			double p50 = m && m->n ? report_percentile(m->gbps, m->n, 0.5) : NAN;
			fprintf(out, "<td data-pair=\"%d-%d\" title=\"", src, dst);
			pair_title(out, s, k, end);
			fputs("\" style=\"", out);
			html_p50_colour(out, p50, vmax);
			fputs("\"", out);
			if (!isnan(p50))
				fprintf(out, " data-p50=\"%.3f\"", p50);
			fputs(">", out);
			if (compact) {
				html_p50_compact(out, p50, n);
			} else {
				for (size_t j = k; j < end; j++) {
					const struct report_bw *b = &s->bw[j];
					html_p50_line(out, "data-path", report_path_names[b->path],
						      report_percentile(b->gbps, b->n, 0.5));
				}
			}
			fputs("</td>", out);
			k = end;
		}
		fputs("</tr>\n", out);
	}
	fputs("</table></div>\n", out);

	/* Every pair and path in full. */
	fprintf(
	    out,
	    "<details id=\"pair-table\"%s><summary>All %zu pair and path lines</summary>"
	    "<div class=\"scroll\"><table class=\"num\"><tr><th>src</th><th>dst</th><th>path</th>"
	    "<th>calls</th><th>bytes</th><th>failed</th><th>timed (GPU)</th>"
	    "<th>timed (sync)</th><th>untimed</th><th>in overflow</th><th>p50 GB/s</th>"
	    "<th>p99 GB/s</th></tr>\n",
	    s->nbw <= 16 ? " open" : "", s->nbw);
	for (size_t j = 0; j < s->nbw; j++) {
		const struct report_bw *b = &s->bw[j];
		fprintf(out, "<tr><td>%d</td><td>%d</td><td>%s</td><td>", b->src, b->dst,
			report_path_names[b->path]);
		html_count(out, b->c.calls);
		fputs("</td><td>", out);
		html_bytes(out, b->c.bytes);
		fprintf(out, "</td><td>%lld</td><td>", (long long)b->c.failed);
		html_count(out, b->c.gpu_timed);
		fputs("</td><td>", out);
		html_count(out, b->c.synchronous);
		fputs("</td><td>", out);
		html_count(out, report_untimed(&b->c));
		fputs("</td><td>", out);
		html_count(out, b->c.folded);
		if (b->n)
			fprintf(out, "</td><td>%.3f</td><td>%.3f</td></tr>\n",
				report_percentile(b->gbps, b->n, 0.5),
				report_percentile(b->gbps, b->n, 0.99));
		else
			fputs("</td><td>-</td><td>-</td></tr>\n", out);
	}
	fputs("</table></div></details>\n", out);
}

static double pair_p50(const struct report_scan *s, int src, int dst)
{
	double best = NAN;
	size_t most = 0;
	for (size_t k = 0; k < s->nbw; k++)
		if (s->bw[k].src == src && s->bw[k].dst == dst && s->bw[k].n > most) {
			most = s->bw[k].n;
			best = report_percentile(s->bw[k].gbps, s->bw[k].n, 0.5);
		}
	return best;
}

struct ranked_series {
	struct report_series *s;
	double p50;
};

static int cmp_ranked(const void *a, const void *b)
{
	const struct ranked_series *x = a, *y = b;
	if (isnan(x->p50) != isnan(y->p50))
		return isnan(x->p50) ? 1 : -1;
	if (x->p50 != y->p50)
		return (x->p50 > y->p50) - (x->p50 < y->p50);
	if (x->s->src != y->s->src)
		return x->s->src - y->s->src;
	return x->s->dst - y->s->dst;
}

static int cmp_by_pair(const void *a, const void *b)
{
	const struct ranked_series *x = a, *y = b;
	if (x->s->src != y->s->src)
		return x->s->src - y->s->src;
	return x->s->dst - y->s->dst;
}

static void pairs(FILE *out, struct report *r)
{
	struct report_scan *s = &r->scan;
	if (s->nseries == 0) {
		fputs("<p>No transfer was recorded.</p>\n", out);
		return;
	}
	double ymax = 0;
	for (size_t k = 0; k < s->nseries; k++)
		for (size_t j = 0; j < s->series[k].n; j++)
			ymax = fmax(ymax, s->series[k].s[j].gbps);
	ymax = chart_nice_max(ymax, 4);
	int64_t t0 = s->t_first, t1 = s->t_last > s->t_first ? s->t_last : s->t_first + 1;
	struct ranked_series *order = calloc(s->nseries, sizeof(*order));
	if (!order)
		return;
	for (size_t k = 0; k < s->nseries; k++)
		order[k] = (struct ranked_series){&s->series[k],
						  pair_p50(s, s->series[k].src, s->series[k].dst)};
	bool all = s->nseries <= MAX_MULTIPLES;
	sort_n(order, s->nseries, sizeof(*order), all ? cmp_by_pair : cmp_ranked);

	fputs("<p class=\"legend\">", out);
	for (int k = 0; k < RP_PATHS; k++)
		fprintf(out, "<span style=\"color:%s\">&#9679; %s</span> ", path_colors[k],
			report_path_names[k]);
	fprintf(out,
		"&#8212; GB/s of each copy whose copy time is known; past %d copies a chart draws "
		"per time bin the p10&#8211;p90 band and the p50 line instead of points.</p>\n",
		CHART_MAX_POINTS);
	fprintf(out,
		"<h3>%s</h3><p class=\"dim\">Same axes in every chart: 0&#8211;%.0f GB/s over the "
		"job's time.</p><div class=\"multiples\">",
		all ? "Every pair at a glance" : "The slowest pairs at a glance (by p50)", ymax);
	size_t shown = all ? s->nseries : MAX_MULTIPLES;
	for (size_t k = 0; k < shown && k < s->nseries; k++) {
		struct report_series *ser = order[k].s;
		char title[64];
		snprintf(title, sizeof(title), "GB/s over time, GPU %d to %d", ser->src, ser->dst);
		struct chart_frame f = {.width = 210,
					.height = 96,
					.left = 34,
					.right = 6,
					.top = 16,
					.bottom = 18,
					.t0 = t0,
					.t1 = t1,
					.ymax = ymax,
					.y_unit = "GB/s",
					.css_class = "multiple",
					.title = title,
					.small = true};
		fprintf(out, "<a class=\"mult\" href=\"#pair-%d-%d\"><span>%d&#8594;%d", ser->src,
			ser->dst, ser->src, ser->dst);
		if (!isnan(order[k].p50))
			fprintf(out, " &#183; p50 %.3g", order[k].p50);
		fputs("</span>", out);
		chart_bandwidth(out, &f, ser->s, ser->n, path_colors);
		fputs("</a>", out);
	}
	fputs("</div>\n", out);
	if (!all)
		fprintf(
		    out,
		    "<p class=\"dim\">%zu pairs in all; the %d slowest have a detail below, every "
		    "pair has its line in the matrix's table.</p>\n",
		    s->nseries, MAX_DETAIL_PAIRS);

	fprintf(out, "<h3>Per pair</h3>\n");
	size_t details = s->nseries < MAX_DETAIL_PAIRS ? s->nseries : MAX_DETAIL_PAIRS;
	for (size_t k = 0; k < details; k++) {
		struct report_series *ser = order[k].s;
		size_t total = 0;
		for (int b = 0; b < 64; b++)
			total += ser->sizes[b];
		fprintf(
		    out,
		    "<details class=\"pair\" id=\"pair-%d-%d\"%s><summary>GPU %d &#8594; GPU %d: "
		    "%zu timed of %zu copies",
		    ser->src, ser->dst, s->nseries <= 2 ? " open" : "", ser->src, ser->dst, ser->n,
		    total);
		if (!isnan(order[k].p50))
			fprintf(out, ", p50 %.3g GB/s", order[k].p50);
		fputs("</summary>", out);
		char title[64], stitle[64];
		snprintf(title, sizeof(title), "GB/s over time, GPU %d to %d", ser->src, ser->dst);
		snprintf(stitle, sizeof(stitle), "copy sizes, GPU %d to %d", ser->src, ser->dst);
		double pmax = 0;
		for (size_t j = 0; j < ser->n; j++)
			pmax = fmax(pmax, ser->s[j].gbps);
		struct chart_frame f = {.width = 520,
					.height = 200,
					.left = 52,
					.right = 12,
					.top = 10,
					.bottom = 36,
					.t0 = t0,
					.t1 = t1,
					.ymax = chart_nice_max(pmax, 4),
					.y_unit = "GB/s",
					.css_class = "bw-time",
					.title = title};
		chart_bandwidth(out, &f, ser->s, ser->n, path_colors);
		f.css_class = "sizes";
		f.title = stitle;
		chart_sizes(out, &f, ser->sizes);
		fprintf(out,
			"<p class=\"dim\">%zu GPU-timed successful cop%s drawn; sizes of "
			"every copy with a row.</p></details>\n",
			ser->n, ser->n == 1 ? "y" : "ies");
	}
	free(order);
}

static const char style[] =
    "body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#222}"
    "main{margin:0 24px 40px 232px;min-width:0}"
    "nav{position:fixed;top:0;left:0;bottom:0;width:200px;overflow:auto;background:#f6f7f9;"
    "border-right:1px solid #ddd;padding:16px 12px;font-size:13px}nav a{display:block;padding:2px "
    "0;color:#1f4e8c;text-decoration:none}nav b{display:block;margin-bottom:6px}"
    "@media (max-width:800px){nav{position:static;width:auto;border:0}main{margin:0 12px}}"
    "h1{font-size:22px;margin-top:18px}h2{font-size:18px;border-bottom:1px solid #ddd;"
    "margin-top:30px}h3{font-size:15px;margin:6px 0}"
    "table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:3px 7px;"
    "text-align:left;vertical-align:top}th{background:#f4f4f4;white-space:nowrap}"
    ".num td{white-space:nowrap}.scroll{overflow-x:auto;max-width:100%}"
    ".matrix td,.matrix th{white-space:nowrap;text-align:center}.matrix td{min-width:64px}"
    ".matrix.compact td,.matrix.compact th{min-width:0;padding:1px 3px;font-size:10px;"
    "line-height:14px}.matrix.compact.dense td{padding:1px 2px;font-size:9px}"
    ".matrix .bw{font-size:12px}.self{color:#aaa}.none{color:#bbb}"
    ".cards{display:flex;gap:10px;flex-wrap:wrap}.card{border:1px solid #ddd;border-radius:6px;"
    "padding:6px 12px}.card b{font-size:20px;display:block}.card span{color:#666}"
    ".dim{color:#777}.legend span{margin-right:10px}"
    ".multiples{display:flex;flex-wrap:wrap;gap:6px}.mult{display:block;border:1px solid #eee;"
    "color:#222;text-decoration:none;font-size:12px;padding:2px}.mult span{display:block}"
    "svg{margin:4px 6px 4px 0;overflow:visible}svg text{font-size:10px;fill:#444}"
    ".axis{stroke:#888}.grid{stroke:#eee}.axis-title{font-size:11px;fill:#555}"
    "rect.bar{fill:#6baed6}details.pair{margin:6px 0}details>summary{cursor:pointer}"
    ".failure,.crash{border-left:4px solid #d62728;padding:4px 10px;margin:10px 0;"
    "background:#fff8f8}.count{float:right;color:#d62728}.on b{font-weight:600}"
    ".on span{margin-right:12px}.on{overflow-wrap:anywhere}pre{white-space:pre-wrap;margin:2px "
    "0;font-size:12px}"
    "code{background:#eee;padding:0 3px;overflow-wrap:anywhere}.barcell{position:relative}"
    ".barcell .bar{position:absolute;left:0;top:3px;bottom:3px;background:#c6dbef;z-index:-1}"
    ".bad{color:#d62728;font-weight:600}a.card{text-decoration:none}"
    ".matrix th.host{border-bottom:2px solid #bbb}.nccl-stall{margin-top:6px}"
    ".map-failed{background:#f8d0cc}.map-live{background:#fbeab0}.map-closed{background:#d6ecd2}"
    ".matrix .sub{font-size:11px}.live{color:#9a6a00;font-weight:600}"
    ".mapping-host{margin:0 14px 8px 0}.mapping-host>b{display:block;font-size:12px}";

static const struct {
	const char *id, *title;
} sections[] = {
    {"sec-summary", "Summary"},
    {"sec-matrix", "P2P matrix"},
    {"sec-pairs", "Pairs over time"},
    {"sec-nccl", "NCCL"},
    {"sec-mappings", "Mappings"},
    {"sec-ranks", "Hosts and ranks"},
    {"sec-failures", "Failures"},
    {"sec-crashes", "Crashes"},
    {"sec-stalls", "Stalls"},
    {"sec-processes", "Processes"},
    {"sec-peer-access", "Peer access calls"},
};

static void open_section(FILE *out, int k)
{
	fprintf(out, "</section>\n<section id=\"%s\"><h2>%s</h2>\n", sections[k].id,
		sections[k].title);
}

int p2pg_report_html(struct report *r, FILE *out)
{
	const char *db_path = r->opt->db_path;
	fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
	      "<meta name=\"viewport\" content=\"width=device-width\">"
	      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
	      "style-src 'unsafe-inline'\"><title>p2pguard report: ",
	      out);
	html_text(out, db_path);
	fprintf(out,
		"</title><style>%s</style></head><body>\n<nav id=\"toc\"><b>p2pguard report</b>",
		style);
	for (size_t k = 0; k < sizeof(sections) / sizeof(sections[0]); k++)
		fprintf(out, "<a href=\"#%s\">%s</a>", sections[k].id, sections[k].title);
	fputs("</nav>\n<main><h1>p2pguard report</h1><p class=\"dim\">", out);
	html_text(out, db_path);
	if (r->selection[0]) {
		fputs(" &#183; ", out);
		html_text(out, r->selection);
	}
	fputs(" &#183; generated by p2pguard " P2PGUARD_VERSION
	      "</p>\n<section id=\"sec-summary\">",
	      out);
	summary(out, r);
	open_section(out, 1);
	matrix(out, r);
	progress_stage(&r->progress, "drawing the pairs", 0);
	open_section(out, 2);
	pairs(out, r);
	open_section(out, 3);
	p2pg_report_nccl_html(r, out);
	open_section(out, 4);
	p2pg_report_mappings_html(r, out);
	open_section(out, 5);
	report_html_ranks(out, r);
	progress_stage(&r->progress, "grouping failures and crashes", 0);
	open_section(out, 6);
	report_html_failures(out, r);
	open_section(out, 7);
	report_html_crashes(out, r);
	open_section(out, 8);
	if (!r->has_stalls)
		fputs("<p class=\"dim\">Not recorded in this database (its guard predates stall "
		      "detection).</p>\n",
		      out);
	else if (!html_table(
		     out, r->db, "stalls",
		     "SELECT p.pid, p.hostname, p.rank, s.api, s.src_device, s.dst_device, "
		     "s.bytes, s.path, datetime(s.started_ns / 1000000000, 'unixepoch') AS "
		     "started_utc, s.waited_ns / 1e9 AS waited_s, s.rule_id, s.diagnosis FROM "
		     "stalls s JOIN processes p ON p.id = s.process_id ORDER BY s.rowid"))
		fputs("<p>No stall was recorded.</p>\n", out);
	open_section(out, 9);
	fprintf(out, "<details%s><summary>%zu processes</summary>\n",
		r->scan.nprocs <= 32 ? " open" : "", r->scan.nprocs);
	html_table(
	    out, r->db, "processes",
	    "SELECT pid, hostname, rank, local_rank, mode, guard_version, datetime(started_ns / "
	    "1000000000, 'unixepoch') AS started_utc, records_dropped, recovered, cmdline FROM "
	    "processes ORDER BY coalesce(rank, 1 << 30), id");
	fputs("</details>\n", out);
	open_section(out, 10);
	html_table(out, r->db, "peer-access", REPORT_PEER_ACCESS_SQL);
	/*
	 * Sections that other files add (report_*.c) go here, one call each: open them with a
	 * <section id="sec-..."> of their own.
	 */
	fputs("</section>\n</main></body></html>\n", out);
	progress_end(&r->progress);
	return ferror(out) ? -EIO : 0;
}
