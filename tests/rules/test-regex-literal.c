/* SPDX-License-Identifier: MIT */
/*
 * The words a regex cannot match without (rules_regex_literal.c): what is taken from each form of
 * the grammar, and that it is sound on real text: for every shipped rule's regex and every line
 * of the explain corpus, the variants and the rules' own examples, a line the regex matches holds
 * one of its words.
 */
#include <jansson.h>
#include <regex.h>
#include <strings.h>

#include "rules-builtin.h"
#include "rules-loader.h"
#include "rules-test.h"

/* want: the words joined by " | ", or "" for none. */
static void expect_words(const char *regex, const char *want)
{
	char **words = NULL;
	size_t n = 0;
	check_int(rules_regex_literals(regex, &words, &n), 0);
	char got[512] = "";
	for (size_t k = 0; k < n; k++) {
		if (k)
			strncat(got, " | ", sizeof(got) - strlen(got) - 1);
		strncat(got, words[k], sizeof(got) - strlen(got) - 1);
		free(words[k]);
	}
	free(words);
	if (strcmp(got, want) != 0)
		fprintf(stderr, "  regex %s\n", regex);
	check_str(got, want);
}

static void test_forms(void)
{
	expect_words("peer access is not supported", "peer access is not supported");
	/* What a quantifier applies to is left out or ends the run. */
	expect_words("abcd?efgh", "efgh");
	expect_words("abcd*efg", "abc");
	expect_words("abcd+efg", "abcd");
	expect_words("abcd+?efgh", "efgh"); /* (d+)? */
	expect_words("abcd{2}efgh", "efgh");
	expect_words("abcd{,3}xyz", "abc");
	expect_words("x{a}bcd", "bcd");	  /* glibc's literal "{a}": left out, which is safe */
	expect_words("abcd{xyzw", "abc"); /* an interval never closed: nothing after it */
	expect_words("ab+c", "");	  /* "ab" is too short to be worth a search */
	/* Escapes: a punctuation character is itself, a letter a class or an anchor. */
	expect_words("a\\.b\\.c\\(d\\)", "a.b.c(d)");
	expect_words("\\bword\\b", "word");
	expect_words("x\\wyz\\sabcd", "abcd");
	/* Groups, brackets, anchors and '.' end a run. */
	expect_words("abc(d|e)+fgh", "abc");
	expect_words("ab[cde]fgh", "fgh");
	expect_words("ab[]|)]fgh", "fgh"); /* ']' and '|' inside a bracket expression */
	expect_words("^abc$", "abc");
	expect_words("abc.def", "abc");
	/* Each top-level alternative needs a word, a whole-branch group its branches'. */
	expect_words("first one|second one", "first one | second one");
	expect_words("first one|ab", "");
	expect_words("first one|", "");
	expect_words("(first one|second (x|y) one)", "first one | second ");
	expect_words("((abc|def)|ghi)", "abc | def | ghi");
	expect_words("(abc)+", "");
	expect_words("(abc)?def", "def");
	expect_words("(unclosed", "");
	expect_words("", "");
	/* Bytes outside ASCII end a run (case folding of other scripts is the locale's). */
	expect_words("caf\xc3\xa9 bar", " bar");
}

static int builtin_regexes(const char **out, size_t max)
{
	size_t n = 0;
	for (size_t k = 0; k < p2pg_builtin_rule_count && n < max; k++) {
		json_t *rule =
		    json_loadb(p2pg_builtin_rules[k].text, p2pg_builtin_rules[k].len, 0, NULL);
		const char *regex = json_string_value(json_object_get(rule, "regex"));
		if (regex)
			out[n++] = strdup(regex);
		json_decref(rule);
	}
	return (int)n;
}

struct lines {
	char **text;
	size_t n, cap;
};

static void add_line(struct lines *l, const char *text)
{
	if (!text)
		return;
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 1024;
		l->text = realloc(l->text, l->cap * sizeof(*l->text));
	}
	l->text[l->n++] = strdup(text);
}

static void add_jsonl(struct lines *l, const char *path)
{
	FILE *f = fopen(path, "r");
	check(f != NULL);
	if (!f)
		return;
	char buf[1 << 16];
	while (fgets(buf, sizeof(buf), f)) {
		json_t *o = json_loads(buf, 0, NULL);
		add_line(l, json_string_value(json_object_get(o, "text")));
		json_decref(o);
	}
	fclose(f);
}

static void add_examples(struct lines *l)
{
	for (size_t k = 0; k < p2pg_builtin_rule_count; k++) {
		json_t *rule =
		    json_loadb(p2pg_builtin_rules[k].text, p2pg_builtin_rules[k].len, 0, NULL);
		json_t *examples = json_object_get(rule, "examples");
		const char *kinds[] = {"matches", "near_misses"};
		for (int i = 0; i < 2; i++) {
			size_t e;
			json_t *ex;
			json_array_foreach(json_object_get(examples, kinds[i]), e, ex)
			    add_line(l, json_string_value(json_object_get(ex, "text")));
		}
		json_decref(rule);
	}
}

static void test_sound_on_real_lines(void)
{
	static const char *regexes[1024];
	int n_regexes = builtin_regexes(regexes, 1024);
	struct lines lines = {0};
	add_jsonl(&lines, EXPLAIN_DIR "/corpus.jsonl");
	add_jsonl(&lines, EXPLAIN_DIR "/variants.jsonl");
	add_examples(&lines);
	check(lines.n > 1000);
	int with_words = 0;
	size_t matched = 0, filtered = 0;
	for (int k = 0; k < n_regexes; k++) {
		char **words = NULL;
		size_t n = 0;
		regex_t re;
		check_int(rules_regex_literals(regexes[k], &words, &n), 0);
		check_int(regcomp(&re, regexes[k], REG_EXTENDED | REG_ICASE), 0);
		with_words += n > 0;
		for (size_t l = 0; l < lines.n; l++) {
			bool has_word = n == 0;
			for (size_t w = 0; w < n && !has_word; w++)
				has_word = strcasestr(lines.text[l], words[w]) != NULL;
			filtered += !has_word;
			if (regexec(&re, lines.text[l], 0, NULL, 0) != 0)
				continue;
			matched++;
			if (!has_word)
				fprintf(stderr, "  regex %s matches a line without its words: %s\n",
					regexes[k], lines.text[l]);
			check(has_word);
		}
		regfree(&re);
		for (size_t w = 0; w < n; w++)
			free(words[w]);
		free(words);
		free((char *)regexes[k]);
	}
	printf("# %d of %d shipped regexes have words; over %zu lines, %zu matches, all holding a "
	       "word; %zu regex runs of %zu saved\n",
	       with_words, n_regexes, lines.n, matched, filtered, lines.n * (size_t)n_regexes);
	/* Most regexes must have words, or explain compiles them all again. */
	check(with_words * 10 >= n_regexes * 8);
	check(matched > 500);
	for (size_t l = 0; l < lines.n; l++)
		free(lines.text[l]);
	free(lines.text);
}

int main(void)
{
	RUN(test_forms);
	RUN(test_sound_on_real_lines);
	return test_failures ? 1 : 0;
}
