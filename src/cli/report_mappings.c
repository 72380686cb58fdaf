/* SPDX-License-Identifier: MIT */
/*
 * `p2pguard report`'s section on cross-process and VMM mappings: the peer_mappings rows grouped
 * per process, call, event, pair, handle type and status (how many, bytes, how many still live at
 * the end, the call that ended them), and the counts of a process's own mappings of its own
 * device's memory.
 */
#include "report_mappings.h"

#include <stdbool.h>

#include "cleanup.h"
#include "dbread.h"

#define GROUPS_SQL                                                                                \
	"SELECT p.pid, p.rank, m.api, m.event, m.owner_device, m.accessor_device, m.is_peer, "    \
	"m.cross_process, m.handle_type, m.status, count(*) AS calls, sum(m.bytes) AS bytes, "    \
	"sum(m.event IN ('import', 'map', 'access') AND m.status = 0 AND m.ended_ns IS NULL) AS " \
	"live, "                                                                                  \
	"max(m.ended_by) AS ended_by, ROUND(avg((m.ended_ns - m.started_ns) / 1e6), 3) AS "       \
	"lived_ms FROM peer_mappings m JOIN processes p ON p.id = m.process_id GROUP BY "         \
	"m.process_id, m.api, m.event, m.owner_device, m.accessor_device, m.handle_type, "        \
	"m.status ORDER BY min(m.started_ns)"

#define COUNTS_SQL                                                                            \
	"SELECT p.pid, p.rank, c.api, c.device, c.calls, c.bytes FROM mapping_counts c JOIN " \
	"processes p ON p.id = c.process_id ORDER BY p.id, c.api, c.device"

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

static void device_or(sqlite3_stmt *st, int col, char *buf, size_t len, const char *none)
{
	if (sqlite3_column_type(st, col) == SQLITE_NULL)
		snprintf(buf, len, "%s", none);
	else
		snprintf(buf, len, "%d", sqlite3_column_int(st, col));
}

void p2pg_report_mappings(sqlite3 *db, FILE *out)
{
	if (!p2pg_cli_has_table(db, "peer_mappings") || !p2pg_cli_has_table(db, "mapping_counts"))
		return;
	_cleanup_sqlite_stmt_ sqlite3_stmt *sum = NULL, *st = NULL, *counts = NULL;
	if (sqlite3_prepare_v2(db,
			       "SELECT count(*), count(DISTINCT process_id), sum(is_peer = 1), "
			       "sum(cross_process), sum(status != 0), (SELECT sum(calls) FROM "
			       "mapping_counts) FROM peer_mappings",
			       -1, &sum, NULL) != SQLITE_OK ||
	    sqlite3_step(sum) != SQLITE_ROW ||
	    (sqlite3_column_int64(sum, 0) == 0 && sqlite3_column_int64(sum, 5) == 0))
		return;
	fprintf(out,
		"\ncross-process mappings: %lld rows in %d processes (%lld peer, %lld across "
		"processes, %lld failed); %lld own-device calls counted\n",
		sqlite3_column_int64(sum, 0), sqlite3_column_int(sum, 1),
		sqlite3_column_int64(sum, 2), sqlite3_column_int64(sum, 3),
		sqlite3_column_int64(sum, 4), sqlite3_column_int64(sum, 5));
	if (sqlite3_prepare_v2(db, GROUPS_SQL, -1, &st, NULL) == SQLITE_OK)
		while (sqlite3_step(st) == SQLITE_ROW) {
			char owner[16], accessor[16], bytes[32];
			device_or(st, 4, owner, sizeof(owner), "?");
			device_or(st, 5, accessor, sizeof(accessor), "-");
			human_bytes(sqlite3_column_int64(st, 11), bytes, sizeof(bytes));
			fprintf(out, "  pid %d: %s %s %s->%s%s%s %s x%d %s",
				sqlite3_column_int(st, 0), p2pg_cli_col(st, 2), p2pg_cli_col(st, 3),
				owner, accessor, sqlite3_column_int(st, 6) == 1 ? " peer" : "",
				sqlite3_column_int(st, 7) ? " cross-process" : "",
				p2pg_cli_col(st, 8) ? p2pg_cli_col(st, 8) : "",
				sqlite3_column_int(st, 10), bytes);
			if (sqlite3_column_int(st, 9))
				fprintf(out, " FAILED %d", sqlite3_column_int(st, 9));
			if (p2pg_cli_col(st, 13))
				fprintf(out, ", ended by %s (%.3f ms on average)",
					p2pg_cli_col(st, 13), sqlite3_column_double(st, 14));
			if (sqlite3_column_int(st, 12))
				fprintf(out, ", %d live at the end", sqlite3_column_int(st, 12));
			fprintf(out, "\n");
		}
	if (sqlite3_prepare_v2(db, COUNTS_SQL, -1, &counts, NULL) == SQLITE_OK)
		for (int n = 0; sqlite3_step(counts) == SQLITE_ROW; n++) {
			char bytes[32];
			human_bytes(sqlite3_column_int64(counts, 5), bytes, sizeof(bytes));
			fprintf(out, "%s  pid %d: %s device %d x%lld %s\n",
				n ? "" : "  own memory on its own device, counted:\n",
				sqlite3_column_int(counts, 0), p2pg_cli_col(counts, 2),
				sqlite3_column_int(counts, 3), sqlite3_column_int64(counts, 4),
				bytes);
		}
}

static void json_array(sqlite3 *db, FILE *out, const char *sql)
{
	if (p2pg_cli_json_rows(db, out, sql, 6) < 0)
		fputs("[]", out);
}

void p2pg_report_mappings_json(sqlite3 *db, FILE *out)
{
	if (!p2pg_cli_has_table(db, "peer_mappings") || !p2pg_cli_has_table(db, "mapping_counts")) {
		fputs("  \"mappings\": null,\n", out);
		return;
	}
	fputs("  \"mappings\": {\"groups\": ", out);
	json_array(db, out, GROUPS_SQL);
	fputs(",\n    \"counts\": ", out);
	json_array(db, out, COUNTS_SQL);
	fputs("},\n", out);
}
