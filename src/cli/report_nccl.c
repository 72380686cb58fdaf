/* SPDX-License-Identifier: MIT */
/* NCCL's part of `p2pguard report`: its stalled operations first, then its communicators,
 * operations and device pairs (report_nccl.h). */
#include "report_nccl.h"

#include <stdio.h>
#include <string.h>

#include "cleanup.h"
#include "dbread.h"

#define STALLS_SQL                                                                            \
	"SELECT p.pid, p.hostname, s.rank, s.nranks, s.comm_hash, s.kind, s.func, s.op_seq, " \
	"s.peer, "                                                                            \
	"s.bytes, s.waited_ns, s.peer_state, s.rule_id, s.diagnosis, s.advice, s.evidence, "  \
	"s.started_ns FROM nccl_stalls s JOIN processes p ON p.id = s.process_id ORDER BY "   \
	"s.started_ns, s.id"

#define COMMS_SQL                                                                                  \
	"SELECT c.comm_hash, c.comm_name, c.nranks, count(*) AS ranks_recorded, count(DISTINCT "   \
	"c.process_id) AS processes, group_concat(c.rank || ':' || coalesce(c.device, '?'), ' ') " \
	"AS rank_devices, max(c.profiler_version) AS profiler_version, max(c.chained) AS "         \
	"chained, sum(c.events_untracked) AS events_untracked FROM nccl_comms c GROUP BY "         \
	"c.comm_hash ORDER BY min(c.started_ns)"

/* Every finished operation once (nccl_totals), per communicator and function; GPU GB/s over the
 * GPU-timed rows. */
#define OPS_SQL                                                                                   \
	"WITH rates AS (SELECT c.comm_hash, o.func, sum(o.bytes) * 1.0 / sum(o.gpu_ns) AS gbps "  \
	"FROM nccl_ops o JOIN nccl_comms c USING (process_id, comm_serial) WHERE o.state = "      \
	"'done' AND o.gpu_ns > 0 GROUP BY 1, 2), states AS (SELECT c.comm_hash, o.func, "         \
	"sum(o.state = 'running') AS running, sum(o.state = 'unreported') AS unreported FROM "    \
	"nccl_ops o JOIN nccl_comms c USING (process_id, comm_serial) GROUP BY 1, 2) "            \
	"SELECT t.comm_hash, t.kind, t.func, sum(t.ops) AS ops, sum(t.bytes) AS bytes, "          \
	"sum(t.gpu_timed) AS gpu_timed, round(r.gbps, 3) AS gpu_gbps, sum(t.folded) AS folded, "  \
	"coalesce(s.running, 0) AS running, coalesce(s.unreported, 0) AS unreported FROM "        \
	"nccl_totals t LEFT JOIN rates r ON r.comm_hash IS t.comm_hash AND r.func = t.func LEFT " \
	"JOIN states s ON s.comm_hash IS t.comm_hash AND s.func = t.func GROUP BY t.comm_hash, "  \
	"t.kind, t.func ORDER BY t.comm_hash, t.func"

#define PAIRS_SQL                                                                      \
	"SELECT comm_hash, kind, src_rank, src_host, src_device, dst_rank, dst_host, " \
	"dst_device, sends, recvs, bytes, gpu_gbps FROM nccl_pair_traffic ORDER BY 1, 2, 3, 6"

static const char *text_or(sqlite3_stmt *st, int col, const char *fallback)
{
	const unsigned char *t = sqlite3_column_text(st, col);
	return t ? (const char *)t : fallback;
}

static void human_bytes(long long bytes, char *buf, size_t len)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	double v = (double)bytes;
	int u = 0;
	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", v, units[u]);
}

static void first_line(const char *text, char *buf, size_t max)
{
	size_t n = strcspn(text, "\n");
	if (n >= max)
		n = max - 1;
	memcpy(buf, text, n);
	buf[n] = '\0';
}

static bool has_nccl(sqlite3 *db)
{
	return p2pg_cli_has_table(db, "nccl_comms") && p2pg_cli_has_table(db, "nccl_stalls");
}

void p2pg_report_nccl_stalls(sqlite3 *db, FILE *out, bool brief)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (!has_nccl(db) || sqlite3_prepare_v2(db, STALLS_SQL, -1, &st, NULL) != SQLITE_OK)
		return;
	int n = 0;
	while (sqlite3_step(st) == SQLITE_ROW) {
		if (n++ == 0)
			fprintf(out, "\nNCCL operations that did not finish\n");
		char bytes[32] = "? B", line[200];
		if (sqlite3_column_type(st, 9) != SQLITE_NULL)
			human_bytes(sqlite3_column_int64(st, 9), bytes, sizeof(bytes));
		fprintf(out, "  pid %d rank %s/%s comm %s: %s", sqlite3_column_int(st, 0),
			text_or(st, 2, "?"), text_or(st, 3, "?"), text_or(st, 4, "?"),
			text_or(st, 6, "?"));
		if (strcmp(text_or(st, 5, ""), "p2p") == 0)
			fprintf(out, " with rank %s", text_or(st, 8, "?"));
		else
			fprintf(out, " #%lld", sqlite3_column_int64(st, 7));
		fprintf(out, ", %s, its kernel running %.1f s; the other ranks: %s\n", bytes,
			(double)sqlite3_column_int64(st, 10) / 1e9, text_or(st, 11, "unknown"));
		if (sqlite3_column_type(st, 12) != SQLITE_NULL)
			fprintf(out, "     rule:  %s\n", text_or(st, 12, ""));
		first_line(text_or(st, 13, ""), line, sizeof(line));
		if (*line)
			fprintf(out, "     why:   %s\n", line);
		if (!brief && sqlite3_column_type(st, 14) != SQLITE_NULL) {
			first_line(text_or(st, 14, ""), line, sizeof(line));
			fprintf(out, "     do:    %s\n", line);
		}
	}
}

void p2pg_report_nccl(sqlite3 *db, FILE *out)
{
	if (!has_nccl(db))
		return;
	_cleanup_sqlite_stmt_ sqlite3_stmt *comms = NULL, *ops = NULL, *pairs = NULL;
	if (sqlite3_prepare_v2(db, COMMS_SQL, -1, &comms, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, OPS_SQL, -1, &ops, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, PAIRS_SQL, -1, &pairs, NULL) != SQLITE_OK)
		return;
	int n = 0;
	while (sqlite3_step(comms) == SQLITE_ROW) {
		if (n++ == 0)
			fprintf(out, "\nNCCL (its profiler plugin interface)\n");
		fprintf(out, "  comm %s: %s of %s ranks recorded (rank:device %s), profiler v%s",
			text_or(comms, 0, "?"), text_or(comms, 3, "?"), text_or(comms, 2, "?"),
			text_or(comms, 5, "?"), text_or(comms, 6, "?"));
		if (sqlite3_column_type(comms, 7) != SQLITE_NULL)
			fprintf(out, ", fed to %s", text_or(comms, 7, ""));
		if (sqlite3_column_int64(comms, 8) > 0)
			fprintf(out, ", %lld events not recorded (slots full)",
				sqlite3_column_int64(comms, 8));
		fprintf(out, "\n");
	}
	if (n == 0)
		return;
	bool header = false;
	while (sqlite3_step(ops) == SQLITE_ROW) {
		if (!header) {
			fprintf(out, "  %-16s %-14s %-4s %8s %12s %9s %9s\n", "comm", "operation",
				"kind", "ops", "bytes", "GPU-timed", "GPU GB/s");
			header = true;
		}
		char bytes[32];
		human_bytes(sqlite3_column_int64(ops, 4), bytes, sizeof(bytes));
		fprintf(out, "  %-16s %-14s %-4s %8lld %12s %9lld %9s", text_or(ops, 0, "?"),
			text_or(ops, 2, "?"), text_or(ops, 1, "?"), sqlite3_column_int64(ops, 3),
			bytes, sqlite3_column_int64(ops, 5), text_or(ops, 6, "-"));
		if (sqlite3_column_int64(ops, 8) > 0)
			fprintf(out, "  %lld still running", sqlite3_column_int64(ops, 8));
		if (sqlite3_column_int64(ops, 9) > 0)
			fprintf(out, "  %lld unreported", sqlite3_column_int64(ops, 9));
		if (sqlite3_column_int64(ops, 7) > 0)
			fprintf(out, "  %lld folded (rings full)", sqlite3_column_int64(ops, 7));
		fprintf(out, "\n");
	}
	header = false;
	while (sqlite3_step(pairs) == SQLITE_ROW) {
		if (!header) {
			fprintf(out, "  device pairs (nccl_pair_traffic)\n");
			header = true;
		}
		char bytes[32];
		human_bytes(sqlite3_column_int64(pairs, 10), bytes, sizeof(bytes));
		fprintf(out, "    comm %s %s rank %s (%s device %s) -> rank %s (%s device %s): %s",
			text_or(pairs, 0, "?"), text_or(pairs, 1, "?"), text_or(pairs, 2, "?"),
			text_or(pairs, 3, "?"), text_or(pairs, 4, "?"), text_or(pairs, 5, "?"),
			text_or(pairs, 6, "?"), text_or(pairs, 7, "?"), bytes);
		if (sqlite3_column_type(pairs, 11) != SQLITE_NULL)
			fprintf(out, ", %s GB/s on the GPU", text_or(pairs, 11, ""));
		fprintf(out, "\n");
	}
}

static void json_array(sqlite3 *db, FILE *out, const char *key, const char *sql, bool last)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	fprintf(out, "    \"%s\": [", key);
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
		for (int n = 0; sqlite3_step(st) == SQLITE_ROW; n++) {
			fputs(n ? ",\n      {" : "\n      {", out);
			for (int c = 0; c < sqlite3_column_count(st); c++) {
				if (c)
					fputs(", ", out);
				p2pg_cli_json_string(out, sqlite3_column_name(st, c));
				fputs(": ", out);
				switch (sqlite3_column_type(st, c)) {
				case SQLITE_INTEGER:
					fprintf(out, "%lld", sqlite3_column_int64(st, c));
					break;
				case SQLITE_FLOAT:
					fprintf(out, "%.17g", sqlite3_column_double(st, c));
					break;
				case SQLITE_NULL:
					fputs("null", out);
					break;
				default:
					p2pg_cli_json_string(out, p2pg_cli_col(st, c));
				}
			}
			fputs("}", out);
		}
	}
	fprintf(out, "]%s\n", last ? "" : ",");
}

void p2pg_report_nccl_json(sqlite3 *db, FILE *out)
{
	if (!has_nccl(db)) {
		fputs("  \"nccl\": null,\n", out);
		return;
	}
	fputs("  \"nccl\": {\n", out);
	json_array(db, out, "stalls", STALLS_SQL, false);
	json_array(db, out, "communicators", COMMS_SQL, false);
	json_array(db, out, "operations", OPS_SQL, false);
	json_array(db, out, "pairs", PAIRS_SQL, true);
	fputs("  },\n", out);
}
