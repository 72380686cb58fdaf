/* SPDX-License-Identifier: MIT */
/*
 * The rule files' JSON, read by jansson: a strict RFC 8259 parser that rejects duplicate keys,
 * invalid UTF-8 and unpaired surrogates, and names the line of every syntax error. What jansson
 * does not keep is where each value starts, which the validator needs to say "file:line:" about a
 * field. Once jansson has accepted the text, it is valid JSON, so one short pass can list the
 * lines values start on in document order; the tree is then copied in that same order (jansson
 * keeps an object's members in the order of the file), node k taking line k.
 */
#include "json.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "json-lines.h"
#include "notice.h"

/* Records the first error only. Always returns -EINVAL. */
static int fail(struct p2pg_json_error *error, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(struct p2pg_json_error *error, int line, const char *fmt, ...)
{
	if (error && error->line == 0) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(error->message, sizeof(error->message), fmt, ap);
		va_end(ap);
		/* jansson quotes the text near the error, which may hold any byte. */
		p2pg_keep_one_line(error->message);
		error->line = line > 0 ? line : 1;
	}
	return -EINVAL;
}

/*
 * Every token but punctuation and keys starts a value, and a string is a key when ':' follows it.
 * Strings hold no raw newline in valid JSON, so only blanks between tokens count lines.
 */
int json_value_lines(const char *p, const char *end, int **ret, size_t *ret_n)
{
	_cleanup_free_ int *lines = NULL;
	size_t n = 0, cap = 0;
	int line = 1;

	for (; p < end; p++) {
		if (json_is_separator(*p)) {
			line += *p == '\n';
			continue;
		}
		if (*p == '"') {
			const char *close = p + 1;
			while (close < end && *close != '"')
				close += *close == '\\' && close + 1 < end ? 2 : 1;
			if (close >= end)
				break; /* unterminated: not a value */
			p = close;
			const char *next = p + 1;
			while (next < end && json_is_blank(*next))
				next++;
			if (next < end && *next == ':')
				continue;
		} else if (*p != '{' && *p != '[') {
			/* A number or a literal: its last character. */
			while (p + 1 < end && !json_is_separator(p[1]))
				p++;
		}
		if (!ret) {
			n++;
			continue;
		}
		if (n == cap) {
			cap = cap ? 2 * cap : 64;
			int *grown = realloc(lines, cap * sizeof(*lines));
			if (!grown)
				return -ENOMEM;
			lines = grown;
		}
		lines[n++] = line;
	}
	if (ret) {
		*ret = lines;
		lines = NULL;
	}
	*ret_n = n;
	return 0;
}

/* A tree is one allocation: the nodes (the root first), then every container's item and key
 * pointers, then the bytes of every string and key. A copy makes no allocation of its own. */
void p2pg_json_free(struct p2pg_json *value)
{
	free(value);
}

struct builder {
	struct p2pg_json *nodes;
	const int *lines;
	size_t n_nodes;
	size_t next; /* the node the next value copied becomes */
	struct p2pg_json **items;
	char **keys;
	size_t n_slots; /* items and keys handed out; at most n_nodes - 1, one per non-root node */
	char *bytes, *bytes_end;
	struct p2pg_json_error *error;
};

/* A copy of s (n bytes) in the tree's own storage, or NULL when the storage is used up. */
static char *keep_string(struct builder *b, const char *s, size_t n)
{
	if ((size_t)(b->bytes_end - b->bytes) < n + 1)
		return NULL;
	char *kept = b->bytes;
	memcpy(kept, s, n);
	kept[n] = '\0';
	b->bytes += n + 1;
	return kept;
}

static int copy_value(struct builder *b, json_t *in, int depth, struct p2pg_json **ret);

static int copy_members(struct builder *b, json_t *in, int depth, struct p2pg_json *v)
{
	size_t count = json_is_object(in) ? json_object_size(in) : json_array_size(in);
	if (count > b->n_nodes - 1 - b->n_slots)
		return fail(b->error, v->line, "the JSON reader lost count of the values here");
	v->items = b->items + b->n_slots;
	if (json_is_object(in))
		v->keys = b->keys + b->n_slots;
	b->n_slots += count;
	if (json_is_array(in)) {
		for (; v->count < count; v->count++) {
			int r = copy_value(b, json_array_get(in, v->count), depth + 1,
					   &v->items[v->count]);
			if (r < 0)
				return r;
		}
		return 0;
	}
	const char *key;
	json_t *member;
	json_object_foreach(in, key, member)
	{
		if (!(v->keys[v->count] = keep_string(b, key, strlen(key))))
			return fail(b->error, v->line,
				    "the JSON reader lost count of the values here");
		v->count++;
		int r = copy_value(b, member, depth + 1, &v->items[v->count - 1]);
		if (r < 0)
			return r;
	}
	return 0;
}

static int copy_value(struct builder *b, json_t *in, int depth, struct p2pg_json **ret)
{
	/* More values than lines would mean the two passes disagree: say so rather than build a
	 * tree with wrong lines. */
	if (b->next == b->n_nodes)
		return fail(b->error, b->n_nodes ? b->lines[b->n_nodes - 1] : 1,
			    "the JSON reader lost count of the values here");
	size_t k = b->next++;
	struct p2pg_json *v = &b->nodes[k];
	v->line = b->lines[k];
	*ret = v;

	switch (json_typeof(in)) {
	case JSON_OBJECT:
	case JSON_ARRAY:
		v->type = json_is_object(in) ? P2PG_JSON_OBJECT : P2PG_JSON_ARRAY;
		if (depth == P2PG_JSON_MAX_DEPTH)
			return fail(b->error, v->line, "nesting deeper than %d levels",
				    P2PG_JSON_MAX_DEPTH);
		return copy_members(b, in, depth, v);
	case JSON_STRING:
		v->type = P2PG_JSON_STRING;
		v->length = json_string_length(in);
		/* jansson is asked to accept "\u0000" so that it can be reported here, in the
		 * reader's own words, rather than as a jansson flag's name. */
		if (memchr(json_string_value(in), '\0', v->length))
			return fail(b->error, v->line, "\\u0000 is not allowed in strings");
		if (!(v->string = keep_string(b, json_string_value(in), v->length)))
			return fail(b->error, v->line,
				    "the JSON reader lost count of the values here");
		return 0;
	case JSON_INTEGER:
		v->type = P2PG_JSON_NUMBER;
		v->is_integer = true;
		v->integer = json_integer_value(in);
		v->number = (double)v->integer;
		return 0;
	case JSON_REAL:
		v->type = P2PG_JSON_NUMBER;
		v->number = json_real_value(in);
		return 0;
	case JSON_TRUE:
	case JSON_FALSE:
		v->type = P2PG_JSON_BOOL;
		v->boolean = json_is_true(in);
		return 0;
	case JSON_NULL:
		v->type = P2PG_JSON_NULL;
		return 0;
	}
	return 0;
}

int p2pg_json_parse(const char *text, size_t len, struct p2pg_json **ret,
		    struct p2pg_json_error *error)
{
	if (error) {
		error->line = 0;
		error->message[0] = '\0';
	}
	/* RFC 8259 lets a parser ignore a byte order mark; editors on some systems write one. */
	if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0) {
		text += 3;
		len -= 3;
	}

	json_error_t syntax;
	json_t *root = json_loadb(
	    text, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &syntax);
	if (!root) {
		if (json_error_code(&syntax) == json_error_out_of_memory)
			return -ENOMEM;
		return fail(error, syntax.line, "%s", syntax.text);
	}

	_cleanup_free_ int *lines = NULL;
	struct builder b = {.error = error};
	int r = json_value_lines(text, text + len, &lines, &b.n_nodes);
	if (r == 0 && b.n_nodes == 0)
		r = fail(error, 1, "the JSON reader lost count of the values here");
	if (r == 0) {
		/* No string or key, unescaped, is longer than its quoted text, so len bytes hold
		 * them all with their NULs. */
		size_t n = b.n_nodes;
		b.lines = lines;
		b.nodes = calloc(1, n * sizeof(*b.nodes) + 2 * n * sizeof(void *) + len + 1);
		r = b.nodes ? 0 : -ENOMEM;
		if (r == 0) {
			b.items = (struct p2pg_json **)(b.nodes + n);
			b.keys = (char **)(b.items + n);
			b.bytes = (char *)(b.keys + n);
			b.bytes_end = b.bytes + len + 1;
		}
	}
	struct p2pg_json *tree = NULL;
	if (r == 0)
		r = copy_value(&b, root, 0, &tree);
	if (r == 0 && b.next != b.n_nodes)
		r = fail(error, lines[b.next], "the JSON reader lost count of the values here");
	json_decref(root);
	if (r < 0) {
		free(b.nodes);
		return r;
	}
	*ret = tree;
	return 0;
}

const struct p2pg_json *p2pg_json_member(const struct p2pg_json *object, const char *key)
{
	if (!object || object->type != P2PG_JSON_OBJECT)
		return NULL;
	/* The first letter rules out most keys without a call: loading the rules asks for every
	 * field of every rule this way. */
	for (size_t k = 0; k < object->count; k++)
		if (object->keys[k][0] == key[0] && strcmp(object->keys[k], key) == 0)
			return object->items[k];
	return NULL;
}

const char *p2pg_json_type_name(enum p2pg_json_type type)
{
	switch (type) {
	case P2PG_JSON_NULL:
		return "null";
	case P2PG_JSON_BOOL:
		return "a boolean";
	case P2PG_JSON_NUMBER:
		return "a number";
	case P2PG_JSON_STRING:
		return "a string";
	case P2PG_JSON_ARRAY:
		return "an array";
	case P2PG_JSON_OBJECT:
		return "an object";
	}
	return "a value";
}
