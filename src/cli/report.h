/* SPDX-License-Identifier: MIT */
/* The queries `report` shows in each of its forms (text, --json, --html). */
#pragma once

#include <sqlite3.h>
#include <stdio.h>

/* Guarded processes; peer_calls = 0 for one that made no peer call. */
#define REPORT_PROCESSES_SQL                                                                      \
	"SELECT p.id, p.pid, p.hostname, p.rank, p.local_rank, p.cmdline, p.mode, "               \
	"p.guard_version, p.started_ns, p.records_dropped, p.recovered, "                         \
	"(EXISTS (SELECT 1 FROM transfers t WHERE t.process_id = p.id) OR EXISTS (SELECT 1 FROM " \
	"transfer_summary s WHERE s.process_id = p.id) OR EXISTS (SELECT 1 FROM peer_access a "   \
	"WHERE a.process_id = p.id) OR EXISTS (SELECT 1 FROM failures f WHERE f.process_id = "    \
	"p.id)) AS peer_calls FROM processes p ORDER BY coalesce(p.rank, 1 << 30), p.id"

/* Identical failures (same call, answer, pair, rule and place) as one group. */
#define REPORT_FAILURES_SQL                                                                       \
	"WITH g AS (SELECT min(f.id) AS first_id, count(*) AS count, count(DISTINCT "             \
	"f.process_id) AS processes, min(f.started_ns) AS first_ns, max(f.started_ns) AS "        \
	"last_ns FROM failures f JOIN failure_report r ON r.id = f.id GROUP BY f.api, f.status, " \
	"f.error_name, f.device, f.peer_device, f.action, f.rule_id, r.python_where, r.c_where) " \
	"SELECT g.first_id, g.count, g.processes, g.first_ns, g.last_ns, f.api, f.status, "       \
	"f.error_name, f.device, f.peer_device, f.action, f.rule_id, f.diagnosis, f.advice, "     \
	"r.python_where, r.c_where, f.args, f.python_stack, f.backtrace, "                        \
	"json_extract(CASE WHEN json_valid(f.evidence) THEN f.evidence END, '$.p2p_probe') AS "   \
	"probe FROM g JOIN failures f ON f.id = g.first_id JOIN failure_report r ON r.id = "      \
	"g.first_id ORDER BY g.first_ns, g.first_id"

#define REPORT_TRANSFERS_SQL                                                                  \
	"WITH timed AS (SELECT src_device, dst_device, path, api, count(gpu_ns) AS n FROM "   \
	"transfers GROUP BY 1, 2, 3, 4) "                                                     \
	"SELECT t.src_device, t.dst_device, t.path, t.api, sum(t.calls) AS calls, "           \
	"sum(t.bytes) AS bytes, sum(t.failures) AS failed, coalesce(g.n, 0) AS gpu_timed, "   \
	"b.p50_gbps, sum(t.folded) AS folded FROM peer_totals t "                             \
	"LEFT JOIN temp.bw b ON b.src_device = t.src_device AND b.dst_device = t.dst_device " \
	"AND b.path = t.path LEFT JOIN timed g ON g.src_device = t.src_device AND "           \
	"g.dst_device = t.dst_device AND g.path = t.path AND g.api = t.api "                  \
	"GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4"

#define REPORT_PEER_ACCESS_SQL                                                                     \
	"SELECT api, device, peer_device, status, coalesce(action, 'passed') AS action, count(*) " \
	"AS calls, max(result) AS answer FROM peer_access GROUP BY 1, 2, 3, 4, 5 ORDER BY "        \
	"min(id)"

#define REPORT_CRASHES_SQL                                                                 \
	"SELECT p.pid, p.hostname, p.rank, c.* FROM crashes c JOIN processes p ON p.id = " \
	"c.process_id ORDER BY c.started_ns, c.id"

#define REPORT_STALLS_SQL                                                                 \
	"SELECT p.pid, p.hostname, p.rank, s.* FROM stalls s JOIN processes p ON p.id = " \
	"s.process_id ORDER BY s.rowid"

/*
 * The peer_bandwidth view, computed once into temp.bw (it ranks every timed copy: seconds on a
 * database of millions of rows, and the report reads it in several places). The connection may be
 * read-only: temporary tables live apart. Returns 0 or -EIO.
 */
int p2pg_report_prepare(sqlite3 *db);

/* Writes the whole report as one self-contained HTML page. Returns 0 or a negative errno. */
int p2pg_report_html(sqlite3 *db, const char *db_path, FILE *out);
