/* SPDX-License-Identifier: MIT */
/*
 * A rule's "notes" (rules/README.md, "Notes"): sentences added to the root cause when the evidence
 * of the failure shows what they say, with the facts they name ({pcie_acs_bridge}) filled in. So
 * a rule can say "ACS redirects peer traffic on bridge 0000:00:03.1" where it would otherwise say
 * "maybe ACS".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rules-loader.h"

/* Each {key} of text must be a fact key that a condition of the note requires to be present:
 * otherwise the sentence could print with a hole in it. */
static bool check_placeholders(struct loader *ld, const struct p2pg_json *text,
			       const struct note *n)
{
	for (const char *p = text->string; (p = strchr(p, '{')); p++) {
		const char *end = strchr(p, '}');
		char key[64];
		if (!end || (size_t)(end - p - 1) >= sizeof(key)) {
			ld_problem(ld, text->line, "unclosed \"{\" in note text");
			return false;
		}
		memcpy(key, p + 1, (size_t)(end - p - 1));
		key[end - p - 1] = '\0';
		if (!rules_fact_key_lookup(key)) {
			ld_problem(ld, text->line, "note text names unknown fact \"{%s}\"", key);
			return false;
		}
		bool required = false;
		for (size_t k = 0; k < n->n_facts && !required; k++)
			required = strcmp(n->facts[k].key->name, key) == 0 &&
				   !(n->facts[k].op == OP_EXISTS && !n->facts[k].exists);
		if (!required) {
			ld_problem(ld, text->line,
				   "note text names {%s}, which the note's facts do not require",
				   key);
			return false;
		}
	}
	return true;
}

static bool parse_note(struct loader *ld, const struct p2pg_json *v, const char *path,
		       struct note *n)
{
	char sub[96];
	bool ok = true;

	if (!ld_expect_type(ld, v, path, P2PG_JSON_OBJECT))
		return false;
	for (size_t k = 0; k < v->count; k++)
		if (strcmp(v->keys[k], "facts") != 0 && strcmp(v->keys[k], "text") != 0) {
			ld_problem(ld, v->items[k]->line, "unknown field \"%s.%s\"", path,
				   v->keys[k]);
			ok = false;
		}
	const struct p2pg_json *facts = p2pg_json_member(v, "facts");
	const struct p2pg_json *text = p2pg_json_member(v, "text");
	if (!facts || !text) {
		ld_problem(ld, v->line, "missing required field \"%s.%s\"", path,
			   facts ? "text" : "facts");
		return false;
	}
	snprintf(sub, sizeof(sub), "%s.facts", path);
	if (!ld_expect_type(ld, facts, sub, P2PG_JSON_OBJECT))
		return false;
	if (facts->count == 0) {
		ld_problem(ld, facts->line, "empty object for \"%s\"", sub);
		return false;
	}
	n->facts = ld_alloc_array(ld, facts->count, sizeof(*n->facts));
	if (!n->facts)
		return false;
	for (size_t k = 0; k < facts->count; k++) {
		ok &=
		    ld_parse_condition(ld, facts->keys[k], facts->items[k], &n->facts[n->n_facts]);
		n->n_facts++; /* counted even when bad, so it is freed */
	}
	snprintf(sub, sizeof(sub), "%s.text", path);
	if (!ld_expect_type(ld, text, sub, P2PG_JSON_STRING))
		return false;
	if (!ok || !check_placeholders(ld, text, n))
		return false;
	n->text = ld_copy(ld, text->string);
	return true;
}

bool rules_parse_notes(struct loader *ld, const struct p2pg_json *v, struct p2pg_rule *r)
{
	bool ok = true;

	if (!ld_expect_type(ld, v, "notes", P2PG_JSON_ARRAY))
		return false;
	if (!r->has_match) {
		/* Notes are read against the evidence of a failure the rule was chosen for. */
		ld_problem(ld, v->line, "\"notes\" needs \"match\"");
		return false;
	}
	r->notes = ld_alloc_array(ld, v->count, sizeof(*r->notes));
	if (!r->notes)
		return false;
	for (size_t k = 0; k < v->count; k++) {
		char path[32];
		snprintf(path, sizeof(path), "notes[%zu]", k);
		ok &= parse_note(ld, v->items[k], path, &r->notes[k]);
		r->n_notes = k + 1;
	}
	return ok;
}

/* ---- Rendering ---- */

static bool note_holds(const struct note *n, const struct p2pg_facts *facts)
{
	for (size_t k = 0; k < n->n_facts; k++)
		if (!rules_condition_holds(&n->facts[k], facts))
			return false;
	return true;
}

static void append(char **out, size_t *len, size_t *cap, const char *s, size_t n)
{
	if (!*out)
		return;
	if (*len + n + 1 > *cap) {
		size_t bigger = (*len + n + 1) * 2;
		char *p = realloc(*out, bigger);
		if (!p) {
			free(*out);
			*out = NULL;
			return;
		}
		*out = p;
		*cap = bigger;
	}
	memcpy(*out + *len, s, n);
	*len += n;
	(*out)[*len] = '\0';
}

static void append_fact(char **out, size_t *len, size_t *cap, const struct p2pg_fact *f)
{
	char value[P2PG_FACT_STR_MAX + 32];
	switch (f->type) {
	case P2PG_FACT_STR:
		snprintf(value, sizeof(value), "%s", f->s);
		break;
	case P2PG_FACT_INT:
		snprintf(value, sizeof(value), "%lld", f->i);
		break;
	case P2PG_FACT_BOOL:
		snprintf(value, sizeof(value), "%s", f->i ? "true" : "false");
		break;
	}
	append(out, len, cap, value, strlen(value));
}

char *p2pg_rule_root_cause_for(const struct p2pg_rule *rule, const struct p2pg_facts *facts)
{
	if (!rule)
		return NULL;
	size_t len = 0, cap = strlen(rule->root_cause) + 1;
	char *out = malloc(cap);
	if (!out)
		return NULL;
	out[0] = '\0';
	append(&out, &len, &cap, rule->root_cause, strlen(rule->root_cause));
	for (size_t k = 0; facts && k < rule->n_notes; k++) {
		const struct note *n = &rule->notes[k];
		if (!note_holds(n, facts))
			continue;
		append(&out, &len, &cap, " ", 1);
		for (const char *p = n->text; out && *p;) {
			const char *open = strchr(p, '{');
			if (!open) {
				append(&out, &len, &cap, p, strlen(p));
				break;
			}
			append(&out, &len, &cap, p, (size_t)(open - p));
			const char *close = strchr(open, '}');
			char key[64];
			snprintf(key, sizeof(key), "%.*s", (int)(close - open - 1), open + 1);
			const struct p2pg_fact *f = p2pg_facts_get(facts, key);
			if (f)
				append_fact(&out, &len, &cap, f);
			p = close + 1;
		}
	}
	return out;
}
