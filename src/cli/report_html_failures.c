/* SPDX-License-Identifier: MIT */
/* report --html: failures grouped across pairs, ranks and hosts, and crashes grouped by top
 * frames, each with its stacks folded. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "dbread.h"
#include "report_html.h"

static void stack(FILE *out, const char *title, const char *text)
{
	if (!text || !*text)
		return;
	fputs("<details><summary>", out);
	html_text(out, title);
	fputs("</summary><pre>", out);
	html_text(out, text);
	fputs("</pre></details>", out);
}

/* "pairs 0-3->4-7 (32) · ranks 0-99 (100) · hosts gpu-[001-013] (13)" */
static void where(FILE *out, const char *pairs_text, const char *ranks_text, const char *hosts_text)
{
	struct dev_pair *pairs = NULL;
	size_t n = report_parse_pairs(pairs_text, &pairs);
	int *rk = NULL;
	size_t nr = report_parse_ints(ranks_text, &rk);
	char **hosts = NULL;
	size_t nh = report_parse_strings(hosts_text, &hosts);
	struct rbuf p = {0}, rr = {0}, hh = {0};
	fmt_pairs(&p, pairs, n);
	fmt_ranges(&rr, rk, nr);
	fmt_hosts(&hh, hosts, nh, 8);
	fputs("<p class=\"on\">", out);
	if (n) {
		fprintf(out, "<span class=\"pairs\" data-n=\"%zu\">pairs <b>", n);
		html_text(out, rbuf_str(&p));
		fprintf(out, "</b> (%zu)</span> ", n);
	}
	if (nr) {
		fprintf(out, "<span class=\"ranks\" data-n=\"%zu\">ranks <b>", nr);
		html_text(out, rbuf_str(&rr));
		fprintf(out, "</b> (%zu)</span> ", nr);
	}
	if (nh) {
		fprintf(out, "<span class=\"hosts\" data-n=\"%zu\">hosts <b>", nh);
		html_text(out, rbuf_str(&hh));
		fprintf(out, "</b> (%zu)</span>", nh);
	}
	fputs("</p>", out);
	rbuf_free(&p);
	rbuf_free(&rr);
	rbuf_free(&hh);
	free(pairs);
	free(rk);
	report_free_strings(hosts, nh);
}

void report_html_failures(FILE *out, struct report *r)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL, *detail = NULL, *places = NULL;
	if (sqlite3_prepare_v2(r->db, REPORT_FAILURE_GROUPS_SQL, -1, &st, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(r->db, REPORT_FAILURE_DETAIL_SQL, -1, &detail, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(r->db, REPORT_FAILURE_WHERE_SQL, -1, &places, NULL) != SQLITE_OK)
		return;
	int n = 0;
	while (sqlite3_step(st) == SQLITE_ROW) {
		n++;
		int cnt = sqlite3_column_int(st, 1), procs = sqlite3_column_int(st, 2);
		fprintf(out, "<div class=\"failure\" id=\"failure-%d\" data-count=\"%d\"><h3>%d. ",
			n, cnt, n);
		html_text(out, p2pg_cli_col(st, 5));
		fprintf(out, " &#8594; %d ", sqlite3_column_int(st, 6));
		html_text(out, p2pg_cli_col(st, 7));
		fputs(" <small>", out);
		html_text(out, p2pg_cli_col(st, 8) ?: "passed");
		fprintf(out, "</small><span class=\"count\">&#215;%d</span></h3>", cnt);
		fprintf(out, "<p class=\"when\">%d time%s in %d process%s, first ", cnt,
			cnt == 1 ? "" : "s", procs, procs == 1 ? "" : "es");
		html_utc(out, sqlite3_column_int64(st, 3));
		fputs(", last ", out);
		html_utc(out, sqlite3_column_int64(st, 4));
		fputs(" UTC</p>", out);
		where(out, p2pg_cli_col(st, 11), p2pg_cli_col(st, 12), p2pg_cli_col(st, 13));
		if (p2pg_cli_col(st, 10)) {
			fputs("<p>probe verdict: <b class=\"verdict\">", out);
			html_text(out, p2pg_cli_col(st, 10));
			fputs("</b></p>", out);
		}
		report_bind_failure_places(places, st);
		bool any = false;
		while (sqlite3_step(places) == SQLITE_ROW) {
			if (!p2pg_cli_col(places, 0) || !*p2pg_cli_col(places, 0))
				continue;
			fputs(any ? "; " : "<p class=\"places\">where: ", out);
			fputs("<code>", out);
			html_text(out, p2pg_cli_col(places, 0));
			fprintf(out, "</code> (%d)", sqlite3_column_int(places, 1));
			any = true;
		}
		if (any)
			fputs("</p>", out);
		sqlite3_reset(detail);
		sqlite3_bind_int64(detail, 1, sqlite3_column_int64(st, 0));
		if (sqlite3_step(detail) == SQLITE_ROW) {
			if (p2pg_cli_col(detail, 2)) {
				fputs("<p class=\"args\">", out);
				html_text(out, p2pg_cli_col(detail, 2));
				fputs("</p>", out);
			}
			if (p2pg_cli_col(st, 9)) {
				fputs("<p>rule <code class=\"rule\">", out);
				html_text(out, p2pg_cli_col(st, 9));
				fputs("</code></p><div class=\"diagnosis\"><b>Why</b><pre>", out);
				html_text(out, p2pg_cli_col(detail, 0));
				fputs("</pre></div><div class=\"advice\"><b>What to do</b><pre>",
				      out);
				html_text(out, p2pg_cli_col(detail, 1));
				fputs("</pre></div>", out);
			}
			stack(out, "Python stack (first failure)", p2pg_cli_col(detail, 3));
			stack(out, "C stack (first failure)", p2pg_cli_col(detail, 4));
		}
		fputs("</div>\n", out);
	}
	if (!n)
		fputs("<p>No failure was recorded.</p>\n", out);
}

void report_html_crashes(FILE *out, struct report *r)
{
	size_t n = 0;
	struct crash_group *g = report_crash_groups(r, &n);
	for (size_t k = 0; k < n; k++) {
		fprintf(out,
			"<div class=\"crash\" data-count=\"%d\"><h3>%zu. signal %d (%s)"
			"<span class=\"count\">&#215;%d</span></h3><p class=\"when\">%d crash%s "
			"in %d process%s, first ",
			g[k].count, k + 1, g[k].signal, strsignal(g[k].signal), g[k].count,
			g[k].count, g[k].count == 1 ? "" : "es", g[k].processes,
			g[k].processes == 1 ? "" : "es");
		html_utc(out, g[k].first_ns);
		fputs(", last ", out);
		html_utc(out, g[k].last_ns);
		fputs(" UTC</p>", out);
		struct rbuf rk = {0}, hs = {0};
		fmt_ranges(&rk, g[k].ranks, g[k].nranks);
		fmt_hosts(&hs, g[k].hosts, g[k].nhosts, 8);
		fputs("<p class=\"on\">", out);
		if (g[k].nranks)
			fprintf(out, "ranks <b>%s</b> (%zu) ", rbuf_str(&rk), g[k].nranks);
		if (g[k].nhosts) {
			fputs("hosts <b>", out);
			html_text(out, rbuf_str(&hs));
			fprintf(out, "</b> (%zu)", g[k].nhosts);
		}
		fputs("</p><p>top frames <code class=\"frames\">", out);
		html_text(out, g[k].key);
		fputs("</code></p>", out);
		stack(out, "Python stack (first crash)", g[k].python);
		stack(out, "C stack (first crash)", g[k].backtrace);
		fputs("</div>\n", out);
		rbuf_free(&rk);
		rbuf_free(&hs);
	}
	if (!n)
		fputs("<p>No crash was recorded.</p>\n", out);
	report_crash_groups_free(g, n);
}
