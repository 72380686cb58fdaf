/* SPDX-License-Identifier: MIT */
/*
 * The reader for the rules compiled into the binary. Their text was checked when it was built
 * (scripts/embed-rules.py: UTF-8, no duplicate key, no "\u0000", integers that fit a long long,
 * no real that overflows, nesting within P2PG_JSON_MAX_DEPTH), so what jansson is there for — a
 * strict parse with a message for every fault — is not needed each time a command or the guard
 * reads them, and jansson's own tree plus the copy cost more than the rest of loading.
 *
 * One pass builds the tree p2pg_json_parse would, node for node and line for line (tests compare
 * the two on every shipped rule). It stays safe on any bytes: whatever it does not expect makes it
 * answer -EINVAL, and the caller asks p2pg_json_parse, whose message names the fault.
 */
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json-lines.h"
#include "json.h"

struct reader {
	const char *p, *end;
	int line;
	struct p2pg_json *nodes;
	size_t n_nodes, next;
	/* Each container's children, kept in order while its members are read, then moved to the
	 * tree's item and key slots when it closes. */
	struct p2pg_json **pending_items;
	char **pending_keys;
	size_t n_pending;
	struct p2pg_json **items;
	char **keys;
	size_t n_slots;
	char *bytes, *bytes_end;
	locale_t c_numbers; /* made when the first real number is read */
};

static void skip_blanks(struct reader *rd)
{
	while (rd->p < rd->end && json_is_blank(*rd->p)) {
		rd->line += *rd->p == '\n';
		rd->p++;
	}
}

static bool ends_token(const struct reader *rd)
{
	return rd->p == rd->end || json_is_separator(*rd->p);
}

static bool put_bytes(struct reader *rd, char **out, const char *s, size_t n)
{
	if ((size_t)(rd->bytes_end - *out) < n + 1)
		return false;
	memcpy(*out, s, n);
	*out += n;
	return true;
}

static bool read_hex4(struct reader *rd, unsigned *ret)
{
	unsigned v = 0;
	if (rd->end - rd->p < 4)
		return false;
	for (int k = 0; k < 4; k++) {
		char c = *rd->p++;
		unsigned digit;
		if (c >= '0' && c <= '9')
			digit = (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			digit = (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			digit = (unsigned)(c - 'A' + 10);
		else
			return false;
		v = v << 4 | digit;
	}
	*ret = v;
	return true;
}

/* The \u escape after the backslash, as UTF-8. */
static bool read_unicode_escape(struct reader *rd, char **out)
{
	unsigned cp, low;
	char utf8[4];
	size_t n;

	rd->p++; /* the 'u' */
	if (!read_hex4(rd, &cp) || cp == 0 || (cp >= 0xdc00 && cp <= 0xdfff))
		return false;
	if (cp >= 0xd800 && cp <= 0xdbff) {
		if (rd->end - rd->p < 2 || rd->p[0] != '\\' || rd->p[1] != 'u')
			return false;
		rd->p += 2;
		if (!read_hex4(rd, &low) || low < 0xdc00 || low > 0xdfff)
			return false;
		cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
	}
	if (cp < 0x80) {
		utf8[0] = (char)cp;
		n = 1;
	} else if (cp < 0x800) {
		utf8[0] = (char)(0xc0 | cp >> 6);
		utf8[1] = (char)(0x80 | (cp & 0x3f));
		n = 2;
	} else if (cp < 0x10000) {
		utf8[0] = (char)(0xe0 | cp >> 12);
		utf8[1] = (char)(0x80 | (cp >> 6 & 0x3f));
		utf8[2] = (char)(0x80 | (cp & 0x3f));
		n = 3;
	} else {
		utf8[0] = (char)(0xf0 | cp >> 18);
		utf8[1] = (char)(0x80 | (cp >> 12 & 0x3f));
		utf8[2] = (char)(0x80 | (cp >> 6 & 0x3f));
		utf8[3] = (char)(0x80 | (cp & 0x3f));
		n = 4;
	}
	return put_bytes(rd, out, utf8, n);
}

/* The bytes that end a run of plain string text: the closing quote, an escape, a control
 * character (which the grammar refuses inside a string). Most of the rules' bytes are long
 * strings, so one table look-up a byte is the reader's main cost. */
static const bool ends_string_run[256] = {
    [0x00 ... 0x1f] = true,
    ['"'] = true,
    ['\\'] = true,
};

/* The string whose opening quote rd->p is at, unescaped into the tree's bytes. */
static char *read_string(struct reader *rd, size_t *ret_len)
{
	char *start = rd->bytes, *out = rd->bytes;

	for (rd->p++;;) {
		if (rd->p == rd->end)
			return NULL;
		const char *run = rd->p;
		const unsigned char *q = (const unsigned char *)rd->p;
		const unsigned char *end = (const unsigned char *)rd->end;
		while (end - q >= 8 &&
		       !(ends_string_run[q[0]] | ends_string_run[q[1]] | ends_string_run[q[2]] |
			 ends_string_run[q[3]] | ends_string_run[q[4]] | ends_string_run[q[5]] |
			 ends_string_run[q[6]] | ends_string_run[q[7]]))
			q += 8;
		while (q < end && !ends_string_run[*q])
			q++;
		rd->p = (const char *)q;
		if (!put_bytes(rd, &out, run, (size_t)(rd->p - run)) || rd->p == rd->end)
			return NULL;
		if (*rd->p == '"')
			break;
		if (*rd->p != '\\' || rd->end - rd->p < 2)
			return NULL; /* a control character, or a backslash at the end */
		rd->p++;
		static const char escaped[] = "\"\\/bfnrt", meant[] = "\"\\/\b\f\n\r\t";
		const char *e = *rd->p ? strchr(escaped, *rd->p) : NULL;
		if (e) {
			if (!put_bytes(rd, &out, &meant[e - escaped], 1))
				return NULL;
			rd->p++;
		} else if (*rd->p != 'u' || !read_unicode_escape(rd, &out)) {
			return NULL;
		}
	}
	rd->p++;
	*out = '\0';
	*ret_len = (size_t)(out - start);
	rd->bytes = out + 1;
	return start;
}

static size_t digits(const char *p, const char *end)
{
	size_t n = 0;
	while (p + n < end && p[n] >= '0' && p[n] <= '9')
		n++;
	return n;
}

/* RFC 8259's number grammar; an integer that fits a long long is kept exact, as jansson does. */
static bool read_number(struct reader *rd, struct p2pg_json *v)
{
	const char *start = rd->p, *p = rd->p;
	bool integer = true;
	size_t n;

	if (p < rd->end && *p == '-')
		p++;
	n = digits(p, rd->end);
	if (n == 0 || (n > 1 && *p == '0'))
		return false;
	p += n;
	if (p < rd->end && *p == '.') {
		integer = false;
		if (!(n = digits(++p, rd->end)))
			return false;
		p += n;
	}
	if (p < rd->end && (*p == 'e' || *p == 'E')) {
		integer = false;
		p++;
		if (p < rd->end && (*p == '+' || *p == '-'))
			p++;
		if (!(n = digits(p, rd->end)))
			return false;
		p += n;
	}
	rd->p = p;
	char token[64];
	if ((size_t)(p - start) >= sizeof(token) || !ends_token(rd))
		return false;
	memcpy(token, start, (size_t)(p - start));
	token[p - start] = '\0';

	v->type = P2PG_JSON_NUMBER;
	errno = 0;
	if (integer) {
		v->integer = strtoll(token, NULL, 10);
		v->is_integer = true;
		v->number = (double)v->integer;
		return errno == 0;
	}
	/* strtod reads the decimal point of the program's locale, which the guard does not own. */
	if (!rd->c_numbers && !(rd->c_numbers = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0)))
		return false;
	v->number = strtod_l(token, NULL, rd->c_numbers);
	return !(errno == ERANGE && isinf(v->number));
}

static bool read_literal(struct reader *rd, const char *word)
{
	size_t n = strlen(word);
	if ((size_t)(rd->end - rd->p) < n || memcmp(rd->p, word, n) != 0)
		return false;
	rd->p += n;
	return ends_token(rd);
}

static bool read_value(struct reader *rd, int depth, struct p2pg_json **ret);

/* The members of the container v, whose opening rd->p is at. */
static bool read_members(struct reader *rd, int depth, struct p2pg_json *v)
{
	bool object = *rd->p == '{';
	char close = object ? '}' : ']';
	size_t first = rd->n_pending;

	if (depth == P2PG_JSON_MAX_DEPTH)
		return false;
	rd->p++;
	skip_blanks(rd);
	if (rd->p < rd->end && *rd->p == close) {
		rd->p++;
	} else {
		for (;;) {
			char *key = NULL;
			size_t key_len;
			if (object) {
				if (rd->p == rd->end || *rd->p != '"' ||
				    !(key = read_string(rd, &key_len)))
					return false;
				skip_blanks(rd);
				if (rd->p == rd->end || *rd->p != ':')
					return false;
				rd->p++;
			}
			struct p2pg_json *item;
			if (rd->n_pending == rd->n_nodes || !read_value(rd, depth + 1, &item))
				return false;
			rd->pending_items[rd->n_pending] = item;
			rd->pending_keys[rd->n_pending++] = key;
			skip_blanks(rd);
			if (rd->p == rd->end)
				return false;
			if (*rd->p == close) {
				rd->p++;
				break;
			}
			if (*rd->p != ',')
				return false;
			rd->p++;
			skip_blanks(rd);
		}
	}
	v->count = rd->n_pending - first;
	if (v->count > rd->n_nodes - rd->n_slots)
		return false;
	v->items = rd->items + rd->n_slots;
	memcpy(v->items, rd->pending_items + first, v->count * sizeof(*v->items));
	if (object) {
		v->keys = rd->keys + rd->n_slots;
		memcpy(v->keys, rd->pending_keys + first, v->count * sizeof(*v->keys));
	}
	rd->n_slots += v->count;
	rd->n_pending = first;
	return true;
}

static bool read_value(struct reader *rd, int depth, struct p2pg_json **ret)
{
	skip_blanks(rd);
	if (rd->p == rd->end || rd->next == rd->n_nodes)
		return false;
	struct p2pg_json *v = &rd->nodes[rd->next++];
	v->line = rd->line;
	*ret = v;
	switch (*rd->p) {
	case '{':
		v->type = P2PG_JSON_OBJECT;
		return read_members(rd, depth, v);
	case '[':
		v->type = P2PG_JSON_ARRAY;
		return read_members(rd, depth, v);
	case '"':
		v->type = P2PG_JSON_STRING;
		return (v->string = read_string(rd, &v->length)) != NULL;
	case 't':
	case 'f':
		v->type = P2PG_JSON_BOOL;
		v->boolean = *rd->p == 't';
		return read_literal(rd, v->boolean ? "true" : "false");
	case 'n':
		v->type = P2PG_JSON_NULL;
		return read_literal(rd, "null");
	default:
		return read_number(rd, v);
	}
}

int p2pg_json_parse_checked_values(const char *text, size_t len, size_t values,
				   struct p2pg_json **ret)
{
	struct reader rd = {.p = text, .end = text + len, .line = 1, .n_nodes = values};
	int r;

	if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0)
		rd.p += 3;
	if (values == 0) {
		r = json_value_lines(rd.p, rd.end, NULL, &rd.n_nodes);
		if (r < 0)
			return r;
	}
	if (rd.n_nodes == 0 || rd.n_nodes > SIZE_MAX / (4 * sizeof(void *) + sizeof(*rd.nodes)))
		return -EINVAL;
	size_t n = rd.n_nodes;
	/* The layout p2pg_json_parse uses, so that p2pg_json_free frees either tree. Only the nodes
	 * start zeroed: the item and key slots and the string bytes are written before anything
	 * reads them, and zeroing them too cost a twentieth of loading the rules. */
	rd.nodes = malloc(n * sizeof(*rd.nodes) + 2 * n * sizeof(void *) + len + 1);
	if (rd.nodes)
		memset(rd.nodes, 0, n * sizeof(*rd.nodes));
	rd.pending_items = malloc(n * sizeof(*rd.pending_items));
	rd.pending_keys = malloc(n * sizeof(*rd.pending_keys));
	if (!rd.nodes || !rd.pending_items || !rd.pending_keys) {
		r = -ENOMEM;
	} else {
		rd.items = (struct p2pg_json **)(rd.nodes + n);
		rd.keys = (char **)(rd.items + n);
		rd.bytes = (char *)(rd.keys + n);
		rd.bytes_end = rd.bytes + len + 1;
		struct p2pg_json *root;
		r = read_value(&rd, 0, &root) ? 0 : -EINVAL;
		skip_blanks(&rd);
		if (r == 0 && (rd.p != rd.end || rd.next != rd.n_nodes))
			r = -EINVAL;
	}
	free(rd.pending_items);
	free(rd.pending_keys);
	if (rd.c_numbers)
		freelocale(rd.c_numbers);
	if (r < 0) {
		free(rd.nodes);
		return r;
	}
	*ret = rd.nodes;
	return 0;
}

int p2pg_json_parse_checked(const char *text, size_t len, struct p2pg_json **ret)
{
	return p2pg_json_parse_checked_values(text, len, 0, ret);
}
