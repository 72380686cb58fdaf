/* SPDX-License-Identifier: MIT */
/* The pieces every part of the HTML report writes with: escaped text, times, counts and bytes, a
 * table from a query, heat colours and the bandwidth cells, a physical GPU's heads and attributes.
 * Below report_html.c and its parts (failures, ranks, NCCL, mappings), which all use them. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "dbread.h"
#include "report.h"
#include "report_html.h"

void html_text(FILE *out, const char *text)
{
	p2pg_cli_html_text(out, text);
}

void html_utc(FILE *out, int64_t ns)
{
	char buf[32];
	fmt_utc(buf, sizeof(buf), ns);
	fputs(buf, out);
}

void html_count(FILE *out, long long n)
{
	char buf[32];
	fmt_count(buf, sizeof(buf), n);
	fputs(buf, out);
}

void html_bytes(FILE *out, long long n)
{
	char buf[32];
	fmt_bytes(buf, sizeof(buf), (double)n);
	fputs(buf, out);
}

int html_table(FILE *out, sqlite3 *db, const char *id, const char *sql)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		return 0;
	int n = 0;
	while (sqlite3_step(st) == SQLITE_ROW) {
		if (n++ == 0) {
			fprintf(out, "<div class=\"scroll\"><table id=\"%s\"><tr>", id);
			for (int c = 0; c < sqlite3_column_count(st); c++) {
				fputs("<th>", out);
				html_text(out, sqlite3_column_name(st, c));
				fputs("</th>", out);
			}
			fputs("</tr>\n", out);
		}
		fputs("<tr>", out);
		for (int c = 0; c < sqlite3_column_count(st); c++) {
			const char *v = p2pg_cli_col(st, c);
			bool multi = v && strchr(v, '\n');
			fputs(multi ? "<td><pre>" : "<td>", out);
			html_text(out, v);
			fputs(multi ? "</pre></td>" : "</td>", out);
		}
		fputs("</tr>\n", out);
	}
	if (n)
		fputs("</table></div>\n", out);
	return n;
}
void html_gpu_matrix_head(FILE *out, const struct cli_gpus *g, const int *gpus, size_t n,
			  bool compact, const char *corner)
{
	if (g->hosts) {
		/* a row of hosts over the row of GPU indices */
		fprintf(out, "<tr><th class=\"corner\" rowspan=\"2\">%s</th>", corner);
		for (size_t d = 0; d < n;) {
			size_t e = d;
			const char *host = g->v[gpus[d]].host;
			while (e < n && !strcmp(g->v[gpus[e]].host ?: "", host ?: ""))
				e++;
			fprintf(out, "<th class=\"host\" colspan=\"%zu\">", e - d);
			html_text(out, host ? host : "?");
			fputs("</th>", out);
			d = e;
		}
		fputs("</tr>\n<tr>", out);
	} else {
		fprintf(out, "<tr><th class=\"corner\">%s</th>", corner);
	}
	for (size_t d = 0; d < n; d++)
		fprintf(out, "<th class=\"col\">%s%d</th>", compact ? "" : "GPU ",
			g->v[gpus[d]].index);
	fputs("</tr>\n", out);
}

void html_gpu_row_head(FILE *out, const struct cli_gpus *g, int gpu, bool compact)
{
	const struct cli_gpu *x = &g->v[gpu];
	fputs("<tr><th>", out);
	if (g->hosts) {
		html_text(out, x->host ? x->host : "?");
		fputs(" ", out);
	}
	fprintf(out, "%s%d</th>", compact ? "" : "GPU ", x->index);
}

void html_gpu_attr(FILE *out, const struct cli_gpus *g, int gpu)
{
	const struct cli_gpu *x = &g->v[gpu];
	html_text(out, x->host ? x->host : "?");
	fprintf(out, ":%d", x->index);
}

void html_heat(FILE *out, double v, double vmax)
{
	double f = vmax > 0 ? v / vmax : 0;
	f = f < 0 ? 0 : f > 1 ? 1 : f;
	fprintf(out, "background:hsl(%.0f,70%%,%.0f%%)", 120 * f, 82 - 10 * f);
}

void html_p50_colour(FILE *out, double p50, double vmax)
{
	if (isnan(p50))
		fputs("background:#e4e4e4", out);
	else
		html_heat(out, p50, vmax);
}

void html_p50_compact(FILE *out, double p50, size_t n)
{
	if (isnan(p50))
		fputs("<span class=\"dim\">u</span>", out);
	else
		fprintf(out, "%.*f", p50 >= 100 || n > 16 ? 0 : 1, p50);
}

void html_p50_line(FILE *out, const char *attr, const char *name, double p50)
{
	fprintf(out, "<div class=\"bw\" %s=\"%s\">%s ", attr, name, name);
	if (isnan(p50))
		fputs("<i>untimed</i>", out);
	else
		fprintf(out, "<b>%.3g</b>", p50);
	fputs("</div>", out);
}
