/* SPDX-License-Identifier: MIT */
/*
 * The rule files' JSON, read by SQLite: json_tree() decodes the text (structure, strings and their
 * escapes, numbers) and lists every value in document order. What SQLite does not give is added
 * here, by one pass of a checker over the text: the line every value starts on (json_tree() has
 * no positions), the exact syntax messages rules/README.md specifies (json_valid() answers only
 * yes or no), and the strictness a data file wants (\u0000, invalid UTF-8 and nesting depth;
 * duplicate keys are found on SQLite's decoded keys). The checker builds nothing: it records one
 * line per value, in the order json_tree() returns the rows, so row k gets line k.
 */
#include "json.h"

#include <errno.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cleanup.h"

/* Where a value starts: its own line and, for an object member, its key's line. */
struct position {
	int line;
	int key_line;
};

struct parser {
	const char *p;
	const char *end;
	int line;
	int depth;
	int key_line; /* the key of the member whose value comes next; 0 outside objects */
	struct p2pg_json_error *error;
	bool nomem;
	struct position *positions;
	size_t n_positions;
	size_t cap_positions;
};

/* Records the first error only: later ones are consequences of it. Always returns -EINVAL. */
static int fail(struct parser *ps, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct parser *ps, const char *fmt, ...)
{
	if (ps->error && ps->error->line == 0) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(ps->error->message, sizeof(ps->error->message), fmt, ap);
		va_end(ap);
		ps->error->line = ps->line;
	}
	return -EINVAL;
}

static int out_of_memory(struct parser *ps)
{
	ps->nomem = true;
	return -ENOMEM;
}

/* A node's own allocations; its children are elements of the same array. */
static void free_fields(struct p2pg_json *v)
{
	for (size_t k = 0; v->keys && k < v->count; k++)
		free(v->keys[k]);
	free(v->items);
	free(v->keys);
	free(v->string);
}

static void free_tree(struct p2pg_json *v)
{
	for (size_t k = 0; k < v->count; k++)
		free_tree(v->items[k]);
	free_fields(v);
}

/* The whole tree lives in one array whose first element is the root. */
void p2pg_json_free(struct p2pg_json *value)
{
	if (!value)
		return;
	free_tree(value);
	free(value);
}

static void skip_whitespace(struct parser *ps)
{
	while (ps->p < ps->end) {
		char c = *ps->p;
		if (c == '\n')
			ps->line++;
		else if (c != ' ' && c != '\t' && c != '\r')
			return;
		ps->p++;
	}
}

/* Describes the character at the cursor for "unexpected ..." messages. */
static const char *describe_here(struct parser *ps, char *buf, size_t len)
{
	if (ps->p >= ps->end)
		return "end of input";
	unsigned char c = (unsigned char)*ps->p;
	if (c >= 0x21 && c < 0x7f)
		snprintf(buf, len, "character '%c'", c);
	else
		snprintf(buf, len, "byte 0x%02x", c);
	return buf;
}

static int unexpected(struct parser *ps)
{
	char buf[32];
	if (ps->p >= ps->end)
		return fail(ps, "unexpected end of input");
	return fail(ps, "unexpected %s", describe_here(ps, buf, sizeof(buf)));
}

/* Length of the UTF-8 sequence at s (at most avail bytes), or 0 when it is not valid UTF-8:
 * overlong forms, surrogates and code points past U+10FFFF are rejected. */
static size_t utf8_sequence(const unsigned char *s, size_t avail)
{
	unsigned char c = s[0];
	size_t n;
	uint32_t cp;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		n = 2;
		cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 3;
		cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4;
		cp = c & 0x07;
	} else {
		return 0;
	}
	if (avail < n)
		return 0;
	for (size_t k = 1; k < n; k++) {
		if ((s[k] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[k] & 0x3f);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

static int read_hex4(struct parser *ps, uint32_t *ret)
{
	uint32_t v = 0;
	if (ps->end - ps->p < 4)
		return fail(ps, "invalid \\u escape in string");
	for (int k = 0; k < 4; k++) {
		char c = ps->p[k];
		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (uint32_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (uint32_t)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (uint32_t)(c - 'A' + 10);
		else
			return fail(ps, "invalid \\u escape in string");
	}
	ps->p += 4;
	*ret = v;
	return 0;
}

/* Checks the string at the cursor (on the opening quote) and moves past it. */
static int check_string(struct parser *ps)
{
	ps->p++; /* the opening quote */
	for (;;) {
		if (ps->p >= ps->end)
			return fail(ps, "unterminated string");
		unsigned char c = (unsigned char)*ps->p;
		if (c == '"') {
			ps->p++;
			return 0;
		}
		if (c < 0x20)
			/* A raw newline is the usual way to forget a closing quote. */
			return fail(ps, c == '\n' ? "unterminated string"
						  : "control character in string");
		if (c == '\\') {
			if (ps->end - ps->p < 2)
				return fail(ps, "unterminated string");
			char e = ps->p[1];
			if (!strchr("\"\\/bfnrtu", e) || e == '\0')
				return fail(ps, "invalid escape sequence in string");
			ps->p += 2;
			if (e != 'u')
				continue;
			uint32_t cp, low;
			int r = read_hex4(ps, &cp);
			if (r < 0)
				return r;
			if (cp >= 0xdc00 && cp <= 0xdfff)
				return fail(ps, "unpaired surrogate in \\u escape");
			if (cp >= 0xd800 && cp <= 0xdbff) {
				if (ps->end - ps->p < 2 || ps->p[0] != '\\' || ps->p[1] != 'u')
					return fail(ps, "unpaired surrogate in \\u escape");
				ps->p += 2;
				r = read_hex4(ps, &low);
				if (r < 0)
					return r;
				if (low < 0xdc00 || low > 0xdfff)
					return fail(ps, "unpaired surrogate in \\u escape");
			}
			if (cp == 0)
				/* Values become C strings; a NUL would silently cut them. */
				return fail(ps, "\\u0000 is not allowed in strings");
			continue;
		}
		size_t n = utf8_sequence((const unsigned char *)ps->p, (size_t)(ps->end - ps->p));
		if (n == 0)
			return fail(ps, "invalid UTF-8 in string");
		ps->p += n;
	}
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static int check_number(struct parser *ps)
{
	const char *q = ps->p;

	if (q < ps->end && *q == '-')
		q++;
	if (q >= ps->end || !is_digit(*q))
		return fail(ps, "invalid number");
	if (*q == '0') {
		q++;
		if (q < ps->end && is_digit(*q))
			return fail(ps, "invalid number");
	} else {
		while (q < ps->end && is_digit(*q))
			q++;
	}
	if (q < ps->end && *q == '.') {
		q++;
		if (q >= ps->end || !is_digit(*q))
			return fail(ps, "invalid number");
		while (q < ps->end && is_digit(*q))
			q++;
	}
	if (q < ps->end && (*q == 'e' || *q == 'E')) {
		q++;
		if (q < ps->end && (*q == '+' || *q == '-'))
			q++;
		if (q >= ps->end || !is_digit(*q))
			return fail(ps, "invalid number");
		while (q < ps->end && is_digit(*q))
			q++;
	}
	/* The reader this replaced converted numbers through a 64-byte buffer; the limit stays
	 * part of the documented messages. */
	if (q - ps->p >= 64)
		return fail(ps, "number too long");
	ps->p = q;
	return 0;
}

static int check_literal(struct parser *ps, const char *word, size_t n)
{
	if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0)
		return fail(ps, "invalid literal");
	/* "truex" is not "true" followed by garbage we could report better: say literal. */
	if ((size_t)(ps->end - ps->p) > n) {
		char c = ps->p[n];
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c))
			return fail(ps, "invalid literal");
	}
	ps->p += n;
	return 0;
}

static int check_value(struct parser *ps);

/* After an array element or object member: 1 when a ',' says another follows, 0 when the closing
 * bracket ends the container, or the parse error. */
static int after_item(struct parser *ps, char close, const char *what)
{
	skip_whitespace(ps);
	if (ps->p < ps->end && *ps->p == ',') {
		ps->p++;
		return 1;
	}
	if (ps->p < ps->end && *ps->p == close) {
		ps->p++;
		return 0;
	}
	if (ps->p >= ps->end)
		return fail(ps, "unexpected end of input");
	return fail(ps, "expected ',' or '%c' after %s", close, what);
}

static int check_array(struct parser *ps)
{
	ps->p++; /* '[' */
	skip_whitespace(ps);
	if (ps->p < ps->end && *ps->p == ']') {
		ps->p++;
		return 0;
	}
	for (;;) {
		ps->key_line = 0;
		int r = check_value(ps);
		if (r < 0)
			return r;
		r = after_item(ps, ']', "array element");
		if (r <= 0)
			return r;
	}
}

static int check_object(struct parser *ps)
{
	ps->p++; /* '{' */
	skip_whitespace(ps);
	if (ps->p < ps->end && *ps->p == '}') {
		ps->p++;
		return 0;
	}
	for (;;) {
		int r;

		skip_whitespace(ps);
		if (ps->p >= ps->end)
			return fail(ps, "unexpected end of input");
		if (*ps->p != '"')
			return fail(ps, "expected a string as object key");
		r = check_string(ps);
		if (r < 0)
			return r;
		/* The reader this replaced reported a duplicate key after the key's closing quote.
		 */
		int key_line = ps->line;
		skip_whitespace(ps);
		if (ps->p >= ps->end)
			return fail(ps, "unexpected end of input");
		if (*ps->p != ':')
			return fail(ps, "expected ':' after object key");
		ps->p++;
		ps->key_line = key_line;
		r = check_value(ps);
		if (r < 0)
			return r;
		r = after_item(ps, '}', "object member");
		if (r <= 0)
			return r;
	}
}

static int record_position(struct parser *ps)
{
	if (ps->n_positions == ps->cap_positions) {
		size_t cap = ps->cap_positions ? 2 * ps->cap_positions : 64;
		struct position *p = realloc(ps->positions, cap * sizeof(*p));
		if (!p)
			return out_of_memory(ps);
		ps->positions = p;
		ps->cap_positions = cap;
	}
	ps->positions[ps->n_positions++] =
	    (struct position){.line = ps->line, .key_line = ps->key_line};
	return 0;
}

static int check_value(struct parser *ps)
{
	int r;

	skip_whitespace(ps);
	if (ps->p >= ps->end)
		return fail(ps, "unexpected end of input");
	r = record_position(ps);
	if (r < 0)
		return r;
	ps->key_line = 0;

	switch (*ps->p) {
	case '{':
	case '[':
		if (ps->depth >= P2PG_JSON_MAX_DEPTH)
			return fail(ps, "nesting deeper than %d levels", P2PG_JSON_MAX_DEPTH);
		ps->depth++;
		r = *ps->p == '{' ? check_object(ps) : check_array(ps);
		ps->depth--;
		return r;
	case '"':
		return check_string(ps);
	case 't':
		return check_literal(ps, "true", 4);
	case 'f':
		return check_literal(ps, "false", 5);
	case 'n':
		return check_literal(ps, "null", 4);
	case '-':
	case '0':
	case '1':
	case '2':
	case '3':
	case '4':
	case '5':
	case '6':
	case '7':
	case '8':
	case '9':
		return check_number(ps);
	default:
		return unexpected(ps);
	}
}

/* ---- Decoding: SQLite's json_tree() ---- */

/*
 * One in-memory connection serves every parse: opening one costs about as much as reading a rule
 * file. Rules load rarely and from few threads, so a lock is enough; a thread that finds it taken
 * (or a child forked while another thread held it) opens a connection of its own instead of
 * waiting.
 */
static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;
static sqlite3 *shared_db;
static sqlite3_stmt *shared_tree;
static pid_t shared_pid; /* SQLite connections must not cross fork() */

static const char tree_sql[] = "SELECT id, parent, type, atom, key FROM json_tree(?1)";

static int open_reader(sqlite3 **ret_db, sqlite3_stmt **ret_stmt)
{
	sqlite3 *db = NULL;
	if (sqlite3_open_v2(":memory:", &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_MEMORY, NULL) !=
	    SQLITE_OK) {
		sqlite3_close(db);
		return -ENOMEM;
	}
	int r = sqlite3_prepare_v3(db, tree_sql, -1, SQLITE_PREPARE_PERSISTENT, ret_stmt, NULL);
	if (r != SQLITE_OK) {
		sqlite3_close(db);
		/* json_tree() is built in since SQLite 3.38, optional (JSON1) before. */
		return r == SQLITE_NOMEM ? -ENOMEM : -EPROTONOSUPPORT;
	}
	*ret_db = db;
	return 0;
}

/* The row of id among the first n rows; json_tree() numbers values in document order, so ids
 * ascend. SIZE_MAX when absent. */
static size_t row_index(const sqlite3_int64 *ids, size_t n, sqlite3_int64 id)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (ids[mid] < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && ids[lo] == id ? lo : SIZE_MAX;
}

static enum p2pg_json_type type_of(const char *t)
{
	switch (t ? t[0] : '\0') {
	case 'o':
		return P2PG_JSON_OBJECT;
	case 'a':
		return P2PG_JSON_ARRAY;
	case 't':
		return t[1] == 'e' ? P2PG_JSON_STRING : P2PG_JSON_BOOL; /* text, true */
	case 'f':
		return P2PG_JSON_BOOL;
	case 'i':
	case 'r':
		return P2PG_JSON_NUMBER;
	default:
		return P2PG_JSON_NULL;
	}
}

static int append(struct p2pg_json *parent, struct p2pg_json *item, const char *key)
{
	size_t n = parent->count + 1;
	struct p2pg_json **items = realloc(parent->items, n * sizeof(*items));
	if (!items)
		return -ENOMEM;
	parent->items = items;
	if (parent->type == P2PG_JSON_OBJECT) {
		char **keys = realloc(parent->keys, n * sizeof(*keys));
		if (!keys)
			return -ENOMEM;
		parent->keys = keys;
		if (!key || !(keys[n - 1] = strdup(key)))
			return -ENOMEM;
	}
	items[n - 1] = item;
	parent->count = n;
	return 0;
}

/* Reads node v's value from the row: the atom is SQLite's decoded value. */
static int read_atom(sqlite3_stmt *stmt, struct p2pg_json *v)
{
	const char *type = (const char *)sqlite3_column_text(stmt, 2);
	if (!type)
		return -ENOMEM; /* json_tree() always names the type */
	v->type = type_of(type);
	switch (v->type) {
	case P2PG_JSON_BOOL:
		v->boolean = sqlite3_column_int(stmt, 3) != 0;
		return 0;
	case P2PG_JSON_NUMBER:
		v->number = sqlite3_column_double(stmt, 3);
		/* An integer past 64 bits comes back as a real: not an integer here either. */
		v->is_integer = sqlite3_column_type(stmt, 3) == SQLITE_INTEGER;
		if (v->is_integer)
			v->integer = sqlite3_column_int64(stmt, 3);
		return 0;
	case P2PG_JSON_STRING: {
		/* Text first, then its length: the order SQLite's documentation asks for. */
		const unsigned char *text = sqlite3_column_text(stmt, 3);
		v->length = (size_t)sqlite3_column_bytes(stmt, 3);
		v->string = text ? malloc(v->length + 1) : NULL;
		if (!v->string)
			return -ENOMEM;
		memcpy(v->string, text, v->length);
		v->string[v->length] = '\0';
		return 0;
	}
	default:
		return 0;
	}
}

/* Builds the tree from json_tree()'s rows, all nodes in one array: node k is row k and starts
 * at positions[k]. */
static int build(struct parser *ps, sqlite3_stmt *stmt, const char *text, size_t len,
		 struct p2pg_json **ret)
{
	size_t n = ps->n_positions, k = 0;
	_cleanup_free_ sqlite3_int64 *ids = calloc(n, sizeof(*ids));
	struct p2pg_json *nodes = calloc(n, sizeof(*nodes));
	int r = ids && nodes ? 0 : -ENOMEM, s = SQLITE_DONE;

	sqlite3_bind_text64(stmt, 1, text, len, SQLITE_STATIC, SQLITE_UTF8);
	while (r == 0 && (s = sqlite3_step(stmt)) == SQLITE_ROW) {
		if (k == n) {
			k++;
			break;
		}
		struct p2pg_json *v = &nodes[k];
		ids[k] = sqlite3_column_int64(stmt, 0);
		v->line = ps->positions[k].line;
		r = read_atom(stmt, v);
		if (r == 0 && k > 0) {
			size_t p = row_index(ids, k, sqlite3_column_int64(stmt, 1));
			const char *key = (const char *)sqlite3_column_text(stmt, 4);
			if (p == SIZE_MAX)
				break; /* not from json_tree(): reported below */
			if (nodes[p].type == P2PG_JSON_OBJECT && key &&
			    p2pg_json_member(&nodes[p], key)) {
				ps->line = ps->positions[k].key_line;
				r = fail(ps, "duplicate key \"%s\"", key);
			} else {
				r = append(&nodes[p], v, key);
			}
		}
		k++;
	}
	if (r == 0 && s == SQLITE_NOMEM)
		r = -ENOMEM;
	else if (r == 0 && (k != n || s != SQLITE_DONE))
		/* SQLite refused what the checker accepted: never seen, but say so rather than
		 * build a wrong tree. */
		r = fail(ps, "the JSON reader could not decode this (SQLite: %s)",
			 sqlite3_errstr(s));
	sqlite3_reset(stmt);
	sqlite3_clear_bindings(stmt);
	if (r < 0) {
		for (size_t i = 0; nodes && i < n; i++)
			free_fields(&nodes[i]);
		free(nodes);
		return r == -ENOMEM ? out_of_memory(ps) : r;
	}
	*ret = nodes;
	return 0;
}

static int decode(struct parser *ps, const char *text, size_t len, struct p2pg_json **ret)
{
	sqlite3 *own_db = NULL;
	sqlite3_stmt *stmt = NULL;
	bool shared = pthread_mutex_trylock(&shared_lock) == 0;
	int r;

	if (shared && !shared_db && open_reader(&shared_db, &shared_tree) == 0)
		shared_pid = getpid();
	/* In a forked child the parent's connection is left alone: each parse opens its own. */
	if (shared && shared_db && shared_pid == getpid()) {
		stmt = shared_tree;
	} else {
		if (shared)
			pthread_mutex_unlock(&shared_lock);
		shared = false;
		r = open_reader(&own_db, &stmt);
		if (r == -EPROTONOSUPPORT)
			return fail(ps, "this SQLite has no JSON functions (json_tree)");
		if (r < 0)
			return out_of_memory(ps);
	}
	r = build(ps, stmt, text, len, ret);
	if (shared) {
		pthread_mutex_unlock(&shared_lock);
	} else {
		sqlite3_finalize(stmt);
		sqlite3_close(own_db);
	}
	return r;
}

int p2pg_json_parse(const char *text, size_t len, struct p2pg_json **ret,
		    struct p2pg_json_error *error)
{
	struct parser ps = {
	    .p = text,
	    .end = text + len,
	    .line = 1,
	    .error = error,
	};
	int r;

	if (error) {
		error->line = 0;
		error->message[0] = '\0';
	}
	/* RFC 8259 lets a parser ignore a byte order mark; editors on some systems write one. */
	if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0)
		ps.p += 3;
	const char *start = ps.p;

	r = check_value(&ps);
	if (r == 0) {
		skip_whitespace(&ps);
		if (ps.p < ps.end)
			r = fail(&ps, "trailing characters after the JSON value");
	}
	if (r == 0)
		r = decode(&ps, start, (size_t)(ps.end - start), ret);
	free(ps.positions);
	return ps.nomem ? -ENOMEM : r;
}

const struct p2pg_json *p2pg_json_member(const struct p2pg_json *object, const char *key)
{
	if (!object || object->type != P2PG_JSON_OBJECT)
		return NULL;
	for (size_t k = 0; k < object->count; k++)
		if (strcmp(object->keys[k], key) == 0)
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
