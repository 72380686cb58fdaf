/* SPDX-License-Identifier: MIT */
#include "json.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct parser {
	const char *p;
	const char *end;
	int line;
	int depth;
	struct p2pg_json_error *error;
	bool nomem;
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

void p2pg_json_free(struct p2pg_json *value)
{
	if (!value)
		return;
	for (size_t k = 0; k < value->count; k++) {
		p2pg_json_free(value->items[k]);
		if (value->keys)
			free(value->keys[k]);
	}
	free(value->items);
	free(value->keys);
	free(value->string);
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

struct buffer {
	char *data;
	size_t len;
	size_t cap;
};

static int buffer_append(struct buffer *b, const char *s, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 32;
		while (cap < b->len + n + 1)
			cap *= 2;
		char *data = realloc(b->data, cap);
		if (!data)
			return -ENOMEM;
		b->data = data;
		b->cap = cap;
	}
	memcpy(b->data + b->len, s, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

static int append_code_point(struct buffer *b, uint32_t cp)
{
	char out[4];
	size_t n;
	if (cp < 0x80) {
		out[0] = (char)cp;
		n = 1;
	} else if (cp < 0x800) {
		out[0] = (char)(0xc0 | (cp >> 6));
		out[1] = (char)(0x80 | (cp & 0x3f));
		n = 2;
	} else if (cp < 0x10000) {
		out[0] = (char)(0xe0 | (cp >> 12));
		out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		out[2] = (char)(0x80 | (cp & 0x3f));
		n = 3;
	} else {
		out[0] = (char)(0xf0 | (cp >> 18));
		out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
		out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
		out[3] = (char)(0x80 | (cp & 0x3f));
		n = 4;
	}
	return buffer_append(b, out, n);
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

/* Parses a string at the cursor (on the opening quote) into a new NUL-terminated buffer. */
static int parse_string_raw(struct parser *ps, char **ret, size_t *ret_len)
{
	struct buffer b = {0};
	int r;

	ps->p++; /* the opening quote */
	if (buffer_append(&b, "", 0) < 0)
		return out_of_memory(ps);
	for (;;) {
		if (ps->p >= ps->end) {
			r = fail(ps, "unterminated string");
			goto fail;
		}
		unsigned char c = (unsigned char)*ps->p;
		if (c == '"') {
			ps->p++;
			break;
		}
		if (c < 0x20) {
			/* A raw newline is the usual way to forget a closing quote. */
			r = fail(ps,
				 c == '\n' ? "unterminated string" : "control character in string");
			goto fail;
		}
		if (c == '\\') {
			if (ps->end - ps->p < 2) {
				r = fail(ps, "unterminated string");
				goto fail;
			}
			char e = ps->p[1];
			const char *simple = NULL;
			ps->p += 2;
			switch (e) {
			case '"':
				simple = "\"";
				break;
			case '\\':
				simple = "\\";
				break;
			case '/':
				simple = "/";
				break;
			case 'b':
				simple = "\b";
				break;
			case 'f':
				simple = "\f";
				break;
			case 'n':
				simple = "\n";
				break;
			case 'r':
				simple = "\r";
				break;
			case 't':
				simple = "\t";
				break;
			case 'u': {
				uint32_t cp, low;
				r = read_hex4(ps, &cp);
				if (r < 0)
					goto fail;
				if (cp >= 0xdc00 && cp <= 0xdfff) {
					r = fail(ps, "unpaired surrogate in \\u escape");
					goto fail;
				}
				if (cp >= 0xd800 && cp <= 0xdbff) {
					if (ps->end - ps->p < 2 || ps->p[0] != '\\' ||
					    ps->p[1] != 'u') {
						r = fail(ps, "unpaired surrogate in \\u escape");
						goto fail;
					}
					ps->p += 2;
					r = read_hex4(ps, &low);
					if (r < 0)
						goto fail;
					if (low < 0xdc00 || low > 0xdfff) {
						r = fail(ps, "unpaired surrogate in \\u escape");
						goto fail;
					}
					cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
				}
				if (cp == 0) {
					/* Values become C strings; a NUL would silently cut them.
					 */
					r = fail(ps, "\\u0000 is not allowed in strings");
					goto fail;
				}
				if (append_code_point(&b, cp) < 0) {
					r = out_of_memory(ps);
					goto fail;
				}
				continue;
			}
			default:
				ps->p -= 2;
				r = fail(ps, "invalid escape sequence in string");
				goto fail;
			}
			if (buffer_append(&b, simple, 1) < 0) {
				r = out_of_memory(ps);
				goto fail;
			}
			continue;
		}
		size_t n = utf8_sequence((const unsigned char *)ps->p, (size_t)(ps->end - ps->p));
		if (n == 0) {
			r = fail(ps, "invalid UTF-8 in string");
			goto fail;
		}
		if (buffer_append(&b, ps->p, n) < 0) {
			r = out_of_memory(ps);
			goto fail;
		}
		ps->p += n;
	}
	*ret = b.data;
	*ret_len = b.len;
	return 0;
fail:
	free(b.data);
	return r;
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static int parse_number(struct parser *ps, struct p2pg_json *v)
{
	const char *start = ps->p, *q = ps->p;
	bool integral = true;
	char buf[64];

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
		integral = false;
		q++;
		if (q >= ps->end || !is_digit(*q))
			return fail(ps, "invalid number");
		while (q < ps->end && is_digit(*q))
			q++;
	}
	if (q < ps->end && (*q == 'e' || *q == 'E')) {
		integral = false;
		q++;
		if (q < ps->end && (*q == '+' || *q == '-'))
			q++;
		if (q >= ps->end || !is_digit(*q))
			return fail(ps, "invalid number");
		while (q < ps->end && is_digit(*q))
			q++;
	}
	size_t n = (size_t)(q - start);
	if (n >= sizeof(buf))
		return fail(ps, "number too long");
	memcpy(buf, start, n);
	buf[n] = '\0';

	v->type = P2PG_JSON_NUMBER;
	errno = 0;
	v->number = strtod(buf, NULL);
	if (integral) {
		errno = 0;
		long long i = strtoll(buf, NULL, 10);
		if (errno == 0) {
			v->is_integer = true;
			v->integer = i;
		}
	}
	ps->p = q;
	return 0;
}

static int parse_literal(struct parser *ps, const char *word, size_t n)
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

static int parse_value(struct parser *ps, struct p2pg_json **ret);

static int add_item(struct parser *ps, struct p2pg_json *container, struct p2pg_json *item,
		    char *key)
{
	size_t n = container->count + 1;
	struct p2pg_json **items = realloc(container->items, n * sizeof(*items));
	if (!items)
		return out_of_memory(ps);
	container->items = items;
	if (container->type == P2PG_JSON_OBJECT) {
		char **keys = realloc(container->keys, n * sizeof(*keys));
		if (!keys)
			return out_of_memory(ps);
		container->keys = keys;
		keys[n - 1] = key;
	}
	items[n - 1] = item;
	container->count = n;
	return 0;
}

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

static int parse_array(struct parser *ps, struct p2pg_json *v)
{
	v->type = P2PG_JSON_ARRAY;
	ps->p++; /* '[' */
	skip_whitespace(ps);
	if (ps->p < ps->end && *ps->p == ']') {
		ps->p++;
		return 0;
	}
	for (;;) {
		struct p2pg_json *item = NULL;
		int r = parse_value(ps, &item);
		if (r < 0)
			return r;
		r = add_item(ps, v, item, NULL);
		if (r < 0) {
			p2pg_json_free(item);
			return r;
		}
		r = after_item(ps, ']', "array element");
		if (r <= 0)
			return r;
	}
}

static int parse_object(struct parser *ps, struct p2pg_json *v)
{
	v->type = P2PG_JSON_OBJECT;
	ps->p++; /* '{' */
	skip_whitespace(ps);
	if (ps->p < ps->end && *ps->p == '}') {
		ps->p++;
		return 0;
	}
	for (;;) {
		char *key = NULL;
		size_t key_len;
		struct p2pg_json *item = NULL;
		int r;

		skip_whitespace(ps);
		if (ps->p >= ps->end)
			return fail(ps, "unexpected end of input");
		if (*ps->p != '"')
			return fail(ps, "expected a string as object key");
		r = parse_string_raw(ps, &key, &key_len);
		if (r < 0)
			return r;
		if (strlen(key) != key_len || p2pg_json_member(v, key)) {
			r = fail(ps, "duplicate key \"%s\"", key);
			free(key);
			return r;
		}
		skip_whitespace(ps);
		if (ps->p >= ps->end || *ps->p != ':') {
			free(key);
			if (ps->p >= ps->end)
				return fail(ps, "unexpected end of input");
			return fail(ps, "expected ':' after object key");
		}
		ps->p++;
		r = parse_value(ps, &item);
		if (r < 0) {
			free(key);
			return r;
		}
		r = add_item(ps, v, item, key);
		if (r < 0) {
			free(key);
			p2pg_json_free(item);
			return r;
		}
		r = after_item(ps, '}', "object member");
		if (r <= 0)
			return r;
	}
}

static int parse_value(struct parser *ps, struct p2pg_json **ret)
{
	struct p2pg_json *v;
	int r;

	skip_whitespace(ps);
	if (ps->p >= ps->end)
		return fail(ps, "unexpected end of input");

	v = calloc(1, sizeof(*v));
	if (!v)
		return out_of_memory(ps);
	v->line = ps->line;

	switch (*ps->p) {
	case '{':
	case '[':
		if (ps->depth >= P2PG_JSON_MAX_DEPTH) {
			r = fail(ps, "nesting deeper than %d levels", P2PG_JSON_MAX_DEPTH);
			break;
		}
		ps->depth++;
		r = *ps->p == '{' ? parse_object(ps, v) : parse_array(ps, v);
		ps->depth--;
		break;
	case '"':
		v->type = P2PG_JSON_STRING;
		r = parse_string_raw(ps, &v->string, &v->length);
		break;
	case 't':
		v->type = P2PG_JSON_BOOL;
		v->boolean = true;
		r = parse_literal(ps, "true", 4);
		break;
	case 'f':
		v->type = P2PG_JSON_BOOL;
		r = parse_literal(ps, "false", 5);
		break;
	case 'n':
		v->type = P2PG_JSON_NULL;
		r = parse_literal(ps, "null", 4);
		break;
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
		r = parse_number(ps, v);
		break;
	default:
		r = unexpected(ps);
		break;
	}
	if (r < 0) {
		p2pg_json_free(v);
		return r;
	}
	*ret = v;
	return 0;
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
	struct p2pg_json *v = NULL;
	int r;

	if (error) {
		error->line = 0;
		error->message[0] = '\0';
	}
	/* RFC 8259 lets a parser ignore a byte order mark; editors on some systems write one. */
	if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0)
		ps.p += 3;

	r = parse_value(&ps, &v);
	if (r < 0)
		return ps.nomem ? -ENOMEM : r;
	skip_whitespace(&ps);
	if (ps.p < ps.end) {
		p2pg_json_free(v);
		return fail(&ps, "trailing characters after the JSON value");
	}
	*ret = v;
	return 0;
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
