/* SPDX-License-Identifier: MIT */
/*
 * The text report, written for a person reading a terminal after a job of hundreds of ranks:
 * what repeats is said once with its count and where (pairs, ranks and hosts as ranges), long text
 * is wrapped, never cut, and lists of pids or pairs appear in full only with --verbose.
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

#define MAX_PAIR_LINES	 64 /* transfer lines shown without --verbose */
#define MAX_HOSTS	 8  /* host groups named in one line */
#define MAX_COUNT_GROUPS 4  /* "8 each on HOSTS" parts of the processes line */

static const char *plural(long long n, const char *one, const char *many)
{
	return n == 1 ? one : many;
}

static int cmp_host_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int cmp_size_desc(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	return (x < y) - (x > y);
}

/*
 * How many processes each host ran, hosts with the same count named together, the largest count
 * first: "8 each on gpu-node-[001-012], 4 on gpu-node-013" (one host: its name). A job that lost a
 * rank on one node shows it at once, where a list of hosts would not; past MAX_COUNT_GROUPS counts
 * the rest are summed up ("and 9 more hosts with 1-3 each"). *ret_hosts: how many hosts.
 */
static void hosts_counted(const struct report_scan *s, struct rbuf *b, size_t *ret_hosts)
{
	*ret_hosts = 0;
	size_t cap = s->nprocs ? s->nprocs : 1;
	char **names = malloc(cap * sizeof(char *)), **group = malloc(cap * sizeof(char *));
	size_t *per_host = malloc(cap * sizeof(size_t)), *counts = malloc(cap * sizeof(size_t));
	if (!names || !group || !per_host || !counts)
		goto out;
	for (size_t k = 0; k < s->nprocs; k++)
		names[k] = s->procs[k].host ? s->procs[k].host : "?";
	sort_n(names, s->nprocs, sizeof(char *), cmp_host_name);
	/* names[] becomes the distinct hosts, per_host[] their process counts. */
	size_t hosts = 0;
	for (size_t k = 0; k < s->nprocs; k++) {
		if (hosts && strcmp(names[hosts - 1], names[k]) == 0) {
			per_host[hosts - 1]++;
			continue;
		}
		names[hosts] = names[k];
		per_host[hosts++] = 1;
	}
	*ret_hosts = hosts;
	if (hosts == 1) {
		rbuf_printf(b, "%s", names[0]);
		goto out;
	}
	memcpy(counts, per_host, hosts * sizeof(size_t));
	sort_n(counts, hosts, sizeof(size_t), cmp_size_desc);
	size_t ncounts = 0;
	for (size_t k = 0; k < hosts; k++)
		if (ncounts == 0 || counts[ncounts - 1] != counts[k])
			counts[ncounts++] = counts[k];
	size_t shown = ncounts <= MAX_COUNT_GROUPS ? ncounts : MAX_COUNT_GROUPS - 1;
	for (size_t g = 0; g < shown; g++) {
		size_t m = 0;
		for (size_t k = 0; k < hosts; k++)
			if (per_host[k] == counts[g])
				group[m++] = names[k];
		struct rbuf h = {0};
		fmt_hosts(&h, group, m, MAX_HOSTS);
		rbuf_printf(b, "%s%zu %son %s", g ? ", " : "", counts[g], m > 1 ? "each " : "",
			    rbuf_str(&h));
		rbuf_free(&h);
	}
	if (shown < ncounts) {
		size_t rest = 0;
		for (size_t k = 0; k < hosts; k++)
			rest += per_host[k] <= counts[shown];
		rbuf_printf(b, ", and %zu more hosts with %zu-%zu each", rest, counts[ncounts - 1],
			    counts[shown]);
	}
out:
	free(names);
	free(group);
	free(per_host);
	free(counts);
}

static void section_processes(struct report *r, FILE *out)
{
	const struct report_scan *s = &r->scan;
	if (s->nprocs == 0) {
		fprintf(out, "processes: none guarded%s\n",
			r->opt->run_id ? " (the program made no CUDA call under the guard)" : "");
		return;
	}
	long long idle = 0, idle_nccl = 0, recovered = 0, dropped = 0, invalid = 0;
	int *ranks = malloc(s->nprocs * sizeof(int));
	size_t nranks = 0;
	for (size_t k = 0; k < s->nprocs; k++) {
		const struct report_process *p = &s->procs[k];
		idle += !p->peer_calls;
		idle_nccl += !p->peer_calls && nccl_scan_has_process(&r->nccl, p->id);
		recovered += p->recovered;
		dropped += p->dropped;
		invalid += p->invalid;
		if (ranks && p->rank >= 0)
			ranks[nranks++] = p->rank;
	}
	struct rbuf hosts = {0}, rk = {0}, modes = {0};
	size_t nhosts;
	hosts_counted(s, &hosts, &nhosts);
	if (ranks)
		fmt_ranges(&rk, ranks, nranks);
	free(ranks);
	/* Modes with their counts, in the order first seen. */
	for (size_t k = 0; k < s->nprocs; k++) {
		const char *m = s->procs[k].mode ? s->procs[k].mode : "?";
		bool seen = false;
		for (size_t j = 0; j < k && !seen; j++)
			seen = strcmp(s->procs[j].mode ? s->procs[j].mode : "?", m) == 0;
		if (seen)
			continue;
		size_t c = 0;
		for (size_t j = k; j < s->nprocs; j++)
			c += strcmp(s->procs[j].mode ? s->procs[j].mode : "?", m) == 0;
		rbuf_printf(&modes, "%s%s %zu", modes.len ? ", " : "", m, c);
	}
	struct rbuf line = {0};
	rbuf_printf(&line, "%zu guarded on %zu %s (%s)", s->nprocs, nhosts,
		    plural((long long)nhosts, "host", "hosts"), rbuf_str(&hosts));
	if (nranks)
		rbuf_printf(&line, ", ranks %s", rbuf_str(&rk));
	rbuf_printf(&line, "; mode %s; %lld made no peer call", rbuf_str(&modes), idle);
	if (idle_nccl)
		rbuf_printf(&line, " (%lld of them ran NCCL, below)", idle_nccl);
	if (recovered)
		rbuf_printf(&line, "; %lld ended abruptly (recovered from their spool)", recovered);
	char num[32];
	fmt_count(num, sizeof(num), dropped);
	if (dropped)
		rbuf_printf(&line, "; %s records dropped (full rings)", num);
	if (invalid)
		rbuf_printf(&line, "; %lld damaged spool records skipped", invalid);
	fputs("processes: ", out);
	fmt_wrap(out, rbuf_str(&line), 11, 4, r->width);
	rbuf_free(&line);
	rbuf_free(&hosts);
	rbuf_free(&rk);
	rbuf_free(&modes);

	if (!r->opt->verbose) {
		fprintf(out, "    (%s: p2pguard report --verbose)\n",
			s->nprocs > 1 ? "their pids" : "its pid and command line");
		return;
	}
	if (s->nprocs == 1) {
		const struct report_process *p = &s->procs[0];
		struct rbuf one = {0};
		rbuf_printf(&one, "%s: pid %d", p->host ? p->host : "?", p->pid);
		if (p->rank >= 0)
			rbuf_printf(&one, " (rank %d)", p->rank);
		if (p->cmdline)
			rbuf_printf(&one, ": %s", p->cmdline);
		fputs("    ", out);
		fmt_wrap(out, rbuf_str(&one), 4, 8, r->width);
		rbuf_free(&one);
		return;
	}
	/* Per host: its pids and ranks. */
	for (size_t k = 0; k < s->nprocs; k++) {
		const char *h = s->procs[k].host ? s->procs[k].host : "?";
		bool seen = false;
		for (size_t j = 0; j < k && !seen; j++)
			seen = strcmp(s->procs[j].host ? s->procs[j].host : "?", h) == 0;
		if (seen)
			continue;
		struct rbuf pids = {0};
		for (size_t j = k; j < s->nprocs; j++)
			if (strcmp(s->procs[j].host ? s->procs[j].host : "?", h) == 0) {
				rbuf_printf(&pids, "%s%d", pids.len ? " " : "", s->procs[j].pid);
				if (s->procs[j].rank >= 0)
					rbuf_printf(&pids, " (rank %d)", s->procs[j].rank);
			}
		fprintf(out, "    %s: pid ", h);
		fmt_wrap(out, rbuf_str(&pids), 11 + (int)strlen(h), 8, r->width);
		rbuf_free(&pids);
	}
}

/* The physical GPUs behind the ordinals (the devices table, where the guard wrote one). */
static void section_gpus(struct report *r, FILE *out)
{
	if (!r->has_devices)
		return;
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	/* physical_index is NULL where NVML was missing or did not know the GPU: such an ordinal
	 * is neither the same as nvidia-smi's index nor known to differ, so it is counted apart. */
	if (sqlite3_prepare_v2(
		r->db,
		"SELECT count(DISTINCT p.hostname || ' ' || coalesce(d.uuid, "
		"d.pci_bus_id)), count(DISTINCT p.hostname), group_concat(DISTINCT "
		"d.name), sum(d.physical_index IS NOT NULL AND d.physical_index != "
		"d.ordinal), sum(d.physical_index IS NULL), count(*) FROM devices d JOIN "
		"processes p ON p.id = d.process_id",
		-1, &st, NULL) != SQLITE_OK ||
	    sqlite3_step(st) != SQLITE_ROW || sqlite3_column_int64(st, 5) == 0)
		return;
	struct rbuf line = {0};
	long long gpus = sqlite3_column_int64(st, 0), hosts = sqlite3_column_int64(st, 1);
	rbuf_printf(&line, "%lld physical %s on %lld %s (%s)", gpus, plural(gpus, "GPU", "GPUs"),
		    hosts, plural(hosts, "host", "hosts"), p2pg_cli_col(st, 2) ?: "?");
	long long renumbered = sqlite3_column_int64(st, 3), unknown = sqlite3_column_int64(st, 4),
		  ordinals = sqlite3_column_int64(st, 5);
	if (renumbered)
		rbuf_printf(&line,
			    "; %lld device %s from nvidia-smi's index "
			    "(CUDA_VISIBLE_DEVICES): pairs below are the processes' ordinals",
			    renumbered, plural(renumbered, "ordinal differs", "ordinals differ"));
	if (unknown)
		rbuf_printf(&line,
			    "; nvidia-smi's index is unknown for %lld of %lld device %s (no NVML, "
			    "or a GPU it does not know)",
			    unknown, ordinals, plural(ordinals, "ordinal", "ordinals"));
	fputs("GPUs: ", out);
	fmt_wrap(out, rbuf_str(&line), 6, 4, r->width);
	rbuf_free(&line);
	if (!r->opt->verbose)
		return;
	_cleanup_sqlite_stmt_ sqlite3_stmt *gs = NULL;
	if (sqlite3_prepare_v2(
		r->db,
		"SELECT p.hostname, d.physical_index, d.uuid, d.pci_bus_id, d.name, "
		"count(DISTINCT d.process_id) FROM devices d JOIN processes p ON p.id "
		"= d.process_id GROUP BY 1, 3, 4 ORDER BY 1, 2, 4",
		-1, &gs, NULL) != SQLITE_OK)
		return;
	while (sqlite3_step(gs) == SQLITE_ROW) {
		struct rbuf gpu = {0};
		rbuf_printf(&gpu, "%s GPU %s %s %s (%s, %d %s)", p2pg_cli_col(gs, 0) ?: "?",
			    p2pg_cli_col(gs, 1) ?: "?", p2pg_cli_col(gs, 2) ?: "?",
			    p2pg_cli_col(gs, 3) ?: "?", p2pg_cli_col(gs, 4) ?: "?",
			    sqlite3_column_int(gs, 5),
			    plural(sqlite3_column_int(gs, 5), "process", "processes"));
		fputs("    ", out);
		fmt_wrap(out, rbuf_str(&gpu), 4, 8, r->width);
		rbuf_free(&gpu);
	}
}

static void gbps_text(char *buf, size_t len, double v)
{
	if (isnan(v))
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%.3g", v);
}

static void transfer_line(FILE *out, const struct report_bw *b)
{
	char pair[32], calls[32], bytes[32], timed[32], untimed[32], p50[16], p99[16];
	snprintf(pair, sizeof(pair), "%d->%d", b->src, b->dst);
	fmt_count(calls, sizeof(calls), b->c.calls);
	fmt_bytes(bytes, sizeof(bytes), (double)b->c.bytes);
	fmt_count(timed, sizeof(timed), b->c.gpu_timed + b->c.synchronous);
	fmt_count(untimed, sizeof(untimed), report_untimed(&b->c));
	gbps_text(p50, sizeof(p50), report_percentile(b->gbps, b->n, 0.5));
	gbps_text(p99, sizeof(p99), report_percentile(b->gbps, b->n, 0.99));
	fprintf(out, "  %-9s %-8s %11s %11s %7lld %11s %10s %8s %8s\n", pair,
		report_path_names[b->path], calls, bytes, (long long)b->c.failed, timed, untimed,
		p50, p99);
}

static int cmp_p50(const void *a, const void *b)
{
	const struct report_bw *x = *(const struct report_bw *const *)a,
			       *y = *(const struct report_bw *const *)b;
	double px = report_percentile(x->gbps, x->n, 0.5),
	       py = report_percentile(y->gbps, y->n, 0.5);
	if (isnan(px) != isnan(py))
		return isnan(px) ? 1 : -1;
	return (px > py) - (px < py);
}

static void section_transfers(struct report *r, FILE *out)
{
	const struct report_scan *s = &r->scan;
	if (s->nbw == 0) {
		fprintf(out, "\ntransfers: none recorded\n");
		return;
	}
	char calls[32], timed[32], untimed[32], bytes[32];
	fmt_count(calls, sizeof(calls), s->total.calls);
	fmt_bytes(bytes, sizeof(bytes), (double)s->total.bytes);
	fmt_count(timed, sizeof(timed), s->total.gpu_timed + s->total.synchronous);
	fmt_count(untimed, sizeof(untimed), report_untimed(&s->total));
	fprintf(out, "\ntransfers: %s calls, %s, %lld failed\n", calls, bytes,
		(long long)s->total.failed);
	struct rbuf basis = {0};
	char gpu[32], sync[32], folded[32];
	fmt_count(gpu, sizeof(gpu), s->total.gpu_timed);
	fmt_count(sync, sizeof(sync), s->total.synchronous);
	fmt_count(folded, sizeof(folded), s->total.folded);
	rbuf_printf(&basis,
		    "GB/s (p50, p99 per pair and path) from the %s copies with a GPU time (%s "
		    "asynchronous, %s synchronous); %s copies without a copy time are counted as "
		    "untimed and not divided.",
		    timed, gpu, sync, untimed);
	if (s->total.folded)
		rbuf_printf(&basis,
			    " %s of the calls found their thread's ring full: counted in "
			    "transfer_overflow (calls and bytes), no row, no time.",
			    folded);
	fputs("  ", out);
	fmt_wrap(out, rbuf_str(&basis), 2, 2, r->width);
	rbuf_free(&basis);
	fprintf(out, "  %-9s %-8s %11s %11s %7s %11s %10s %8s %8s\n", "pair", "path", "calls",
		"bytes", "failed", "timed", "untimed", "p50 GB/s", "p99 GB/s");
	if (r->opt->verbose || s->nbw <= MAX_PAIR_LINES) {
		for (size_t k = 0; k < s->nbw; k++)
			transfer_line(out, &s->bw[k]);
	} else {
		/* Too many to read: the slowest ones, where problems show. */
		const struct report_bw **order = malloc(s->nbw * sizeof(*order));
		if (order) {
			for (size_t k = 0; k < s->nbw; k++)
				order[k] = &s->bw[k];
			sort_n(order, s->nbw, sizeof(*order), cmp_p50);
			for (size_t k = 0; k < 16; k++)
				transfer_line(out, order[k]);
			free(order);
		}
		fprintf(out,
			"  (the 16 slowest of %zu pair and path lines; all of them: --verbose "
			"or --json)\n",
			s->nbw);
	}
	/* By API, over all pairs. */
	fprintf(out, "  by API: ");
	struct rbuf apis = {0};
	for (size_t a = 0; a < s->napis; a++) {
		struct report_counts c = {0};
		for (size_t k = 0; k < s->nlines; k++)
			if (s->lines[k].api == s->apis[a]) {
				c.calls += s->lines[k].c.calls;
				c.gpu_timed += s->lines[k].c.gpu_timed;
				c.synchronous += s->lines[k].c.synchronous;
				c.failed += s->lines[k].c.failed;
			}
		fmt_count(calls, sizeof(calls), c.calls);
		fmt_count(timed, sizeof(timed), c.gpu_timed + c.synchronous);
		rbuf_printf(&apis, "%s%s %s (%s timed)", apis.len ? "; " : "", s->apis[a], calls,
			    timed);
	}
	fmt_wrap(out, rbuf_str(&apis), 10, 4, r->width);
	rbuf_free(&apis);
}

static void section_peer_access(struct report *r, FILE *out)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(r->db, REPORT_PEER_ACCESS_SQL, -1, &st, NULL) != SQLITE_OK)
		return;
	bool header = false;
	while (sqlite3_step(st) == SQLITE_ROW) {
		if (!header)
			fprintf(out, "\npeer access calls (grouped by call, status and action)\n");
		header = true;
		struct dev_pair *pairs = NULL;
		size_t n = report_parse_pairs(p2pg_cli_col(st, 4), &pairs);
		struct rbuf pl = {0}, line = {0};
		fmt_pairs(&pl, pairs, n);
		free(pairs);
		char calls[32];
		fmt_count(calls, sizeof(calls), sqlite3_column_int64(st, 3));
		rbuf_printf(
		    &line, "%s -> %d, %s: %s %s in %d %s, %zu %s %s", p2pg_cli_col(st, 0) ?: "?",
		    sqlite3_column_int(st, 1), p2pg_cli_col(st, 2) ?: "passed", calls,
		    plural(sqlite3_column_int64(st, 3), "call", "calls"), sqlite3_column_int(st, 5),
		    plural(sqlite3_column_int(st, 5), "process", "processes"), n,
		    plural((long long)n, "pair", "pairs"), rbuf_str(&pl));
		if (sqlite3_column_type(st, 6) != SQLITE_NULL) {
			if (sqlite3_column_int(st, 6) == sqlite3_column_int(st, 7))
				rbuf_printf(&line, " (answer %d)", sqlite3_column_int(st, 6));
			else
				rbuf_printf(&line, " (answers %d to %d)", sqlite3_column_int(st, 6),
					    sqlite3_column_int(st, 7));
		}
		fputs("  ", out);
		fmt_wrap(out, rbuf_str(&line), 2, 6, r->width);
		rbuf_free(&pl);
		rbuf_free(&line);
	}
}

/* "pairs 0-3->4-7 (32), ranks 0-99 (100), hosts gpu-[01-13] (13)" */
static void where_line(struct rbuf *b, const char *pairs_text, const char *ranks_text,
		       const char *hosts_text)
{
	struct dev_pair *pairs = NULL;
	size_t n = report_parse_pairs(pairs_text, &pairs);
	if (n) {
		struct rbuf t = {0};
		fmt_pairs(&t, pairs, n);
		rbuf_printf(b, "%s %s (%zu)", plural((long long)n, "pair", "pairs"), rbuf_str(&t),
			    n);
		rbuf_free(&t);
	}
	free(pairs);
	int *ranks = NULL;
	size_t nr = report_parse_ints(ranks_text, &ranks);
	if (nr) {
		struct rbuf t = {0};
		fmt_ranges(&t, ranks, nr);
		rbuf_printf(b, "%s%s %s (%zu)", b->len ? ", " : "",
			    plural((long long)nr, "rank", "ranks"), rbuf_str(&t), nr);
		rbuf_free(&t);
	}
	free(ranks);
	char **hosts = NULL;
	size_t nh = report_parse_strings(hosts_text, &hosts);
	if (nh) {
		struct rbuf t = {0};
		fmt_hosts(&t, hosts, nh, MAX_HOSTS);
		rbuf_printf(b, "%s%s %s (%zu)", b->len ? ", " : "",
			    plural((long long)nh, "host", "hosts"), rbuf_str(&t), nh);
		rbuf_free(&t);
	}
	report_free_strings(hosts, nh);
}

static void labelled(FILE *out, struct report *r, const char *label, const char *text)
{
	if (!text || !*text)
		return;
	fprintf(out, "     %-7s ", label);
	fmt_wrap(out, text, 13, 13, r->width);
}

static void section_failures(struct report *r, FILE *out)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL, *detail = NULL, *places = NULL;
	progress_stage(&r->progress, "grouping failures", 0);
	if (sqlite3_prepare_v2(r->db, REPORT_FAILURE_GROUPS_SQL, -1, &st, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(r->db, REPORT_FAILURE_DETAIL_SQL, -1, &detail, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(r->db, REPORT_FAILURE_WHERE_SQL, -1, &places, NULL) != SQLITE_OK)
		return;
	int n = 0;
	while (sqlite3_step(st) == SQLITE_ROW) {
		if (n++ == 0)
			fprintf(out,
				"\nfailures (grouped by call, error, rule and action across pairs, "
				"ranks and hosts; first seen first)\n");
		int count = sqlite3_column_int(st, 1), procs = sqlite3_column_int(st, 2);
		struct rbuf head = {0};
		rbuf_printf(&head, "%s -> %d", p2pg_cli_col(st, 5) ?: "?",
			    sqlite3_column_int(st, 6));
		if (p2pg_cli_col(st, 7) && *p2pg_cli_col(st, 7))
			rbuf_printf(&head, " %s", p2pg_cli_col(st, 7));
		rbuf_printf(&head, ", %s", p2pg_cli_col(st, 8) ?: "passed");
		if (p2pg_cli_col(st, 10))
			rbuf_printf(&head, ", probe verdict %s", p2pg_cli_col(st, 10));
		char first[32], last[32];
		fmt_utc(first, sizeof(first), sqlite3_column_int64(st, 3));
		fmt_utc(last, sizeof(last), sqlite3_column_int64(st, 4));
		char times[32];
		fmt_count(times, sizeof(times), count);
		if (count > 1)
			rbuf_printf(&head, ": %s times in %d %s (first %s, last %s UTC)", times,
				    procs, plural(procs, "process", "processes"), first, last);
		else
			rbuf_printf(&head, ": once (%s UTC)", first);
		fmt_numbered(out, n, rbuf_str(&head), r->width);
		rbuf_free(&head);

		struct rbuf w = {0};
		where_line(&w, p2pg_cli_col(st, 11), p2pg_cli_col(st, 12), p2pg_cli_col(st, 13));
		labelled(out, r, "on:", rbuf_str(&w));
		rbuf_free(&w);

		report_bind_failure_places(places, st);
		struct rbuf pl = {0};
		int shown = 0, counted = 0;
		while (sqlite3_step(places) == SQLITE_ROW) {
			const char *place = p2pg_cli_col(places, 0);
			if (!place || !*place)
				continue;
			int c = sqlite3_column_int(places, 1);
			rbuf_printf(&pl, "%s%s", shown ? "; " : "", place);
			if (c != count)
				rbuf_printf(&pl, " (%d)", c);
			shown++;
			counted += c;
		}
		if (shown && counted < count)
			rbuf_printf(&pl, "; elsewhere %d", count - counted);
		labelled(out, r, "where:", rbuf_str(&pl));
		rbuf_free(&pl);

		sqlite3_reset(detail);
		sqlite3_bind_int64(detail, 1, sqlite3_column_int64(st, 0));
		if (sqlite3_step(detail) == SQLITE_ROW) {
			if (p2pg_cli_col(st, 9))
				labelled(out, r, "rule:", p2pg_cli_col(st, 9));
			labelled(out, r, "why:", p2pg_cli_col(detail, 0));
			if (!r->opt->brief)
				labelled(out, r, "do:", p2pg_cli_col(detail, 1));
			if (r->opt->verbose)
				labelled(out, r, "args:", p2pg_cli_col(detail, 2));
		}
	}
	if (n && r->opt->brief)
		fprintf(out, "  (what to do, stacks and evidence: p2pguard report%s%s %s)\n",
			r->opt->run_id ? " --run " : "", r->opt->run_id ? r->opt->run_id : "",
			r->opt->db_path);
}

static void section_crashes(struct report *r, FILE *out)
{
	size_t n = 0;
	progress_stage(&r->progress, "grouping crashes", 0);
	struct crash_group *g = report_crash_groups(r, &n);
	if (n)
		fprintf(out, "\ncrashes (grouped by signal and top frames)\n");
	for (size_t k = 0; k < n; k++) {
		struct rbuf head = {0};
		char first[32], last[32];
		fmt_utc(first, sizeof(first), g[k].first_ns);
		fmt_utc(last, sizeof(last), g[k].last_ns);
		rbuf_printf(&head, "signal %d (%s)", g[k].signal, strsignal(g[k].signal));
		if (g[k].count > 1)
			rbuf_printf(&head, ": %d crashes in %d %s (first %s, last %s UTC)",
				    g[k].count, g[k].processes,
				    plural(g[k].processes, "process", "processes"), first, last);
		else
			rbuf_printf(&head, ": once (%s UTC)", first);
		fmt_numbered(out, (long long)(k + 1), rbuf_str(&head), r->width);
		rbuf_free(&head);
		struct rbuf on = {0}, ranks = {0};
		if (g[k].nranks) {
			fmt_ranges(&ranks, g[k].ranks, g[k].nranks);
			rbuf_printf(&on, "%s %s", plural((long long)g[k].nranks, "rank", "ranks"),
				    rbuf_str(&ranks));
		}
		if (g[k].nhosts) {
			struct rbuf h = {0};
			fmt_hosts(&h, g[k].hosts, g[k].nhosts, MAX_HOSTS);
			rbuf_printf(&on, "%s%s %s", on.len ? ", " : "",
				    plural((long long)g[k].nhosts, "host", "hosts"), rbuf_str(&h));
			rbuf_free(&h);
		}
		labelled(out, r, "on:", rbuf_str(&on));
		rbuf_free(&on);
		rbuf_free(&ranks);
		labelled(out, r, "top:", g[k].key);
		if (g[k].python) {
			_cleanup_free_ char *py = strndup(g[k].python, strcspn(g[k].python, "\n"));
			labelled(out, r, "python:", py);
		}
	}
	report_crash_groups_free(g, n);
}

static void section_stalls(struct report *r, FILE *out)
{
	if (!r->has_stalls)
		return;
	bool pairs = p2pg_cli_has_column(r->db, "stalls", "src_device");
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(
		r->db,
		pairs
		    ? "SELECT s.api, s.path, s.rule_id, count(*), group_concat(DISTINCT "
		      "s.src_device || ':' || s.dst_device), group_concat(DISTINCT p.rank), "
		      "group_concat(DISTINCT p.hostname), max(s.waited_ns), min(s.diagnosis) FROM "
		      "stalls s JOIN processes p ON p.id = s.process_id GROUP BY 1, 2, 3 ORDER BY "
		      "min(s.rowid)"
		    : "SELECT NULL, NULL, NULL, count(*), NULL, group_concat(DISTINCT p.rank), "
		      "group_concat(DISTINCT p.hostname), NULL, NULL FROM stalls s JOIN processes "
		      "p ON p.id = s.process_id HAVING count(*) > 0",
		-1, &st, NULL) != SQLITE_OK)
		return;
	int n = 0;
	while (sqlite3_step(st) == SQLITE_ROW) {
		if (n++ == 0)
			fprintf(out, "\nstalls (peer copies that did not finish)\n");
		struct rbuf head = {0};
		int count = sqlite3_column_int(st, 3);
		rbuf_printf(&head, "%s on path %s: %d %s", p2pg_cli_col(st, 0) ?: "copies",
			    p2pg_cli_col(st, 1) ?: "?", count, plural(count, "copy", "copies"));
		if (sqlite3_column_type(st, 7) != SQLITE_NULL)
			rbuf_printf(&head, ", the longest seen waiting %.1f s",
				    sqlite3_column_double(st, 7) / 1e9);
		fmt_numbered(out, n, rbuf_str(&head), r->width);
		rbuf_free(&head);
		struct rbuf w = {0};
		where_line(&w, p2pg_cli_col(st, 4), p2pg_cli_col(st, 5), p2pg_cli_col(st, 6));
		labelled(out, r, "on:", rbuf_str(&w));
		rbuf_free(&w);
		labelled(out, r, "rule:", p2pg_cli_col(st, 2));
		labelled(out, r, "why:", p2pg_cli_col(st, 8));
	}
}

int report_text(struct report *r, FILE *out)
{
	fprintf(out, "p2pguard report: %s\n", r->opt->db_path);
	if (r->selection[0])
		fprintf(out, "(%s)\n", r->selection);
	/* A job that hangs in NCCL: the first thing to read. */
	p2pg_report_nccl_stalls(r, out);
	section_processes(r, out);
	section_gpus(r, out);
	section_transfers(r, out);
	p2pg_report_nccl_pairs(r, out);
	section_peer_access(r, out);
	section_failures(r, out);
	section_crashes(r, out);
	section_stalls(r, out);
	p2pg_report_mappings(r, out);
	p2pg_report_nccl(r, out);
	/*
	 * Sections that other files add (report_*.c: cross-process mappings, NCCL operations, ...)
	 * go here, one call each, with the same (r, out) and the same habits: nothing printed when
	 * the database has nothing for them, text through fmt_wrap().
	 */
	progress_end(&r->progress);
	return ferror(out) ? 2 : 0;
}
