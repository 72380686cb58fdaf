/* SPDX-License-Identifier: MIT */
#include "p2pguard/facts.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "utf8.h"

static struct p2pg_fact *fact_slot(struct p2pg_facts *facts, const char *key)
{
	for (int k = 0; k < facts->n; k++)
		if (strcmp(facts->f[k].key, key) == 0)
			return &facts->f[k];
	if (facts->n >= P2PG_FACTS_MAX)
		return NULL;
	struct p2pg_fact *fact = &facts->f[facts->n++];
	memset(fact, 0, sizeof(*fact));
	snprintf(fact->key, sizeof(fact->key), "%s", key);
	return fact;
}

void p2pg_facts_set_bool(struct p2pg_facts *facts, const char *key, bool value)
{
	struct p2pg_fact *fact = fact_slot(facts, key);
	if (!fact)
		return;
	fact->type = P2PG_FACT_BOOL;
	fact->i = value ? 1 : 0;
	fact->s[0] = '\0';
}

void p2pg_facts_set_int(struct p2pg_facts *facts, const char *key, long long value)
{
	struct p2pg_fact *fact = fact_slot(facts, key);
	if (!fact)
		return;
	fact->type = P2PG_FACT_INT;
	fact->i = value;
	fact->s[0] = '\0';
}

void p2pg_facts_set_str(struct p2pg_facts *facts, const char *key, const char *value)
{
	struct p2pg_fact *fact = fact_slot(facts, key);
	if (!fact)
		return;
	fact->type = P2PG_FACT_STR;
	fact->i = 0;
	snprintf(fact->s, sizeof(fact->s), "%s", value ? value : "");
}

const struct p2pg_fact *p2pg_facts_get(const struct p2pg_facts *facts, const char *key)
{
	for (int k = 0; k < facts->n; k++)
		if (strcmp(facts->f[k].key, key) == 0)
			return &facts->f[k];
	return NULL;
}

/* Appends to buf at *pos; keeps counting past the end so the caller can tell it did not fit. */
static void emit(char *buf, size_t len, size_t *pos, const char *text, size_t n)
{
	if (*pos < len) {
		size_t room = len - *pos;
		memcpy(buf + *pos, text, n < room ? n : room);
	}
	*pos += n;
}

static void emit_json_string(char *buf, size_t len, size_t *pos, const char *s)
{
	emit(buf, len, pos, "\"", 1);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		char esc[8];
		if (c == '"' || c == '\\') {
			esc[0] = '\\';
			esc[1] = (char)c;
			emit(buf, len, pos, esc, 2);
		} else if (c < 0x20) {
			int n = snprintf(esc, sizeof(esc), "\\u%04x", c);
			emit(buf, len, pos, esc, (size_t)n);
		} else if (c < 0x80) {
			emit(buf, len, pos, (const char *)&c, 1);
		} else {
			/* JSON is UTF-8: a fact read from the system (a device name, a path, a
			 * sequence cut by the fact's size) that is not well-formed is U+FFFD. */
			size_t n = p2pg_utf8_sequence((const unsigned char *)s);
			if (n) {
				emit(buf, len, pos, s, n);
				s += n - 1;
			} else {
				emit(buf, len, pos, "\\ufffd", 6);
			}
		}
	}
	emit(buf, len, pos, "\"", 1);
}

int p2pg_facts_to_json(const struct p2pg_facts *facts, char *buf, size_t len)
{
	size_t pos = 0;
	if (len == 0)
		return -ENOSPC;
	emit(buf, len, &pos, "{", 1);
	for (int k = 0; k < facts->n; k++) {
		const struct p2pg_fact *fact = &facts->f[k];
		char num[32];
		if (k > 0)
			emit(buf, len, &pos, ",", 1);
		emit_json_string(buf, len, &pos, fact->key);
		emit(buf, len, &pos, ":", 1);
		switch (fact->type) {
		case P2PG_FACT_BOOL:
			emit(buf, len, &pos, fact->i ? "true" : "false", fact->i ? 4 : 5);
			break;
		case P2PG_FACT_INT: {
			int n = snprintf(num, sizeof(num), "%lld", fact->i);
			emit(buf, len, &pos, num, (size_t)n);
			break;
		}
		case P2PG_FACT_STR:
			emit_json_string(buf, len, &pos, fact->s);
			break;
		}
	}
	emit(buf, len, &pos, "}", 1);
	if (pos >= len) {
		buf[len - 1] = '\0';
		return -ENOSPC;
	}
	buf[pos] = '\0';
	return (int)pos;
}
