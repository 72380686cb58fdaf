/* SPDX-License-Identifier: MIT */
/*
 * The knowledge base's validator: one rule file's JSON to a checked rule, every problem reported
 * as "FILE:LINE: message" (rules/README.md lists every message the validator reports). The fact
 * keys, the regex size check and the examples have files of their own.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "json.h"
#include "rules-loader.h"

static inline void json_freep(struct p2pg_json **p)
{
	p2pg_json_free(*p);
}
#define _cleanup_json_ _cleanup_(json_freep)

/* ---- Loading ---- */

void ld_problem(struct loader *ld, int line, const char *fmt, ...)
{
	char message[512];
	va_list ap;

	ld->problems++;
	if (!ld->report)
		return;
	va_start(ap, fmt);
	vsnprintf(message, sizeof(message), fmt, ap);
	va_end(ap);
	ld->report(ld->userdata, ld->file, line, message);
}

/* strdup that remembers a failure, so one check at the end covers every copy. */
char *ld_copy(struct loader *ld, const char *s)
{
	char *c = strdup(s);
	if (!c)
		ld->nomem = true;
	return c;
}

void *ld_alloc_array(struct loader *ld, size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size);
	if (!p)
		ld->nomem = true;
	return p;
}

/* "field "x" must be a string, not a number" */
bool ld_expect_type(struct loader *ld, const struct p2pg_json *v, const char *path,
		    enum p2pg_json_type type)
{
	if (v->type == type)
		return true;
	ld_problem(ld, v->line, "field \"%s\" must be %s, not %s", path, p2pg_json_type_name(type),
		   p2pg_json_type_name(v->type));
	return false;
}

static size_t append(char *buf, size_t size, size_t at, const char *s, size_t n)
{
	if (at + 1 >= size)
		return at;
	if (n > size - 1 - at)
		n = size - 1 - at;
	memcpy(buf + at, s, n);
	buf[at + n] = '\0';
	return at + n;
}

void ld_field_key(char *buf, size_t size, const char *path, const char *key)
{
	if (!size)
		return;
	buf[0] = '\0';
	size_t at = append(buf, size, 0, path, strlen(path));
	at = append(buf, size, at, ".", 1);
	append(buf, size, at, key, strlen(key));
}

void ld_field_index(char *buf, size_t size, const char *path, size_t k)
{
	char digits[24];
	size_t n = sizeof(digits);
	do
		digits[--n] = (char)('0' + k % 10);
	while ((k /= 10) && n > 1);
	digits[--n] = '[';
	if (!size)
		return;
	buf[0] = '\0';
	size_t at = append(buf, size, 0, path, strlen(path));
	at = append(buf, size, at, digits + n, sizeof(digits) - n);
	append(buf, size, at, "]", 1);
}

static bool expect_rate(struct loader *ld, const struct p2pg_json *v, const char *path)
{
	if (v->type == P2PG_JSON_NUMBER && v->number >= 0.0 && v->number <= 1.0)
		return true;
	ld_problem(ld, v->line, "field \"%s\" must be a number between 0 and 1", path);
	return false;
}

bool ld_expect_strings(struct loader *ld, const struct p2pg_json *v, const char *path)
{
	if (!ld_expect_type(ld, v, path, P2PG_JSON_ARRAY))
		return false;
	for (size_t k = 0; k < v->count; k++)
		if (v->items[k]->type != P2PG_JSON_STRING) {
			ld_problem(ld, v->items[k]->line,
				   "field \"%s\" must be an array of strings", path);
			return false;
		}
	return true;
}

static bool valid_id(const char *id)
{
	/* domain/name[/name...]: lowercase letters, digits and dashes, so it doubles as a path. */
	int segments = 0;
	const char *p = id;
	for (;;) {
		const char *start = p;
		while ((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-')
			p++;
		if (p == start || *start == '-')
			return false;
		segments++;
		if (*p == '\0')
			break;
		if (*p != '/')
			return false;
		p++;
	}
	return segments >= 2;
}

bool ld_valid_api_name(const char *api)
{
	if (strncmp(api, "cu", 2) != 0 || strlen(api) < 4 || strlen(api) > 64)
		return false;
	for (const char *p = api; *p; p++)
		if (!isalnum((unsigned char)*p) && *p != '_')
			return false;
	return true;
}

enum field_type {
	F_STRING,
	F_STRINGS,
	F_ARRAY,
	F_OBJECT,
	F_RATE,
	F_COUNT,
	F_CHECKED_LATER, /* validated by its own code below */
};

/* The entry schema. Fields of the shared knowledge-base schema that p2pguard does not use are
 * still type-checked, so a typo in any of them is caught. */
static const struct field {
	const char *name;
	enum field_type type;
	bool required;
} fields[] = {
    {"id", F_STRING, true},
    {"signature", F_STRING, true},
    {"signature_zh", F_STRING, false},
    {"regex", F_CHECKED_LATER, false},
    {"domain", F_STRING, false},
    {"category", F_STRING, false},
    {"subcategory", F_STRING, false},
    {"root_cause", F_STRING, true},
    {"root_cause_type", F_STRING, false},
    {"root_cause_zh", F_STRING, false},
    {"versions", F_ARRAY, false},
    {"os_specific", F_OBJECT, false},
    {"dead_ends", F_CHECKED_LATER, false},
    {"workarounds", F_CHECKED_LATER, true},
    {"workarounds_zh", F_ARRAY, false},
    {"transition_graph", F_OBJECT, false},
    {"official_doc_url", F_STRING, false},
    {"official_doc_section", F_STRING, false},
    {"error_code", F_STRING, false},
    {"verification_tier", F_STRING, false},
    {"confidence", F_RATE, false},
    {"fix_success_rate", F_RATE, false},
    {"resolvable", F_STRING, false},
    {"first_seen", F_STRING, false},
    {"last_confirmed", F_STRING, false},
    {"last_updated", F_STRING, false},
    {"evidence_count", F_COUNT, false},
    {"tags", F_STRINGS, false},
    {"locale", F_STRING, false},
    {"aliases", F_STRINGS, false},
    {"codes", F_CHECKED_LATER, false},
    {"match", F_CHECKED_LATER, false},
    {"context", F_CHECKED_LATER, false},
    {"notes", F_CHECKED_LATER, false},
    {"examples", F_CHECKED_LATER, true},
};

static const struct field *field_lookup(const char *name)
{
	/* The first letter rules out most names without a call (every rule of every command
	 * passes here). */
	for (size_t k = 0; k < sizeof(fields) / sizeof(fields[0]); k++)
		if (fields[k].name[0] == name[0] && strcmp(fields[k].name, name) == 0)
			return &fields[k];
	return NULL;
}

/* The member, with null treated as absent (the shared schema writes null for "not given"). */
static const struct p2pg_json *member(const struct p2pg_json *obj, const char *key)
{
	const struct p2pg_json *v = p2pg_json_member(obj, key);
	return v && v->type != P2PG_JSON_NULL ? v : NULL;
}

static bool check_fields(struct loader *ld, const struct p2pg_json *root)
{
	bool ok = true;

	for (size_t k = 0; k < root->count; k++) {
		const struct field *f = field_lookup(root->keys[k]);
		const struct p2pg_json *v = root->items[k];
		if (!f) {
			ld_problem(ld, v->line, "unknown field \"%s\"", root->keys[k]);
			ok = false;
			continue;
		}
		if (v->type == P2PG_JSON_NULL && !f->required)
			continue;
		switch (f->type) {
		case F_STRING:
			ok &= ld_expect_type(ld, v, f->name, P2PG_JSON_STRING);
			break;
		case F_STRINGS:
			ok &= ld_expect_strings(ld, v, f->name);
			break;
		case F_ARRAY:
			ok &= ld_expect_type(ld, v, f->name, P2PG_JSON_ARRAY);
			break;
		case F_OBJECT:
			ok &= ld_expect_type(ld, v, f->name, P2PG_JSON_OBJECT);
			break;
		case F_RATE:
			ok &= expect_rate(ld, v, f->name);
			break;
		case F_COUNT:
			if (v->type != P2PG_JSON_NUMBER || !v->is_integer || v->integer < 0) {
				ld_problem(ld, v->line,
					   "field \"%s\" must be a non-negative integer", f->name);
				ok = false;
			}
			break;
		case F_CHECKED_LATER:
			break;
		}
	}
	for (size_t k = 0; k < sizeof(fields) / sizeof(fields[0]); k++)
		if (fields[k].required && !p2pg_json_member(root, fields[k].name)) {
			ld_problem(ld, root->line, "missing required field \"%s\"", fields[k].name);
			ok = false;
		}
	if (!p2pg_json_member(root, "codes") && !p2pg_json_member(root, "match")) {
		ld_problem(ld, root->line, "missing required field \"codes\" or \"match\"");
		ok = false;
	}
	return ok;
}

/* A scalar JSON value as a fact value of the key's kind. */
bool ld_parse_value(struct loader *ld, const struct fact_key *key, const struct p2pg_json *v,
		    struct value *ret)
{
	ret->kind = key->kind;
	switch (key->kind) {
	case KIND_BOOL:
		if (v->type != P2PG_JSON_BOOL)
			break;
		ret->i = v->boolean;
		return true;
	case KIND_INT:
		if (v->type != P2PG_JSON_NUMBER || !v->is_integer)
			break;
		ret->i = v->integer;
		return true;
	case KIND_STR:
		if (v->type != P2PG_JSON_STRING)
			break;
		if (key->values) {
			bool known = false;
			char list[256] = "";
			for (size_t k = 0; key->values[k]; k++) {
				known |= strcmp(key->values[k], v->string) == 0;
				if (k > 0)
					strncat(list, ", ", sizeof(list) - strlen(list) - 1);
				strncat(list, key->values[k], sizeof(list) - strlen(list) - 1);
			}
			if (!known) {
				ld_problem(
				    ld, v->line,
				    "unknown value \"%s\" for fact \"%s\" (expected one of %s)",
				    v->string, key->name, list);
				return false;
			}
		}
		ret->s = ld_copy(ld, v->string);
		return true;
	}
	ld_problem(
	    ld, v->line, "fact \"%s\" expects %s, not %s", key->name, rules_kind_name(key->kind),
	    v->type == P2PG_JSON_NUMBER && key->kind == KIND_INT ? "a fraction"
								 : p2pg_json_type_name(v->type));
	return false;
}

const struct fact_key *ld_parse_fact_key(struct loader *ld, const char *name, int line)
{
	const struct fact_key *key = rules_fact_key_lookup(name);
	if (!key) {
		ld_problem(ld, line, "unknown fact key \"%s\"", name);
		return NULL;
	}
	if (strcmp(name, "api") == 0 || strcmp(name, "status") == 0) {
		/* One way to say it: the call's api and status are conditions of their own. */
		ld_problem(ld, line, "fact key \"%s\" belongs in \"%s\", not in \"facts\"", name,
			   name);
		return NULL;
	}
	return key;
}

bool ld_parse_condition(struct loader *ld, const char *name, const struct p2pg_json *v,
			struct condition *c)
{
	const struct fact_key *key = ld_parse_fact_key(ld, name, v->line);
	if (!key)
		return false;
	c->key = key;

	if (v->type == P2PG_JSON_ARRAY) {
		if (v->count == 0) {
			ld_problem(ld, v->line, "empty list for fact \"%s\"", name);
			return false;
		}
		c->op = OP_ANY;
		c->values = ld_alloc_array(ld, v->count, sizeof(*c->values));
		if (!c->values)
			return false;
		for (size_t k = 0; k < v->count; k++) {
			if (!ld_parse_value(ld, key, v->items[k], &c->values[c->n_values]))
				return false;
			c->n_values++;
		}
		return true;
	}
	if (v->type == P2PG_JSON_OBJECT) {
		if (v->count != 1) {
			ld_problem(ld, v->line,
				   "operator object for fact \"%s\" must have exactly one member",
				   name);
			return false;
		}
		const char *op = v->keys[0];
		const struct p2pg_json *arg = v->items[0];
		if (strcmp(op, "exists") == 0) {
			if (arg->type != P2PG_JSON_BOOL) {
				ld_problem(ld, arg->line,
					   "operator \"exists\" takes true or false");
				return false;
			}
			c->op = OP_EXISTS;
			c->exists = arg->boolean;
			return true;
		}
		if (strcmp(op, "gte") == 0 || strcmp(op, "lte") == 0) {
			if (key->kind != KIND_INT) {
				ld_problem(
				    ld, v->line,
				    "operator \"%s\" needs an integer fact, and \"%s\" is %s", op,
				    name, rules_kind_name(key->kind));
				return false;
			}
			c->op = op[0] == 'g' ? OP_GTE : OP_LTE;
		} else if (strcmp(op, "ne") == 0) {
			c->op = OP_NE;
		} else {
			ld_problem(
			    ld, v->line,
			    "unknown operator \"%s\" for fact \"%s\" (expected gte, lte, ne or "
			    "exists)",
			    op, name);
			return false;
		}
		c->values = ld_alloc_array(ld, 1, sizeof(*c->values));
		if (!c->values || !ld_parse_value(ld, key, arg, &c->values[0]))
			return false;
		c->n_values = 1;
		return true;
	}
	c->op = OP_ANY;
	c->values = ld_alloc_array(ld, 1, sizeof(*c->values));
	if (!c->values || !ld_parse_value(ld, key, v, &c->values[0]))
		return false;
	c->n_values = 1;
	return true;
}

static bool parse_int_list(struct loader *ld, const struct p2pg_json *v, const char *path,
			   bool allow_empty, int **ret, size_t *ret_n)
{
	if (!ld_expect_type(ld, v, path, P2PG_JSON_ARRAY))
		return false;
	if (v->count == 0 && !allow_empty) {
		ld_problem(ld, v->line, "empty list for \"%s\"", path);
		return false;
	}
	int *list = ld_alloc_array(ld, v->count, sizeof(*list));
	if (!list)
		return false;
	for (size_t k = 0; k < v->count; k++) {
		const struct p2pg_json *item = v->items[k];
		if (item->type != P2PG_JSON_NUMBER || !item->is_integer || item->integer < 0 ||
		    item->integer > INT_MAX) {
			ld_problem(ld, item->line,
				   "field \"%s\" must be an array of CUDA status codes", path);
			free(list);
			return false;
		}
		list[k] = (int)item->integer;
	}
	*ret = list;
	*ret_n = v->count;
	return true;
}

static bool parse_match(struct loader *ld, const struct p2pg_json *m, struct p2pg_rule *r)
{
	bool ok = true;
	const struct p2pg_json *v;

	if (!ld_expect_type(ld, m, "match", P2PG_JSON_OBJECT))
		return false;
	r->has_match = true;
	for (size_t k = 0; k < m->count; k++)
		if (strcmp(m->keys[k], "api") != 0 && strcmp(m->keys[k], "status") != 0 &&
		    strcmp(m->keys[k], "facts") != 0) {
			ld_problem(ld, m->items[k]->line, "unknown match condition \"%s\"",
				   m->keys[k]);
			ok = false;
		}

	v = p2pg_json_member(m, "api");
	if (v) {
		if (!ld_expect_strings(ld, v, "match.api"))
			return false;
		if (v->count == 0) {
			ld_problem(ld, v->line, "empty list for \"match.api\"");
			return false;
		}
		r->apis = ld_alloc_array(ld, v->count, sizeof(*r->apis));
		if (!r->apis)
			return false;
		for (size_t k = 0; k < v->count; k++) {
			if (!ld_valid_api_name(v->items[k]->string)) {
				ld_problem(ld, v->items[k]->line, "invalid API name \"%s\"",
					   v->items[k]->string);
				ok = false;
				continue;
			}
			r->apis[r->n_apis++] = ld_copy(ld, v->items[k]->string);
		}
		r->specificity++;
	}

	v = p2pg_json_member(m, "status");
	if (v) {
		if (!parse_int_list(ld, v, "match.status", false, &r->statuses, &r->n_statuses))
			return false;
		r->specificity++;
	}

	v = p2pg_json_member(m, "facts");
	if (v) {
		if (!ld_expect_type(ld, v, "match.facts", P2PG_JSON_OBJECT))
			return false;
		r->conditions = ld_alloc_array(ld, v->count, sizeof(*r->conditions));
		if (!r->conditions)
			return false;
		for (size_t k = 0; k < v->count; k++) {
			struct condition *c = &r->conditions[r->n_conditions];
			bool good = ld_parse_condition(ld, v->keys[k], v->items[k], c);
			r->n_conditions++; /* counted even when bad, so it is freed */
			ok &= good;
		}
		r->specificity += (int)v->count;
	}

	if (ok && r->specificity == 0) {
		ld_problem(ld, m->line, "match needs at least one condition");
		ok = false;
	}
	return ok;
}

/* workarounds (action, success_rate, how) and dead_ends (action, why_fails, fail_rate). */
static bool parse_remedies(struct loader *ld, const struct p2pg_json *v, const char *name,
			   bool workarounds, struct workaround **ret, size_t *ret_n)
{
	const char *text_key = workarounds ? "action" : "why_fails";
	const char *rate_key = workarounds ? "success_rate" : "fail_rate";
	const char *extra_key = workarounds ? "how" : "action";
	bool ok = true;

	if (!ld_expect_type(ld, v, name, P2PG_JSON_ARRAY))
		return false;
	if (workarounds && v->count == 0) {
		ld_problem(ld, v->line, "field \"%s\" needs at least one entry", name);
		return false;
	}
	*ret = ld_alloc_array(ld, v->count, sizeof(**ret));
	if (!*ret)
		return false;
	for (size_t k = 0; k < v->count; k++) {
		const struct p2pg_json *item = v->items[k];
		struct workaround *w = &(*ret)[k];
		char path[96];

		*ret_n = k + 1;
		w->order = k;
		ld_field_index(path, sizeof(path), name, k);
		if (!ld_expect_type(ld, item, path, P2PG_JSON_OBJECT)) {
			ok = false;
			continue;
		}
		for (size_t m = 0; m < item->count; m++) {
			const char *key = item->keys[m];
			if (strcmp(key, text_key) != 0 && strcmp(key, rate_key) != 0 &&
			    strcmp(key, extra_key) != 0 && strcmp(key, "condition") != 0 &&
			    strcmp(key, "sources") != 0) {
				ld_problem(ld, item->items[m]->line, "unknown field \"%s.%s\"",
					   path, key);
				ok = false;
			}
		}
		char sub[128];
		const struct p2pg_json *text = member(item, text_key);
		ld_field_key(sub, sizeof(sub), path, text_key);
		if (!text) {
			ld_problem(ld, item->line, "missing required field \"%s\"", sub);
			ok = false;
		} else if (ld_expect_type(ld, text, sub, P2PG_JSON_STRING)) {
			if (workarounds)
				w->action = ld_copy(ld, text->string);
			else
				w->how = ld_copy(ld, text->string);
		} else {
			ok = false;
		}
		const struct p2pg_json *extra = member(item, extra_key);
		ld_field_key(sub, sizeof(sub), path, extra_key);
		if (extra && ld_expect_type(ld, extra, sub, P2PG_JSON_STRING)) {
			if (workarounds)
				w->how = extra->length ? ld_copy(ld, extra->string) : NULL;
			else
				w->action = ld_copy(ld, extra->string);
		} else if (extra) {
			ok = false;
		}
		const struct p2pg_json *condition = member(item, "condition");
		ld_field_key(sub, sizeof(sub), path, "condition");
		if (condition && ld_expect_type(ld, condition, sub, P2PG_JSON_STRING))
			w->condition = condition->length ? ld_copy(ld, condition->string) : NULL;
		else if (condition)
			ok = false;
		const struct p2pg_json *rate = member(item, rate_key);
		ld_field_key(sub, sizeof(sub), path, rate_key);
		if (rate) {
			ok &= expect_rate(ld, rate, sub);
			w->rate = rate->number;
		} else if (workarounds) {
			/* Advice is ordered by it; an entry without it cannot be placed. */
			ld_problem(ld, item->line, "missing required field \"%s\"", sub);
			ok = false;
		} else {
			w->rate = -1.0;
		}
	}
	return ok;
}

static bool parse_regex(struct loader *ld, const struct p2pg_json *v, struct p2pg_rule *r)
{
	if (!ld_expect_type(ld, v, "regex", P2PG_JSON_STRING))
		return false;
	struct rules_regex_cost cost = rules_regex_cost(v->string);
	if (cost.size > REGEX_MAX_SIZE) {
		ld_problem(
		    ld, v->line,
		    "regex too large: its repetitions expand it to about %.3g elements (at most "
		    "%d)",
		    cost.size, REGEX_MAX_SIZE);
		return false;
	}
	if (cost.optional > REGEX_MAX_OPTIONAL) {
		ld_problem(
		    ld, v->line,
		    "regex too large: its repetitions expand it to about %.3g optional parts "
		    "(at most %d)",
		    cost.optional, REGEX_MAX_OPTIONAL);
		return false;
	}
	char bracket[320];
	if (!ld->builtin && rules_regex_escape_in_bracket(v->string, bracket, sizeof(bracket))) {
		ld_problem(ld, v->line, "%s", bracket);
		return false;
	}
	r->regex_text = ld_copy(ld, v->string);
	r->regex_line = v->line;
	if (rules_regex_literals(v->string, &r->regex_literals, &r->n_regex_literals) < 0)
		ld->nomem = true;
	if (!r->regex_text || ld->builtin)
		return r->regex_text != NULL;
	char why[160];
	regex_t *re = rules_regex_compile(v->string, why, sizeof(why));
	if (!re) {
		ld->nomem = true;
		return false;
	}
	if (re == &rules_regex_broken) {
		ld_problem(ld, v->line, "invalid regex: %s", why);
		return false;
	}
	atomic_store(&r->regex, re);
	if (regexec(re, "", 0, NULL, 0) == 0) {
		/* It would "explain" every line anyone pastes. */
		ld_problem(ld, v->line, "regex matches the empty string");
		return false;
	}
	return true;
}

static int compare_workarounds(const void *a, const void *b)
{
	const struct workaround *x = a, *y = b;
	if (x->rate != y->rate)
		return x->rate > y->rate ? -1 : 1;
	/* qsort is not stable: keep file order for equal rates. */
	return x->order < y->order ? -1 : x->order > y->order;
}

/* Builds a rule from a parsed entry. id_path is the file's path relative to its rules folder
 * without ".json", or NULL when the entry does not come from a folder. */
static struct p2pg_rule *rule_from_json(struct loader *ld, const struct p2pg_json *root,
					const char *id_path)
{
	struct p2pg_rule *r;
	const struct p2pg_json *v;
	int before = ld->problems;

	if (root->type != P2PG_JSON_OBJECT) {
		ld_problem(ld, root->line, "entry must be a JSON object, not %s",
			   p2pg_json_type_name(root->type));
		return NULL;
	}
	r = calloc(1, sizeof(*r));
	if (!r) {
		ld->nomem = true;
		return NULL;
	}
	r->confidence = 0.5;

	if (!check_fields(ld, root))
		goto fail_soft;

	v = member(root, "id");
	if (!valid_id(v->string)) {
		ld_problem(ld, v->line,
			   "invalid id \"%s\" (expected domain/name in lowercase letters, "
			   "digits and dashes)",
			   v->string);
	} else if (id_path && strcmp(v->string, id_path) != 0) {
		ld_problem(ld, v->line, "id \"%s\" does not match the file path (expected \"%s\")",
			   v->string, id_path);
	}
	r->id = ld_copy(ld, v->string);
	r->folder_framework = rules_folder_framework(r->id);
	r->title = ld_copy(ld, member(root, "signature")->string);
	r->root_cause = ld_copy(ld, member(root, "root_cause")->string);
	v = member(root, "official_doc_url");
	if (v)
		r->doc_url = ld_copy(ld, v->string);
	v = member(root, "confidence");
	if (v)
		r->confidence = v->number;
	v = member(root, "category");
	r->triage = v && strcmp(v->string, "triage") == 0;
	r->notice = v && rules_is_notice_category(v->string);

	v = member(root, "codes");
	if (v)
		parse_int_list(ld, v, "codes", true, &r->codes, &r->n_codes);
	v = member(root, "match");
	if (v && parse_match(ld, v, r)) {
		if (!member(root, "codes")) {
			/* Without codes, the entry is about the statuses it matches. */
			r->codes = ld_alloc_array(ld, r->n_statuses, sizeof(int));
			for (size_t k = 0; r->codes && k < r->n_statuses; k++)
				r->codes[k] = r->statuses[k];
			if (r->codes)
				r->n_codes = r->n_statuses;
		} else if (r->codes) {
			for (size_t k = 0; k < r->n_statuses; k++) {
				bool listed = false;
				for (size_t c = 0; c < r->n_codes; c++)
					listed |= r->codes[c] == r->statuses[k];
				if (!listed)
					ld_problem(ld, p2pg_json_member(v, "status")->line,
						   "match status %d is not listed in codes",
						   r->statuses[k]);
			}
		}
	}

	v = member(root, "regex");
	if (v)
		parse_regex(ld, v, r);
	v = member(root, "aliases");
	if (v) {
		r->aliases = ld_alloc_array(ld, v->count, sizeof(*r->aliases));
		for (size_t k = 0; r->aliases && k < v->count; k++) {
			if (v->items[k]->length == 0) {
				ld_problem(ld, v->items[k]->line, "empty alias");
				continue;
			}
			r->aliases[r->n_aliases++] = ld_copy(ld, v->items[k]->string);
		}
	}
	v = member(root, "context");
	if (v)
		rules_parse_context(ld, v, r);
	v = member(root, "notes");
	if (v)
		rules_parse_notes(ld, v, r);
	if (!r->has_match && !member(root, "regex") && r->n_aliases == 0)
		ld_problem(ld, root->line,
			   "a rule without \"match\" needs \"regex\" or \"aliases\"");

	parse_remedies(ld, member(root, "workarounds"), "workarounds", true, &r->workarounds,
		       &r->n_workarounds);
	v = member(root, "dead_ends");
	if (v)
		parse_remedies(ld, v, "dead_ends", false, &r->dead_ends, &r->n_dead_ends);
	rules_parse_examples(ld, member(root, "examples"), r);

	if (ld->problems > before || ld->nomem)
		goto fail_soft;

	qsort(r->workarounds, r->n_workarounds, sizeof(*r->workarounds), compare_workarounds);
	return r;

fail_soft:
	rules_rule_free(r);
	return NULL;
}

static int ruleset_append(struct p2pg_ruleset *rs, struct p2pg_rule *r)
{
	struct p2pg_rule **rules = realloc(rs->rules, (rs->count + 1) * sizeof(*rules));
	if (!rules)
		return -ENOMEM;
	rs->rules = rules;
	rs->rules[rs->count++] = r;
	return 0;
}

/* An id's k-th byte as its file's name has it: the id, then ".json", then the end. */
static unsigned char file_name_byte(const char *id, size_t len, size_t k)
{
	static const char suffix[] = ".json";
	if (k < len)
		return (unsigned char)id[k];
	k -= len;
	return k < sizeof(suffix) ? (unsigned char)suffix[k] : 0;
}

/* Ids compared as their files' names are, the order in which the build lists the built-in
 * rules: "x/a-b" before "x/a", since "x/a-b.json" sorts before "x/a.json". */
static int file_order(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	for (size_t k = 0;; k++) {
		unsigned char ca = file_name_byte(a, la, k), cb = file_name_byte(b, lb, k);
		if (ca != cb || !ca)
			return ca - cb;
	}
}

static int add_entry(struct p2pg_ruleset *rs, struct loader *ld, const char *id_path,
		     const char *text, size_t len)
{
	bool builtin = ld->builtin;
	_cleanup_json_ struct p2pg_json *root = NULL;
	struct p2pg_json_error error;
	struct p2pg_rule *r;
	int rc = -EINVAL;

	if (builtin)
		rc = p2pg_json_parse_checked_values(text, len, ld->builtin_values, &root);
	if (rc == -EINVAL)
		rc = p2pg_json_parse(text, len, &root, &error);
	if (rc == -ENOMEM)
		return rc;
	if (rc < 0) {
		ld_problem(ld, error.line, "syntax error: %s", error.message);
		return -EINVAL;
	}
	r = rule_from_json(ld, root, id_path);
	if (!r)
		return ld->nomem ? -ENOMEM : -EINVAL;

	/* Rules arrive in their files' order: while each id came after the one before in that
	 * order, a later id cannot repeat an earlier one, and only a ruleset whose order broke
	 * needs the search for a twin (over every rule, for every rule: otherwise the bulk of
	 * checking the built-in rules' ids). */
	bool after_last = rs->count == 0 || file_order(rs->rules[rs->count - 1]->id, r->id) < 0;
	const struct p2pg_rule *twin =
	    !rs->ids_unordered && after_last ? NULL : p2pg_ruleset_find(rs, r->id);
	if (twin) {
		ld_problem(ld, member(root, "id")->line, "duplicate id \"%s\" (also in %s)", r->id,
			   twin->file);
		rules_rule_free(r);
		return -EEXIST;
	}
	r->file = strdup(ld->file);
	r->json_is_builtin = builtin;
	r->json = builtin ? (char *)text : malloc(len + 1);
	if (!r->file || !r->json || ruleset_append(rs, r) < 0) {
		rules_rule_free(r);
		return -ENOMEM;
	}
	rs->ids_unordered |= !after_last;
	if (!builtin) {
		memcpy(r->json, text, len);
		r->json[len] = '\0';
	}
	return 0;
}

/* Adds one entry; *problems grows by the number of problems reported. */
static int add_text(struct p2pg_ruleset *rs, const char *file, const char *id_path,
		    const char *text, size_t len, bool builtin, size_t values,
		    p2pg_rules_report_fn report, void *userdata, int *problems)
{
	struct loader ld = {.file = file,
			    .report = report,
			    .userdata = userdata,
			    .builtin = builtin,
			    .builtin_values = values};
	int rc = add_entry(rs, &ld, id_path, text, len);
	if (problems)
		*problems += ld.problems;
	return rc;
}

int rules_add_text(struct p2pg_ruleset *rs, const char *file, const char *id_path, const char *text,
		   size_t len, p2pg_rules_report_fn report, void *userdata, int *problems)
{
	return add_text(rs, file, id_path, text, len, false, 0, report, userdata, problems);
}

int rules_add_builtin_text(struct p2pg_ruleset *rs, const char *file, const char *id_path,
			   const char *text, size_t len, size_t values, p2pg_rules_report_fn report,
			   void *userdata, int *problems)
{
	return add_text(rs, file, id_path, text, len, true, values, report, userdata, problems);
}
