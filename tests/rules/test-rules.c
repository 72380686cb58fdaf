/* SPDX-License-Identifier: MIT */
/*
 * Rule files: one malformed entry per validator message (rules/README.md, "Validator messages"),
 * asserting the exact message and line; then matching, explain and folder loading.
 */
#include <errno.h>
#include <regex.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <unistd.h>

#include "p2pguard/rules.h"
#include "rules-loader.h"
#include "rules-private.h"
#include "rules-test.h"

/* A valid entry, one field a line, so that tests can name lines. */
static const char base[] =
    "{\n"					/* 1 */
    "  \"id\": \"test/sample\",\n"		/* 2 */
    "  \"signature\": \"sample failure\",\n"	/* 3 */
    "  \"root_cause\": \"Something broke.\",\n" /* 4 */
    "  \"codes\": [217],\n"			/* 5 */
    "  \"match\": {\"api\": [\"cudaDeviceEnablePeerAccess\"], \"status\": [217], "
    "\"facts\": {\"topology\": \"SYS\"}},\n" /* 6 */
    "  \"regex\": \"sample failure\",\n"     /* 7 */
    "  \"aliases\": [\"SAMPLE\"],\n"	     /* 8 */
    "  \"workarounds\": [{\"action\": \"Do this\", \"how\": \"Like that.\", "
    "\"success_rate\": 0.5}],\n" /* 9 */
    "  \"dead_ends\": [{\"action\": \"Not that\", \"why_fails\": \"Because.\", "
    "\"fail_rate\": 0.9}],\n"  /* 10 */
    "  \"confidence\": 0.7,\n" /* 11 */
    "  \"examples\": {\n"      /* 12 */
    "    \"matches\": [{\"api\": \"cudaDeviceEnablePeerAccess\", \"status\": 217, "
    "\"facts\": {\"topology\": \"SYS\"}}],\n"	 /* 13 */
    "    \"near_misses\": [{\"status\": 704}]\n" /* 14 */
    "  }\n"					 /* 15 */
    "}\n";					 /* 16 */

struct captured {
	int n;
	int line;
	char file[256];
	char message[512];
};

static void capture(void *userdata, const char *file, int line, const char *message)
{
	struct captured *c = userdata;
	if (c->n == 0) {
		c->line = line;
		snprintf(c->file, sizeof(c->file), "%s", file);
		snprintf(c->message, sizeof(c->message), "%s", message);
	}
	fprintf(stderr, "  (reported %s:%d: %s)\n", file, line, message);
	c->n++;
}

struct all {
	int n;
	int lines[16];
	char files[16][64];
	char messages[16][256];
};

static void capture_all(void *userdata, const char *file, int line, const char *message)
{
	struct all *a = userdata;
	if (a->n < 16) {
		a->lines[a->n] = line;
		snprintf(a->files[a->n], sizeof(a->files[0]), "%s", file);
		snprintf(a->messages[a->n], sizeof(a->messages[0]), "%s", message);
	}
	a->n++;
}

/* base with the first occurrence of from replaced by to; the result is static. */
static const char *with(const char *text, const char *from, const char *to)
{
	static char buf[8][4096];
	static int next;
	char *out = buf[next++ % 8];
	const char *at = strstr(text, from);
	if (!at) {
		fprintf(stderr, "test bug: \"%s\" not in the entry\n", from);
		test_failures++;
		snprintf(out, sizeof(buf[0]), "%s", text);
		return out;
	}
	snprintf(out, sizeof(buf[0]), "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
	return out;
}

static void expect_problem_rc(const char *text, int rc, int line, const char *message)
{
	struct p2pg_ruleset *rs = p2pg_ruleset_new();
	struct captured c = {0};
	int r = p2pg_ruleset_add_text(rs, "t.json", text, strlen(text), capture, &c);
	check_int(r, rc);
	check_int(c.n, 1);
	check_int(c.line, line);
	check_str(c.file, "t.json");
	check_str(c.message, message);
	check_int(p2pg_ruleset_count(rs), 0);
	p2pg_ruleset_free(rs);
}

static void expect_problem(const char *text, int line, const char *message)
{
	expect_problem_rc(text, -EINVAL, line, message);
}

static struct p2pg_ruleset *load_ok(const char *const *texts, size_t n)
{
	struct p2pg_ruleset *rs = p2pg_ruleset_new();
	for (size_t k = 0; k < n; k++) {
		struct captured c = {0};
		char name[32];
		snprintf(name, sizeof(name), "t%zu.json", k);
		check_int(p2pg_ruleset_add_text(rs, name, texts[k], strlen(texts[k]), capture, &c),
			  0);
		check_int(c.n, 0);
	}
	return rs;
}

/* A workaround or dead end for one cause says which, in the stored advice and to explain. */
static void test_conditions(void)
{
	const char *texts[] = {with(
	    with(base, "\"how\": \"Like that.\"",
		 "\"how\": \"Like that.\", \"condition\": \"the pair is on one switch\""),
	    "\"why_fails\": \"Because.\"", "\"why_fails\": \"Because.\", \"condition\": \"a VM\"")};
	struct p2pg_ruleset *rs = load_ok(texts, 1);
	const struct p2pg_rule *r = p2pg_ruleset_find(rs, "test/sample");
	check_str(p2pg_rule_workaround_condition(r, 0), "the pair is on one switch");
	check_str(p2pg_rule_dead_end_condition(r, 0), "a VM");
	check_str(p2pg_rule_advice(r),
		  "Do this (50% success; when the pair is on one switch): Like that.");
	check_str(p2pg_rule_dead_ends(r), "Not that: Because. (fails 90%; when a VM)");
	p2pg_ruleset_free(rs);
}

static void test_valid(void)
{
	const char *texts[] = {base};
	struct p2pg_ruleset *rs = load_ok(texts, 1);
	const struct p2pg_rule *r = p2pg_ruleset_find(rs, "test/sample");
	check(r != NULL);
	check(p2pg_ruleset_at(rs, 0) == r);
	check(p2pg_ruleset_at(rs, 1) == NULL);
	check_str(p2pg_rule_title(r), "sample failure");
	check_str(p2pg_rule_root_cause(r), "Something broke.");
	check_str(p2pg_rule_advice(r), "Do this (50% success): Like that.");
	check_str(p2pg_rule_dead_ends(r), "Not that: Because. (fails 90%)");
	check(p2pg_rule_workaround_condition(r, 0) == NULL);
	check(p2pg_rule_dead_end_condition(r, 0) == NULL);
	check(p2pg_rule_workaround_condition(r, 1) == NULL);
	check(p2pg_rule_doc_url(r) == NULL);
	check_str(p2pg_rule_source_file(r), "t0.json");
	check_str(p2pg_rule_json(r), base);
	check(p2pg_rule_confidence(r) == 0.7);
	check_int(p2pg_rule_specificity(r), 3);
	const int *codes;
	check_int(p2pg_rule_codes(r, &codes), 1);
	check_int(codes[0], 217);
	check_int(p2pg_ruleset_check_examples(rs, capture, &(struct captured){0}), 0);
	p2pg_ruleset_free(rs);
}

static const char base_regex[] = "\"regex\": \"sample failure\"";

/* fits loads; refused, the same with one copy more, is refused at 10001. */
static void expect_size_limit(const char *fits, const char *refused)
{
	const char *texts[] = {with(base, base_regex, fits)};
	p2pg_ruleset_free(load_ok(texts, 1));
	expect_problem(
	    with(base, base_regex, refused), 7,
	    "regex too large: its repetitions expand it to about 1e+04 elements (at most "
	    "10000)");
}

/* The regex's cost to glibc's regcomp() once repetitions are spelt out, counted exactly: at 10000
 * it loads, at 10001 it is refused. A stack of '+' doubles it each time: 27 of them would ask
 * regcomp() for gigabytes. */
static void test_regex_size(void)
{
	char plus[64] = "\"regex\": \"sample failure c";
	memset(plus + strlen(plus), '+', 27);
	strcat(plus, "\"");
	expect_problem(with(base, base_regex, plus), 7,
		       "regex too large: its repetitions expand it to about 1.34e+08 elements (at "
		       "most 10000)");

	/* 14 characters, a bracket expression (one atom, whatever it holds) repeated 9986 times. */
	expect_size_limit("\"regex\": \"sample failure[]x[:digit:]{}]{9986}\"",
			  "\"regex\": \"sample failure[]x[:digit:]{}]{9987}\"");
	/* Escaped parentheses are characters, a group's repetition copies the whole group, and
	 * an alternative adds its size; x{n,} is n copies and a loop, x* and x? copy nothing. */
	expect_size_limit("\"regex\": \"sample failure\\\\(x\\\\){9984}\"",
			  "\"regex\": \"sample failure\\\\(x\\\\){9985}\"");
	expect_size_limit("\"regex\": \"sample (failure|fault){832}\"",
			  "\"regex\": \"sample (failure|fault){833}\"");
	expect_size_limit("\"regex\": \"sample failure x*y?z{9982,}\"",
			  "\"regex\": \"sample failure x*y?z{9983,}\"");
}

/* A built-in rule is read by the reader for build-checked text and keeps the compiled-in text; what
 * it makes, and what is reported when that reader cannot read it, is what a rule file gives. */
static void test_builtin_path(void)
{
	struct p2pg_ruleset *from_file = p2pg_ruleset_new(), *builtin = p2pg_ruleset_new();
	check_int(p2pg_ruleset_add_text(from_file, "t.json", base, strlen(base), NULL, NULL), 0);
	check_int(rules_add_builtin_text(builtin, "rules/test/sample.json", "test/sample", base,
					 strlen(base), 0, NULL, NULL, NULL),
		  0);
	/* A wrong count of values (the build's, normally) makes the faster reader refuse the text;
	 * the strict reader then reads the same rule. */
	struct p2pg_ruleset *miscounted = p2pg_ruleset_new();
	check_int(rules_add_builtin_text(miscounted, "rules/test/sample.json", "test/sample", base,
					 strlen(base), 3, NULL, NULL, NULL),
		  0);
	check_int(p2pg_ruleset_count(miscounted), 1);
	if (p2pg_ruleset_count(miscounted) == 1)
		check_str(p2pg_rule_advice(p2pg_ruleset_at(miscounted, 0)),
			  p2pg_rule_advice(p2pg_ruleset_at(builtin, 0)));
	p2pg_ruleset_free(miscounted);
	const struct p2pg_rule *a = p2pg_ruleset_at(from_file, 0), *b = p2pg_ruleset_at(builtin, 0);
	check(a && b);
	if (a && b) {
		check_str(p2pg_rule_id(b), p2pg_rule_id(a));
		check_str(p2pg_rule_advice(b), p2pg_rule_advice(a));
		check_str(p2pg_rule_dead_ends(b), p2pg_rule_dead_ends(a));
		check_int(p2pg_rule_specificity(b), p2pg_rule_specificity(a));
		check(p2pg_rule_confidence(b) == p2pg_rule_confidence(a));
		check(p2pg_rule_json(b) == base);
		check(p2pg_rule_json(a) != base);
		check_str(p2pg_rule_json(a), base);
		const struct p2pg_rule *found[2] = {0};
		check_int(p2pg_ruleset_explain(builtin, "sample failure", found, 2), 1);
		check(found[0] == b);
	}
	p2pg_ruleset_free(from_file);
	p2pg_ruleset_free(builtin);

	struct captured c = {0};
	struct p2pg_ruleset *rs = p2pg_ruleset_new();
	const char *broken = with(base, "\"sample failure\",\n", "\"sample failure\"\n");
	int problems = 0;
	check_int(rules_add_builtin_text(rs, "rules/test/sample.json", "test/sample", broken,
					 strlen(broken), 0, capture, &c, &problems),
		  -EINVAL);
	check_int(problems, 1);
	check_int(c.line, 4);
	check_str(c.message, "syntax error: '}' expected near '\"root_cause\"'");
	check_int(p2pg_ruleset_count(rs), 0);
	p2pg_ruleset_free(rs);
}

/* A built-in rule's regex is compiled at its first use (the guard's process never explains text),
 * and p2pg_ruleset_check_examples, which `rules validate` runs, says what a rule file's read would
 * have said of it. */
static void expect_builtin_regex_problem(const char *text, const char *message)
{
	struct p2pg_ruleset *rs = p2pg_ruleset_new();
	struct all all = {0};
	check_int(rules_add_builtin_text(rs, "rules/test/sample.json", "test/sample", text,
					 strlen(text), 0, capture_all, &all, NULL),
		  0);
	check_int(all.n, 0);
	const struct p2pg_rule *r = p2pg_ruleset_at(rs, 0), *found[2];
	check(r && atomic_load(&r->regex) == NULL); /* not compiled when read */
	check_int(p2pg_ruleset_explain(rs, "a line naming nothing", found, 2), 0);
	check(p2pg_ruleset_check_examples(rs, capture_all, &all) >= 1);
	check(all.n >= 1);
	check_str(all.files[0], "rules/test/sample.json");
	check_int(all.lines[0], 7);
	check_str(all.messages[0], message);
	p2pg_ruleset_free(rs);

	/* The same text as a rule file: the same message, when it is read. */
	struct captured c = {0};
	rs = p2pg_ruleset_new();
	check_int(p2pg_ruleset_add_text(rs, "t.json", text, strlen(text), capture, &c), -EINVAL);
	check_int(c.line, 7);
	check_str(c.message, message);
	p2pg_ruleset_free(rs);
}

static void test_builtin_regex(void)
{
	struct p2pg_ruleset *rs = p2pg_ruleset_new();
	check_int(rules_add_builtin_text(rs, "rules/test/sample.json", "test/sample", base,
					 strlen(base), 0, NULL, NULL, NULL),
		  0);
	const struct p2pg_rule *r = p2pg_ruleset_at(rs, 0), *found[2];
	check(r && atomic_load(&r->regex) == NULL);
	check_int(p2pg_ruleset_explain(rs, "it was a sample failure", found, 2), 1);
	const regex_t *compiled = r ? atomic_load(&r->regex) : NULL;
	check(compiled != NULL && compiled != &rules_regex_broken);
	check(rules_rule_regex(r) == compiled); /* compiled once */
	check_int(p2pg_ruleset_check_examples(rs, NULL, NULL), 0);
	p2pg_ruleset_free(rs);

	/* Without its alias, so that only the regex could explain a line. */
	const char *no_alias = with(base, "  \"aliases\": [\"SAMPLE\"],\n", "");
	char broken[4096], empty[4096], escaped[4096];
	snprintf(broken, sizeof(broken), "%s",
		 with(no_alias, "\"regex\": \"sample failure\"", "\"regex\": \"sample (failure\""));
	snprintf(empty, sizeof(empty), "%s",
		 with(no_alias, "\"regex\": \"sample failure\"", "\"regex\": \"(sample)?\""));
	char why[160];
	regex_t scratch;
	regerror(regcomp(&scratch, "sample (failure", REG_EXTENDED | REG_ICASE), &scratch, why,
		 sizeof(why));
	char want[200];
	snprintf(want, sizeof(want), "invalid regex: %s", why);
	expect_builtin_regex_problem(broken, want);
	expect_builtin_regex_problem(empty, "regex matches the empty string");
	/* The JSON text "[^\\n]" is the regex [^\n]: it leaves out '\\' and 'n', not newlines. */
	snprintf(escaped, sizeof(escaped), "%s",
		 with(no_alias, "\"regex\": \"sample failure\"",
		      "\"regex\": \"sample[^\\\\n]*failure\""));
	expect_builtin_regex_problem(
	    escaped, "regex bracket [^\\n] holds a backslash and a letter: inside brackets POSIX "
		     "reads '\\' as itself; put the character itself there (in the JSON text a "
		     "single \"\\n\" is already a newline)");
}

/* Every message of rules/README.md, "Validator messages", in its order. */
static void test_malformed(void)
{
	expect_problem(with(base, "\"sample failure\",\n", "\"sample failure\"\n"), 4,
		       "syntax error: '}' expected near '\"root_cause\"'");
	expect_problem("[1, 2]", 1, "entry must be a JSON object, not an array");
	expect_problem(with(base, "  \"signature\": \"sample failure\",\n", ""), 1,
		       "missing required field \"signature\"");
	expect_problem(with(with(base, "  \"codes\": [217],\n", ""),
			    "  \"match\": {\"api\": "
			    "[\"cudaDeviceEnablePeerAccess\"], "
			    "\"status\": [217], \"facts\": "
			    "{\"topology\": \"SYS\"}},\n",
			    ""),
		       1, "missing required field \"codes\" or \"match\"");
	expect_problem(with(base, "\"signature\": \"sample failure\"", "\"signature\": 5"), 3,
		       "field \"signature\" must be a string, not a number");
	expect_problem(with(base, "\"confidence\": 0.7", "\"confidence\": 1.5"), 11,
		       "field \"confidence\" must be a number between 0 and 1");
	expect_problem(with(base, "\"aliases\": [\"SAMPLE\"]", "\"aliases\": [\"SAMPLE\", 3]"), 8,
		       "field \"aliases\" must be an array of strings");
	expect_problem(with(base, "\"confidence\": 0.7,", "\"confidence\": 0.7, \"colour\": 1,"),
		       11, "unknown field \"colour\"");
	expect_problem(with(base, "\"id\": \"test/sample\"", "\"id\": \"Test/Sample\""), 2,
		       "invalid id \"Test/Sample\" (expected domain/name in lowercase letters, "
		       "digits and dashes)");
	expect_problem(with(base, "\"codes\": [217]", "\"codes\": [-1]"), 5,
		       "field \"codes\" must be an array of CUDA status codes");
	expect_problem(with(base, "\"codes\": [217]", "\"codes\": [704]"), 6,
		       "match status 217 is not listed in codes");
	expect_problem(
	    with(base, "\"regex\": \"sample failure\"", "\"regex\": \"(sample failure){1000}\""), 7,
	    "regex too large: its repetitions expand it to about 1.4e+04 elements (at most "
	    "10000)");
	expect_problem(with(base, "\"regex\": \"sample failure\"", "\"regex\": \"(sample\""), 7,
		       "invalid regex: Unmatched ( or \\(");
	expect_problem(with(base, "\"regex\": \"sample failure\"", "\"regex\": \"x*\""), 7,
		       "regex matches the empty string");
	expect_problem(with(base, "\"aliases\": [\"SAMPLE\"]", "\"aliases\": [\"\"]"), 8,
		       "empty alias");

	/* match */
	expect_problem(with(base, "\"match\": {\"api\"", "\"match\": {\"apis\""), 6,
		       "unknown match condition \"apis\"");
	expect_problem(with(base,
			    "{\"api\": [\"cudaDeviceEnablePeerAccess\"], \"status\": [217], "
			    "\"facts\": {\"topology\": \"SYS\"}}",
			    "{}"),
		       6, "match needs at least one condition");
	expect_problem(with(base, "[\"cudaDeviceEnablePeerAccess\"], \"status\"",
			    "[\"EnablePeerAccess\"], \"status\""),
		       6, "invalid API name \"EnablePeerAccess\"");
	expect_problem(with(base, "\"status\": [217]", "\"status\": []"), 6,
		       "empty list for \"match.status\"");
	expect_problem(with(base, "\"api\": [\"cudaDeviceEnablePeerAccess\"], ", "\"api\": [], "),
		       6, "empty list for \"match.api\"");
	expect_problem(with(base, "{\"topology\": \"SYS\"}}", "{\"topo\": \"SYS\"}}"), 6,
		       "unknown fact key \"topo\"");
	expect_problem(with(base, "{\"topology\": \"SYS\"}}", "{\"api\": \"cuMemcpy\"}}"), 6,
		       "fact key \"api\" belongs in \"api\", not in \"facts\"");
	expect_problem(with(base, "{\"topology\": \"SYS\"}}", "{\"topology\": \"SYSTEM\"}}"), 6,
		       "unknown value \"SYSTEM\" for fact \"topology\" (expected one of INTERNAL, "
		       "PIX, PXB, PHB, NODE, SYS, unknown)");
	expect_problem(with(base, "{\"topology\": \"SYS\"}}", "{\"peer_is_self\": 1}}"), 6,
		       "fact \"peer_is_self\" expects a boolean, not a number");
	expect_problem(with(base, "{\"topology\": \"SYS\"}}", "{\"flags\": 0.5}}"), 6,
		       "fact \"flags\" expects an integer, not a fraction");
	expect_problem(with(base, "{\"topology\": \"SYS\"}}", "{\"topology\": []}}"), 6,
		       "empty list for fact \"topology\"");
	expect_problem(with(base, "{\"topology\": \"SYS\"}}", "{\"flags\": {\"gt\": 0}}}"), 6,
		       "unknown operator \"gt\" for fact \"flags\" (expected gte, lte, ne or "
		       "exists)");
	expect_problem(
	    with(base, "{\"topology\": \"SYS\"}}", "{\"flags\": {\"gte\": 0, \"lte\": 4}}}"), 6,
	    "operator object for fact \"flags\" must have exactly one member");
	expect_problem(with(base, "{\"topology\": \"SYS\"}}", "{\"topology\": {\"gte\": 1}}}"), 6,
		       "operator \"gte\" needs an integer fact, and \"topology\" is a string");
	expect_problem(with(base, "{\"topology\": \"SYS\"}}", "{\"topology\": {\"exists\": 1}}}"),
		       6, "operator \"exists\" takes true or false");

	/* workarounds and dead ends */
	expect_problem(with(base, ", \"success_rate\": 0.5}", "}"), 9,
		       "missing required field \"workarounds[0].success_rate\"");
	expect_problem(with(base, "\"success_rate\": 0.5", "\"success_rate\": 50"), 9,
		       "field \"workarounds[0].success_rate\" must be a number between 0 and 1");
	expect_problem(with(base, "\"action\": \"Do this\", ", ""), 9,
		       "missing required field \"workarounds[0].action\"");
	expect_problem(with(base, "\"how\": \"Like that.\"", "\"hwo\": \"Like that.\""), 9,
		       "unknown field \"workarounds[0].hwo\"");
	expect_problem(with(base,
			    "[{\"action\": \"Do this\", \"how\": \"Like that.\", \"success_rate\": "
			    "0.5}]",
			    "[]"),
		       9, "field \"workarounds\" needs at least one entry");
	expect_problem(
	    with(base, "\"how\": \"Like that.\"", "\"how\": \"Like that.\", \"condition\": 2"), 9,
	    "field \"workarounds[0].condition\" must be a string, not a number");
	expect_problem(with(base, "\"why_fails\": \"Because.\", ", ""), 10,
		       "missing required field \"dead_ends[0].why_fails\"");

	/* examples */
	expect_problem(with(base, "\"near_misses\": [{\"status\": 704}]", "\"near_misses\": []"),
		       14, "field \"examples.near_misses\" needs at least one example");
	expect_problem(with(base, ",\n    \"near_misses\": [{\"status\": 704}]", ""), 12,
		       "missing required field \"examples.near_misses\"");
	expect_problem(with(base, "\"near_misses\": [{\"status\": 704}]",
			    "\"near_misses\": [{\"status\": 704}], \"maybe\": []"),
		       14, "unknown field \"examples.maybe\"");
	expect_problem(with(base, "[{\"status\": 704}]", "[{\"status\": 704, \"stauts\": 1}]"), 14,
		       "unknown field \"examples.near_misses[0].stauts\"");
	expect_problem(with(base, "[{\"status\": 704}]", "[{\"status\": \"704\"}]"), 14,
		       "field \"examples.near_misses[0].status\" must be a CUDA status code");
	expect_problem(with(base, "[{\"status\": 704}]", "[{\"status\": 704, \"text\": \"x\"}]"),
		       14, "example \"examples.near_misses[0]\" mixes text and evidence");
	expect_problem(
	    with(base, "[{\"status\": 704}]", "[{\"facts\": {\"topology\": [\"SYS\"]}}]"), 14,
	    "example fact \"topology\" must be a single value");
	expect_problem(with(base, "[{\"status\": 704}]", "[{\"facts\": {\"topolgy\": \"SYS\"}}]"),
		       14, "unknown fact key \"topolgy\"");
	expect_problem(with(base, "[{\"status\": 704}]", "[{\"facts\": {\"nvml\": \"yes\"}}]"), 14,
		       "unknown value \"yes\" for fact \"nvml\" (expected one of ok, unavailable)");

	/* A rule without match */
	const char *text_only =
	    with(with(base,
		      "  \"match\": {\"api\": [\"cudaDeviceEnablePeerAccess\"], "
		      "\"status\": [217], \"facts\": {\"topology\": "
		      "\"SYS\"}},\n",
		      ""),
		 "{\"api\": \"cudaDeviceEnablePeerAccess\", \"status\": 217, "
		 "\"facts\": {\"topology\": \"SYS\"}}",
		 "{\"text\": \"sample failure\"}");
	expect_problem(text_only, 13,
		       "evidence example \"examples.near_misses[0]\" for a rule without \"match\" "
		       "(use a text example)");
	expect_problem(with(with(with(text_only, "  \"regex\": \"sample failure\",\n", ""),
				 "  \"aliases\": [\"SAMPLE\"],\n", ""),
			    "[{\"status\": 704}]", "[{\"text\": \"x\"}]"),
		       1, "a rule without \"match\" needs \"regex\" or \"aliases\"");

	/* Two problems in one entry are both reported. */
	struct p2pg_ruleset *rs = p2pg_ruleset_new();
	struct captured c = {0};
	const char *two = with(with(base, "\"regex\": \"sample failure\"", "\"regex\": \"(\""),
			       "\"topology\": \"SYS\"}},", "\"topology\": \"sys\"}},");
	check_int(p2pg_ruleset_add_text(rs, "t.json", two, strlen(two), capture, &c), -EINVAL);
	check_int(c.n, 2);
	p2pg_ruleset_free(rs);
}

static void test_null_and_seed_fields(void)
{
	/* The shared schema writes null for optional fields and carries fields p2pguard ignores. */
	const char *seedish =
	    with(base, "\"confidence\": 0.7,",
		 "\"confidence\": 0.7, \"subcategory\": null, \"official_doc_section\": null, "
		 "\"versions\": [{\"version\": \"CUDA 12.0\", \"status\": \"active\"}], "
		 "\"transition_graph\": {\"leads_to\": []}, \"signature_zh\": \"x\", "
		 "\"evidence_count\": 3, \"tags\": [\"p2p\"],");
	const char *texts[] = {seedish};
	struct p2pg_ruleset *rs = load_ok(texts, 1);
	check_int(p2pg_ruleset_count(rs), 1);
	p2pg_ruleset_free(rs);
	expect_problem(
	    with(base, "\"confidence\": 0.7,", "\"confidence\": 0.7, \"evidence_count\": -1,"), 11,
	    "field \"evidence_count\" must be a non-negative integer");
	expect_problem(with(base, "\"signature\": \"sample failure\"", "\"signature\": null"), 3,
		       "field \"signature\" must be a string, not null");
}

static void test_duplicate(void)
{
	struct p2pg_ruleset *rs = p2pg_ruleset_new();
	struct captured c = {0};
	check_int(p2pg_ruleset_add_text(rs, "a.json", base, strlen(base), capture, &c), 0);
	check_int(p2pg_ruleset_add_text(rs, "b.json", base, strlen(base), capture, &c), -EEXIST);
	check_int(c.n, 1);
	check_int(c.line, 2);
	check_str(c.file, "b.json");
	check_str(c.message, "duplicate id \"test/sample\" (also in a.json)");
	check_int(p2pg_ruleset_count(rs), 1);
	p2pg_ruleset_free(rs);
}

/* The names fields go by in messages, put together without printf: many digits, and cut like
 * snprintf cuts. */
static void test_field_names(void)
{
	char buf[32];
	ld_field_index(buf, sizeof(buf), "examples.matches", 1234);
	check_str(buf, "examples.matches[1234]");
	ld_field_index(buf, sizeof(buf), "workarounds", 0);
	check_str(buf, "workarounds[0]");
	ld_field_key(buf, sizeof(buf), "dead_ends[3]", "why_fails");
	check_str(buf, "dead_ends[3].why_fails");
	ld_field_key(buf, 12, "dead_ends[3]", "why_fails");
	check_str(buf, "dead_ends[3");
	ld_field_index(buf, 9, "notes", 42);
	check_str(buf, "notes[42");
}

/* The loader looks for a twin only once ids stop arriving in their files' order, so a repeat is
 * found however the ids came: sorted, then one out of order ("t/a-b.json" sorts before
 * "t/a.json"), then a repeat that sorts after the one before it. */
static void test_duplicate_after_order_breaks(void)
{
	const char *ids[] = {"t/a", "t/c", "t/a-b", "t/c"};
	struct p2pg_ruleset *rs = p2pg_ruleset_new();
	struct captured c = {0};
	for (size_t k = 0; k < 4; k++) {
		char line[64];
		snprintf(line, sizeof(line), "\"id\": \"%s\"", ids[k]);
		const char *text = with(base, "\"id\": \"test/sample\"", line);
		check_int(p2pg_ruleset_add_text(rs, "x.json", text, strlen(text), capture, &c),
			  k == 3 ? -EEXIST : 0);
	}
	check_int(c.n, 1);
	check_str(c.message, "duplicate id \"t/c\" (also in x.json)");
	check_int(p2pg_ruleset_count(rs), 3);
	p2pg_ruleset_free(rs);
}

/* ---- Matching ---- */

static const char *rule_text(const char *id, const char *match, double confidence)
{
	static char buf[16][2048];
	static int next;
	char *out = buf[next++ % 16];
	snprintf(out, sizeof(buf[0]),
		 "{\"id\": \"%s\", \"signature\": \"s\", \"root_cause\": \"r\", \"match\": %s, "
		 "\"confidence\": %.2f, \"workarounds\": [{\"action\": \"a\", \"success_rate\": "
		 "0.5}], \"examples\": {\"matches\": [{}], \"near_misses\": [{}]}}",
		 id, match, confidence);
	return out;
}

static const char *match_id(const struct p2pg_ruleset *rs, const char *api, int status,
			    const struct p2pg_facts *facts)
{
	const struct p2pg_rule *r = p2pg_ruleset_match(rs, api, status, facts);
	return r ? p2pg_rule_id(r) : "(none)";
}

static void test_match(void)
{
	const char *texts[] = {
	    rule_text("t/general", "{\"status\": [217]}", 0.5),
	    rule_text("t/sys",
		      "{\"status\": [217], \"facts\": {\"topology\": [\"SYS\", \"NODE\"]}}", 0.8),
	    rule_text("t/self", "{\"status\": [217], \"facts\": {\"peer_is_self\": true}}", 0.9),
	    rule_text("t/a-tie", "{\"status\": [217], \"facts\": {\"topology\": \"PIX\"}}", 0.6),
	    rule_text("t/b-tie", "{\"status\": [217], \"facts\": {\"iommu_present\": true}}", 0.6),
	    rule_text("t/confident",
		      "{\"status\": [217], \"facts\": {\"virtualization\": \"vgpu\"}}", 0.99),
	    rule_text("t/flags",
		      "{\"api\": [\"cudaDeviceEnablePeerAccess\", \"cuCtxEnablePeerAccess\"], "
		      "\"status\": [1], \"facts\": {\"flags\": {\"ne\": 0}}}",
		      0.5),
	    rule_text("t/copy",
		      "{\"api\": [\"cuMemcpyPeerAsync\", \"cuMemcpyDtoD\"], \"status\": [1]}", 0.5),
	    rule_text("t/peers",
		      "{\"status\": [711], \"facts\": {\"peers_enabled\": {\"gte\": 8}}}", 0.5),
	    rule_text("t/few", "{\"status\": [711], \"facts\": {\"peers_enabled\": {\"lte\": 7}}}",
		      0.5),
	    rule_text(
		"t/hidden",
		"{\"status\": [101], \"facts\": {\"cuda_visible_devices\": {\"exists\": true}}}",
		0.5),
	    rule_text("t/unset",
		      "{\"status\": [101], \"facts\": {\"cuda_visible_devices\": {\"exists\": "
		      "false}}}",
		      0.5),
	    rule_text("t/probe", "{\"facts\": {\"p2p_probe\": \"wrong_data\"}}", 0.5),
	};
	struct p2pg_ruleset *rs = load_ok(texts, sizeof(texts) / sizeof(texts[0]));
	struct p2pg_facts f = {0};

	check_str(match_id(rs, "cudaDeviceEnablePeerAccess", 217, NULL), "t/general");
	check_str(match_id(rs, "cudaDeviceEnablePeerAccess", 217, &f), "t/general");
	check_str(match_id(rs, "cudaDeviceEnablePeerAccess", 999, &f), "(none)");
	check_str(match_id(NULL, "x", 217, &f), "(none)");

	/* A list is any of; a more specific rule wins. */
	p2pg_facts_set_str(&f, "topology", "NODE");
	check_str(match_id(rs, NULL, 217, &f), "t/sys");
	p2pg_facts_set_str(&f, "topology", "PHB");
	check_str(match_id(rs, NULL, 217, &f), "t/general");

	/* Equal specificity: the higher confidence, then the smaller id. */
	memset(&f, 0, sizeof(f));
	p2pg_facts_set_str(&f, "topology", "SYS");
	p2pg_facts_set_bool(&f, "peer_is_self", true);
	check_str(match_id(rs, NULL, 217, &f), "t/self");
	memset(&f, 0, sizeof(f));
	p2pg_facts_set_str(&f, "topology", "PIX");
	p2pg_facts_set_bool(&f, "iommu_present", true);
	check_str(match_id(rs, NULL, 217, &f), "t/a-tie");
	p2pg_facts_set_str(&f, "virtualization", "vgpu");
	check_str(match_id(rs, NULL, 217, &f), "t/confident");

	/* A bool fact stored as an integer still compares. */
	memset(&f, 0, sizeof(f));
	p2pg_facts_set_int(&f, "peer_is_self", 1);
	check_str(match_id(rs, NULL, 217, &f), "t/self");

	/* ne: holds for another value, not for the same one, not for a missing key. */
	memset(&f, 0, sizeof(f));
	check_str(match_id(rs, "cudaDeviceEnablePeerAccess", 1, &f), "(none)");
	p2pg_facts_set_int(&f, "flags", 0);
	check_str(match_id(rs, "cudaDeviceEnablePeerAccess", 1, &f), "(none)");
	p2pg_facts_set_int(&f, "flags", 4);
	check_str(match_id(rs, "cudaDeviceEnablePeerAccess", 1, &f), "t/flags");
	check_str(match_id(rs, "cudaMemcpyPeer", 1, &f), "(none)");
	check_str(match_id(rs, NULL, 1, &f), "(none)");

	/* The ABI suffixes of the called name are ignored. */
	check_str(match_id(rs, "cuMemcpyPeerAsync_ptsz", 1, &f), "t/copy");
	check_str(match_id(rs, "cuMemcpyDtoD_v2", 1, &f), "t/copy");
	check_str(match_id(rs, "cuMemcpyDtoD_v2_ptds", 1, &f), "t/copy");
	check_str(match_id(rs, "cuMemcpyPeerAsyncX", 1, &f), "(none)");

	/* gte / lte */
	memset(&f, 0, sizeof(f));
	check_str(match_id(rs, NULL, 711, &f), "(none)");
	p2pg_facts_set_int(&f, "peers_enabled", 8);
	check_str(match_id(rs, NULL, 711, &f), "t/peers");
	p2pg_facts_set_int(&f, "peers_enabled", 7);
	check_str(match_id(rs, NULL, 711, &f), "t/few");
	p2pg_facts_set_str(&f, "peers_enabled", "8"); /* wrong type: no comparison holds */
	check_str(match_id(rs, NULL, 711, &f), "(none)");

	/* exists */
	memset(&f, 0, sizeof(f));
	check_str(match_id(rs, NULL, 101, &f), "t/unset");
	p2pg_facts_set_str(&f, "cuda_visible_devices", "0");
	check_str(match_id(rs, NULL, 101, &f), "t/hidden");

	/* A rule without api or status conditions holds for any call. */
	memset(&f, 0, sizeof(f));
	p2pg_facts_set_str(&f, "p2p_probe", "wrong_data");
	check_str(match_id(rs, "cudaMemcpyPeerAsync", 0, &f), "t/probe");
	p2pg_ruleset_free(rs);
}

/* ---- Explain ---- */

static const char *explain_first(const struct p2pg_ruleset *rs, const char *text, size_t *n)
{
	const struct p2pg_rule *out[8];
	*n = p2pg_ruleset_explain(rs, text, out, 8);
	return *n ? p2pg_rule_id(out[0]) : "(none)";
}

static void test_explain(void)
{
	static const char framework[] =
	    "{\"id\": \"fw/torch\", \"signature\": \"s\", \"root_cause\": \"r\", \"codes\": [217], "
	    "\"regex\": \"CUDA error: peer access is not supported between these two devices\", "
	    "\"workarounds\": "
	    "[{\"action\": \"a\", \"success_rate\": 0.5}], \"examples\": {\"matches\": [{\"text\": "
	    "\"CUDA error: peer access is not supported between these two devices\"}], "
	    "\"near_misses\": [{\"text\": \"217\"}]}}";
	static const char alias[] =
	    "{\"id\": \"fw/fm\", \"signature\": \"s\", \"root_cause\": \"r\", \"codes\": [], "
	    "\"aliases\": [\"nv-fabricmanager\"], \"workarounds\": [{\"action\": \"a\", "
	    "\"success_rate\": 0.5}], \"examples\": {\"matches\": [{\"text\": \"nv-fabricmanager "
	    "failed\"}], \"near_misses\": [{\"text\": \"fabric\"}]}}";
	const char *texts[] = {
	    rule_text("t/general", "{\"status\": [217]}", 0.5),
	    rule_text("t/sys", "{\"status\": [217], \"facts\": {\"topology\": \"SYS\"}}", 0.9),
	    rule_text("t/ready", "{\"status\": [802]}", 0.5),
	    rule_text("t/invalid", "{\"status\": [101]}", 0.5),
	    rule_text("t/value", "{\"status\": [1]}", 0.5),
	    framework,
	    alias,
	};
	struct p2pg_ruleset *rs = load_ok(texts, sizeof(texts) / sizeof(texts[0]));
	size_t n;

	/* Names, messages and numbers find the rules with a match on that status; the general one
	 * first. Text-only rules are not found through a status. */
	check_str(explain_first(rs, "cudaErrorPeerAccessUnsupported", &n), "t/general");
	check_int(n, 2);
	check_str(explain_first(rs, "returned CUDA_ERROR_PEER_ACCESS_UNSUPPORTED.", &n),
		  "t/general");
	check_str(explain_first(rs, "217", &n), "t/general");
	check_int(n, 2);
	check_str(explain_first(rs, "  217\n", &n), "t/general");
	check_str(explain_first(rs, "Error 802: system not yet initialized", &n), "t/ready");
	check_str(explain_first(rs, "CUDA error 802", &n), "t/ready");
	check_str(explain_first(rs, "status=802", &n), "t/ready");
	check_str(explain_first(rs, "cudaErrorInvalidDevice", &n), "t/invalid");
	/* Not a status: part of an identifier, a longer name, a size or an ordinal. */
	check_str(explain_first(rs, "cudaErrorInvalidDeviceFunction", &n), "(none)");
	check_str(explain_first(rs, "copied 217 bytes", &n), "(none)");
	check_str(explain_first(rs, "gpu217", &n), "(none)");
	check_str(explain_first(rs, "version 12.217", &n), "(none)");
	check_str(explain_first(rs, "device 1 failed", &n), "(none)");
	check_str(explain_first(rs, "error 1", &n), "t/value");

	/* The rule whose regex covers more of the line comes first. */
	check_str(explain_first(rs,
				"RuntimeError: CUDA error: peer access is not supported between "
				"these two devices",
				&n),
		  "fw/torch");
	check_int(n, 3);
	check_str(explain_first(rs, "peer access is not supported between these two devices", &n),
		  "t/general");
	check_str(explain_first(rs, "[pid 7] NV-FABRICMANAGER exited", &n), "fw/fm");
	check_str(explain_first(rs, "all is well", &n), "(none)");
	check_int(p2pg_ruleset_explain(rs, "217", NULL, 0), 2);
	check_int(p2pg_ruleset_explain(NULL, "217", NULL, 0), 0);
	p2pg_ruleset_free(rs);
}

/* The validator's cross-set check: examples that do not behave. */
static void test_examples_behave(void)
{
	static const char loose[] =
	    "{\"id\": \"t/loose\", \"signature\": \"s\", \"root_cause\": \"r\", \"match\": "
	    "{\"status\": [217]}, \"confidence\": 0.9, \"workarounds\": [{\"action\": \"a\", "
	    "\"success_rate\": 0.5}], \"examples\": {\"matches\": [\n"
	    "{\"status\": 217, \"facts\": {\"topology\": \"SYS\"}},\n" /* line 2: taken by t/sys */
	    "{\"status\": 704},\n"				       /* line 3: nothing */
	    "{\"text\": \"nothing to see\"},\n"			       /* line 4 */
	    "{\"text\": \"peer access is not supported between these two devices on SYS\"}\n"
	    "], \"near_misses\": [\n"
	    "{\"status\": 217},\n"  /* line 7: selects this rule */
	    "{\"text\": \"217\"}\n" /* line 8 */
	    "]}}";
	static const char sys[] =
	    "{\"id\": \"t/sys\", \"signature\": \"s\", \"root_cause\": \"r\", \"match\": "
	    "{\"status\": [217], \"facts\": {\"topology\": \"SYS\"}}, \"regex\": "
	    "\"peer access is not supported between these two devices on SYS\", "
	    "\"workarounds\": [{\"action\": \"a\", \"success_rate\": 0.5}], \"examples\": "
	    "{\"matches\": [{\"status\": 217, \"facts\": {\"topology\": \"SYS\"}}], "
	    "\"near_misses\": [{\"status\": 217}]}}";
	const char *texts[] = {loose, sys};
	struct p2pg_ruleset *rs = load_ok(texts, 2);
	struct all all = {0};
	const struct {
		int line;
		const char *message;
	} want[] = {
	    {2, "example selects t/sys, not this rule"},
	    {3, "example selects no rule"},
	    {4, "example text explains nothing"},
	    {5, "example text is explained first by t/sys, not this rule"},
	    {7, "near miss selects this rule"},
	    {8, "near-miss text is explained first by this rule"},
	};

	check_int(p2pg_ruleset_check_examples(rs, NULL, NULL), 6);
	check_int(p2pg_ruleset_check_examples(rs, capture_all, &all), 6);
	check_int(all.n, 6);
	for (size_t k = 0; k < sizeof(want) / sizeof(want[0]) && k < (size_t)all.n; k++) {
		check_str(all.files[k], "t0.json");
		check_int(all.lines[k], want[k].line);
		check_str(all.messages[k], want[k].message);
	}
	p2pg_ruleset_free(rs);
}

int main(void)
{
	RUN(test_valid);
	RUN(test_conditions);
	RUN(test_regex_size);
	RUN(test_malformed);
	RUN(test_builtin_path);
	RUN(test_builtin_regex);
	RUN(test_null_and_seed_fields);
	RUN(test_field_names);
	RUN(test_duplicate);
	RUN(test_duplicate_after_order_breaks);
	RUN(test_match);
	RUN(test_explain);
	RUN(test_examples_behave);
	return test_failures ? 1 : 0;
}
