/* SPDX-License-Identifier: MIT */
/* A rule's examples: read from its file, and checked against the whole set (each match must select
 * its rule, no near miss may). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "rules-loader.h"

static bool parse_example(struct loader *ld, const struct p2pg_json *v, const char *path,
			  const struct p2pg_rule *r, struct example *ex)
{
	char sub[128];
	bool ok = true;

	ex->line = v->line;
	ex->status = -1;
	if (!ld_expect_type(ld, v, path, P2PG_JSON_OBJECT))
		return false;

	const struct p2pg_json *text = p2pg_json_member(v, "text");
	for (size_t k = 0; k < v->count; k++) {
		const char *name = v->keys[k];
		bool known = strcmp(name, "text") == 0 || strcmp(name, "api") == 0 ||
			     strcmp(name, "status") == 0 || strcmp(name, "facts") == 0;
		if (!known) {
			ld_problem(ld, v->items[k]->line, "unknown field \"%s.%s\"", path, name);
			ok = false;
		}
	}
	if (!ok)
		return false;

	if (text) {
		ld_field_key(sub, sizeof(sub), path, "text");
		if (!ld_expect_type(ld, text, sub, P2PG_JSON_STRING))
			return false;
		if (v->count > 1) {
			ld_problem(ld, v->line, "example \"%s\" mixes text and evidence", path);
			return false;
		}
		ex->text = ld_copy(ld, text->string);
		return true;
	}

	if (!r->has_match) {
		ld_problem(
		    ld, v->line,
		    "evidence example \"%s\" for a rule without \"match\" (use a text example)",
		    path);
		return false;
	}
	const struct p2pg_json *api = p2pg_json_member(v, "api");
	if (api) {
		ld_field_key(sub, sizeof(sub), path, "api");
		if (!ld_expect_type(ld, api, sub, P2PG_JSON_STRING))
			return false;
		ex->api = ld_copy(ld, api->string);
	}
	const struct p2pg_json *status = p2pg_json_member(v, "status");
	if (status) {
		if (status->type != P2PG_JSON_NUMBER || !status->is_integer ||
		    status->integer < 0 || status->integer > INT_MAX) {
			ld_problem(ld, status->line,
				   "field \"%s.status\" must be a CUDA status code", path);
			return false;
		}
		ex->status = (int)status->integer;
	}
	const struct p2pg_json *facts = p2pg_json_member(v, "facts");
	if (facts) {
		ld_field_key(sub, sizeof(sub), path, "facts");
		if (!ld_expect_type(ld, facts, sub, P2PG_JSON_OBJECT))
			return false;
		ex->facts = ld_alloc_array(ld, facts->count, sizeof(*ex->facts));
		if (!ex->facts)
			return false;
		for (size_t k = 0; k < facts->count; k++) {
			const struct p2pg_json *fv = facts->items[k];
			struct condition *c = &ex->facts[ex->n_facts];
			const struct fact_key *key =
			    ld_parse_fact_key(ld, facts->keys[k], fv->line);
			if (!key)
				return false;
			if (fv->type == P2PG_JSON_ARRAY || fv->type == P2PG_JSON_OBJECT) {
				/* Evidence has one value per key; lists and operators are for
				 * match. */
				ld_problem(ld, fv->line,
					   "example fact \"%s\" must be a single value",
					   facts->keys[k]);
				return false;
			}
			c->key = key;
			c->op = OP_ANY;
			c->values = ld_alloc_array(ld, 1, sizeof(*c->values));
			ex->n_facts++;
			if (!c->values || !ld_parse_value(ld, key, fv, &c->values[0]))
				return false;
			c->n_values = 1;
		}
	}
	return true;
}

static bool parse_example_list(struct loader *ld, const struct p2pg_json *examples,
			       const char *name, const struct p2pg_rule *r, struct example **ret,
			       size_t *ret_n)
{
	char path[32];
	const struct p2pg_json *list = p2pg_json_member(examples, name);

	ld_field_key(path, sizeof(path), "examples", name);
	if (!list) {
		ld_problem(ld, examples->line, "missing required field \"%s\"", path);
		return false;
	}
	if (!ld_expect_type(ld, list, path, P2PG_JSON_ARRAY))
		return false;
	if (list->count == 0) {
		ld_problem(ld, list->line, "field \"%s\" needs at least one example", path);
		return false;
	}
	*ret = ld_alloc_array(ld, list->count, sizeof(**ret));
	if (!*ret)
		return false;
	bool ok = true;
	for (size_t k = 0; k < list->count; k++) {
		char sub[64];
		ld_field_index(sub, sizeof(sub), path, k);
		ok &= parse_example(ld, list->items[k], sub, r, &(*ret)[k]);
		*ret_n = k + 1;
	}
	return ok;
}

bool rules_parse_examples(struct loader *ld, const struct p2pg_json *v, struct p2pg_rule *r)
{
	if (!ld_expect_type(ld, v, "examples", P2PG_JSON_OBJECT))
		return false;
	bool ok = true;
	for (size_t k = 0; k < v->count; k++)
		if (strcmp(v->keys[k], "matches") != 0 && strcmp(v->keys[k], "near_misses") != 0) {
			ld_problem(ld, v->items[k]->line, "unknown field \"examples.%s\"",
				   v->keys[k]);
			ok = false;
		}
	ok &= parse_example_list(ld, v, "matches", r, &r->matches, &r->n_matches);
	ok &= parse_example_list(ld, v, "near_misses", r, &r->near_misses, &r->n_near_misses);
	return ok;
}

/* ---- Examples ---- */

static struct p2pg_facts *example_facts(const struct example *ex)
{
	struct p2pg_facts *facts = calloc(1, sizeof(*facts));
	if (!facts)
		return NULL;
	if (ex->api)
		p2pg_facts_set_str(facts, "api", ex->api);
	if (ex->status >= 0)
		p2pg_facts_set_int(facts, "status", ex->status);
	for (size_t k = 0; k < ex->n_facts; k++) {
		const struct value *v = &ex->facts[k].values[0];
		const char *key = ex->facts[k].key->name;
		switch (v->kind) {
		case KIND_BOOL:
			p2pg_facts_set_bool(facts, key, v->i != 0);
			break;
		case KIND_INT:
			p2pg_facts_set_int(facts, key, v->i);
			break;
		case KIND_STR:
			p2pg_facts_set_str(facts, key, v->s);
			break;
		}
	}
	return facts;
}

/* The text read as one line: the default answer (a p2pg_rules_answer_fn). */
static int one_line_answer(const struct p2pg_ruleset *rs, const char *text,
			   const struct p2pg_rule **ret)
{
	*ret = NULL;
	p2pg_ruleset_explain(rs, text, ret, 1);
	return 0;
}

/* The rule the example selects, or NULL. Returns false when memory ran out. */
static bool example_selects(const struct p2pg_ruleset *rs, p2pg_rules_answer_fn answer,
			    const struct example *ex, const struct p2pg_rule **ret)
{
	if (ex->text)
		return answer(rs, ex->text, ret) == 0;
	_cleanup_free_ struct p2pg_facts *facts = example_facts(ex);
	if (!facts)
		return false;
	*ret = p2pg_ruleset_match(rs, ex->api, ex->status, facts);
	return true;
}

int p2pg_ruleset_check_examples(const struct p2pg_ruleset *rs, p2pg_rules_report_fn report,
				void *userdata)
{
	return p2pg_ruleset_check_examples_answered(rs, one_line_answer, report, userdata);
}

int p2pg_ruleset_check_examples_answered(const struct p2pg_ruleset *rs, p2pg_rules_answer_fn answer,
					 p2pg_rules_report_fn report, void *userdata)
{
	int problems = 0;

	if (!rs)
		return -EINVAL;
	/* The built-in rules' regexes, compiled at first use otherwise, are checked here as a rule
	 * file's are when it is read. */
	for (size_t k = 0; k < rs->count; k++)
		problems += rules_check_regex(rs->rules[k], report, userdata);
	for (size_t k = 0; k < rs->count; k++) {
		const struct p2pg_rule *r = rs->rules[k];
		for (size_t e = 0; e < r->n_matches; e++) {
			const struct example *ex = &r->matches[e];
			const struct p2pg_rule *got;
			if (!example_selects(rs, answer, ex, &got))
				return -ENOMEM;
			if (got == r)
				continue;
			problems++;
			if (ex->text && !got)
				rules_report(report, userdata, r->file, ex->line,
					     "example text explains nothing");
			else if (ex->text)
				rules_report(report, userdata, r->file, ex->line,
					     "example text is explained first by %s, not this rule",
					     got->id);
			else if (!got)
				rules_report(report, userdata, r->file, ex->line,
					     "example selects no rule");
			else
				rules_report(report, userdata, r->file, ex->line,
					     "example selects %s, not this rule", got->id);
		}
		for (size_t e = 0; e < r->n_near_misses; e++) {
			const struct example *ex = &r->near_misses[e];
			const struct p2pg_rule *got;
			if (!example_selects(rs, answer, ex, &got))
				return -ENOMEM;
			if (got != r)
				continue;
			problems++;
			rules_report(report, userdata, r->file, ex->line,
				     ex->text ? "near-miss text is explained first by this rule"
					      : "near miss selects this rule");
		}
	}
	return problems;
}
