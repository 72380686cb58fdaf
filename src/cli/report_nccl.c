/* SPDX-License-Identifier: MIT */
/* NCCL's part of `p2pguard report`: its stalled operations first, its traffic per device pair
 * after the copies', then its communicators and operations (report_nccl.h). */
#include "report_nccl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "dbread.h"

#define MAX_PAIR_LINES 64 /* pair lines shown without --verbose */
#define MAX_COMMS      8  /* communicators named one a line without --verbose */

/* The text report's table of pairs (report_text.c) said once what these pairs are. */
#define PAIR_LINE_FMT "  %-*s %-4s %9s %10s %9s %9s %8s %8s\n"
#define PAIR_FIGURES  65 /* the line's width besides the pair's label */

static const char *text_or(sqlite3_stmt *st, int col, const char *fallback)
{
	const unsigned char *t = sqlite3_column_text(st, col);
	return t ? (const char *)t : fallback;
}

static const char *plural(long long n, const char *one, const char *many)
{
	return n == 1 ? one : many;
}

static bool has_stalls(sqlite3 *db)
{
	return p2pg_cli_has_table(db, "nccl_comms") && p2pg_cli_has_table(db, "nccl_stalls");
}

static void labelled(FILE *out, struct report *r, const char *label, const char *text)
{
	if (!text || !*text)
		return;
	fprintf(out, "     %-6s ", label);
	fmt_wrap(out, text, 12, 12, r->width);
}

void p2pg_report_nccl_stalls(struct report *r, FILE *out)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL, *text = NULL;
	if (!has_stalls(r->db) ||
	    sqlite3_prepare_v2(r->db, REPORT_NCCL_STALL_GROUPS_SQL, -1, &st, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(r->db, REPORT_NCCL_STALL_TEXT_SQL, -1, &text, NULL) != SQLITE_OK)
		return;
	int n = 0;
	while (sqlite3_step(st) == SQLITE_ROW) {
		if (n++ == 0)
			fprintf(out, "\nNCCL operations that did not finish\n");
		int stalls = sqlite3_column_int(st, 1);
		char bytes[32] = "? B";
		if (sqlite3_column_type(st, 13) != SQLITE_NULL)
			fmt_bytes(bytes, sizeof(bytes), (double)sqlite3_column_int64(st, 13));
		struct rbuf head = {0};
		rbuf_printf(&head, "comm %s: %s", text_or(st, 2, "?"), text_or(st, 4, "?"));
		if (strcmp(text_or(st, 3, ""), "p2p") == 0)
			rbuf_printf(&head, " (rank->peer %s)", text_or(st, 12, "?"));
		else
			rbuf_printf(&head, " #%lld", sqlite3_column_int64(st, 5));
		rbuf_printf(
		    &head,
		    ", %s: %s %s of %s stuck in it, %s running up to %.1f s; the other ranks: "
		    "%s",
		    bytes, plural(stalls, "rank", "ranks"), text_or(st, 9, "?"),
		    text_or(st, 8, "?"), plural(stalls, "its kernel", "their kernels"),
		    (double)sqlite3_column_int64(st, 14) / 1e9, text_or(st, 6, "unknown"));
		fmt_numbered(out, n, rbuf_str(&head), r->width);
		rbuf_free(&head);
		struct rbuf on = {0};
		if (r->opt->verbose)
			rbuf_printf(&on, "%s %s on %s", plural(stalls, "pid", "pids"),
				    text_or(st, 10, "?"), text_or(st, 11, "?"));
		else
			rbuf_printf(&on, "%s (%d %s; their pids: --verbose)", text_or(st, 11, "?"),
				    stalls, plural(stalls, "process", "processes"));
		labelled(out, r, "on:", rbuf_str(&on));
		rbuf_free(&on);
		labelled(out, r, "rule:", p2pg_cli_col(st, 7));
		sqlite3_reset(text);
		sqlite3_bind_int64(text, 1, sqlite3_column_int64(st, 0));
		if (sqlite3_step(text) == SQLITE_ROW) {
			labelled(out, r, "why:", p2pg_cli_col(text, 0));
			if (!r->opt->brief)
				labelled(out, r, "do:", p2pg_cli_col(text, 1));
		}
	}
}

void report_nccl_pair_label(const struct nccl_scan *s, const struct nccl_pair *p, char *buf,
			    size_t len)
{
	const struct cli_gpu *a = p->src >= 0 ? &s->gpus.v[p->src] : NULL,
			     *b = p->dst >= 0 ? &s->gpus.v[p->dst] : NULL;
	char src[96] = "?", dst[96] = "?";
	if (a)
		snprintf(src, sizeof(src), s->gpus.hosts ? "%s:%d" : "%.0s%d",
			 a->host ? a->host : "?", a->index);
	if (b) {
		bool host =
		    s->gpus.hosts && !(a && a->host && b->host && strcmp(a->host, b->host) == 0);
		snprintf(dst, sizeof(dst), host ? "%s:%d" : "%.0s%d", b->host ? b->host : "?",
			 b->index);
	}
	snprintf(buf, len, "%s->%s", src, dst);
}

static void gbps_text(char *buf, size_t len, double v)
{
	if (isnan(v))
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%.3g", v);
}

/* A label longer than width (hosts' long names) goes on a line of its own, the figures below. */
static void pair_line(FILE *out, const struct nccl_scan *s, const struct nccl_pair *p, int width)
{
	char pair[224], ops[32], bytes[32], timed[32], untimed[32], p50[16], p99[16];
	report_nccl_pair_label(s, p, pair, sizeof(pair));
	fmt_count(ops, sizeof(ops), nccl_pair_ops(p));
	fmt_bytes(bytes, sizeof(bytes), (double)nccl_pair_bytes(p));
	fmt_count(timed, sizeof(timed), p->timed[p->side]);
	fmt_count(untimed, sizeof(untimed), nccl_pair_untimed(p));
	gbps_text(p50, sizeof(p50), nccl_pair_percentile(p, 0.5));
	gbps_text(p99, sizeof(p99), nccl_pair_percentile(p, 0.99));
	if ((int)strlen(pair) > width) {
		fprintf(out, "  %s\n", pair);
		pair[0] = '\0';
	}
	fprintf(out, PAIR_LINE_FMT, width, pair, p->coll ? "coll" : "p2p", ops, bytes, timed,
		untimed, p50, p99);
}

static int cmp_p50(const void *a, const void *b)
{
	const struct nccl_pair *x = *(const struct nccl_pair *const *)a,
			       *y = *(const struct nccl_pair *const *)b;
	double px = nccl_pair_percentile(x, 0.5), py = nccl_pair_percentile(y, 0.5);
	if (isnan(px) != isnan(py))
		return isnan(px) ? 1 : -1;
	return (px > py) - (px < py);
}

void p2pg_report_nccl_pairs(struct report *r, FILE *out)
{
	const struct nccl_scan *s = &r->nccl;
	if (!s->present || s->ops == 0)
		return;
	int64_t ops = 0, bytes = 0, timed = 0;
	for (size_t k = 0; k < s->npairs; k++) {
		ops += nccl_pair_ops(&s->pairs[k]);
		bytes += nccl_pair_bytes(&s->pairs[k]);
		timed += s->pairs[k].timed[s->pairs[k].side];
	}
	char n_ops[32], n_bytes[32], n_timed[32], n_all[32];
	fmt_count(n_ops, sizeof(n_ops), ops);
	fmt_bytes(n_bytes, sizeof(n_bytes), (double)bytes);
	fmt_count(n_timed, sizeof(n_timed), timed);
	fmt_count(n_all, sizeof(n_all), s->ops);
	if (s->npairs == 0) {
		struct rbuf line = {0};
		rbuf_printf(
		    &line,
		    "NCCL traffic per device pair: none of its %s operations has a pair "
		    "(collectives of communicators of more than two ranks: NCCL does not "
		    "tell their ring or tree order; they are counted per communicator below)",
		    n_all);
		fputc('\n', out);
		fmt_wrap(out, rbuf_str(&line), 0, 2, r->width);
		rbuf_free(&line);
		return;
	}
	fprintf(out, "\nNCCL traffic per device pair (nccl_pair_bandwidth): %s operations, %s\n",
		n_ops, n_bytes);
	struct rbuf basis = {0};
	rbuf_printf(&basis, "GB/s (p50, p99 per pair and kind) from the %s GPU-timed ones. %s",
		    n_timed, REPORT_NCCL_BASIS);
	rbuf_printf(&basis,
		    " GPUs are %s nvidia-smi's index where the database knows it, else the rank's "
		    "CUDA ordinal.",
		    s->gpus.hosts ? "host:index, the index" : "numbered by");
	fputs("  ", out);
	fmt_wrap(out, rbuf_str(&basis), 2, 2, r->width);
	rbuf_free(&basis);

	bool all = r->opt->verbose || s->npairs <= MAX_PAIR_LINES;
	size_t shown = all ? s->npairs : 16;
	const struct nccl_pair **order = malloc(s->npairs * sizeof(*order));
	if (!order)
		return;
	for (size_t k = 0; k < s->npairs; k++)
		order[k] = &s->pairs[k];
	if (!all)
		sort_n(order, s->npairs, sizeof(*order), cmp_p50);
	int width = 9, room = r->width - PAIR_FIGURES > 9 ? r->width - PAIR_FIGURES : 9;
	for (size_t k = 0; k < shown; k++) {
		char pair[224];
		report_nccl_pair_label(s, order[k], pair, sizeof(pair));
		if ((int)strlen(pair) > width)
			width = (int)strlen(pair) < room ? (int)strlen(pair) : room;
	}
	fprintf(out, PAIR_LINE_FMT, width, "pair", "kind", "ops", "bytes", "timed", "untimed",
		"p50 GB/s", "p99 GB/s");
	for (size_t k = 0; k < shown; k++)
		pair_line(out, s, order[k], width);
	if (!all)
		fprintf(out,
			"  (the 16 slowest of %zu pair lines; all of them: --verbose or --json)\n",
			s->npairs);
	free(order);
}

/* Communicators: each one a line up to MAX_COMMS (or --verbose), else counted by size with the
 * ones that need a look named. */
static void communicators(struct report *r, FILE *out)
{
	const struct nccl_scan *s = &r->nccl;
	bool each = r->opt->verbose || s->ncomms <= MAX_COMMS;
	struct rbuf sizes = {0};
	if (!each) {
		/* sizes in the order first seen: "1 of 100 ranks, 13 of 8, 50 of 2" */
		for (size_t k = 0; k < s->ncomms; k++) {
			bool seen = false;
			for (size_t j = 0; j < k && !seen; j++)
				seen = s->comms[j].nranks == s->comms[k].nranks;
			if (seen)
				continue;
			size_t c = 0;
			for (size_t j = k; j < s->ncomms; j++)
				c += s->comms[j].nranks == s->comms[k].nranks;
			rbuf_printf(&sizes, "%s%zu of %d %s", sizes.len ? ", " : "", c,
				    s->comms[k].nranks,
				    plural(s->comms[k].nranks, "rank", "ranks"));
		}
		struct rbuf line = {0};
		rbuf_printf(&line, "%zu communicators: %s (each: --verbose)", s->ncomms,
			    rbuf_str(&sizes));
		fputs("  ", out);
		fmt_wrap(out, rbuf_str(&line), 2, 4, r->width);
		rbuf_free(&line);
	}
	rbuf_free(&sizes);
	for (size_t k = 0; k < s->ncomms; k++) {
		const struct nccl_comm *c = &s->comms[k];
		bool short_of_ranks = c->recorded < c->nranks;
		if (!each && !short_of_ranks && c->untracked == 0)
			continue;
		struct rbuf line = {0}, ranks = {0};
		rbuf_printf(&line, "comm %s%s%s%s: %d of %d %s recorded", c->hash,
			    c->name ? " (" : "", c->name ? c->name : "", c->name ? ")" : "",
			    c->recorded, c->nranks, plural(c->nranks, "rank", "ranks"));
		if (each) {
			/* rank:GPU, in rank order */
			for (int rk = 0; rk < c->rank_cap; rk++) {
				int row = c->rank_row[rk];
				if (row < 0)
					continue;
				int gpu = s->rows[row].gpu;
				char name[128] = "?";
				if (gpu >= 0)
					snprintf(name, sizeof(name),
						 s->gpus.hosts ? "%s:%d" : "%.0s%d",
						 s->gpus.v[gpu].host ? s->gpus.v[gpu].host : "?",
						 s->gpus.v[gpu].index);
				rbuf_printf(&ranks, "%s%d:%s", ranks.len ? " " : "", rk, name);
			}
			rbuf_printf(&line, " (rank:GPU %s)", rbuf_str(&ranks));
		}
		rbuf_printf(&line, ", profiler v%d", c->profiler_version);
		if (c->untracked > 0)
			rbuf_printf(&line, ", %lld events not recorded (slots full)",
				    (long long)c->untracked);
		fputs("  ", out);
		fmt_wrap(out, rbuf_str(&line), 2, 4, r->width);
		rbuf_free(&line);
		rbuf_free(&ranks);
	}
	/* Whose plugin the guard fed: the same for every communicator of a process. */
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(r->db,
			       "SELECT chained, count(*) FROM nccl_comms WHERE chained IS NOT NULL "
			       "GROUP BY 1 ORDER BY 1",
			       -1, &st, NULL) == SQLITE_OK)
		while (sqlite3_step(st) == SQLITE_ROW)
			fprintf(out, "  your profiler plugin %s was fed by the guard (%d %s)\n",
				text_or(st, 0, "?"), sqlite3_column_int(st, 1),
				plural(sqlite3_column_int(st, 1), "rank", "ranks"));
}

/* One line of the operations table: a function in one communicator, or in every communicator
 * of one size. */
struct func_line {
	char where[64];
	const char *kind, *func;
	int64_t ops, bytes, gpu_timed, timed_bytes, gpu_ns, folded, running, unreported;
};

static void func_add(struct func_line *l, const struct nccl_func *f)
{
	l->ops += f->ops;
	l->bytes += f->bytes;
	l->gpu_timed += f->gpu_timed;
	l->timed_bytes += f->timed_bytes;
	l->gpu_ns += f->gpu_ns;
	l->folded += f->folded;
	l->running += f->running;
	l->unreported += f->unreported;
}

/* The figures in columns; what needs saying besides, wrapped after them. */
static void func_print(FILE *out, const struct func_line *l, int width, int line_width)
{
	char bytes[32], ops[32], timed[32], gbps[16] = "-";
	fmt_bytes(bytes, sizeof(bytes), (double)l->bytes);
	fmt_count(ops, sizeof(ops), l->ops);
	fmt_count(timed, sizeof(timed), l->gpu_timed);
	if (l->gpu_ns > 0)
		snprintf(gbps, sizeof(gbps), "%.3f", (double)l->timed_bytes / (double)l->gpu_ns);
	int col = fprintf(out, "  %-*s %-13s %-4s %9s %10s %9s %9s", width, l->where, l->func,
			  l->kind, ops, bytes, timed, gbps);
	struct rbuf notes = {0};
	if (l->running > 0)
		rbuf_printf(&notes, "%lld running;", (long long)l->running);
	if (l->unreported > 0)
		rbuf_printf(&notes, "%s%lld unreported;", notes.len ? " " : "",
			    (long long)l->unreported);
	if (l->folded > 0)
		rbuf_printf(&notes, "%s%lld folded;", notes.len ? " " : "", (long long)l->folded);
	if (notes.len) {
		notes.text[--notes.len] = '\0'; /* the last ';' */
		fputc(' ', out);
		fmt_wrap(out, rbuf_str(&notes), col + 1, 6, line_width);
	} else {
		fputc('\n', out);
	}
	rbuf_free(&notes);
}

static void operations(struct report *r, FILE *out)
{
	const struct nccl_scan *s = &r->nccl;
	if (s->nfuncs == 0)
		return;
	bool each = r->opt->verbose || s->ncomms <= MAX_COMMS;
	struct func_line *lines = calloc(s->nfuncs, sizeof(*lines));
	size_t n = 0;
	if (!lines)
		return;
	for (size_t k = 0; k < s->nfuncs; k++) {
		const struct nccl_func *f = &s->funcs[k];
		char where[64];
		if (f->comm < 0)
			snprintf(where, sizeof(where), "?");
		else if (each)
			snprintf(where, sizeof(where), "%s", s->comms[f->comm].hash);
		else
			snprintf(where, sizeof(where), "%d-rank comms", s->comms[f->comm].nranks);
		size_t j = 0;
		while (j < n && !(strcmp(lines[j].where, where) == 0 && lines[j].func == f->func &&
				  lines[j].kind == f->kind))
			j++;
		if (j == n) {
			lines[n] = (struct func_line){.kind = f->kind, .func = f->func};
			snprintf(lines[n].where, sizeof(lines[n].where), "%s", where);
			n++;
		}
		func_add(&lines[j], f);
	}
	int width = 16;
	for (size_t k = 0; k < n; k++)
		if ((int)strlen(lines[k].where) > width)
			width = (int)strlen(lines[k].where);
	fprintf(out, "  %-*s %-13s %-4s %9s %10s %9s %9s\n", width, "comm", "operation", "kind",
		"ops", "bytes", "GPU-timed", "GPU GB/s");
	bool folded = false;
	for (size_t k = 0; k < n; k++) {
		func_print(out, &lines[k], width, r->width);
		folded |= lines[k].folded > 0;
	}
	if (folded) {
		fputs("  ", out);
		fmt_wrap(out,
			 "(folded: operations that found their thread's ring full, counted in "
			 "nccl_op_overflow: no row, no GPU time)",
			 2, 3, r->width);
	}
	free(lines);
}

void p2pg_report_nccl(struct report *r, FILE *out)
{
	const struct nccl_scan *s = &r->nccl;
	if (!s->present || s->ncomms == 0)
		return;
	char ops[32], bytes[32];
	fmt_count(ops, sizeof(ops), s->ops);
	fmt_bytes(bytes, sizeof(bytes), (double)s->bytes);
	fprintf(out, "\nNCCL (its profiler plugin interface): %s finished operations, %s\n", ops,
		bytes);
	communicators(r, out);
	operations(r, out);
}

/* ---- JSON ---- */

static void json_array(sqlite3 *db, FILE *out, const char *key, const char *sql)
{
	fprintf(out, "    \"%s\": ", key);
	if (p2pg_cli_json_rows(db, out, sql, 6) < 0)
		fputs("[]", out);
}

static void j_num(FILE *out, double v)
{
	if (isnan(v) || isinf(v))
		fputs("null", out);
	else
		fprintf(out, "%.17g", v);
}

static void json_gpu(FILE *out, const struct nccl_scan *s, const char *end, int gpu)
{
	fprintf(out, "\"%s_host\": ", end);
	p2pg_cli_json_string(out, gpu >= 0 ? s->gpus.v[gpu].host : NULL);
	fputs(", ", out);
	cli_gpus_json(out, &s->gpus, gpu, end);
}

static void json_pairs(struct report *r, FILE *out)
{
	const struct nccl_scan *s = &r->nccl;
	fputs("    \"pair_bandwidth\": [", out);
	for (size_t k = 0; k < s->npairs; k++) {
		const struct nccl_pair *p = &s->pairs[k];
		fputs(k ? ",\n      {" : "\n      {", out);
		json_gpu(out, s, "src", p->src);
		fputs(", ", out);
		json_gpu(out, s, "dst", p->dst);
		fprintf(out,
			", \"kind\": \"%s\", \"ops\": %lld, \"bytes\": %lld, \"gpu_timed\": %lld, "
			"\"untimed\": %lld, \"counted_side\": \"%s\", \"p50_gbps\": ",
			p->coll ? "coll" : "p2p", (long long)nccl_pair_ops(p),
			(long long)nccl_pair_bytes(p), (long long)p->timed[p->side],
			(long long)nccl_pair_untimed(p), p->side ? "receivers" : "senders");
		j_num(out, nccl_pair_percentile(p, 0.5));
		fputs(", \"p99_gbps\": ", out);
		j_num(out, nccl_pair_percentile(p, 0.99));
		fputs(", \"min_gbps\": ", out);
		j_num(out, p->n[p->side] ? p->gbps[p->side][0] : NAN);
		fputs(", \"max_gbps\": ", out);
		j_num(out, p->n[p->side] ? p->gbps[p->side][p->n[p->side] - 1] : NAN);
		fputs("}", out);
	}
	fputs("]", out);
}

static void json_operations(struct report *r, FILE *out)
{
	const struct nccl_scan *s = &r->nccl;
	fputs("    \"operations\": [", out);
	for (size_t k = 0; k < s->nfuncs; k++) {
		const struct nccl_func *f = &s->funcs[k];
		const struct nccl_comm *c = f->comm >= 0 ? &s->comms[f->comm] : NULL;
		fputs(k ? ",\n      {\"comm_hash\": " : "\n      {\"comm_hash\": ", out);
		p2pg_cli_json_string(out, c ? c->hash : NULL);
		fputs(", \"comm_name\": ", out);
		p2pg_cli_json_string(out, c ? c->name : NULL);
		fprintf(out, ", \"nranks\": %d, \"kind\": ", c ? c->nranks : 0);
		p2pg_cli_json_string(out, f->kind);
		fputs(", \"func\": ", out);
		p2pg_cli_json_string(out, f->func);
		fprintf(
		    out,
		    ", \"ops\": %lld, \"bytes\": %lld, \"gpu_timed\": %lld, \"gpu_timed_bytes\": "
		    "%lld, \"gpu_ns\": %lld, \"gpu_gbps\": ",
		    (long long)f->ops, (long long)f->bytes, (long long)f->gpu_timed,
		    (long long)f->timed_bytes, (long long)f->gpu_ns);
		j_num(out, f->gpu_ns > 0
			       ? round((double)f->timed_bytes / (double)f->gpu_ns * 1000) / 1000
			       : NAN);
		fprintf(out, ", \"folded\": %lld, \"running\": %lld, \"unreported\": %lld}",
			(long long)f->folded, (long long)f->running, (long long)f->unreported);
	}
	fputs("]", out);
}

void p2pg_report_nccl_json(struct report *r, FILE *out)
{
	if (!r->nccl.present) {
		fputs("  \"nccl\": null,\n", out);
		return;
	}
	fputs("  \"nccl\": {\n    \"basis\": ", out);
	p2pg_cli_json_string(out, REPORT_NCCL_BASIS);
	fprintf(out,
		",\n    \"ops\": %lld, \"bytes\": %lld, \"gpu_timed\": %lld, \"running\": "
		"%lld, \"unreported\": %lld,\n",
		(long long)r->nccl.ops, (long long)r->nccl.bytes, (long long)r->nccl.gpu_timed,
		(long long)r->nccl.running, (long long)r->nccl.unreported);
	if (has_stalls(r->db))
		json_array(r->db, out, "stalls", REPORT_NCCL_STALLS_SQL);
	else
		fputs("    \"stalls\": []", out);
	fputs(",\n", out);
	json_array(r->db, out, "communicators", REPORT_NCCL_COMMS_SQL);
	fputs(",\n", out);
	json_operations(r, out);
	fputs(",\n", out);
	json_pairs(r, out);
	fputs(",\n", out);
	/* per communicator and pair of ranks, as the view nccl_pair_traffic has them */
	json_array(r->db, out, "pairs",
		   p2pg_cli_has_table(r->db, "nccl_pair_traffic")
		       ? "SELECT comm_hash, kind, src_rank, src_host, src_device, dst_rank, "
			 "dst_host, dst_device, sends, recvs, bytes, gpu_gbps FROM "
			 "nccl_pair_traffic ORDER BY 1, 2, 3, 6"
		       : "SELECT 1 WHERE 0");
	fputs("\n  },\n", out);
}
