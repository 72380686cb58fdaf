/* SPDX-License-Identifier: MIT */
/*
 * What loading the knowledge base costs: every rule compiled into the binary (the shipped rules/
 * folder), parsed, validated and added to a fresh set, repeated; then the check of every rule's
 * examples against the set. Prints one table of medians. Then what `p2pguard explain` costs a
 * line: every line of the explain corpus (tests/explain/corpus.jsonl, real lines pasted from
 * public issue threads) explained on its own, and the whole corpus read as one log (`explain -`).
 *   build/tests/bench/bench_rules [REPEATS [CORPUS.jsonl]]
 * No GPU involved: rules load in the guard's process when a failure is first diagnosed, in every
 * `p2pguard explain` and `p2pguard rules validate`. Times are the thread's CPU time, so that a
 * busy machine's preemptions do not count.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "explain_log.h"
#include "json.h"

/* A line whose answer takes several rules' regexes, as most pasted lines do. */
#define ONE_LINE "NCCL WARN Cuda failure 'peer access is not supported between these two devices'"
#include "p2pguard/rules.h"
#include "rules-builtin.h"

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int compare_doubles(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), compare_doubles);
	return v[n / 2];
}

/* The "text" of every line of a JSON-lines corpus, joined by newlines into *ret_log. */
static char **read_corpus(const char *path, size_t *ret_n, char **ret_log)
{
	FILE *f = fopen(path, "r");
	char buf[65536], **texts = NULL, *log = NULL;
	size_t n = 0, log_len = 0;

	if (!f)
		return NULL;
	while (fgets(buf, sizeof(buf), f)) {
		json_t *root = json_loads(buf, 0, NULL);
		const char *text = json_string_value(json_object_get(root, "text"));
		if (text) {
			size_t len = strlen(text);
			char **more = realloc(texts, (n + 1) * sizeof(*texts));
			char *longer = realloc(log, log_len + len + 2);
			if (!more || !longer)
				abort();
			texts = more;
			log = longer;
			texts[n++] = strdup(text);
			memcpy(log + log_len, text, len);
			log_len += len;
			log[log_len++] = '\n';
			log[log_len] = '\0';
		}
		json_decref(root);
	}
	fclose(f);
	*ret_n = n;
	*ret_log = log;
	return texts;
}

/* Per line: the median of `repeats` explains of it; then the median, 90th percentile and
 * maximum over the lines, and the corpus as one log. */
static int bench_explain(int repeats, const char *path)
{
	struct p2pg_ruleset *rs = p2pg_ruleset_new();
	const struct p2pg_rule *found[64];
	size_t n = 0, matched = 0;
	char *log = NULL, **texts = read_corpus(path, &n, &log);

	if (!rs || p2pg_ruleset_load_builtin(rs, NULL, NULL) != 0)
		return 1;
	if (!texts || n == 0) {
		fprintf(stderr, "bench_rules: cannot read the corpus %s\n", path);
		return 1;
	}
	double *per_line = calloc(n, sizeof(double)),
	       *runs = calloc((size_t)repeats, sizeof(double));
	double *whole = calloc((size_t)repeats, sizeof(double));
	if (!per_line || !runs || !whole)
		return 2;
	for (size_t k = 0; k < n; k++) {
		for (int r = 0; r < repeats; r++) {
			double t0 = now_us();
			size_t found_n = p2pg_ruleset_explain(rs, texts[k], found, 64);
			runs[r] = now_us() - t0;
			if (r == 0 && found_n)
				matched++;
		}
		per_line[k] = median(runs, repeats);
	}
	for (int r = 0; r < repeats; r++) {
		struct p2pg_explain_log parsed;
		double t0 = now_us();
		if (p2pg_explain_log_read(rs, log, &parsed) < 0)
			return 2;
		whole[r] = now_us() - t0;
		p2pg_explain_log_done(&parsed);
	}
	double sum = 0;
	for (size_t k = 0; k < n; k++)
		sum += per_line[k];
	qsort(per_line, n, sizeof(*per_line), compare_doubles);
	double w = median(whole, repeats);
	printf("\nbench_rules: explain, %zu corpus lines (%zu explained by a rule), %d repeats "
	       "each (medians of CPU time)\n",
	       n, matched, repeats);
	printf("| what | median a line | p90 a line | max a line | all lines |\n"
	       "|---|---|---|---|---|\n");
	printf("| explain one line (p2pg_ruleset_explain) | %.0f us | %.0f us | %.0f us | %.1f ms "
	       "|\n",
	       per_line[n / 2], per_line[n * 9 / 10], per_line[n - 1], sum / 1000.0);
	printf("| the corpus as one log (explain -) | %.0f us | | | %.1f ms |\n", w / (double)n,
	       w / 1000.0);
	for (size_t k = 0; k < n; k++)
		free(texts[k]);
	free(texts);
	free(log);
	free(per_line);
	free(runs);
	free(whole);
	p2pg_ruleset_free(rs);
	return 0;
}

int main(int argc, char **argv)
{
	int repeats = argc > 1 ? atoi(argv[1]) : 200;
	if (repeats < 1)
		repeats = 1;
	double *load = calloc((size_t)repeats, sizeof(double));
	double *check = calloc((size_t)repeats, sizeof(double));
	double *parse = calloc((size_t)repeats, sizeof(double));
	double *strict = calloc((size_t)repeats, sizeof(double));
	double *jansson = calloc((size_t)repeats, sizeof(double));
	double *command = calloc((size_t)repeats, sizeof(double));
	size_t bytes = 0, count = 0;
	if (!load || !check || !parse || !strict || !jansson || !command)
		return 2;
	for (size_t k = 0; k < p2pg_builtin_rule_count; k++)
		bytes += p2pg_builtin_rules[k].len;

	/* Each part in a loop of its own, so that each runs on the heap its own repeats leave
	 * (a part that follows a larger one's free pays the page faults of a trimmed heap). */
	for (int r = 0; r < repeats; r++) {
		/* What a one-line `p2pguard explain` does beyond starting: a fresh set, one line
		 * (the regexes it needs compiled at their first use), the set freed. */
		double t0 = now_us();
		struct p2pg_ruleset *fresh = p2pg_ruleset_new();
		p2pg_ruleset_load_builtin(fresh, NULL, NULL);
		const struct p2pg_rule *top[8];
		if (p2pg_ruleset_explain(fresh, ONE_LINE, top, 8) == 0)
			return 1;
		p2pg_ruleset_free(fresh);
		command[r] = now_us() - t0;
	}
	for (int r = 0; r < repeats; r++) {
		struct p2pg_ruleset *rs = p2pg_ruleset_new();
		double t0 = now_us();
		int problems = p2pg_ruleset_load_builtin(rs, NULL, NULL);
		load[r] = now_us() - t0;
		if (problems != 0) {
			fprintf(stderr,
				"bench_rules: the built-in rules do not load cleanly (%d)\n",
				problems);
			return 1;
		}
		count = p2pg_ruleset_count(rs);
		p2pg_ruleset_free(rs);
	}
	for (int r = 0; r < repeats; r++) {
		struct p2pg_ruleset *rs = p2pg_ruleset_new();
		p2pg_ruleset_load_builtin(rs, NULL, NULL);
		double t0 = now_us();
		int failed = p2pg_ruleset_check_examples(rs, NULL, NULL);
		check[r] = now_us() - t0;
		if (failed != 0) {
			fprintf(stderr, "bench_rules: %d examples of the built-in rules fail\n",
				failed);
			return 1;
		}
		p2pg_ruleset_free(rs);
	}
	/* The JSON reader's share of the load: built-in rules are read by the reader for
	 * build-checked text, with the number of values the build counted. */
	for (int r = 0; r < repeats; r++) {
		double t0 = now_us();
		for (size_t k = 0; k < p2pg_builtin_rule_count; k++) {
			struct p2pg_json *v = NULL;
			if (p2pg_json_parse_checked_values(p2pg_builtin_rules[k].text,
							   p2pg_builtin_rules[k].len,
							   p2pg_builtin_rules[k].values, &v) < 0)
				return 1;
			p2pg_json_free(v);
		}
		parse[r] = now_us() - t0;
	}
	/* What the same text costs the strict reader, which reads a rules folder's files. */
	for (int r = 0; r < repeats; r++) {
		double t0 = now_us();
		for (size_t k = 0; k < p2pg_builtin_rule_count; k++) {
			struct p2pg_json *v = NULL;
			if (p2pg_json_parse(p2pg_builtin_rules[k].text, p2pg_builtin_rules[k].len,
					    &v, NULL) < 0)
				return 1;
			p2pg_json_free(v);
		}
		strict[r] = now_us() - t0;
	}
	/* jansson's share of that: its parse alone, with the flags json.c passes. */
	for (int r = 0; r < repeats; r++) {
		double t0 = now_us();
		for (size_t k = 0; k < p2pg_builtin_rule_count; k++) {
			json_t *root = json_loadb(
			    p2pg_builtin_rules[k].text, p2pg_builtin_rules[k].len,
			    JSON_DECODE_ANY | JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, NULL);
			if (!root)
				return 1;
			json_decref(root);
		}
		jansson[r] = now_us() - t0;
	}
	double l = median(load, repeats), c = median(check, repeats), j = median(parse, repeats),
	       st = median(strict, repeats), lib = median(jansson, repeats),
	       cmd = median(command, repeats);
	printf("bench_rules: %zu built-in rules, %zu bytes of JSON, %d repeats (medians of CPU "
	       "time)\n",
	       count, bytes, repeats);
	printf("| what | median | per rule |\n|---|---|---|\n");
	printf("| load (parse, validate, add) | %.0f us | %.1f us |\n", l, l / (double)count);
	printf("| of which: reading the JSON (build-checked reader) | %.0f us | %.1f us |\n", j,
	       j / (double)count);
	printf("| the same text, strict reader (a rules folder's files) | %.0f us | %.1f us |\n",
	       st, st / (double)count);
	printf("| of which: jansson's json_loadb() | %.0f us | %.1f us |\n", lib,
	       lib / (double)count);
	printf("| check every example (and compile every regex) | %.0f us | %.1f us |\n", c,
	       c / (double)count);
	printf("| both | %.0f us | %.1f us |\n", l + c, (l + c) / (double)count);
	printf("| a one-line explain's work: load, explain one line, free | %.0f us | |\n", cmd);
	free(load);
	free(check);
	free(parse);
	free(strict);
	free(jansson);
	free(command);
	return bench_explain(repeats > 20 ? 20 : repeats, argc > 2 ? argv[2] : EXPLAIN_CORPUS);
}
