/* SPDX-License-Identifier: MIT */
/* The cross-process and VMM mappings section of `p2pguard report` (report_mappings.c). */
#pragma once

#include <sqlite3.h>
#include <stdio.h>

/* The text section; nothing when the database holds no mapping (or predates the table). */
void p2pg_report_mappings(sqlite3 *db, FILE *out);
/* The "mappings" member of report --json, followed by a comma: {"groups": [...], "counts": [...]},
 * or null for a database without the tables. */
void p2pg_report_mappings_json(sqlite3 *db, FILE *out);
