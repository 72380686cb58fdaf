/* SPDX-License-Identifier: MIT */
/*
 * `p2pguard report`'s section on cross-process and VMM mappings: the mappings per device pair
 * (owner -> accessor, GPUs named across processes and hosts: mapping_scan.c), then the
 * peer_mappings rows grouped per process, call, event, pair, handle type and status (how many,
 * bytes, how many still live at the end, the call that ended them), and the counts of a process's
 * own mappings of its own device's memory; the per-process lists in full with --verbose or when
 * short.
 */
#include "report_mappings.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "dbread.h"

#define MAX_PAIR_LINES	  64 /* pair lines shown without --verbose */
#define SHOWN_PAIR_LINES  16 /* past MAX_PAIR_LINES: those with failures, then live ones */
#define MAX_PROCESS_LINES 32 /* per-process lines shown without --verbose */
#define MAX_WHO		  16 /* a longer list of ranks or pids is counted in its column */

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

#define COUNTS_BY_API_SQL                                                                     \
	"SELECT api, sum(calls), sum(bytes), count(DISTINCT process_id) FROM mapping_counts " \
	"GROUP BY api ORDER BY api"

/* What report --json's pairs are, said once in it. */
#define PAIR_BASIS                                                                                 \
	"owner -> accessor: whose memory -> the GPU given access to it, both GPUs of the host of " \
	"the process that made the mapping; opened: IPC opens and cuMemSetAccess grants (cuMem "   \
	"imports and maps lead to them); closed: their close or unmap was seen; live: still "      \
	"mapped when their process's records end; exported_by: the processes that exported "       \
	"memory of the owner GPU (a handle does not say who made it); failed: every failed "       \
	"mapping call, its owner or accessor null where unknown or none"

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

void report_mapping_pair_label(const struct mapping_scan *s, const struct mapping_pair *p,
			       char *buf, size_t len)
{
	const struct cli_gpu *o = p->owner >= 0 ? &s->gpus.v[p->owner] : NULL,
			     *a = p->accessor >= 0 ? &s->gpus.v[p->accessor] : NULL;
	/* as the rows say it: owner unknown "?", no accessor (an export, import or map) "-" */
	char owner[16] = "?", accessor[16] = "-";
	if (o)
		snprintf(owner, sizeof(owner), "%d", o->index);
	if (a)
		snprintf(accessor, sizeof(accessor), "%d", a->index);
	/* both ends are GPUs of the mapping process's host */
	if (s->gpus.hosts)
		snprintf(buf, len, "%s:%s->%s", p->host ? p->host : "?", owner, accessor);
	else
		snprintf(buf, len, "%s->%s", owner, accessor);
}

/* The ranks or pids of a list, or how many when that is too long for its column. */
/* The ranks or pids of a list, or how many when that is longer than `most` (or always when most
 * is 0): *ret_counted says so. */
static void who_cell(const struct mapping_scan *s, const struct mapping_procs *p, size_t most,
		     char *buf, size_t len, bool *ret_counted)
{
	struct rbuf b = {0};
	mapping_who(s, p, &b);
	if (strlen(rbuf_str(&b)) <= most || p->n == 0) {
		snprintf(buf, len, "%s", rbuf_str(&b));
	} else {
		size_t ranked = 0;
		for (size_t k = 0; k < p->n; k++)
			ranked += s->procs[p->v[k]].rank >= 0;
		snprintf(buf, len, "%zu %s", p->n,
			 ranked == p->n ? (p->n == 1 ? "rank" : "ranks")
			 : p->n == 1	? "process"
					: "processes");
		*ret_counted = true;
	}
	rbuf_free(&b);
}

static const struct mapping_procs no_procs;

static const struct mapping_procs *exporters_of(const struct mapping_scan *s,
						const struct mapping_pair *p)
{
	return p->owner >= 0 ? &s->exporters[p->owner] : &no_procs;
}

/* Pairs past MAX_PAIR_LINES: those with failures first, then the most still live, the most
 * opened. */
static int cmp_attention(const void *a, const void *b)
{
	const struct mapping_pair *x = *(const struct mapping_pair *const *)a,
				  *y = *(const struct mapping_pair *const *)b;
	if (x->c.failed != y->c.failed)
		return x->c.failed > y->c.failed ? -1 : 1;
	if (mapping_live(&x->c) != mapping_live(&y->c))
		return mapping_live(&x->c) > mapping_live(&y->c) ? -1 : 1;
	if (x->c.opened != y->c.opened)
		return x->c.opened > y->c.opened ? -1 : 1;
	return x < y ? -1 : x > y;
}

/* With --verbose, a list that its column only counted (longer than `most`). */
static void full_list(struct report *r, FILE *out, const char *label, const struct mapping_procs *p,
		      size_t most)
{
	struct rbuf b = {0};
	mapping_who(&r->mappings, p, &b);
	if (strlen(rbuf_str(&b)) > most && p->n) {
		int at = fprintf(out, "      %s ", label);
		fmt_wrap(out, rbuf_str(&b), at, 8, r->width);
	}
	rbuf_free(&b);
}

#define PAIR_LINE_FMT "  %-*s %-*s %-*s %6s %6s %5s %9s  %-*s %6s\n"
#define PAIR_FIGURES  43 /* the line's width besides its four columns of text */

static void pairs(struct report *r, FILE *out)
{
	const struct mapping_scan *s = &r->mappings;
	if (s->npairs == 0)
		return;
	const struct mapping_counts *t = &s->total;
	char opened[32], closed[32], live[32], bytes[32], failed[32];
	fmt_count(opened, sizeof(opened), t->opened);
	fmt_count(closed, sizeof(closed), t->closed);
	fmt_count(live, sizeof(live), mapping_live(t));
	fmt_bytes(bytes, sizeof(bytes), (double)t->bytes);
	fmt_count(failed, sizeof(failed), t->failed);
	struct rbuf head = {0};
	rbuf_printf(&head,
		    "per device pair, owner->accessor (whose memory -> the GPU given access; %s "
		    "nvidia-smi's where known, else the process's CUDA ordinal): %s opened "
		    "(IPC opens, cuMemSetAccess grants), %s closed, %s live at the end, %s; %s "
		    "failed call%s ('?': owner unknown, '-': no accessor)",
		    s->gpus.hosts ? "GPUs as host:index, the index" : "GPUs by index,", opened,
		    closed, live, bytes, failed, t->failed == 1 ? "" : "s");
	fputs("  ", out);
	fmt_wrap(out, rbuf_str(&head), 2, 4, r->width);
	rbuf_free(&head);

	bool all = r->opt->verbose || s->npairs <= MAX_PAIR_LINES;
	size_t shown = all ? s->npairs : SHOWN_PAIR_LINES;
	const struct mapping_pair **order = malloc(s->npairs * sizeof(*order));
	if (!order)
		return;
	for (size_t k = 0; k < s->npairs; k++)
		order[k] = &s->pairs[k];
	if (!all)
		sort_n(order, s->npairs, sizeof(*order), cmp_attention);
	/* Lists of ranks as they are, up to MAX_WHO, unless the line is then past the width: then
	 * counted. A label longer than the room the figures leave goes on a line of its own. */
	static const size_t mosts[] = {MAX_WHO, 10, 0};
	size_t most = MAX_WHO;
	int wpair, wby, wexp, whandles;
	for (int pass = 0;; pass++) {
		most = mosts[pass];
		wpair = 4, wby = 2, wexp = 11, whandles = 7;
		for (size_t k = 0; k < shown; k++) {
			char label[224], by[64], exp[64], handles[64];
			bool counted = false;
			report_mapping_pair_label(s, order[k], label, sizeof(label));
			who_cell(s, &order[k]->by, most, by, sizeof(by), &counted);
			who_cell(s, exporters_of(s, order[k]), most, exp, sizeof(exp), &counted);
			mapping_handles_text(order[k]->handles, handles, sizeof(handles));
			wpair = (int)strlen(label) > wpair ? (int)strlen(label) : wpair;
			wby = (int)strlen(by) > wby ? (int)strlen(by) : wby;
			wexp = (int)strlen(exp) > wexp ? (int)strlen(exp) : wexp;
			whandles =
			    (int)strlen(handles) > whandles ? (int)strlen(handles) : whandles;
		}
		if (pass == 2 || wby + wexp + whandles + PAIR_FIGURES + 9 <= r->width)
			break;
	}
	int room = r->width - (wby + wexp + whandles + PAIR_FIGURES);
	if (wpair > (room > 9 ? room : 9))
		wpair = room > 9 ? room : 9;
	fprintf(out, PAIR_LINE_FMT, wpair, "pair", wby, "by", wexp, "exported by", "opened",
		"closed", "live", "bytes", whandles, "handles", "failed");
	bool lists = false;
	for (size_t k = 0; k < shown; k++) {
		const struct mapping_pair *p = order[k];
		char label[224], by[64], exp[64], handles[64];
		report_mapping_pair_label(s, p, label, sizeof(label));
		who_cell(s, &p->by, most, by, sizeof(by), &lists);
		who_cell(s, exporters_of(s, p), most, exp, sizeof(exp), &lists);
		mapping_handles_text(p->handles, handles, sizeof(handles));
		fmt_count(opened, sizeof(opened), p->c.opened);
		fmt_count(closed, sizeof(closed), p->c.closed);
		fmt_count(live, sizeof(live), mapping_live(&p->c));
		fmt_bytes(bytes, sizeof(bytes), (double)p->c.bytes);
		fmt_count(failed, sizeof(failed), p->c.failed);
		if ((int)strlen(label) > wpair) {
			fprintf(out, "  %s\n", label);
			label[0] = '\0';
		}
		fprintf(out, PAIR_LINE_FMT, wpair, label, wby, by, wexp, exp, opened, closed, live,
			bytes, whandles, handles, failed);
		if (r->opt->verbose) {
			/* the lists that were counted, in full */
			full_list(r, out, "by:", &p->by, most);
			full_list(r, out, "exported by:", exporters_of(s, p), most);
		}
	}
	if (!all)
		fprintf(out,
			"  (%d of %zu pair lines, those with failures first, then the most still "
			"live;\n   all of them: --verbose or --json)\n",
			SHOWN_PAIR_LINES, s->npairs);
	else if (lists && !r->opt->verbose)
		fputs("  (lists of ranks or pids counted to fit the line; in full: --verbose or "
		      "--json)\n",
		      out);
	free(order);
}

/* The rows grouped per process, call, event, pair, handle type and status. */
static void groups(struct report *r, FILE *out)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	int64_t n = p2pg_cli_scalar(r->db, "SELECT count(*) FROM (" GROUPS_SQL ")");
	if (n > MAX_PROCESS_LINES && !r->opt->verbose) {
		fprintf(out,
			"  (%lld lines per process, call, pair and status: --verbose or --json)\n",
			(long long)n);
		return;
	}
	if (sqlite3_prepare_v2(r->db, GROUPS_SQL, -1, &st, NULL) != SQLITE_OK)
		return;
	for (int k = 0; sqlite3_step(st) == SQLITE_ROW; k++) {
		if (k == 0)
			fputs("  per process, call, pair and status:\n", out);
		char owner[16], accessor[16], bytes[32];
		device_or(st, 4, owner, sizeof(owner), "?");
		device_or(st, 5, accessor, sizeof(accessor), "-");
		human_bytes(sqlite3_column_int64(st, 11), bytes, sizeof(bytes));
		struct rbuf line = {0};
		rbuf_printf(&line, "pid %d: %s %s %s->%s%s%s %s x%d %s", sqlite3_column_int(st, 0),
			    p2pg_cli_col(st, 2), p2pg_cli_col(st, 3), owner, accessor,
			    sqlite3_column_int(st, 6) == 1 ? " peer" : "",
			    sqlite3_column_int(st, 7) ? " cross-process" : "",
			    p2pg_cli_col(st, 8) ? p2pg_cli_col(st, 8) : "",
			    sqlite3_column_int(st, 10), bytes);
		if (sqlite3_column_int(st, 9))
			rbuf_printf(&line, " FAILED %d", sqlite3_column_int(st, 9));
		if (p2pg_cli_col(st, 13))
			rbuf_printf(&line, ", ended by %s (%.3f ms on average)",
				    p2pg_cli_col(st, 13), sqlite3_column_double(st, 14));
		if (sqlite3_column_int(st, 12))
			rbuf_printf(&line, ", %d live at the end", sqlite3_column_int(st, 12));
		fputs("  ", out);
		fmt_wrap(out, rbuf_str(&line), 2, 4, r->width);
		rbuf_free(&line);
	}
}

/* A process's own mappings of its own device: per process, or per call past a screenful. */
static void counts(struct report *r, FILE *out)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	int64_t n = p2pg_cli_scalar(r->db, "SELECT count(*) FROM mapping_counts");
	if (n > MAX_PROCESS_LINES && !r->opt->verbose) {
		if (sqlite3_prepare_v2(r->db, COUNTS_BY_API_SQL, -1, &st, NULL) != SQLITE_OK)
			return;
		fputs(
		    "  own memory on its own device, counted (per call; per process: --verbose or "
		    "--json):\n",
		    out);
		while (sqlite3_step(st) == SQLITE_ROW) {
			char calls[32], bytes[32];
			fmt_count(calls, sizeof(calls), sqlite3_column_int64(st, 1));
			human_bytes(sqlite3_column_int64(st, 2), bytes, sizeof(bytes));
			fprintf(out, "  %s x%s %s in %d processes\n", p2pg_cli_col(st, 0), calls,
				bytes, sqlite3_column_int(st, 3));
		}
		return;
	}
	if (sqlite3_prepare_v2(r->db, COUNTS_SQL, -1, &st, NULL) != SQLITE_OK)
		return;
	for (int k = 0; sqlite3_step(st) == SQLITE_ROW; k++) {
		char bytes[32];
		human_bytes(sqlite3_column_int64(st, 5), bytes, sizeof(bytes));
		fprintf(out, "%s  pid %d: %s device %d x%lld %s\n",
			k ? "" : "  own memory on its own device, counted:\n",
			sqlite3_column_int(st, 0), p2pg_cli_col(st, 2), sqlite3_column_int(st, 3),
			sqlite3_column_int64(st, 4), bytes);
	}
}

void p2pg_report_mappings(struct report *r, FILE *out)
{
	sqlite3 *db = r->db;
	if (!r->mappings.present || !p2pg_cli_has_table(db, "mapping_counts"))
		return;
	_cleanup_sqlite_stmt_ sqlite3_stmt *sum = NULL;
	if (sqlite3_prepare_v2(db,
			       "SELECT count(*), count(DISTINCT process_id), sum(is_peer = 1), "
			       "sum(cross_process), sum(status != 0), (SELECT sum(calls) FROM "
			       "mapping_counts) FROM peer_mappings",
			       -1, &sum, NULL) != SQLITE_OK ||
	    sqlite3_step(sum) != SQLITE_ROW ||
	    (sqlite3_column_int64(sum, 0) == 0 && sqlite3_column_int64(sum, 5) == 0))
		return;
	char n[6][32];
	for (int k = 0; k < 6; k++)
		fmt_count(n[k], sizeof(n[k]), sqlite3_column_int64(sum, k));
	struct rbuf head = {0};
	rbuf_printf(&head,
		    "cross-process mappings: %s rows in %s processes (%s peer, %s across "
		    "processes, %s failed); %s own-device calls counted",
		    n[0], n[1], n[2], n[3], n[4], n[5]);
	fputc('\n', out);
	fmt_wrap(out, rbuf_str(&head), 0, 2, r->width);
	rbuf_free(&head);
	pairs(r, out);
	groups(r, out);
	counts(r, out);
}

/* ---- JSON ---- */

static void json_array(sqlite3 *db, FILE *out, const char *sql)
{
	if (p2pg_cli_json_rows(db, out, sql, 6) < 0)
		fputs("[]", out);
}

/* "ranks": [...], "pids": [...] of a list of processes, under the names given. */
static void json_who(FILE *out, const struct mapping_scan *s, const struct mapping_procs *p,
		     const char *ranks, const char *pids)
{
	fprintf(out, ", \"%s\": [", ranks);
	for (size_t k = 0, n = 0; k < p->n; k++)
		if (s->procs[p->v[k]].rank >= 0)
			fprintf(out, "%s%d", n++ ? ", " : "", s->procs[p->v[k]].rank);
	fprintf(out, "], \"%s\": [", pids);
	for (size_t k = 0; k < p->n; k++)
		fprintf(out, "%s%d", k ? ", " : "", s->procs[p->v[k]].pid);
	fputs("]", out);
}

static void json_pairs(const struct mapping_scan *s, FILE *out)
{
	fputs("[", out);
	for (size_t k = 0; k < s->npairs; k++) {
		const struct mapping_pair *p = &s->pairs[k];
		fputs(k ? ",\n      {\"host\": " : "\n      {\"host\": ", out);
		p2pg_cli_json_string(out, p->host);
		fputs(", ", out);
		cli_gpus_json(out, &s->gpus, p->owner, "owner");
		fputs(", ", out);
		cli_gpus_json(out, &s->gpus, p->accessor, "accessor");
		fprintf(out, ", \"processes\": %zu", p->by.n);
		json_who(out, s, &p->by, "ranks", "pids");
		json_who(out, s, exporters_of(s, p), "exported_by_ranks", "exported_by_pids");
		fprintf(out,
			", \"opened\": %lld, \"closed\": %lld, \"live\": %lld, \"bytes\": %lld, "
			"\"cross_process\": %lld, \"failed\": %lld, \"handle_types\": [",
			(long long)p->c.opened, (long long)p->c.closed,
			(long long)mapping_live(&p->c), (long long)p->c.bytes,
			(long long)p->c.cross_process, (long long)p->c.failed);
		for (unsigned bit = 1, n = 0; bit <= MAPPING_HANDLE_NONE; bit <<= 1)
			if (p->handles & bit)
				fprintf(out, "%s\"%s\"", n++ ? ", " : "", mapping_handle_name(bit));
		fputs("], \"avg_lived_ms\": ", out);
		if (p->c.closed)
			fprintf(out, "%.3f",
				round((double)p->c.lived_ns / (double)p->c.closed / 1e3) / 1e3);
		else
			fputs("null", out);
		fprintf(out, ", \"first_ns\": %lld}", (long long)p->first_ns);
	}
	fputs("]", out);
}

void p2pg_report_mappings_json(struct report *r, FILE *out)
{
	sqlite3 *db = r->db;
	if (!r->mappings.present || !p2pg_cli_has_table(db, "mapping_counts")) {
		fputs("  \"mappings\": null,\n", out);
		return;
	}
	fputs("  \"mappings\": {\"groups\": ", out);
	json_array(db, out, GROUPS_SQL);
	fputs(",\n    \"counts\": ", out);
	json_array(db, out, COUNTS_SQL);
	fputs(",\n    \"pair_basis\": ", out);
	p2pg_cli_json_string(out, PAIR_BASIS);
	fputs(",\n    \"pairs\": ", out);
	json_pairs(&r->mappings, out);
	fputs("},\n", out);
}
