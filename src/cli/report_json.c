/* SPDX-License-Identifier: MIT */
/*
 * report --json: the text report's facts as one JSON object, lists in full (no --verbose needed),
 * each figure beside what it is computed from.
 */
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "dbread.h"
#include "report.h"
#include "report_mappings.h"
#include "report_nccl.h"

#define BANDWIDTH_BASIS                                                                       \
	"successful copies with a GPU time: asynchronous (gpu_timed) and synchronous "        \
	"(synchronous: a synchronous call between devices returns before its copy ends, so "  \
	"it is GPU-timed like an asynchronous one); copies without a GPU time (untimed) are " \
	"counted, never divided"

static void key(FILE *out, const char *k, bool *first)
{
	fputs(*first ? "" : ", ", out);
	*first = false;
	p2pg_cli_json_string(out, k);
	fputs(": ", out);
}

static void j_int(FILE *out, const char *k, long long v, bool *first)
{
	key(out, k, first);
	fprintf(out, "%lld", v);
}

static void j_str(FILE *out, const char *k, const char *v, bool *first)
{
	key(out, k, first);
	p2pg_cli_json_string(out, v);
}

static void j_num(FILE *out, const char *k, double v, bool *first)
{
	key(out, k, first);
	if (isnan(v) || isinf(v))
		fputs("null", out);
	else
		fprintf(out, "%.17g", v);
}

static void j_counts(FILE *out, const struct report_counts *c, bool *first)
{
	j_int(out, "calls", c->calls, first);
	j_int(out, "bytes", c->bytes, first);
	j_int(out, "failed", c->failed, first);
	j_int(out, "folded", c->folded, first);
	j_int(out, "gpu_timed", c->gpu_timed, first);
	j_int(out, "synchronous", c->synchronous, first);
	j_int(out, "untimed", report_untimed(c), first);
}

/* Each row of sql as an object keyed by column name, in an array; null when sql cannot be read. */
static void json_rows(sqlite3 *db, FILE *out, const char *sql)
{
	if (p2pg_cli_json_rows(db, out, sql, 4) < 0)
		fputs("null", out);
}

static void j_pairs(FILE *out, const char *k, const char *text, bool *first)
{
	struct dev_pair *pairs = NULL;
	size_t n = report_parse_pairs(text, &pairs);
	key(out, k, first);
	fputs("[", out);
	for (size_t j = 0; j < n; j++)
		fprintf(out, "%s[%d, %d]", j ? ", " : "", pairs[j].src, pairs[j].dst);
	fputs("]", out);
	struct rbuf t = {0};
	fmt_pairs(&t, pairs, n);
	char name[64];
	snprintf(name, sizeof(name), "%s_text", k);
	j_str(out, name, rbuf_str(&t), first);
	rbuf_free(&t);
	free(pairs);
}

static void j_ints(FILE *out, const char *k, int *v, size_t n, bool *first)
{
	key(out, k, first);
	fputs("[", out);
	for (size_t j = 0; j < n; j++)
		fprintf(out, "%s%d", j ? ", " : "", v[j]);
	fputs("]", out);
	struct rbuf t = {0};
	fmt_ranges(&t, v, n);
	char name[64];
	snprintf(name, sizeof(name), "%s_text", k);
	j_str(out, name, rbuf_str(&t), first);
	rbuf_free(&t);
}

static void j_hosts(FILE *out, const char *k, char **v, size_t n, bool *first)
{
	key(out, k, first);
	fputs("[", out);
	for (size_t j = 0; j < n; j++) {
		fputs(j ? ", " : "", out);
		p2pg_cli_json_string(out, v[j]);
	}
	fputs("]", out);
	struct rbuf t = {0};
	fmt_hosts(&t, v, n, (size_t)-1);
	char name[64];
	snprintf(name, sizeof(name), "%s_text", k);
	j_str(out, name, rbuf_str(&t), first);
	rbuf_free(&t);
}

static void summary(struct report *r, FILE *out)
{
	const struct report_scan *s = &r->scan;
	long long idle = 0, dropped = 0, invalid = 0, recovered = 0, nccl = 0;
	int *ranks = malloc((s->nprocs ? s->nprocs : 1) * sizeof(int));
	char **hosts = malloc((s->nprocs ? s->nprocs : 1) * sizeof(char *));
	size_t nranks = 0, nhosts = 0;
	for (size_t k = 0; k < s->nprocs; k++) {
		idle += !s->procs[k].peer_calls;
		nccl += nccl_scan_has_process(&r->nccl, s->procs[k].id);
		dropped += s->procs[k].dropped;
		invalid += s->procs[k].invalid;
		recovered += s->procs[k].recovered;
		if (ranks && s->procs[k].rank >= 0)
			ranks[nranks++] = s->procs[k].rank;
		if (hosts && s->procs[k].host)
			hosts[nhosts++] = s->procs[k].host;
	}
	bool f = true;
	fputs("  \"summary\": {", out);
	j_int(out, "processes_guarded", (long long)s->nprocs, &f);
	j_int(out, "processes_without_peer_calls", idle, &f);
	j_int(out, "processes_with_nccl", nccl, &f);
	j_int(out, "processes_recovered", recovered, &f);
	j_int(out, "records_dropped", dropped, &f);
	j_int(out, "records_invalid", invalid, &f);
	if (ranks && hosts) {
		j_ints(out, "ranks", ranks, nranks, &f);
		/* distinct hosts */
		struct rbuf t = {0};
		fmt_hosts(&t, hosts, nhosts, (size_t)-1);
		size_t distinct = 0;
		for (size_t k = 0; k < nhosts; k++)
			distinct += k == 0 || strcmp(hosts[k], hosts[k - 1]) != 0;
		j_int(out, "hosts", (long long)distinct, &f);
		j_str(out, "hosts_text", rbuf_str(&t), &f);
		rbuf_free(&t);
	}
	free(ranks);
	free(hosts);
	j_int(out, "transfers", p2pg_cli_scalar(r->db, "SELECT count(*) FROM transfers"), &f);
	key(out, "transfer_calls", &f);
	fputs("{", out);
	bool g = true;
	j_counts(out, &s->total, &g);
	fputs("}", out);
	j_str(out, "bandwidth_basis", BANDWIDTH_BASIS, &f);
	j_str(out, "folded_means",
	      "calls that found their thread's ring full: counted in transfer_overflow (calls, "
	      "bytes), no row, no time",
	      &f);
	j_int(out, "failures", p2pg_cli_scalar(r->db, "SELECT count(*) FROM failures"), &f);
	j_int(out, "crashes", p2pg_cli_scalar(r->db, "SELECT count(*) FROM crashes"), &f);
	j_int(out, "stalls",
	      r->has_stalls ? p2pg_cli_scalar(r->db, "SELECT count(*) FROM stalls") : 0, &f);
	fputs("},\n", out);
}

static void transfers(struct report *r, FILE *out)
{
	const struct report_scan *s = &r->scan;
	fputs("  \"transfers\": [", out);
	for (size_t k = 0; k < s->nlines; k++) {
		const struct report_line *l = &s->lines[k];
		bool f = true;
		fputs(k ? ",\n    {" : "\n    {", out);
		j_int(out, "src_device", l->src, &f);
		j_int(out, "dst_device", l->dst, &f);
		j_str(out, "path", report_path_names[l->path], &f);
		j_str(out, "api", l->api, &f);
		j_counts(out, &l->c, &f);
		fputs("}", out);
	}
	fputs("],\n  \"bandwidth\": [", out);
	for (size_t k = 0; k < s->nbw; k++) {
		const struct report_bw *b = &s->bw[k];
		bool f = true;
		fputs(k ? ",\n    {" : "\n    {", out);
		j_int(out, "src_device", b->src, &f);
		j_int(out, "dst_device", b->dst, &f);
		j_str(out, "path", report_path_names[b->path], &f);
		j_int(out, "count", (long long)b->n, &f);
		j_int(out, "bytes", b->timed_bytes, &f);
		j_num(out, "p50_gbps", report_percentile(b->gbps, b->n, 0.5), &f);
		j_num(out, "p99_gbps", report_percentile(b->gbps, b->n, 0.99), &f);
		j_num(out, "min_gbps", b->n ? b->gbps[0] : NAN, &f);
		j_num(out, "max_gbps", b->n ? b->gbps[b->n - 1] : NAN, &f);
		j_counts(out, &b->c, &f);
		fputs("}", out);
	}
	fputs("],\n", out);
}

static void processes(struct report *r, FILE *out)
{
	const struct report_scan *s = &r->scan;
	fputs("  \"processes\": [", out);
	for (size_t k = 0; k < s->nprocs; k++) {
		const struct report_process *p = &s->procs[k];
		bool f = true;
		fputs(k ? ",\n    {" : "\n    {", out);
		j_int(out, "id", p->id, &f);
		j_int(out, "pid", p->pid, &f);
		j_str(out, "hostname", p->host, &f);
		key(out, "rank", &f);
		p->rank >= 0 ? fprintf(out, "%d", p->rank) : fputs("null", out);
		key(out, "local_rank", &f);
		p->local_rank >= 0 ? fprintf(out, "%d", p->local_rank) : fputs("null", out);
		j_str(out, "cmdline", p->cmdline, &f);
		j_str(out, "mode", p->mode, &f);
		j_str(out, "run_id", p->run_id, &f);
		j_int(out, "started_ns", p->started_ns, &f);
		j_int(out, "records_dropped", p->dropped, &f);
		j_int(out, "records_invalid", p->invalid, &f);
		j_int(out, "recovered", p->recovered, &f);
		j_int(out, "peer_calls", p->peer_calls, &f);
		j_counts(out, &p->c, &f);
		double v = NAN;
		if (p->n) {
			size_t at = (size_t)(0.5 * (double)p->n + 0.5);
			v = round((double)p->gbps[(at ? at : 1) - 1] * 1000) / 1000;
		}
		j_num(out, "p50_gbps", v, &f);
		fputs("}", out);
	}
	fputs("],\n", out);
}

static void failures(struct report *r, FILE *out)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL, *detail = NULL, *places = NULL;
	fputs("  \"failures\": [", out);
	if (sqlite3_prepare_v2(r->db, REPORT_FAILURE_GROUPS_SQL, -1, &st, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(r->db, REPORT_FAILURE_DETAIL_SQL, -1, &detail, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(r->db, REPORT_FAILURE_WHERE_SQL, -1, &places, NULL) != SQLITE_OK) {
		fputs("],\n", out);
		return;
	}
	for (int n = 0; sqlite3_step(st) == SQLITE_ROW; n++) {
		bool f = true;
		fputs(n ? ",\n    {" : "\n    {", out);
		j_int(out, "group", n + 1, &f);
		for (int c = 0; c <= 10; c++) {
			key(out, sqlite3_column_name(st, c), &f);
			if (sqlite3_column_type(st, c) == SQLITE_INTEGER)
				fprintf(out, "%lld", sqlite3_column_int64(st, c));
			else
				p2pg_cli_json_string(out, p2pg_cli_col(st, c));
		}
		j_pairs(out, "pairs", p2pg_cli_col(st, 11), &f);
		int *ranks = NULL;
		size_t nr = report_parse_ints(p2pg_cli_col(st, 12), &ranks);
		j_ints(out, "ranks", ranks, nr, &f);
		free(ranks);
		char **hosts = NULL;
		size_t nh = report_parse_strings(p2pg_cli_col(st, 13), &hosts);
		j_hosts(out, "hosts", hosts, nh, &f);
		report_free_strings(hosts, nh);
		sqlite3_reset(detail);
		sqlite3_bind_int64(detail, 1, sqlite3_column_int64(st, 0));
		if (sqlite3_step(detail) == SQLITE_ROW) {
			static const char *const names[] = {"diagnosis",    "advice",	   "args",
							    "python_stack", "backtrace",   "device",
							    "peer_device",  "error_string"};
			for (int c = 0; c < 8; c++) {
				key(out, names[c], &f);
				if (sqlite3_column_type(detail, c) == SQLITE_INTEGER)
					fprintf(out, "%lld", sqlite3_column_int64(detail, c));
				else
					p2pg_cli_json_string(out, p2pg_cli_col(detail, c));
			}
		}
		report_bind_failure_places(places, st);
		key(out, "places", &f);
		fputs("[", out);
		for (int p = 0; sqlite3_step(places) == SQLITE_ROW; p++) {
			fputs(p ? ", {\"where\": " : "{\"where\": ", out);
			p2pg_cli_json_string(out, p2pg_cli_col(places, 0));
			fprintf(out, ", \"count\": %d}", sqlite3_column_int(places, 1));
		}
		fputs("]}", out);
	}
	fputs("],\n", out);
}

static void crash_groups(struct report *r, FILE *out)
{
	size_t n = 0;
	struct crash_group *g = report_crash_groups(r, &n);
	fputs("  \"crash_groups\": [", out);
	for (size_t k = 0; k < n; k++) {
		bool f = true;
		fputs(k ? ",\n    {" : "\n    {", out);
		j_int(out, "group", (long long)k + 1, &f);
		j_int(out, "signal", g[k].signal, &f);
		j_str(out, "signal_name", strsignal(g[k].signal), &f);
		j_str(out, "top_frames", g[k].key, &f);
		j_int(out, "count", g[k].count, &f);
		j_int(out, "processes", g[k].processes, &f);
		j_ints(out, "ranks", g[k].ranks, g[k].nranks, &f);
		j_hosts(out, "hosts", g[k].hosts, g[k].nhosts, &f);
		j_int(out, "first_ns", g[k].first_ns, &f);
		j_int(out, "last_ns", g[k].last_ns, &f);
		j_str(out, "python_stack", g[k].python, &f);
		j_str(out, "backtrace", g[k].backtrace, &f);
		fputs("}", out);
	}
	fputs("],\n", out);
	report_crash_groups_free(g, n);
}

int report_json(struct report *r, FILE *out)
{
	fputs("{\n  \"database\": ", out);
	p2pg_cli_json_string(out, r->opt->db_path);
	fputs(",\n  \"selection\": ", out);
	p2pg_cli_json_string(out, r->selection[0] ? r->selection : NULL);
	fputs(",\n", out);
	summary(r, out);
	p2pg_report_nccl_json(r, out);
	p2pg_report_mappings_json(r, out);
	processes(r, out);
	transfers(r, out);
	fputs("  \"peer_access\": ", out);
	json_rows(r->db, out, REPORT_PEER_ACCESS_SQL);
	fputs(",\n", out);
	failures(r, out);
	crash_groups(r, out);
	fputs("  \"crashes\": ", out);
	json_rows(r->db, out,
		  "SELECT p.pid, p.hostname, p.rank, c.* FROM crashes c JOIN processes p ON p.id = "
		  "c.process_id ORDER BY c.started_ns, c.id");
	fputs(",\n  \"devices\": ", out);
	if (r->has_devices)
		json_rows(r->db, out,
			  "SELECT p.hostname, d.* FROM devices d JOIN processes p ON p.id = "
			  "d.process_id ORDER BY d.process_id, d.ordinal");
	else
		fputs("null", out);
	fputs(",\n  \"stalls\": ", out);
	if (r->has_stalls)
		json_rows(r->db, out,
			  "SELECT p.pid, p.hostname, p.rank, s.* FROM stalls s JOIN processes p ON "
			  "p.id = s.process_id ORDER BY s.rowid");
	else
		fputs("null", out);
	fputs("\n}\n", out);
	progress_end(&r->progress);
	return ferror(out) ? 2 : 0;
}
