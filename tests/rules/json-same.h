/* SPDX-License-Identifier: MIT */
/* Whether the two JSON readers built the same tree: node for node, line for line, bit for bit. */
#pragma once

#include <stdbool.h>
#include <string.h>

#include "json.h"

/* On a difference, the line of the first node that differs (in a's numbering); 0 when the same. */
static int json_first_difference(const struct p2pg_json *a, const struct p2pg_json *b)
{
	if (!a || !b)
		return a == b ? 0 : 1;
	int line = a->line > 0 ? a->line : 1;
	if (a->type != b->type || a->line != b->line || a->count != b->count)
		return line;
	switch (a->type) {
	case P2PG_JSON_BOOL:
		return a->boolean == b->boolean ? 0 : line;
	case P2PG_JSON_NUMBER:
		if (a->is_integer != b->is_integer || (a->is_integer && a->integer != b->integer) ||
		    memcmp(&a->number, &b->number, sizeof(a->number)) != 0)
			return line;
		return 0;
	case P2PG_JSON_STRING:
		return a->length == b->length && memcmp(a->string, b->string, a->length + 1) == 0
			   ? 0
			   : line;
	case P2PG_JSON_OBJECT:
	case P2PG_JSON_ARRAY:
		for (size_t k = 0; k < a->count; k++) {
			if (a->type == P2PG_JSON_OBJECT && strcmp(a->keys[k], b->keys[k]) != 0)
				return a->items[k]->line;
			int d = json_first_difference(a->items[k], b->items[k]);
			if (d)
				return d;
		}
		return 0;
	case P2PG_JSON_NULL:
		return 0;
	}
	return line;
}
