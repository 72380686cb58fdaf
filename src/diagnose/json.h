/* SPDX-License-Identifier: MIT */
/*
 * The knowledge base's JSON (RFC 8259) reader: jansson parses the text and names the line of a
 * syntax error; json.c adds the line every value starts on, so that the rule validator can say
 * "file:line: message" about any field.
 *
 * Stricter than the RFC where a data file should be: duplicate object keys, "\u0000" and invalid
 * UTF-8 are errors, and nesting is limited to P2PG_JSON_MAX_DEPTH levels (the copy recurses).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#define P2PG_JSON_MAX_DEPTH 64

enum p2pg_json_type {
	P2PG_JSON_NULL,
	P2PG_JSON_BOOL,
	P2PG_JSON_NUMBER,
	P2PG_JSON_STRING,
	P2PG_JSON_ARRAY,
	P2PG_JSON_OBJECT,
};

struct p2pg_json {
	enum p2pg_json_type type;
	int line; /* 1-based line of the value's first character */

	bool boolean; /* BOOL */

	double number;	   /* NUMBER */
	bool is_integer;   /* NUMBER written without fraction or exponent that fits a long long */
	long long integer; /* NUMBER, valid when is_integer */

	char *string;  /* STRING: NUL-terminated UTF-8 without embedded NUL */
	size_t length; /* STRING: bytes, without the NUL */

	size_t count;		  /* ARRAY elements, OBJECT members */
	struct p2pg_json **items; /* ARRAY elements, OBJECT member values, in file order */
	char **keys;		  /* OBJECT member names, parallel to items */
};

struct p2pg_json_error {
	int line;
	char message[160];
};

/*
 * Parses text (len bytes; it need not be NUL-terminated). Returns 0 and the tree in *ret, or
 * -EINVAL with the line and a message in *error (when error is not NULL), or -ENOMEM.
 */
int p2pg_json_parse(const char *text, size_t len, struct p2pg_json **ret,
		    struct p2pg_json_error *error);

/*
 * The same tree for text the build has checked (json_checked.c): faster, with no message. -EINVAL
 * for anything it does not expect, and the caller then asks p2pg_json_parse why; -ENOMEM.
 */
int p2pg_json_parse_checked(const char *text, size_t len, struct p2pg_json **ret);
/*
 * The same with the number of values the text holds (keys not counted) given: the build counts
 * them (scripts/embed-rules.py), which saves the pass that counts them here, a fifth of reading
 * the rules. 0 counts them here. A wrong count is answered with -EINVAL, like any other surprise.
 */
int p2pg_json_parse_checked_values(const char *text, size_t len, size_t values,
				   struct p2pg_json **ret);

void p2pg_json_free(struct p2pg_json *value); /* accepts NULL */

/* The value of member key of object, or NULL when object is not an object or has no such key. */
const struct p2pg_json *p2pg_json_member(const struct p2pg_json *object, const char *key);

/* "a string", "an array", ... for messages about the wrong type. */
const char *p2pg_json_type_name(enum p2pg_json_type type);
