/* SPDX-License-Identifier: MIT */
#include "report_chart.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

double chart_nice_step(double range, int ticks)
{
	if (!(range > 0) || ticks < 1)
		return 1;
	double raw = range / ticks, mag = pow(10, floor(log10(raw)));
	double norm = raw / mag;
	double step = norm <= 1 ? 1 : norm <= 2 ? 2 : norm <= 5 ? 5 : 10;
	return step * mag;
}

double chart_nice_max(double max, int ticks)
{
	if (!(max > 0))
		return 1;
	double step = chart_nice_step(max, ticks);
	return ceil(max / step * (1 + 1e-9)) * step;
}

/* A value as a label: no exponent, as many decimals as the step needs. */
static void label(char *buf, size_t len, double v, double step)
{
	int decimals = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
	if (decimals > 6)
		decimals = 6;
	if (fabs(v) >= 1e6 && step >= 1e5)
		snprintf(buf, len, "%.*fM", step >= 1e6 ? 0 : 1, v / 1e6);
	else if (fabs(v) >= 1e4 && step >= 1e3)
		snprintf(buf, len, "%.*fk", step >= 1e3 * 10 || fmod(step, 1e3) == 0 ? 0 : 1,
			 v / 1e3);
	else
		snprintf(buf, len, "%.*f", decimals, v);
}

static void y_axis(FILE *out, const struct chart_frame *f, int ph)
{
	int ticks = f->small ? 2 : 4;
	double step = chart_nice_step(f->ymax, ticks);
	for (double v = 0; v <= f->ymax * (1 + 1e-9); v += step) {
		double y = f->top + ph - v / f->ymax * ph;
		char text[32];
		label(text, sizeof(text), v, step);
		fprintf(out,
			"<line class=\"grid\" x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"/>"
			"<text class=\"tick y\" x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>",
			f->left, y, f->width - f->right, y, f->left - 4, y + 3.5, text);
	}
	if (!f->small)
		fprintf(out,
			"<text class=\"axis-title\" transform=\"translate(11,%d) rotate(-90)\" "
			"text-anchor=\"middle\">%s</text>",
			f->top + ph / 2, f->y_unit);
}

static void x_time_axis(FILE *out, const struct chart_frame *f, int pw, int ph)
{
	double span_s = (double)(f->t1 - f->t0) / 1e9;
	const char *unit = "s";
	double scale = 1;
	if (span_s < 2) {
		unit = "ms";
		scale = 1e-3;
	} else if (span_s >= 7200) {
		unit = "h";
		scale = 3600;
	} else if (span_s >= 180) {
		unit = "min";
		scale = 60;
	}
	double range = span_s / scale;
	double step = chart_nice_step(range > 0 ? range : 1, f->small ? 2 : 5);
	for (double v = 0; v <= range * (1 + 1e-9); v += step) {
		double x = f->left + (range > 0 ? v / range * pw : 0);
		char text[48];
		label(text, sizeof(text), v, step);
		/* A small multiple has no axis title: its last tick carries the unit, ending at the
		 * tick so that it stays inside the chart. */
		bool last = f->small && v > 0 && v + step > range * (1 + 1e-9);
		if (last)
			snprintf(text + strlen(text), sizeof(text) - strlen(text), " %s", unit);
		fprintf(out,
			"<line class=\"axis\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\"/><text "
			"class=\"tick x\" x=\"%.1f\" y=\"%d\" text-anchor=\"%s\">%s</text>",
			x, f->top + ph, x, f->top + ph + 4, x, f->top + ph + 14,
			last ? "end" : "middle", text);
		if (range <= 0)
			break;
	}
	if (!f->small) {
		char start[32];
		fmt_utc(start, sizeof(start), f->t0);
		fprintf(
		    out,
		    "<text class=\"axis-title\" x=\"%d\" y=\"%d\" text-anchor=\"middle\">%s since "
		    "%s UTC</text>",
		    f->left + pw / 2, f->height - 3, unit, start);
	}
}

static int cmp_sample_t(const void *a, const void *b)
{
	const struct report_sample *x = a, *y = b;
	return (x->t > y->t) - (x->t < y->t);
}

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return (x > y) - (x < y);
}

static double at(const float *sorted, size_t n, double p)
{
	size_t r = (size_t)(p * (double)n + 0.5);
	r = r < 1 ? 1 : r > n ? n : r;
	return sorted[r - 1];
}

/* p10-p90 bars and a p50 line per time bin, for one path's samples (sorted by time). */
static void bands(FILE *out, const struct chart_frame *f, const struct report_sample *s, size_t n,
		  int path, const char *color, int pw, int ph)
{
	int bins = pw / 3 > 150 ? 150 : pw / 3;
	double span = (double)(f->t1 - f->t0);
	float *vals = malloc(n * sizeof(float));
	if (!vals || bins < 1)
		goto out;
	fprintf(out, "<g class=\"band\" data-path=\"%s\">", report_path_names[path]);
	struct rbuf line = {0};
	size_t k = 0;
	for (int b = 0; b < bins; b++) {
		int64_t end = f->t0 + (int64_t)(span * (b + 1) / bins);
		size_t m = 0;
		while (k < n && (s[k].t <= end || b == bins - 1)) {
			if (s[k].path == path)
				vals[m++] = s[k].gbps;
			k++;
		}
		if (!m)
			continue;
		sort_n(vals, m, sizeof(float), cmp_float);
		double p10 = at(vals, m, 0.1), p50 = at(vals, m, 0.5), p90 = at(vals, m, 0.9);
		double x = f->left + (double)b * pw / bins, w = (double)pw / bins;
		double y90 = f->top + ph - p90 / f->ymax * ph,
		       y10 = f->top + ph - p10 / f->ymax * ph;
		fprintf(out,
			"<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\" "
			"fill-opacity=\"0.25\"/>",
			x, y90, w, y10 - y90 > 0.5 ? y10 - y90 : 0.5, color);
		rbuf_printf(&line, "%s%.1f,%.1f", line.len ? " " : "", x + w / 2,
			    f->top + ph - p50 / f->ymax * ph);
	}
	fprintf(out, "<polyline class=\"p50\" fill=\"none\" stroke=\"%s\" points=\"%s\"/></g>",
		color, rbuf_str(&line));
	rbuf_free(&line);
out:
	free(vals);
}

void chart_bandwidth(FILE *out, const struct chart_frame *f, struct report_sample *s, size_t n,
		     const char *const *path_colors)
{
	int pw = f->width - f->left - f->right, ph = f->height - f->top - f->bottom;
	fprintf(out,
		"<svg class=\"%s\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\" "
		"data-points=\"%zu\" data-drawn=\"%s\"><title>%s</title>",
		f->css_class, f->width, f->height, f->width, f->height, n,
		n > CHART_MAX_POINTS ? "percentiles" : "points", f->title);
	if (n == 0) {
		fprintf(out, "<text x=\"%d\" y=\"%d\" class=\"empty\">no timed copy</text></svg>",
			f->left + 8, f->top + ph / 2);
		return;
	}
	y_axis(out, f, ph);
	fprintf(out, "<line class=\"axis\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/>", f->left,
		f->top, f->left, f->top + ph);
	fprintf(out, "<line class=\"axis\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/>", f->left,
		f->top + ph, f->left + pw, f->top + ph);
	x_time_axis(out, f, pw, ph);
	double span = f->t1 > f->t0 ? (double)(f->t1 - f->t0) : 1;
	if (n <= CHART_MAX_POINTS) {
		for (size_t k = 0; k < n; k++) {
			double x = f->left + (f->t1 > f->t0 ? (double)(s[k].t - f->t0) / span * pw
							    : pw / 2.0);
			double y = f->top + ph - s[k].gbps / f->ymax * ph;
			fprintf(
			    out,
			    "<circle class=\"pt\" cx=\"%.1f\" cy=\"%.1f\" r=\"%s\" fill=\"%s\"/>",
			    x, y, f->small ? "1.5" : "2.5", path_colors[s[k].path]);
		}
	} else {
		sort_n(s, n, sizeof(*s), cmp_sample_t);
		for (int path = 0; path < RP_PATHS; path++) {
			bool any = false;
			for (size_t k = 0; k < n && !any; k++)
				any = s[k].path == path;
			if (any)
				bands(out, f, s, n, path, path_colors[path], pw, ph);
		}
	}
	fputs("</svg>", out);
}

void chart_sizes(FILE *out, const struct chart_frame *f, const uint64_t sizes[64])
{
	static const char *const unit[] = {"B", "K", "M", "G", "T", "P", "E"};
	int pw = f->width - f->left - f->right, ph = f->height - f->top - f->bottom;
	int lo = 63, hi = 0;
	uint64_t max = 0;
	for (int b = 0; b < 64; b++)
		if (sizes[b]) {
			lo = b < lo ? b : lo;
			hi = b > hi ? b : hi;
			max = sizes[b] > max ? sizes[b] : max;
		}
	fprintf(out,
		"<svg class=\"%s\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
		"role=\"img\"><title>%s</title>",
		f->css_class, f->width, f->height, f->width, f->height, f->title);
	if (!max) {
		fprintf(out, "<text x=\"%d\" y=\"%d\" class=\"empty\">no sizes</text></svg>",
			f->left + 8, f->top + ph / 2);
		return;
	}
	struct chart_frame yf = *f;
	yf.ymax = chart_nice_max((double)max, 4);
	yf.y_unit = "copies";
	y_axis(out, &yf, ph);
	fprintf(out, "<line class=\"axis\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/>", f->left,
		f->top + ph, f->left + pw, f->top + ph);
	int bars = hi - lo + 1;
	double bw = (double)pw / bars;
	for (int b = lo; b <= hi; b++) {
		double h = (double)sizes[b] / yf.ymax * ph, x = f->left + (b - lo) * bw;
		fprintf(out,
			"<rect class=\"bar\" data-bucket=\"%d\" data-count=\"%llu\" x=\"%.1f\" "
			"y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"><title>%llu copies of %d%s to "
			"&lt;%d%s</title></rect>",
			b, (unsigned long long)sizes[b], x + 1, f->top + ph - h,
			bw > 2 ? bw - 2 : bw, h, (unsigned long long)sizes[b], 1 << (b % 10),
			unit[b / 10], 1 << ((b + 1) % 10), unit[(b + 1) / 10]);
		/* A label per bar while they fit (about 26 px each), else every other one. */
		if (bw >= 26 || (b - lo) % (int)ceil(26 / bw) == 0)
			fprintf(out,
				"<text class=\"tick x\" x=\"%.1f\" y=\"%d\" "
				"text-anchor=\"middle\">%d%s</text>",
				x + bw / 2, f->top + ph + 14, 1 << (b % 10), unit[b / 10]);
	}
	fprintf(out,
		"<text class=\"axis-title\" x=\"%d\" y=\"%d\" text-anchor=\"middle\">copy size "
		"(bytes, by power of two)</text></svg>",
		f->left + pw / 2, f->height - 3);
}
