/* SPDX-License-Identifier: MIT */
/*
 * Inline SVG charts for report --html: real axes (ticks at round values, units, no e-notation),
 * points while they can be told apart, percentile bands past that.
 */
#pragma once

#include <stdint.h>
#include <stdio.h>

#include "report.h"

#define CHART_MAX_POINTS 2000 /* above this a chart draws p10/p50/p90 per time bin */

struct chart_frame {
	int width, height;	      /* of the whole SVG */
	int left, right, top, bottom; /* margins around the plot */
	int64_t t0, t1;		      /* the time axis (ns, Unix) */
	double ymax;		      /* the value axis, from 0 */
	const char *y_unit;	      /* "GB/s" */
	const char *css_class;	      /* "bw-time" */
	const char *title;	      /* the SVG's <title>, already HTML-safe */
	bool small;		      /* a small multiple: fewer ticks, no axis titles */
};

/* The round step for an axis over [0, range] with about `ticks` ticks (1, 2 or 5 times 10^k). */
double chart_nice_step(double range, int ticks);
/* A value axis maximum: the next tick above max (at least one step). */
double chart_nice_max(double max, int ticks);

/*
 * Bandwidth over time: the samples of one pair (sorted here by time), one colour per path, as
 * points or as percentile bands. Writes the whole <svg>.
 */
void chart_bandwidth(FILE *out, const struct chart_frame *f, struct report_sample *s, size_t n,
		     const char *const *path_colors);

/* The sizes of a pair's copies, a bar per power of two, with a count axis. */
void chart_sizes(FILE *out, const struct chart_frame *f, const uint64_t sizes[64]);
