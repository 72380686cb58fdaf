/* SPDX-License-Identifier: MIT */
/*
 * The knowledge base's lookup for a failure: the most specific rule whose conditions hold
 * (rules/README.md, "Specificity"). Explaining pasted text is in rules_explain.c.
 */
#include "p2pguard/rules.h"

#include <ctype.h>
#include <errno.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "driver.h"
#include "rules-private.h"

/* ---- Matching ---- */

/* The api the program called may carry its ABI suffix (cuMemcpyPeer_ptds, cuMemcpyDtoD_v2);
 * rules name the plain function. */
bool rules_api_matches(const char *listed, const char *api)
{
	char plain[96];
	size_t n;

	if (strcmp(listed, api) == 0)
		return true;
	snprintf(plain, sizeof(plain), "%s", api);
	n = strlen(plain);
	if (n > 5 && (has_suffix(plain, "_ptds") || has_suffix(plain, "_ptsz"))) {
		n -= 5;
		plain[n] = '\0';
	}
	size_t d = n;
	while (d > 0 && isdigit((unsigned char)plain[d - 1]))
		d--;
	if (d < n && d >= 2 && plain[d - 1] == 'v' && plain[d - 2] == '_')
		plain[d - 2] = '\0';
	return strcmp(listed, plain) == 0;
}

static bool value_equals(const struct value *v, const struct p2pg_fact *f)
{
	switch (v->kind) {
	case KIND_BOOL:
		return (f->type == P2PG_FACT_BOOL || f->type == P2PG_FACT_INT) &&
		       (f->i != 0) == (v->i != 0);
	case KIND_INT:
		return (f->type == P2PG_FACT_INT || f->type == P2PG_FACT_BOOL) && f->i == v->i;
	case KIND_STR:
		return f->type == P2PG_FACT_STR && strcmp(f->s, v->s) == 0;
	}
	return false;
}

bool rules_condition_holds(const struct condition *c, const struct p2pg_facts *facts)
{
	const struct p2pg_fact *f = facts ? p2pg_facts_get(facts, c->key->name) : NULL;

	if (c->op == OP_EXISTS)
		return (f != NULL) == c->exists;
	if (!f)
		return false; /* unknown evidence proves nothing, "ne" included */
	switch (c->op) {
	case OP_ANY:
		for (size_t k = 0; k < c->n_values; k++)
			if (value_equals(&c->values[k], f))
				return true;
		return false;
	case OP_NE:
		return !value_equals(&c->values[0], f);
	case OP_GTE:
		return f->type == P2PG_FACT_INT && f->i >= c->values[0].i;
	case OP_LTE:
		return f->type == P2PG_FACT_INT && f->i <= c->values[0].i;
	case OP_EXISTS:
		break;
	}
	return false;
}

static bool rule_holds(const struct p2pg_rule *r, const char *api, int status,
		       const struct p2pg_facts *facts)
{
	if (!r->has_match)
		return false;
	if (r->n_apis) {
		bool any = false;
		for (size_t k = 0; api && k < r->n_apis && !any; k++)
			any = rules_api_matches(r->apis[k], api);
		if (!any)
			return false;
	}
	if (r->n_statuses) {
		bool any = false;
		for (size_t k = 0; k < r->n_statuses && !any; k++)
			any = r->statuses[k] == status;
		if (!any)
			return false;
	}
	for (size_t k = 0; k < r->n_conditions; k++)
		if (!rules_condition_holds(&r->conditions[k], facts))
			return false;
	return true;
}

/* Negative when a ranks before b for p2pg_ruleset_match. */
static int compare_for_match(const struct p2pg_rule *a, const struct p2pg_rule *b)
{
	if (a->specificity != b->specificity)
		return a->specificity > b->specificity ? -1 : 1;
	if (a->confidence != b->confidence)
		return a->confidence > b->confidence ? -1 : 1;
	return strcmp(a->id, b->id);
}

const struct p2pg_rule *p2pg_ruleset_match(const struct p2pg_ruleset *rs, const char *api,
					   int status, const struct p2pg_facts *facts)
{
	const struct p2pg_rule *best = NULL;

	if (!rs)
		return NULL;
	for (size_t k = 0; k < rs->count; k++) {
		const struct p2pg_rule *r = rs->rules[k];
		if (rule_holds(r, api, status, facts) && (!best || compare_for_match(r, best) < 0))
			best = r;
	}
	return best;
}
