/* SPDX-License-Identifier: MIT */
/*
 * Evidence about a failing peer call, as typed key/value facts.
 *
 * The evidence gatherer writes facts, the rule matcher reads them and the recorder stores them as
 * JSON. Keys are the contract between the three; the canonical set is listed in rules/README.md.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

enum p2pg_fact_type {
	P2PG_FACT_BOOL,
	P2PG_FACT_INT,
	P2PG_FACT_STR,
};

#define P2PG_FACT_KEY_MAX 40
#define P2PG_FACT_STR_MAX 128
#define P2PG_FACTS_MAX	  96

struct p2pg_fact {
	char key[P2PG_FACT_KEY_MAX];
	enum p2pg_fact_type type;
	long long i; /* BOOL (0/1) and INT */
	char s[P2PG_FACT_STR_MAX];
};

struct p2pg_facts {
	int n;
	struct p2pg_fact f[P2PG_FACTS_MAX];
};

/* Setting a key that exists replaces its value; past P2PG_FACTS_MAX keys the fact is dropped. */
void p2pg_facts_set_bool(struct p2pg_facts *facts, const char *key, bool value);
void p2pg_facts_set_int(struct p2pg_facts *facts, const char *key, long long value);
void p2pg_facts_set_str(struct p2pg_facts *facts, const char *key, const char *value);

/* Returns NULL when the key is absent. */
const struct p2pg_fact *p2pg_facts_get(const struct p2pg_facts *facts, const char *key);

/* Writes a JSON object with one member per fact. Returns the length written (without the NUL),
 * or -ENOSPC when buf is too small (buf then holds a truncated, still NUL-terminated prefix). */
int p2pg_facts_to_json(const struct p2pg_facts *facts, char *buf, size_t len);
