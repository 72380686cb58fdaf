/* SPDX-License-Identifier: MIT */
/*
 * What the parts of report --html share (report_html.c, report_html_ranks.c,
 * report_html_failures.c, report_nccl_html.c): escaped text, numbers, times, a table of a query's
 * rows, heat colours, and the sections each part writes.
 */
#pragma once

#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>

#include "gpus.h"
#include "report.h"

/* text with HTML's special characters escaped */
void html_text(FILE *out, const char *text);
/* Unix ns as UTC */
void html_utc(FILE *out, int64_t ns);
/* 1234567 as 1,234,567 */
void html_count(FILE *out, long long n);
/* 1536 as 1.5 KiB */
void html_bytes(FILE *out, long long n);
/* A table of every row of sql, columns named by the query; returns the number of rows. */
int html_table(FILE *out, sqlite3 *db, const char *id, const char *sql);
/* A cell's colour: red (slowest pair) to green (fastest), by its value against the best. */
void html_heat(FILE *out, double v, double vmax);
/* A bandwidth matrix's cell, from its p50 in GB/s (NAN: none timed): its colour (grey when
 * untimed), its text when compact (n: the matrix's GPUs), and a line per path or kind when not
 * (`attr` naming it: data-path, data-kind). */
void html_p50_colour(FILE *out, double p50, double vmax);
void html_p50_compact(FILE *out, double p50, size_t n);
void html_p50_line(FILE *out, const char *attr, const char *name, double p50);

/* A matrix of GPUs (NCCL's pairs, mappings' pairs), gpus[] indices into g->v in host and index
 * order: its head row (the corner's text, a row of hosts over the row of indices when the GPUs
 * are on several hosts; "GPU 3", or "3" when compact), each row's head cell, and a GPU as a cell's
 * attribute value ("host:3"). */
void html_gpu_matrix_head(FILE *out, const struct cli_gpus *g, const int *gpus, size_t n,
			  bool compact, const char *corner);
void html_gpu_row_head(FILE *out, const struct cli_gpus *g, int gpu, bool compact);
void html_gpu_attr(FILE *out, const struct cli_gpus *g, int gpu);

/* The sections the parts write. */
void report_html_ranks(FILE *out, struct report *r);
void report_html_failures(FILE *out, struct report *r);
void report_html_crashes(FILE *out, struct report *r);
