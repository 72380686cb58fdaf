/* SPDX-License-Identifier: MIT */
/* NCCL's part of `p2pguard report` (report_nccl.c); each does nothing on a database without NCCL's
 * tables. */
#pragma once

#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>

/* Text: NCCL operations that did not finish, with their diagnosis (said first). */
void p2pg_report_nccl_stalls(sqlite3 *db, FILE *out, bool brief);
/* Text: communicators, operations per function, device pairs. */
void p2pg_report_nccl(sqlite3 *db, FILE *out);
/* JSON: the member "nccl": {stalls, communicators, operations, pairs}, with its trailing comma. */
void p2pg_report_nccl_json(sqlite3 *db, FILE *out);
