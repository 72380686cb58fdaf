/* SPDX-License-Identifier: MIT */
/*
 * report --html: one page that needs nothing but itself. The charts are inline SVG written here
 * (no script, no library): the page opens offline, from a mail attachment or a CI artifact, and
 * renders the same in any browser.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cleanup.h"
#include "dbread.h"
#include "report.h"

#define CHART_W	   460
#define CHART_H	   170
#define MAX_POINTS 2000 /* per pair: beyond it every k-th copy is drawn */

static const char *const path_names[] = {"p2p", "driver", "staged", "captured", "other"};
static const char *const path_colors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#7f7f7f"};

static int path_index(const char *path)
{
	for (int k = 0; k < 4; k++)
		if (path && strcmp(path, path_names[k]) == 0)
			return k;
	return 4;
}

static void h(FILE *out, const char *text)
{
	p2pg_cli_html_text(out, text);
}

static void utc(FILE *out, int64_t ns)
{
	time_t s = (time_t)(ns / 1000000000);
	struct tm tm;
	char buf[32];
	if (gmtime_r(&s, &tm) && strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &tm))
		fputs(buf, out);
}

/* A table of every row of sql; columns named by the query. */
static int table(FILE *out, sqlite3 *db, const char *id, const char *sql)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		return 0;
	int n = 0;
	while (sqlite3_step(st) == SQLITE_ROW) {
		if (n++ == 0) {
			fprintf(out, "<table id=\"%s\"><tr>", id);
			for (int c = 0; c < sqlite3_column_count(st); c++) {
				fputs("<th>", out);
				h(out, sqlite3_column_name(st, c));
				fputs("</th>", out);
			}
			fputs("</tr>\n", out);
		}
		fputs("<tr>", out);
		for (int c = 0; c < sqlite3_column_count(st); c++) {
			const char *v = p2pg_cli_col(st, c);
			bool multi = v && strchr(v, '\n');
			fputs(multi ? "<td><pre>" : "<td>", out);
			h(out, v);
			fputs(multi ? "</pre></td>" : "</td>", out);
		}
		fputs("</tr>\n", out);
	}
	if (n)
		fputs("</table>\n", out);
	return n;
}

static void summary(FILE *out, sqlite3 *db)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(
		db,
		"WITH p AS (" REPORT_PROCESSES_SQL
		") SELECT count(*), coalesce(sum(NOT peer_calls), 0), count(DISTINCT "
		"hostname), (SELECT count(*) FROM transfers), (SELECT count(*) FROM "
		"failures), (SELECT count(*) FROM crashes), coalesce(sum("
		"records_dropped), 0) FROM p",
		-1, &st, NULL) != SQLITE_OK ||
	    sqlite3_step(st) != SQLITE_ROW)
		return;
	static const char *const labels[] = {"processes guarded", "made no peer call", "hosts",
					     "transfers",	  "failures",	       "crashes",
					     "records dropped"};
	static const char *const ids[] = {"n-processes", "n-idle",    "n-hosts",  "n-transfers",
					  "n-failures",	 "n-crashes", "n-dropped"};
	fputs("<div class=\"cards\">", out);
	for (int k = 0; k < 7; k++)
		fprintf(out, "<div class=\"card\"><b id=\"%s\">%lld</b><span>%s</span></div>",
			ids[k], sqlite3_column_int64(st, k), labels[k]);
	fputs("</div>\n", out);
}

static int devices(sqlite3 *db, int *dev, int max)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	int n = 0;
	if (sqlite3_prepare_v2(
		db,
		"SELECT src_device FROM transfers UNION SELECT dst_device FROM "
		"transfers UNION SELECT device FROM peer_access WHERE status = 0 UNION "
		"SELECT peer_device FROM peer_access WHERE status = 0 ORDER BY 1",
		-1, &st, NULL) != SQLITE_OK)
		return 0;
	while (n < max && sqlite3_step(st) == SQLITE_ROW)
		if (sqlite3_column_type(st, 0) != SQLITE_NULL)
			dev[n++] = sqlite3_column_int(st, 0);
	return n;
}

static void matrix(FILE *out, sqlite3 *db, const int *dev, int ndev)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (ndev == 0) {
		fputs("<p>No device pair was used.</p>\n", out);
		return;
	}
	if (sqlite3_prepare_v2(db,
			       "SELECT path, p50_gbps, p99_gbps, count FROM temp.bw WHERE "
			       "src_device = ?1 AND dst_device = ?2 ORDER BY path",
			       -1, &st, NULL) != SQLITE_OK)
		return;
	fputs("<table id=\"matrix\" class=\"matrix\"><tr><th>src \\ dst</th>", out);
	for (int d = 0; d < ndev; d++)
		fprintf(out, "<th>GPU %d</th>", dev[d]);
	fputs("</tr>\n", out);
	for (int s = 0; s < ndev; s++) {
		fprintf(out, "<tr><th>GPU %d</th>", dev[s]);
		for (int d = 0; d < ndev; d++) {
			if (s == d) {
				fputs("<td class=\"self\">X</td>", out);
				continue;
			}
			fprintf(out, "<td data-pair=\"%d-%d\">", dev[s], dev[d]);
			sqlite3_reset(st);
			sqlite3_bind_int(st, 1, dev[s]);
			sqlite3_bind_int(st, 2, dev[d]);
			int n = 0;
			while (sqlite3_step(st) == SQLITE_ROW) {
				const char *path = p2pg_cli_col(st, 0);
				fprintf(out,
					"<div class=\"bw\" data-path=\"%s\" style=\"color:%s\">%s "
					"<b>%.3g</b> GB/s <small>p99 %.3g, n=%d</small></div>",
					path ?: "", path_colors[path_index(path)], path ?: "?",
					sqlite3_column_double(st, 1), sqlite3_column_double(st, 2),
					sqlite3_column_int(st, 3));
				n++;
			}
			if (!n)
				fputs("<span class=\"dim\">-</span>", out);
			fputs("</td>", out);
		}
		fputs("</tr>\n", out);
	}
	fputs("</table>\n", out);
}

struct point {
	int64_t t;
	double gbps;
	int path;
};

/* Bandwidth over time and the size histogram of one pair, as two inline SVG charts. */
static void pair_charts(FILE *out, sqlite3 *db, int src, int dst)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	_cleanup_free_ struct point *pts = NULL;
	size_t n = 0, cap = 0, total = 0;
	uint64_t hist[64] = {0};
	int64_t t0 = INT64_MAX, t1 = INT64_MIN;
	double ymax = 0;

	if (sqlite3_prepare_v2(db,
			       "SELECT started_ns, bytes, coalesce(gpu_ns, host_ns), path, status "
			       "FROM transfers WHERE src_device = ?1 AND dst_device = ?2 AND "
			       "started_ns IS NOT NULL ORDER BY started_ns",
			       -1, &st, NULL) != SQLITE_OK)
		return;
	sqlite3_bind_int(st, 1, src);
	sqlite3_bind_int(st, 2, dst);
	while (sqlite3_step(st) == SQLITE_ROW) {
		int64_t bytes = sqlite3_column_int64(st, 1), ns = sqlite3_column_int64(st, 2);
		if (bytes > 0)
			hist[63 - __builtin_clzll((unsigned long long)bytes)]++;
		if (ns <= 0 || sqlite3_column_int(st, 4) != 0)
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 256;
			struct point *bigger = realloc(pts, cap * sizeof(*pts));
			if (!bigger)
				break;
			pts = bigger;
		}
		pts[n++] = (struct point){sqlite3_column_int64(st, 0), (double)bytes / (double)ns,
					  path_index(p2pg_cli_col(st, 3))};
		total++;
	}
	for (size_t k = 0; k < n; k++) {
		t0 = pts[k].t < t0 ? pts[k].t : t0;
		t1 = pts[k].t > t1 ? pts[k].t : t1;
		ymax = pts[k].gbps > ymax ? pts[k].gbps : ymax;
	}
	fprintf(out,
		"<figure class=\"pair\" id=\"pair-%d-%d\"><figcaption>GPU %d &rarr; GPU "
		"%d</figcaption>\n",
		src, dst, src, dst);

	/* Bandwidth over time. */
	const int L = 44, B = 22, pw = CHART_W - L - 8, ph = CHART_H - B - 10;
	fprintf(out,
		"<svg class=\"bw-time\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
		"role=\"img\"><title>GB/s over time, GPU %d to %d</title>",
		CHART_W, CHART_H, CHART_W, CHART_H, src, dst);
	fprintf(out,
		"<line x1=\"%d\" y1=\"10\" x2=\"%d\" y2=\"%d\" class=\"axis\"/><line x1=\"%d\" "
		"y1=\"%d\" x2=\"%d\" y2=\"%d\" class=\"axis\"/>",
		L, L, 10 + ph, L, 10 + ph, L + pw, 10 + ph);
	if (n == 0) {
		fprintf(out, "<text x=\"%d\" y=\"%d\">no timed copy</text>", L + 10, CHART_H / 2);
	} else {
		double ytop = ymax > 0 ? ymax * 1.1 : 1;
		double span = t1 > t0 ? (double)(t1 - t0) : 1;
		fprintf(out,
			"<text x=\"%d\" y=\"14\" text-anchor=\"end\">%.3g</text><text x=\"%d\" "
			"y=\"%d\" text-anchor=\"end\">0</text><text x=\"%d\" y=\"%d\">GB/s over "
			"%.3g s</text>",
			L - 4, ytop, L - 4, 10 + ph, L + 6, CHART_H - 6, span / 1e9);
		size_t stride = n > MAX_POINTS ? (n + MAX_POINTS - 1) / MAX_POINTS : 1;
		for (size_t k = 0; k < n; k += stride) {
			double x = L + (t1 > t0 ? (double)(pts[k].t - t0) / span * pw : pw / 2.0);
			double y = 10 + ph - pts[k].gbps / ytop * ph;
			fprintf(
			    out,
			    "<circle class=\"pt\" cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"/>",
			    x, y, path_colors[pts[k].path]);
		}
	}
	fputs("</svg>\n", out);

	/* Sizes: one bar per power of two. */
	int lo = 63, hi = 0;
	uint64_t hmax = 0;
	for (int b = 0; b < 64; b++)
		if (hist[b]) {
			lo = b < lo ? b : lo;
			hi = b > hi ? b : hi;
			hmax = hist[b] > hmax ? hist[b] : hmax;
		}
	fprintf(out,
		"<svg class=\"sizes\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
		"role=\"img\"><title>copy sizes, GPU %d to %d</title>",
		CHART_W, CHART_H, CHART_W, CHART_H, src, dst);
	if (hmax) {
		int bars = hi - lo + 1;
		double bw = (double)pw / bars;
		for (int b = lo; b <= hi; b++) {
			double bh = (double)hist[b] / (double)hmax * (ph - 14);
			double x = L + (b - lo) * bw;
			static const char *const unit[] = {"B", "K", "M", "G", "T"};
			fprintf(out,
				"<rect class=\"bar\" data-bucket=\"%d\" data-count=\"%" PRIu64
				"\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/>",
				b, hist[b], x + 1, 10 + ph - bh, bw - 2, bh);
			if (hist[b])
				fprintf(
				    out,
				    "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%" PRIu64
				    "</text>",
				    x + bw / 2, 10 + ph - bh - 2, hist[b]);
			if (bars <= 12 || (b - lo) % 2 == 0)
				fprintf(
				    out,
				    "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%d%s</text>",
				    x + bw / 2, CHART_H - 6, 1 << (b % 10), unit[b / 10]);
		}
	} else {
		fprintf(out, "<text x=\"%d\" y=\"%d\">no sizes</text>", L + 10, CHART_H / 2);
	}
	fprintf(out,
		"</svg><p class=\"dim\">%zu timed successful cop%s; sizes of every copy, "
		"by power of two</p></figure>\n",
		total, total == 1 ? "y" : "ies");
}

static void charts(FILE *out, sqlite3 *db)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(db,
			       "SELECT DISTINCT src_device, dst_device FROM transfers WHERE "
			       "src_device IS NOT NULL AND dst_device IS NOT NULL ORDER BY 1, 2",
			       -1, &st, NULL) != SQLITE_OK)
		return;
	fputs("<p class=\"legend\">", out);
	for (int k = 0; k < 5; k++)
		fprintf(out, "<span style=\"color:%s\">&#9679; %s</span> ", path_colors[k],
			path_names[k]);
	fputs("</p>\n", out);
	int n = 0;
	while (sqlite3_step(st) == SQLITE_ROW && n++ < 64)
		pair_charts(out, db, sqlite3_column_int(st, 0), sqlite3_column_int(st, 1));
	if (!n)
		fputs("<p>No transfer was recorded.</p>\n", out);
}

static void stack(FILE *out, const char *title, const char *text)
{
	if (!text || !*text)
		return;
	fputs("<details><summary>", out);
	h(out, title);
	fputs("</summary><pre>", out);
	h(out, text);
	fputs("</pre></details>", out);
}

static void failures(FILE *out, sqlite3 *db)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(db, REPORT_FAILURES_SQL, -1, &st, NULL) != SQLITE_OK)
		return;
	int n = 0;
	while (sqlite3_step(st) == SQLITE_ROW) {
		n++;
		fprintf(out, "<div class=\"failure\" data-count=\"%d\"><h3>",
			sqlite3_column_int(st, 1));
		h(out, p2pg_cli_col(st, 5));
		fprintf(out, " &rarr; %d ", sqlite3_column_int(st, 6));
		h(out, p2pg_cli_col(st, 7));
		fprintf(out, " <small>GPU %d &rarr; %d, ", sqlite3_column_int(st, 8),
			sqlite3_column_int(st, 9));
		h(out, p2pg_cli_col(st, 10) ?: "passed");
		fprintf(out, "</small><span class=\"count\">&times;%d</span></h3>",
			sqlite3_column_int(st, 1));
		fprintf(out, "<p class=\"when\">%d time%s in %d process%s, first ",
			sqlite3_column_int(st, 1), sqlite3_column_int(st, 1) == 1 ? "" : "s",
			sqlite3_column_int(st, 2), sqlite3_column_int(st, 2) == 1 ? "" : "es");
		utc(out, sqlite3_column_int64(st, 3));
		fputs(", last ", out);
		utc(out, sqlite3_column_int64(st, 4));
		fputs(" UTC</p>", out);
		if (p2pg_cli_col(st, 19)) {
			fputs("<p>probe verdict: <b class=\"verdict\">", out);
			h(out, p2pg_cli_col(st, 19));
			fputs("</b></p>", out);
		}
		if (p2pg_cli_col(st, 16)) {
			fputs("<p class=\"args\">", out);
			h(out, p2pg_cli_col(st, 16));
			fputs("</p>", out);
		}
		if (p2pg_cli_col(st, 11)) {
			fputs("<p>rule <code class=\"rule\">", out);
			h(out, p2pg_cli_col(st, 11));
			fputs("</code></p><div class=\"diagnosis\"><b>Why</b><pre>", out);
			h(out, p2pg_cli_col(st, 12));
			fputs("</pre></div><div class=\"advice\"><b>What to do</b><pre>", out);
			h(out, p2pg_cli_col(st, 13));
			fputs("</pre></div>", out);
		}
		stack(out, "Python stack", p2pg_cli_col(st, 17));
		stack(out, "C stack", p2pg_cli_col(st, 18));
		fputs("</div>\n", out);
	}
	if (!n)
		fputs("<p>No failure was recorded.</p>\n", out);
}

static void crashes(FILE *out, sqlite3 *db)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(db, REPORT_CRASHES_SQL, -1, &st, NULL) != SQLITE_OK)
		return;
	int n = 0, sig = -1, bt = -1, py = -1, t = -1;
	for (int c = 0; c < sqlite3_column_count(st); c++) {
		const char *name = sqlite3_column_name(st, c);
		sig = strcmp(name, "signal") == 0 ? c : sig;
		bt = strcmp(name, "backtrace") == 0 ? c : bt;
		py = strcmp(name, "python_stack") == 0 ? c : py;
		t = strcmp(name, "started_ns") == 0 ? c : t;
	}
	while (sqlite3_step(st) == SQLITE_ROW) {
		n++;
		int s = sig >= 0 ? sqlite3_column_int(st, sig) : 0;
		fprintf(out, "<div class=\"crash\"><h3>pid %d on ", sqlite3_column_int(st, 0));
		h(out, p2pg_cli_col(st, 1));
		if (sqlite3_column_type(st, 2) != SQLITE_NULL && sqlite3_column_int(st, 2) >= 0)
			fprintf(out, ", rank %d", sqlite3_column_int(st, 2));
		fprintf(out, ": signal %d (%s)</h3><p class=\"when\">", s, strsignal(s));
		if (t >= 0)
			utc(out, sqlite3_column_int64(st, t));
		fputs(" UTC</p>", out);
		if (py >= 0)
			stack(out, "Python stack", p2pg_cli_col(st, py));
		if (bt >= 0)
			stack(out, "C stack", p2pg_cli_col(st, bt));
		fputs("</div>\n", out);
	}
	if (!n)
		fputs("<p>No crash was recorded.</p>\n", out);
}

static const char style[] =
    "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1100px}"
    "h1{font-size:22px}h2{font-size:18px;border-bottom:1px solid #ddd;margin-top:28px}"
    "h3{font-size:15px;margin:4px 0}table{border-collapse:collapse;margin:8px 0;max-width:100%}"
    "td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top;"
    "overflow-wrap:anywhere}"
    "th{background:#f4f4f4}.matrix td{min-width:140px}.self{color:#aaa;text-align:center}"
    ".cards{display:flex;gap:10px;flex-wrap:wrap}.card{border:1px solid #ddd;border-radius:6px;"
    "padding:6px 12px}.card b{font-size:20px;display:block}.card span{color:#666}"
    ".dim{color:#888}.pair{display:inline-block;margin:6px 12px 6px 0}figcaption{font-weight:600}"
    "svg{border:1px solid #eee;margin-right:6px}svg text{font-size:10px;fill:#444}"
    ".axis{stroke:#999}.bar{fill:#6baed6}.failure,.crash{border-left:4px solid #d62728;"
    "padding:4px 10px;margin:10px 0;background:#fff8f8}.count{float:right;color:#d62728}"
    "pre{white-space:pre-wrap;margin:2px 0;font-size:12px}code{background:#eee;padding:0 3px}";

int p2pg_report_html(sqlite3 *db, const char *db_path, FILE *out)
{
	int dev[64];
	int ndev = devices(db, dev, 64);

	fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
	      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
	      "style-src 'unsafe-inline'\"><title>p2pguard report: ",
	      out);
	h(out, db_path);
	fprintf(out,
		"</title><style>%s</style></head><body>\n<h1>p2pguard report</h1><p "
		"class=\"dim\">",
		style);
	h(out, db_path);
	fputs(" &middot; generated by p2pguard " P2PGUARD_VERSION "</p>\n", out);
	summary(out, db);
	fputs("<section id=\"sec-matrix\"><h2>P2P matrix: measured bandwidth (p50) per pair and "
	      "path</h2>\n",
	      out);
	matrix(out, db, dev, ndev);
	fputs("</section>\n<section id=\"sec-charts\"><h2>Per pair: bandwidth over time and copy "
	      "sizes</h2>\n",
	      out);
	charts(out, db);
	fputs("</section>\n<section id=\"sec-failures\"><h2>Failures (identical ones "
	      "grouped)</h2>\n",
	      out);
	failures(out, db);
	fputs("</section>\n<section id=\"sec-crashes\"><h2>Crashes</h2>\n", out);
	crashes(out, db);
	fputs("</section>\n<section id=\"sec-stalls\"><h2>Stalls</h2>\n", out);
	if (!p2pg_cli_has_table(db, "stalls"))
		fputs("<p class=\"dim\">Not recorded in this database (its guard predates stall "
		      "detection).</p>\n",
		      out);
	else if (!table(out, db, "stalls", REPORT_STALLS_SQL))
		fputs("<p>No stall was recorded.</p>\n", out);
	fputs("</section>\n<section id=\"sec-processes\"><h2>Processes and ranks</h2>\n", out);
	table(out, db, "processes",
	      "SELECT pid, hostname, rank, local_rank, mode, guard_version, datetime(started_ns / "
	      "1000000000, 'unixepoch') AS started_utc, CASE WHEN peer_calls THEN 'yes' ELSE 'no' "
	      "END AS peer_calls, records_dropped, recovered, cmdline FROM (" REPORT_PROCESSES_SQL
	      ")");
	fputs("</section>\n<section id=\"sec-peer-access\"><h2>Peer access calls</h2>\n", out);
	table(out, db, "peer-access", REPORT_PEER_ACCESS_SQL);
	fputs("</section>\n</body></html>\n", out);
	return ferror(out) ? -EIO : 0;
}
