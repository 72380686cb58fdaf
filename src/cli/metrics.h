/* SPDX-License-Identifier: MIT */
/* p2pguard metrics: the exposition (cmd_metrics.c) and its HTTP server (metrics_serve.c). */
#pragma once

#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "gpus.h"
#include "report_format.h"

/* The label of the host a series comes from, spelt as dcgm-exporter spells it on its GPU series,
 * so that a PromQL join on (Hostname, UUID) matches them; every family uses this one spelling. */
#define METRICS_HOST "Hostname"

/* A label name="value" (backslash, double quote and newline escaped, as the format wants), after
 * a comma unless first. */
void metrics_label(struct rbuf *b, const char *name, const char *value, bool first);
/* A GPU's labels as dcgm-exporter names them, gpu (nvidia-smi's index, empty when not known),
 * UUID and pci_bus_id, or with peer_ before each for the far end; empty values for no GPU. */
void metrics_gpu_labels(struct rbuf *b, const struct cli_gpu *g, bool peer);
/* A counter family's HELP and TYPE lines. */
void metrics_family(FILE *out, const char *name, const char *help);
/* One sample per row of sql: the first nlabels columns are the labels (names in labels[]), the
 * last one the value; the family's lines first. */
void metrics_counter(FILE *out, sqlite3 *db, const char *name, const char *help, const char *sql,
		     const char *const *labels, int nlabels);
/*
 * Series of equal labels (a rank that ran twice) made one: sorts the n samples of v (each `size`
 * bytes, starting with its malloc'd labels, a char *) by labels, add()s each into the first of
 * its labels and frees its labels. Returns how many samples are left.
 */
size_t metrics_merge_series(void *v, size_t n, size_t size,
			    void (*add)(void *to, const void *from));
/* NCCL's families (metrics_nccl.c); nothing for a database without NCCL's tables. Returns 0 or a
 * negative errno after saying why. */
int p2pg_metrics_nccl(sqlite3 *db, FILE *out);
/* The cross-process mappings' families (metrics_mappings.c); nothing for a database without
 * their tables. Returns 0 or a negative errno after saying why. */
int p2pg_metrics_mappings(sqlite3 *db, FILE *out);

/* The exposition of db. Returns 0 or a negative errno after saying why. */
int p2pg_metrics_write(sqlite3 *db, FILE *out);
/* The exposition of the database at db_path as it is now (its dead spools imported first), in a
 * malloc'd buffer of *len bytes; NULL after saying why. */
char *p2pg_metrics_render(const char *db_path, size_t *len);

struct p2pg_listen {
	char host[256]; /* "" -> 127.0.0.1 */
	char port[8];	/* 0-65535 */
};

/* "[HOST:]PORT", "[v6]:PORT": checked (the port a number from 0 to 65535). Returns 0, or -EINVAL
 * after one line on stderr. */
int p2pg_metrics_parse_listen(const char *addr, struct p2pg_listen *ret);

/* Serves GET /metrics until SIGINT or SIGTERM. Returns the exit status. */
int p2pg_metrics_serve(const char *db_path, const struct p2pg_listen *where);
