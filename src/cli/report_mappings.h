/* SPDX-License-Identifier: MIT */
/* The cross-process and VMM mappings section of `p2pguard report` (report_mappings.c). */
#pragma once

#include <stddef.h>
#include <stdio.h>

#include "report.h"

/* The text section; nothing when the database holds no mapping (or predates the table). */
void p2pg_report_mappings(struct report *r, FILE *out);
/* The "mappings" member of report --json, followed by a comma: {"groups": [...], "counts": [...],
 * "pair_basis": "...", "pairs": [...]}, or null for a database without the tables. */
void p2pg_report_mappings_json(struct report *r, FILE *out);
/* The HTML section (report_mappings_html.c). */
void p2pg_report_mappings_html(struct report *r, FILE *out);
/* "0->1", or "gpu-node-001:0->1" when the GPUs are on several hosts; "?" for an unknown GPU. */
void report_mapping_pair_label(const struct mapping_scan *s, const struct mapping_pair *p,
			       char *buf, size_t len);
