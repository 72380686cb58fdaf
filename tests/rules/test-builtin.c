/* SPDX-License-Identifier: MIT */
/*
 * The shipped rules: they load without a problem, every example behaves over the whole set
 * ("every rule has a test"), every peer status has a rule, and rules/README.md documents every
 * fact key and every validator message.
 */
#include <errno.h>
#include <pthread.h>

#include "json-same.h"
#include "p2pguard/rules.h"
#include "rules-builtin.h"
#include "rules-test.h"

static void report(void *userdata, const char *file, int line, const char *message)
{
	(void)userdata;
	fprintf(stderr, "%s:%d: %s\n", file, line, message);
}

static struct p2pg_ruleset *rs;

static void test_load(void)
{
	rs = p2pg_ruleset_new();
	check_int(p2pg_ruleset_load_builtin(rs, report, NULL), 0);
	/* Roughly the size the format was designed for; a big drop means files went missing. */
	check(p2pg_ruleset_count(rs) >= 25);
	check(p2pg_ruleset_find(rs, "cuda/peer-access-unsupported-by-hardware") != NULL);
	check(p2pg_ruleset_find(rs, "tensorflow/gpu-peer-access-error") != NULL);

	/* Loading twice reports every id as a duplicate and keeps the first set. */
	size_t n = p2pg_ruleset_count(rs);
	check_int(p2pg_ruleset_load_builtin(rs, NULL, NULL), (int)n);
	check_int(p2pg_ruleset_count(rs), n);
}

/* Every shipped rule passed the build's JSON check, so it is read by the faster reader, and that
 * reader gives the strict reader's tree for each. */
static void test_checked_at_build(void)
{
	for (size_t k = 0; k < p2pg_builtin_rule_count; k++) {
		const struct p2pg_builtin_rule *b = &p2pg_builtin_rules[k];
		struct p2pg_json *strict = NULL, *checked = NULL;
		if (!b->checked)
			fprintf(stderr, "rules/%s: not marked checked by the build\n", b->path);
		check(b->checked);
		check_int(p2pg_json_parse(b->text, b->len, &strict, NULL), 0);
		check_int(p2pg_json_parse_checked(b->text, b->len, &checked), 0);
		int d = json_first_difference(strict, checked);
		if (d)
			fprintf(stderr, "rules/%s:%d: the two readers differ\n", b->path, d);
		check_int(d, 0);
		p2pg_json_free(checked);

		/* The build's count of values is the reader's own (the same tree, without the pass
		 * that counts them), and a count one off either way is refused, not read past. */
		checked = NULL;
		check_int(p2pg_json_parse_checked_values(b->text, b->len, b->values, &checked), 0);
		check_int(json_first_difference(strict, checked), 0);
		p2pg_json_free(strict);
		p2pg_json_free(checked);
		check_int(p2pg_json_parse_checked_values(b->text, b->len, b->values + 1, &checked),
			  -EINVAL);
		check_int(p2pg_json_parse_checked_values(b->text, b->len, b->values - 1, &checked),
			  -EINVAL);
	}
}

/* Lines whose answers need several rules' regexes, explained by many threads at once on a fresh
 * set (the regexes compiled at their first use, by whichever thread comes first), give the answers
 * of one thread on another set. scripts/tsan.sh runs this test. */
static const char *const thread_lines[] = {
    "cudaErrorPeerAccessUnsupported: peer access is not supported between these two devices",
    "RuntimeError: CUDA error: peer mapping resources exhausted",
    "NCCL WARN Cuda failure 'peer access is not supported between these two devices'",
    "cudaIpcOpenMemHandle failed: invalid argument",
    "misc/shmutils.cc:87 NCCL WARN Error: failed to extend /dev/shm/nccl-x to 9637892 bytes",
    "Custom allreduce is disabled because your platform lacks GPU P2P capability",
    "CUDA_ERROR_TOO_MANY_PEERS",
    "a line that names nothing",
};
#define THREAD_LINES (sizeof(thread_lines) / sizeof(thread_lines[0]))
#define THREADS	     8

struct explainer {
	const struct p2pg_ruleset *rs;
	const struct p2pg_rule *top[THREAD_LINES];
	const char *advice[THREAD_LINES], *dead_ends[THREAD_LINES];
};

/* The advice texts too are built at their first use, by whichever thread asks first. */
static void *explain_lines(void *arg)
{
	struct explainer *e = arg;
	for (size_t k = 0; k < THREAD_LINES; k++) {
		e->top[k] = NULL;
		p2pg_ruleset_explain(e->rs, thread_lines[k], &e->top[k], 1);
		e->advice[k] = p2pg_rule_advice(e->top[k]);
		e->dead_ends[k] = p2pg_rule_dead_ends(e->top[k]);
	}
	return NULL;
}

static void test_regex_threads(void)
{
	struct p2pg_ruleset *once = p2pg_ruleset_new(), *shared = p2pg_ruleset_new();
	check_int(p2pg_ruleset_load_builtin(once, NULL, NULL), 0);
	check_int(p2pg_ruleset_load_builtin(shared, NULL, NULL), 0);
	struct explainer alone = {.rs = once}, many[THREADS];
	explain_lines(&alone);
	pthread_t t[THREADS];
	for (int k = 0; k < THREADS; k++) {
		many[k].rs = shared;
		check_int(pthread_create(&t[k], NULL, explain_lines, &many[k]), 0);
	}
	size_t answered = 0;
	for (int k = 0; k < THREADS; k++) {
		pthread_join(t[k], NULL);
		for (size_t l = 0; l < THREAD_LINES; l++) {
			const struct p2pg_rule *a = alone.top[l], *b = many[k].top[l];
			check((a == NULL) == (b == NULL));
			if (a && b) {
				check_str(p2pg_rule_id(b), p2pg_rule_id(a));
				check_str(many[k].advice[l], alone.advice[l]);
				/* one text a rule, whichever thread built it */
				check(many[k].advice[l] == many[0].advice[l]);
				check(many[k].dead_ends[l] == many[0].dead_ends[l]);
			}
			answered += b != NULL;
		}
	}
	size_t alone_answered = 0;
	for (size_t l = 0; l < THREAD_LINES; l++)
		alone_answered += alone.top[l] != NULL;
	check(alone_answered >= THREAD_LINES - 2); /* the regexes were needed */
	check_int(answered, THREADS * alone_answered);
	p2pg_ruleset_free(once);
	p2pg_ruleset_free(shared);
}

static void test_examples(void)
{
	check_int(p2pg_ruleset_check_examples(rs, report, NULL), 0);
}

/* Things the format allows but the shipped set promises. */
static void test_quality(void)
{
	for (size_t k = 0; k < p2pg_ruleset_count(rs); k++) {
		const struct p2pg_rule *r = p2pg_ruleset_at(rs, k);
		const char *id = p2pg_rule_id(r);
		bool ok = p2pg_rule_doc_url(r) && strncmp(p2pg_rule_doc_url(r), "https://", 8) == 0;
		if (!ok)
			fprintf(stderr, "%s: no https documentation link\n", id);
		check(ok);
		/* Every shipped workaround says how, concretely. */
		for (size_t w = 0; w < p2pg_rule_workaround_count(r); w++) {
			const char *how = NULL;
			p2pg_rule_workaround(r, w, NULL, &how, NULL);
			if (!how)
				fprintf(stderr, "%s: workaround %zu has no \"how\"\n", id, w);
			check(how != NULL);
		}
		check(p2pg_rule_dead_end_count(r) > 0);
	}
}

static const int peer_codes[] = {1,   46,  101, 201, 205, 217, 220, 226,
				 700, 704, 705, 709, 711, 801, 802};

static bool is_peer_status(int status)
{
	/* 226 (contained error) is defined by CUDA as an invalid access of peer memory over NVLink
	 * or a hardware error; its rule explains both. */
	static const int only_peer[] = {217, 220, 226, 704, 705, 711, 802};
	for (size_t k = 0; k < sizeof(only_peer) / sizeof(only_peer[0]); k++)
		if (only_peer[k] == status)
			return true;
	return false;
}

static void test_coverage(void)
{
	for (size_t c = 0; c < sizeof(peer_codes) / sizeof(peer_codes[0]); c++) {
		bool found = false;
		for (size_t k = 0; k < p2pg_ruleset_count(rs) && !found; k++) {
			const struct p2pg_rule *r = p2pg_ruleset_at(rs, k);
			const int *codes;
			size_t n = p2pg_rule_codes(r, &codes);
			for (size_t m = 0; m < n && p2pg_rule_specificity(r) > 0; m++)
				found |= codes[m] == peer_codes[c];
		}
		if (!found)
			fprintf(stderr, "no rule with a match covers status %d\n", peer_codes[c]);
		check(found);

		/* A status that only peer work returns is explained bare; one that any CUDA work
		 * can return (1, 700, 101 ...) only when the line names a peer call, so that a line
		 * about an ordinary kernel or allocation gets no P2P advice: at most the status's
		 * triage answer, which says how to tell the causes apart. */
		char text[64];
		snprintf(text, sizeof(text), "%d", peer_codes[c]);
		const struct p2pg_rule *bare_rules[8];
		size_t n_bare = p2pg_ruleset_explain(rs, text, bare_rules, 8);
		bool advice = false;
		for (size_t k = 0; k < n_bare && k < 8; k++)
			advice |= !p2pg_rule_is_triage(bare_rules[k]);
		check(advice == is_peer_status(peer_codes[c]));
		snprintf(text, sizeof(text), "cudaMemcpyPeerAsync returned %d", peer_codes[c]);
		check(p2pg_ruleset_explain(rs, text, NULL, 0) > 0);
	}
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	static char buf[256 * 1024];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return buf;
}

/* The fixed part of every validator message (rules.c), as rules/README.md must quote it. */
static const char *const messages[] = {
    "syntax error: ",
    "entry must be a JSON object, not ",
    "missing required field ",
    "missing required field \"codes\" or \"match\"",
    "unknown field ",
    "must be a number between 0 and 1",
    "must be an array of strings",
    "must be a non-negative integer",
    "invalid id ",
    "does not match the file path (expected ",
    "must be an array of CUDA status codes",
    "is not listed in codes",
    "regex too large: its repetitions expand it to about ",
    "invalid regex: ",
    "regex matches the empty string",
    " holds a backslash and a letter: inside brackets POSIX reads ",
    "empty alias",
    "unknown match condition ",
    "match needs at least one condition",
    "invalid API name ",
    "empty list for ",
    "unknown fact key ",
    "belongs in ",
    "unknown value ",
    "expects ",
    "unknown operator ",
    "must have exactly one member",
    "needs an integer fact",
    "operator \"exists\" takes true or false",
    "needs at least one entry",
    "needs at least one example",
    "must be a CUDA status code",
    "mixes text and evidence",
    "must be a single value",
    "for a rule without \"match\" (use a text example)",
    "a rule without \"match\" needs \"regex\" or \"aliases\"",
    "duplicate id ",
    "cannot read file: ",
    "cannot read folder: ",
    "folders nested deeper than ",
    "a folder already read (a link loop, or a second link to it): not read again",
    "more than 1024 folders: the rest is not read",
    " optional parts (at most ",
    "example selects ",
    "example selects no rule",
    "example text explains nothing",
    "example text is explained first by ",
    "near miss selects this rule",
    "near-miss text is explained first by this rule",
    "unknown context clue ",
    "invalid source file name ",
    "unknown framework ",
    "context needs at least one clue",
    "\"notes\" needs \"match\"",
    "empty object for ",
    "unclosed \"{\" in note text",
    "note text names unknown fact ",
    "which the note's facts do not require",
};

static void test_readme(void)
{
	const char *readme = slurp(RULES_SOURCE_DIR "/README.md");
	check(readme != NULL);
	if (!readme)
		return;
	for (size_t k = 0; p2pg_rules_fact_key(k); k++) {
		char quoted[64];
		snprintf(quoted, sizeof(quoted), "| `%s` |", p2pg_rules_fact_key(k));
		if (!strstr(readme, quoted)) {
			fprintf(stderr, "README.md does not document the fact key in %s\n", quoted);
			test_failures++;
		}
	}
	for (size_t k = 0; k < sizeof(messages) / sizeof(messages[0]); k++) {
		const char *message = messages[k];
		if (!strstr(readme, message)) {
			fprintf(stderr, "README.md does not list the message \"%s\"\n",
				message ? message : "");
			test_failures++;
		}
	}
}

int main(void)
{
	RUN(test_load);
	RUN(test_checked_at_build);
	RUN(test_regex_threads);
	RUN(test_examples);
	RUN(test_quality);
	RUN(test_coverage);
	RUN(test_readme);
	p2pg_ruleset_free(rs);
	return test_failures ? 1 : 0;
}
