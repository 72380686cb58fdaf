/* SPDX-License-Identifier: MIT */
/* The JSON reader: values, line numbers, and one input per error message (rules/README.md,
 * "Syntax errors"). */
#include <errno.h>
#include <math.h>
#include <sys/wait.h>
#include <unistd.h>

#include "json-same.h"
#include "json.h"
#include "rules-test.h"

static struct p2pg_json *parse_ok(const char *text)
{
	struct p2pg_json *v = NULL;
	struct p2pg_json_error err;
	int r = p2pg_json_parse(text, strlen(text), &v, &err);
	if (r != 0)
		fprintf(stderr, "unexpected error %d at line %d: %s\n", r, err.line, err.message);
	check_int(r, 0);
	return v;
}

/* message is the reader's own, exact, or the part of jansson's that names the problem: the line
 * is ours to get right, jansson's wording is its own. */
static void expect_error(const char *text, int line, const char *message)
{
	struct p2pg_json *v = NULL;
	struct p2pg_json_error err;
	int r = p2pg_json_parse(text, strlen(text), &v, &err);
	check_int(r, -EINVAL);
	check(v == NULL);
	check_int(err.line, line);
	if (!strstr(err.message, message)) {
		fprintf(stderr, "got \"%s\", want it to contain \"%s\"\n", err.message, message);
		check(false);
	}
	for (const char *c = err.message; *c; c++)
		check((unsigned char)*c >= 0x20 && *c != 0x7f);
}

static const char *err_message(const char *text)
{
	static struct p2pg_json_error err;
	struct p2pg_json *v = NULL;
	check_int(p2pg_json_parse(text, strlen(text), &v, &err), -EINVAL);
	return err.message;
}

static void test_values(void)
{
	struct p2pg_json *v = parse_ok("{\"a\": [1, -2.5, 3e2, true, false, null, \"x\"],\n"
				       " \"b\": {\"c\": 9007199254740993}, \"d\": -0}");
	if (!v)
		return;
	check_int(v->type, P2PG_JSON_OBJECT);
	check_int(v->count, 3);
	const struct p2pg_json *a = p2pg_json_member(v, "a");
	check_int(a->count, 7);
	check(a->items[0]->is_integer && a->items[0]->integer == 1);
	check(!a->items[1]->is_integer && a->items[1]->number == -2.5);
	check(!a->items[2]->is_integer && a->items[2]->number == 300.0);
	check(a->items[3]->type == P2PG_JSON_BOOL && a->items[3]->boolean);
	check(a->items[4]->type == P2PG_JSON_BOOL && !a->items[4]->boolean);
	check_int(a->items[5]->type, P2PG_JSON_NULL);
	check_str(a->items[6]->string, "x");
	/* Past double precision, the integer is still exact. */
	check_int(p2pg_json_member(p2pg_json_member(v, "b"), "c")->integer, 9007199254740993LL);
	check(p2pg_json_member(v, "d")->is_integer);
	check(p2pg_json_member(v, "zz") == NULL);
	check(p2pg_json_member(a, "a") == NULL); /* not an object */
	p2pg_json_free(v);
	p2pg_json_free(NULL);
}

static void test_lines(void)
{
	struct p2pg_json *v =
	    parse_ok("{\n  \"a\": 1,\n\n  \"b\": [\n    true,\n    \"s\"\n  ]\n}\n");
	if (!v)
		return;
	check_int(v->line, 1);
	check_int(p2pg_json_member(v, "a")->line, 2);
	const struct p2pg_json *b = p2pg_json_member(v, "b");
	check_int(b->line, 4);
	check_int(b->items[0]->line, 5);
	check_int(b->items[1]->line, 6);
	p2pg_json_free(v);

	/* What the line pass must not mistake: strings that look like keys or hold quotes and
	 * colons, a value on the line after its key, members out of alphabetical order (the tree
	 * keeps the file's order), empty containers, exponents, literals, a byte order mark. */
	v = parse_ok("\xef\xbb\xbf{\"z\": \"a\\\": b\",\n"
		     "\"m\":\n\n  [\"k\", \":\", {}, [],\n   -1.5e+3, null],\n"
		     "\"a\" : {\"x\\\"y\" :\n false},\n"
		     "\"q\": \"\\\\\"\n}");
	if (!v)
		return;
	check_str(v->keys[0], "z");
	check_str(v->keys[1], "m");
	check_str(v->keys[2], "a");
	check_str(v->keys[3], "q");
	check_int(v->items[0]->line, 1);
	check_str(v->items[0]->string, "a\": b");
	const struct p2pg_json *m = v->items[1];
	check_int(m->line, 4);
	check_int(m->count, 6);
	for (int k = 0; k < 4; k++)
		check_int(m->items[k]->line, 4);
	check_int(m->items[4]->line, 5);
	check(m->items[4]->number == -1500.0);
	check_int(m->items[5]->line, 5);
	const struct p2pg_json *a = v->items[2];
	check_int(a->line, 6);
	check_str(a->keys[0], "x\"y");
	check_int(a->items[0]->line, 7);
	check_int(v->items[3]->line, 8);
	check_str(v->items[3]->string, "\\");
	p2pg_json_free(v);
}

static void test_strings(void)
{
	struct p2pg_json *v = parse_ok("[\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\", \"\\u00e9\\u20ac\", "
				       "\"\\ud83d\\ude00\", \"\xc3\xa9\xe2\x82\xac\"]");
	if (!v)
		return;
	check_str(v->items[0]->string, "a\"b\\c/d\b\f\n\r\t");
	check_str(v->items[1]->string, "\xc3\xa9\xe2\x82\xac");
	check_str(v->items[2]->string, "\xf0\x9f\x98\x80");
	check_int(v->items[2]->length, 4);
	check_str(v->items[3]->string, "\xc3\xa9\xe2\x82\xac");
	p2pg_json_free(v);

	/* A byte order mark is skipped; text need not be NUL-terminated. */
	v = parse_ok("\xef\xbb\xbf{}");
	p2pg_json_free(v);
	struct p2pg_json_error err;
	check_int(p2pg_json_parse("[1]xxx", 3, &v, &err), 0);
	p2pg_json_free(v);
}

static void test_errors(void)
{
	expect_error("", 1, "unexpected token near end of file");
	/* A missing comma at the end of a line is found at the next member. */
	expect_error("{\n  \"a\": 1\n  \"b\": 2\n}", 3, "'}' expected near '\"b\"'");
	expect_error("[1 2]", 1, "']' expected near '2'");
	expect_error("{\"a\" 1}", 1, "':' expected near '1'");
	expect_error("{a: 1}", 1, "string or '}' expected near 'a'");
	expect_error("{\n\"a\": 1,\n\n\"a\": 2}", 4, "duplicate object key near '\"a\"'");
	expect_error("[01]", 1, "invalid token near '0'");
	expect_error("[1.]", 1, "invalid token near '1.'");
	expect_error("[-]", 1, "invalid token near '-'");
	expect_error("[1e]", 1, "invalid token near '1e'");
	expect_error("[99999999999999999999]", 1, "too big integer");
	expect_error("[1.5e400]", 1, "real number overflow near '1.5e400'");
	expect_error("{\"a\": 1\n\n", 3, "'}' expected near end of file");
	expect_error("[\"\\x\"]", 1, "invalid escape near");
	expect_error("[\"\\u12g4\"]", 1, "invalid escape near");
	expect_error("[\"\\ud800\"]", 1, "invalid Unicode '\\uD800'");
	expect_error("[\"\\udc00\"]", 1, "invalid Unicode '\\uDC00'");
	expect_error("[\"a\tb\"]", 1, "control character 0x9");
	expect_error("[\"\xc3\x28\"]", 1, "unable to decode byte 0xc3");
	expect_error("[\"\xed\xa0\x80\"]", 1, "unable to decode byte 0xed"); /* a surrogate */
	expect_error("[\"\xc0\xaf\"]", 1, "unable to decode byte 0xc0");     /* overlong */
	expect_error("{\n\"a\": \"open\n}", 2, "unexpected newline");
	expect_error("[\"open", 1, "premature end of input");
	expect_error("[tru]", 1, "invalid token near 'tru'");
	expect_error("[nulls]", 1, "invalid token near 'nulls'");
	expect_error("{} {}", 1, "end of file expected near '{'");
	expect_error("[1,]", 1, "unexpected token near ']'");
	expect_error("\n\n@", 3, "invalid token near '@'");
	/* A control byte quoted back is made printable: a message is one line. */
	expect_error("[\x01]", 1, "invalid token near '?'");
	expect_error("{\"a\": [1,\n", 2, "']' expected near end of file");
	expect_error("{\"k\\u0000\": 1}", 1, "NUL byte in object key");
	/* The reader's own: exact. */
	expect_error("{\n\"a\":\n [\"x\", \"\\u0000\"]}", 3, "\\u0000 is not allowed in strings");
	check_str(err_message("[\"\\u0000\"]"), "\\u0000 is not allowed in strings");

	char deep[200];
	memset(deep, '[', 100);
	memset(deep + 100, ']', 100);
	struct p2pg_json *v = NULL;
	struct p2pg_json_error err;
	check_int(p2pg_json_parse(deep, sizeof(deep), &v, &err), -EINVAL);
	check_str(err.message, "nesting deeper than 64 levels");
	check_int(err.line, 1);
	/* At the line of the 65th nested container. */
	char tall[300];
	for (int k = 0; k < 100; k++) {
		tall[2 * k] = '[';
		tall[2 * k + 1] = '\n';
	}
	memset(tall + 200, ']', 100);
	check_int(p2pg_json_parse(tall, sizeof(tall), &v, &err), -EINVAL);
	check_int(err.line, 65);
	check_int(p2pg_json_parse(deep + 100 - 64, 128, &v, &err), 0);
	p2pg_json_free(v);
	/* A NULL error pointer is allowed. */
	check_int(p2pg_json_parse("[", 1, &v, NULL), -EINVAL);
}

/* A rule set is loaded at a failure, which may come in a forked child (a DataLoader worker):
 * the reader keeps no state a child could inherit half-made. */
static void test_fork(void)
{
	struct p2pg_json *v = parse_ok("{\"a\": [1, 2]}");
	p2pg_json_free(v);
	pid_t pid = fork();
	if (pid == 0) {
		struct p2pg_json *w = NULL;
		int r = p2pg_json_parse("{\"b\": \"x\"}", 10, &w, NULL);
		bool ok = r == 0 && w && strcmp(p2pg_json_member(w, "b")->string, "x") == 0;
		p2pg_json_free(w);
		_exit(ok ? 0 : 1);
	}
	int status = -1;
	check(pid > 0 && waitpid(pid, &status, 0) == pid);
	check(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* The reader for build-checked text gives p2pg_json_parse's tree, and refuses, without reading past
 * the text, what it cannot read. */
static void expect_same_tree(const char *text)
{
	struct p2pg_json *strict = NULL, *checked = NULL;
	check_int(p2pg_json_parse(text, strlen(text), &strict, NULL), 0);
	check_int(p2pg_json_parse_checked(text, strlen(text), &checked), 0);
	int d = json_first_difference(strict, checked);
	if (d)
		fprintf(stderr, "the readers differ at line %d of: %s\n", d, text);
	check_int(d, 0);
	p2pg_json_free(strict);
	p2pg_json_free(checked);
}

static void expect_checked_refuses(const char *text, size_t len)
{
	struct p2pg_json *v = NULL;
	/* A copy of exactly len bytes, so that a read past the end is one the sanitizers see. */
	char *copy = malloc(len ? len : 1);
	memcpy(copy, text, len);
	check_int(p2pg_json_parse_checked(copy, len, &v), -EINVAL);
	check(v == NULL);
	free(copy);
}

static void test_checked_reader(void)
{
	expect_same_tree("{\"a\": [1, -2.5, 3e2, true, false, null, \"x\"],\n"
			 " \"b\": {\"c\": 9007199254740993}, \"d\": -0, \"e\": -0.0,\n"
			 " \"f\": 1E-400, \"g\": 0.95, \"h\": -9223372036854775808}");
	expect_same_tree("{\n  \"a\": 1,\n\n  \"b\": [\n    true,\n    \"s\"\n  ]\n}\n");
	expect_same_tree("\xef\xbb\xbf{\"z\": \"a\\\": b\",\n"
			 "\"m\":\n\n  [\"k\", \":\", {}, [],\n   -1.5e+3, null],\n"
			 "\"a\" : {\"x\\\"y\" :\n false},\n"
			 "\"q\": \"\\\\\"\n}");
	expect_same_tree(
	    "[\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\", \"\\u00e9\\u20ac\", "
	    "\"\\ud83d\\ude00\", \"\xc3\xa9\xe2\x82\xac\", \"\\u007f\\u0080\\u07FF\"]");
	expect_same_tree("\"top\"");
	expect_same_tree(" 12 ");
	expect_same_tree("[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
			 "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]");

	/* What jansson refuses, except the two faults the build checks for it (a duplicate key,
	 * bytes that are not UTF-8), this reader refuses too. */
	static const char *const refused[] = {
	    "",
	    "[1 2]",
	    "{\"a\" 1}",
	    "{a: 1}",
	    "[01]",
	    "[1.]",
	    "[-]",
	    "[1e]",
	    "[1e+]",
	    "[99999999999999999999]",
	    "[1.5e400]",
	    "{\"a\": 1\n\n",
	    "[\"\\x\"]",
	    "[\"\\u12g4\"]",
	    "[\"\\ud800\"]",
	    "[\"\\udc00\"]",
	    "[\"\\ud800\\u0041\"]",
	    "[\"a\tb\"]",
	    "{\n\"a\": \"open\n}",
	    "[\"open",
	    "[\"open\\",
	    "[tru]",
	    "[nulls]",
	    "{} {}",
	    "[1,]",
	    "[,1]",
	    "{\"a\":1,}",
	    "\n\n@",
	    "[\x01]",
	    "{\"a\": [1,\n",
	    "{\"k\\u0000\": 1}",
	    "[\"\\u0000\"]",
	    "[\"\\u00",
	    "{\"a\"",
	    "{\"a\":",
	    "[true",
	    "-",
	    "1x",
	    "[+1]",
	    "[.5]",
	    "[0x10]",
	    "{\"a\":1 \"b\":2}",
	    "{1: 2}",
	    "]",
	};
	for (size_t k = 0; k < sizeof(refused) / sizeof(refused[0]); k++)
		expect_checked_refuses(refused[k], strlen(refused[k]));
	char deep[130];
	memset(deep, '[', 65);
	memset(deep + 65, ']', 65);
	expect_checked_refuses(deep, sizeof(deep));
	/* The text need not be NUL-terminated, and a length cuts it. */
	struct p2pg_json *v = NULL;
	check_int(p2pg_json_parse_checked("[1]xxx", 3, &v), 0);
	check(v && v->count == 1 && v->items[0]->integer == 1);
	p2pg_json_free(v);
	expect_checked_refuses("[\"ab\"]", 4);
	expect_checked_refuses("123", 0);
}

int main(void)
{
	RUN(test_values);
	RUN(test_lines);
	RUN(test_strings);
	RUN(test_errors);
	RUN(test_fork);
	RUN(test_checked_reader);
	return test_failures ? 1 : 0;
}
