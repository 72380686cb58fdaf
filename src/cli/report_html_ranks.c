/* SPDX-License-Identifier: MIT */
/* report --html: per host and per rank, where the slow copies, failures and crashes are. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "report_html.h"

#define OPEN_RANKS 64 /* the rank table is open up to this many processes */

struct host_row {
	const char *host;
	struct report_counts c;
	size_t procs, failures, crashes;
	int *ranks;
	size_t nranks;
	float *gbps;
	size_t n;
};

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return (x > y) - (x < y);
}

static double fp50(const float *v, size_t n)
{
	if (!n)
		return NAN;
	size_t at = (size_t)(0.5 * (double)n + 0.5);
	return v[(at ? at : 1) - 1];
}

/* Per host and per rank: where the slow copies, failures and crashes are. */
void report_html_ranks(FILE *out, struct report *r)
{
	const struct report_scan *s = &r->scan;
	if (!s->nprocs) {
		fputs("<p>No process was recorded.</p>\n", out);
		return;
	}
	size_t cap = s->nprocs;
	long long *fails = calloc(cap, sizeof(long long)),
		  *crashes = calloc(cap, sizeof(long long));
	struct host_row *hosts = calloc(cap, sizeof(*hosts));
	size_t nhosts = 0;
	if (!fails || !crashes || !hosts)
		goto out;
	static const char *const per[] = {"SELECT process_id, count(*) FROM failures GROUP BY 1",
					  "SELECT process_id, count(*) FROM crashes GROUP BY 1"};
	for (int q = 0; q < 2; q++) {
		_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
		if (sqlite3_prepare_v2(r->db, per[q], -1, &st, NULL) != SQLITE_OK)
			continue;
		while (sqlite3_step(st) == SQLITE_ROW) {
			const struct report_process *p =
			    report_scan_process(s, sqlite3_column_int64(st, 0));
			if (p)
				(q ? crashes : fails)[p - s->procs] = sqlite3_column_int64(st, 1);
		}
	}
	double vmax = 0;
	for (size_t k = 0; k < s->nprocs; k++) {
		const struct report_process *p = &s->procs[k];
		vmax = fmax(vmax, isnan(fp50(p->gbps, p->n)) ? 0 : fp50(p->gbps, p->n));
		size_t j = 0;
		while (j < nhosts && strcmp(hosts[j].host, p->host ? p->host : "?") != 0)
			j++;
		if (j == nhosts)
			hosts[nhosts++].host = p->host ? p->host : "?";
		struct host_row *hr = &hosts[j];
		hr->procs++;
		hr->failures += (size_t)fails[k];
		hr->crashes += (size_t)crashes[k];
		hr->c.calls += p->c.calls;
		hr->c.bytes += p->c.bytes;
		hr->c.failed += p->c.failed;
		hr->c.gpu_timed += p->c.gpu_timed;
		hr->c.synchronous += p->c.synchronous;
		hr->c.folded += p->c.folded;
		if (p->rank >= 0) {
			int *bigger = realloc(hr->ranks, (hr->nranks + 1) * sizeof(int));
			if (bigger) {
				hr->ranks = bigger;
				hr->ranks[hr->nranks++] = p->rank;
			}
		}
		float *more = realloc(hr->gbps, (hr->n + p->n + 1) * sizeof(float));
		if (more) {
			hr->gbps = more;
			if (p->n)
				memcpy(hr->gbps + hr->n, p->gbps, p->n * sizeof(float));
			hr->n += p->n;
		}
	}
	fputs("<h3>By host</h3><div class=\"scroll\"><table id=\"hosts\" class=\"num\"><tr><th>host"
	      "</th><th>processes</th><th>ranks</th><th>copy calls</th><th>bytes</th><th>timed</th>"
	      "<th>untimed</th><th>p50 GB/s (timed)</th><th>failures</th><th>crashes</th></tr>\n",
	      out);
	for (size_t j = 0; j < nhosts; j++) {
		struct host_row *hr = &hosts[j];
		sort_n(hr->gbps, hr->n, sizeof(float), cmp_float);
		struct rbuf rk = {0};
		fmt_ranges(&rk, hr->ranks, hr->nranks);
		fputs("<tr><td>", out);
		html_text(out, hr->host);
		fprintf(out, "</td><td>%zu</td><td>%s</td><td>", hr->procs, rbuf_str(&rk));
		html_count(out, hr->c.calls);
		fputs("</td><td>", out);
		html_bytes(out, hr->c.bytes);
		fputs("</td><td>", out);
		html_count(out, hr->c.gpu_timed + hr->c.synchronous);
		fputs("</td><td>", out);
		html_count(out, report_untimed(&hr->c));
		double v = fp50(hr->gbps, hr->n);
		if (isnan(v))
			fputs("</td><td>-", out);
		else
			fprintf(out, "</td><td>%.3f", v);
		fprintf(out, "</td><td>%zu</td><td>%zu</td></tr>\n", hr->failures, hr->crashes);
		rbuf_free(&rk);
	}
	fputs("</table></div>\n", out);

	fprintf(out,
		"<details id=\"rank-view\"%s><summary>By rank: %zu processes (the bar is the "
		"process's p50 GB/s against the best, %.3g)</summary><div class=\"scroll\"><table "
		"id=\"ranks\" class=\"num\"><tr><th>rank</th><th>host</th><th>pid</th><th>mode</th>"
		"<th>copy calls</th><th>bytes</th><th>timed</th><th>untimed</th><th>p50 GB/s"
		"</th><th>failures</th><th>crashes</th></tr>\n",
		s->nprocs <= OPEN_RANKS ? " open" : "", s->nprocs, vmax);
	for (size_t k = 0; k < s->nprocs; k++) {
		const struct report_process *p = &s->procs[k];
		fputs("<tr><td>", out);
		if (p->rank >= 0)
			fprintf(out, "%d", p->rank);
		fputs("</td><td>", out);
		html_text(out, p->host);
		fprintf(out, "</td><td>%d</td><td>", p->pid);
		html_text(out, p->mode);
		fputs("</td><td>", out);
		html_count(out, p->c.calls);
		fputs("</td><td>", out);
		html_bytes(out, p->c.bytes);
		fputs("</td><td>", out);
		html_count(out, p->c.gpu_timed + p->c.synchronous);
		fputs("</td><td>", out);
		html_count(out, report_untimed(&p->c));
		double v = fp50(p->gbps, p->n);
		if (isnan(v))
			fputs("</td><td>-", out);
		else
			fprintf(out,
				"</td><td class=\"barcell\"><span class=\"bar\" "
				"style=\"width:%.0f%%\"></span>%.3f",
				vmax > 0 ? 100 * v / vmax : 0, v);
		fprintf(out, "</td><td%s>%lld</td><td%s>%lld</td></tr>\n",
			fails[k] ? " class=\"bad\"" : "", fails[k],
			crashes[k] ? " class=\"bad\"" : "", crashes[k]);
	}
	fputs("</table></div></details>\n", out);
out:
	for (size_t j = 0; hosts && j < nhosts; j++) {
		free(hosts[j].ranks);
		free(hosts[j].gbps);
	}
	free(hosts);
	free(fails);
	free(crashes);
}
