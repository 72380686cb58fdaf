/* SPDX-License-Identifier: MIT */
/* NCCL's part of `p2pguard report` (report_nccl.c text and JSON, report_nccl_html.c); each does
 * nothing on a database without NCCL's tables. */
#pragma once

#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>

#include "report.h"

/* NCCL operations whose kernel did not finish, with where the other ranks were: said first. */
#define REPORT_NCCL_STALLS_SQL                                                                \
	"SELECT p.pid, p.hostname, s.rank, s.nranks, s.comm_hash, s.kind, s.func, s.op_seq, " \
	"s.peer, "                                                                            \
	"s.bytes, s.waited_ns, s.peer_state, s.rule_id, s.diagnosis, s.advice, s.evidence, "  \
	"s.started_ns FROM nccl_stalls s JOIN processes p ON p.id = s.process_id ORDER BY "   \
	"s.started_ns, s.id"

/* The same grouped by communicator, operation, where the other ranks were and rule (one hang is
 * a row per rank); the text of the group's first row is read by REPORT_NCCL_STALL_TEXT_SQL. */
#define REPORT_NCCL_STALL_GROUPS_SQL                                                              \
	"SELECT min(s.id) AS first_id, count(*) AS stalls, s.comm_hash, s.kind, s.func, "         \
	"s.op_seq, "                                                                              \
	"s.peer_state, s.rule_id, max(s.nranks) AS nranks, (SELECT group_concat(rank, ',') FROM " \
	"(SELECT o.rank FROM nccl_stalls o WHERE o.comm_hash IS s.comm_hash AND o.kind "          \
	"IS s.kind AND o.func IS s.func AND o.op_seq IS s.op_seq AND o.peer_state IS "            \
	"s.peer_state AND o.rule_id IS s.rule_id ORDER BY o.rank)) AS ranks, "                    \
	"group_concat(p.pid, ', ') AS pids, group_concat(DISTINCT p.hostname) AS hosts, "         \
	"group_concat(s.rank || '->' || s.peer, ', ') AS sends, max(s.bytes) AS bytes, "          \
	"max(s.waited_ns) AS waited_ns, min(s.started_ns) AS started_ns FROM nccl_stalls s JOIN " \
	"processes p ON p.id = s.process_id GROUP BY s.comm_hash, s.kind, s.func, s.op_seq, "     \
	"s.peer_state, s.rule_id ORDER BY min(s.started_ns), min(s.id)"
#define REPORT_NCCL_STALL_TEXT_SQL \
	"SELECT diagnosis, advice, evidence FROM nccl_stalls WHERE id = ?1"

#define REPORT_NCCL_COMMS_SQL                                                                      \
	"SELECT c.comm_hash, c.comm_name, c.nranks, count(*) AS ranks_recorded, count(DISTINCT "   \
	"c.process_id) AS processes, group_concat(c.rank || ':' || coalesce(c.device, '?'), ' ') " \
	"AS rank_devices, max(c.profiler_version) AS profiler_version, max(c.chained) AS "         \
	"chained, sum(c.events_untracked) AS events_untracked FROM nccl_comms c GROUP BY "         \
	"c.comm_hash ORDER BY min(c.started_ns)"

/* What NCCL's GB/s are computed from, said beside them in every form. */
#define REPORT_NCCL_BASIS                                                                         \
	"An operation's GPU time runs from its kernel's first channel's start to its last "       \
	"channel's end (waiting for the peer included); GB/s is its size over that time. A "      \
	"device pair counts a transfer once (from its sender's row, or its receiver's when that " \
	"side recorded more); collectives have a pair only in two-rank communicators (coll): "    \
	"NCCL does not tell the ring or tree order of bigger ones. Untimed operations (no GPU "   \
	"time, or folded into summary buckets or overflow) are counted, never divided."

/* Text: NCCL operations that did not finish, with their diagnosis (said first). */
void p2pg_report_nccl_stalls(struct report *r, FILE *out);
/* Text: NCCL's traffic per device pair, after the copies' table. */
void p2pg_report_nccl_pairs(struct report *r, FILE *out);
/* Text: communicators and operations per function. */
void p2pg_report_nccl(struct report *r, FILE *out);
/* JSON: the member "nccl": {stalls, communicators, operations, pair_bandwidth, pairs}, with its
 * trailing comma. */
void p2pg_report_nccl_json(struct report *r, FILE *out);
/* HTML: the NCCL section (report_nccl_html.c). */
void p2pg_report_nccl_html(struct report *r, FILE *out);

/* "gpu-node-001:0->gpu-node-002:0", "node:0->1" (one host) or "0->1" (one host in all) */
void report_nccl_pair_label(const struct nccl_scan *s, const struct nccl_pair *p, char *buf,
			    size_t len);
