/* SPDX-License-Identifier: MIT */
/*
 * The knowledge base's validator: one rule file's JSON to a checked rule, every problem reported
 * as "FILE:LINE: message" (rules/README.md lists every message this file reports), and the check
 * of every rule's examples against the whole set.
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
#include "rules-private.h"

static inline void json_freep(struct p2pg_json **p)
{
	p2pg_json_free(*p);
}
#define _cleanup_json_ _cleanup_(json_freep)

/* ---- Fact keys: the contract with the evidence gatherer (rules/README.md, "Fact keys") ---- */

static const char *const available_values[] = {"ok", "unavailable", NULL};
static const char *const nvml_p2p_values[] = {"ok",
					      "chipset_not_supported",
					      "gpu_not_supported",
					      "ioh_topology_not_supported",
					      "disabled_by_regkey",
					      "not_supported",
					      "unknown",
					      NULL};
static const char *const topology_values[] = {"INTERNAL", "PIX", "PXB",	    "PHB",
					      "NODE",	  "SYS", "unknown", NULL};
static const char *const virtualization_values[] = {"none",	 "passthrough", "vgpu", "host_vgpu",
						    "host_vsga", "unknown",	NULL};
static const char *const mode_values[] = {"observe", "fallback", "staged", NULL};
static const char *const probe_values[] = {"ok", "wrong_data", "slow", "hang", NULL};

static const struct fact_key fact_keys[] = {
    {"api", KIND_STR, NULL},
    {"status", KIND_INT, NULL},
    {"device", KIND_INT, NULL},
    {"peer_device", KIND_INT, NULL},
    {"peer_is_self", KIND_BOOL, NULL},
    {"device_count", KIND_INT, NULL},
    {"ordinal_valid", KIND_BOOL, NULL},
    {"device_name", KIND_STR, NULL},
    {"peer_name", KIND_STR, NULL},
    {"device_pci", KIND_STR, NULL},
    {"peer_pci", KIND_STR, NULL},
    {"can_access_peer", KIND_INT, NULL},
    {"p2p_access_supported", KIND_INT, NULL},
    {"p2p_native_atomic", KIND_INT, NULL},
    {"p2p_performance_rank", KIND_INT, NULL},
    {"nvml", KIND_STR, available_values},
    {"nvml_p2p_read", KIND_STR, nvml_p2p_values},
    {"nvml_p2p_write", KIND_STR, nvml_p2p_values},
    {"nvml_p2p_nvlink", KIND_STR, nvml_p2p_values},
    {"nvml_p2p_atomics", KIND_STR, nvml_p2p_values},
    {"topology", KIND_STR, topology_values},
    {"nvlinks_active", KIND_INT, NULL},
    {"virtualization", KIND_STR, virtualization_values},
    {"iommu_present", KIND_BOOL, NULL},
    {"iommu_cmdline", KIND_STR, NULL},
    {"sysfs", KIND_STR, available_values},
    {"peers_enabled", KIND_INT, NULL},
    {"peer_access_enabled", KIND_BOOL, NULL},
    {"flags", KIND_INT, NULL},
    {"nccl_p2p_disable", KIND_STR, NULL},
    {"nccl_p2p_level", KIND_STR, NULL},
    {"cuda_visible_devices", KIND_STR, NULL},
    {"driver", KIND_STR, available_values},
    {"driver_version", KIND_INT, NULL},
    {"runtime_version", KIND_INT, NULL},
    {"mode", KIND_STR, mode_values},
    {"p2p_probe", KIND_STR, probe_values},
};

#define N_FACT_KEYS (sizeof(fact_keys) / sizeof(fact_keys[0]))

const char *p2pg_rules_fact_key(size_t index)
{
	return index < N_FACT_KEYS ? fact_keys[index].name : NULL;
}

static const struct fact_key *fact_key_lookup(const char *name)
{
	for (size_t k = 0; k < N_FACT_KEYS; k++)
		if (strcmp(fact_keys[k].name, name) == 0)
			return &fact_keys[k];
	return NULL;
}

static const char *kind_name(enum kind kind)
{
	switch (kind) {
	case KIND_BOOL:
		return "a boolean";
	case KIND_INT:
		return "an integer";
	case KIND_STR:
		return "a string";
	}
	return "a value";
}

/* ---- Loading ---- */

struct loader {
	const char *file;
	p2pg_rules_report_fn report;
	void *userdata;
	int problems;
	bool nomem;
};

static void problem(struct loader *ld, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void problem(struct loader *ld, int line, const char *fmt, ...)
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
static char *copy(struct loader *ld, const char *s)
{
	char *c = strdup(s);
	if (!c)
		ld->nomem = true;
	return c;
}

static void *alloc_array(struct loader *ld, size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size);
	if (!p)
		ld->nomem = true;
	return p;
}

/* "field "x" must be a string, not a number" */
static bool expect_type(struct loader *ld, const struct p2pg_json *v, const char *path,
			enum p2pg_json_type type)
{
	if (v->type == type)
		return true;
	problem(ld, v->line, "field \"%s\" must be %s, not %s", path, p2pg_json_type_name(type),
		p2pg_json_type_name(v->type));
	return false;
}

static bool expect_rate(struct loader *ld, const struct p2pg_json *v, const char *path)
{
	if (v->type == P2PG_JSON_NUMBER && v->number >= 0.0 && v->number <= 1.0)
		return true;
	problem(ld, v->line, "field \"%s\" must be a number between 0 and 1", path);
	return false;
}

static bool expect_strings(struct loader *ld, const struct p2pg_json *v, const char *path)
{
	if (!expect_type(ld, v, path, P2PG_JSON_ARRAY))
		return false;
	for (size_t k = 0; k < v->count; k++)
		if (v->items[k]->type != P2PG_JSON_STRING) {
			problem(ld, v->items[k]->line, "field \"%s\" must be an array of strings",
				path);
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

static bool valid_api_name(const char *api)
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
    {"examples", F_CHECKED_LATER, true},
};

static const struct field *field_lookup(const char *name)
{
	for (size_t k = 0; k < sizeof(fields) / sizeof(fields[0]); k++)
		if (strcmp(fields[k].name, name) == 0)
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
			problem(ld, v->line, "unknown field \"%s\"", root->keys[k]);
			ok = false;
			continue;
		}
		if (v->type == P2PG_JSON_NULL && !f->required)
			continue;
		switch (f->type) {
		case F_STRING:
			ok &= expect_type(ld, v, f->name, P2PG_JSON_STRING);
			break;
		case F_STRINGS:
			ok &= expect_strings(ld, v, f->name);
			break;
		case F_ARRAY:
			ok &= expect_type(ld, v, f->name, P2PG_JSON_ARRAY);
			break;
		case F_OBJECT:
			ok &= expect_type(ld, v, f->name, P2PG_JSON_OBJECT);
			break;
		case F_RATE:
			ok &= expect_rate(ld, v, f->name);
			break;
		case F_COUNT:
			if (v->type != P2PG_JSON_NUMBER || !v->is_integer || v->integer < 0) {
				problem(ld, v->line, "field \"%s\" must be a non-negative integer",
					f->name);
				ok = false;
			}
			break;
		case F_CHECKED_LATER:
			break;
		}
	}
	for (size_t k = 0; k < sizeof(fields) / sizeof(fields[0]); k++)
		if (fields[k].required && !p2pg_json_member(root, fields[k].name)) {
			problem(ld, root->line, "missing required field \"%s\"", fields[k].name);
			ok = false;
		}
	if (!p2pg_json_member(root, "codes") && !p2pg_json_member(root, "match")) {
		problem(ld, root->line, "missing required field \"codes\" or \"match\"");
		ok = false;
	}
	return ok;
}

/* A scalar JSON value as a fact value of the key's kind. */
static bool parse_value(struct loader *ld, const struct fact_key *key, const struct p2pg_json *v,
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
				problem(ld, v->line,
					"unknown value \"%s\" for fact \"%s\" (expected one of %s)",
					v->string, key->name, list);
				return false;
			}
		}
		ret->s = copy(ld, v->string);
		return true;
	}
	problem(ld, v->line, "fact \"%s\" expects %s, not %s", key->name, kind_name(key->kind),
		v->type == P2PG_JSON_NUMBER && key->kind == KIND_INT
		    ? "a fraction"
		    : p2pg_json_type_name(v->type));
	return false;
}

static const struct fact_key *parse_fact_key(struct loader *ld, const char *name, int line)
{
	const struct fact_key *key = fact_key_lookup(name);
	if (!key) {
		problem(ld, line, "unknown fact key \"%s\"", name);
		return NULL;
	}
	if (strcmp(name, "api") == 0 || strcmp(name, "status") == 0) {
		/* One way to say it: the call's api and status are conditions of their own. */
		problem(ld, line, "fact key \"%s\" belongs in \"%s\", not in \"facts\"", name,
			name);
		return NULL;
	}
	return key;
}

static bool parse_condition(struct loader *ld, const char *name, const struct p2pg_json *v,
			    struct condition *c)
{
	const struct fact_key *key = parse_fact_key(ld, name, v->line);
	if (!key)
		return false;
	c->key = key;

	if (v->type == P2PG_JSON_ARRAY) {
		if (v->count == 0) {
			problem(ld, v->line, "empty list for fact \"%s\"", name);
			return false;
		}
		c->op = OP_ANY;
		c->values = alloc_array(ld, v->count, sizeof(*c->values));
		if (!c->values)
			return false;
		for (size_t k = 0; k < v->count; k++) {
			if (!parse_value(ld, key, v->items[k], &c->values[c->n_values]))
				return false;
			c->n_values++;
		}
		return true;
	}
	if (v->type == P2PG_JSON_OBJECT) {
		if (v->count != 1) {
			problem(ld, v->line,
				"operator object for fact \"%s\" must have exactly one member",
				name);
			return false;
		}
		const char *op = v->keys[0];
		const struct p2pg_json *arg = v->items[0];
		if (strcmp(op, "exists") == 0) {
			if (arg->type != P2PG_JSON_BOOL) {
				problem(ld, arg->line, "operator \"exists\" takes true or false");
				return false;
			}
			c->op = OP_EXISTS;
			c->exists = arg->boolean;
			return true;
		}
		if (strcmp(op, "gte") == 0 || strcmp(op, "lte") == 0) {
			if (key->kind != KIND_INT) {
				problem(ld, v->line,
					"operator \"%s\" needs an integer fact, and \"%s\" is %s",
					op, name, kind_name(key->kind));
				return false;
			}
			c->op = op[0] == 'g' ? OP_GTE : OP_LTE;
		} else if (strcmp(op, "ne") == 0) {
			c->op = OP_NE;
		} else {
			problem(ld, v->line,
				"unknown operator \"%s\" for fact \"%s\" (expected gte, lte, ne or "
				"exists)",
				op, name);
			return false;
		}
		c->values = alloc_array(ld, 1, sizeof(*c->values));
		if (!c->values || !parse_value(ld, key, arg, &c->values[0]))
			return false;
		c->n_values = 1;
		return true;
	}
	c->op = OP_ANY;
	c->values = alloc_array(ld, 1, sizeof(*c->values));
	if (!c->values || !parse_value(ld, key, v, &c->values[0]))
		return false;
	c->n_values = 1;
	return true;
}

static bool parse_int_list(struct loader *ld, const struct p2pg_json *v, const char *path,
			   bool allow_empty, int **ret, size_t *ret_n)
{
	if (!expect_type(ld, v, path, P2PG_JSON_ARRAY))
		return false;
	if (v->count == 0 && !allow_empty) {
		problem(ld, v->line, "empty list for \"%s\"", path);
		return false;
	}
	int *list = alloc_array(ld, v->count, sizeof(*list));
	if (!list)
		return false;
	for (size_t k = 0; k < v->count; k++) {
		const struct p2pg_json *item = v->items[k];
		if (item->type != P2PG_JSON_NUMBER || !item->is_integer || item->integer < 0 ||
		    item->integer > INT_MAX) {
			problem(ld, item->line,
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

	if (!expect_type(ld, m, "match", P2PG_JSON_OBJECT))
		return false;
	r->has_match = true;
	for (size_t k = 0; k < m->count; k++)
		if (strcmp(m->keys[k], "api") != 0 && strcmp(m->keys[k], "status") != 0 &&
		    strcmp(m->keys[k], "facts") != 0) {
			problem(ld, m->items[k]->line, "unknown match condition \"%s\"",
				m->keys[k]);
			ok = false;
		}

	v = p2pg_json_member(m, "api");
	if (v) {
		if (!expect_strings(ld, v, "match.api"))
			return false;
		if (v->count == 0) {
			problem(ld, v->line, "empty list for \"match.api\"");
			return false;
		}
		r->apis = alloc_array(ld, v->count, sizeof(*r->apis));
		if (!r->apis)
			return false;
		for (size_t k = 0; k < v->count; k++) {
			if (!valid_api_name(v->items[k]->string)) {
				problem(ld, v->items[k]->line, "invalid API name \"%s\"",
					v->items[k]->string);
				ok = false;
				continue;
			}
			r->apis[r->n_apis++] = copy(ld, v->items[k]->string);
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
		if (!expect_type(ld, v, "match.facts", P2PG_JSON_OBJECT))
			return false;
		r->conditions = alloc_array(ld, v->count, sizeof(*r->conditions));
		if (!r->conditions)
			return false;
		for (size_t k = 0; k < v->count; k++) {
			struct condition *c = &r->conditions[r->n_conditions];
			bool good = parse_condition(ld, v->keys[k], v->items[k], c);
			r->n_conditions++; /* counted even when bad, so it is freed */
			ok &= good;
		}
		r->specificity += (int)v->count;
	}

	if (ok && r->specificity == 0) {
		problem(ld, m->line, "match needs at least one condition");
		ok = false;
	}
	return ok;
}

static bool parse_example(struct loader *ld, const struct p2pg_json *v, const char *path,
			  const struct p2pg_rule *r, struct example *ex)
{
	char sub[128];
	bool ok = true;

	ex->line = v->line;
	ex->status = -1;
	if (!expect_type(ld, v, path, P2PG_JSON_OBJECT))
		return false;

	const struct p2pg_json *text = p2pg_json_member(v, "text");
	for (size_t k = 0; k < v->count; k++) {
		const char *name = v->keys[k];
		bool known = strcmp(name, "text") == 0 || strcmp(name, "api") == 0 ||
			     strcmp(name, "status") == 0 || strcmp(name, "facts") == 0;
		if (!known) {
			problem(ld, v->items[k]->line, "unknown field \"%s.%s\"", path, name);
			ok = false;
		}
	}
	if (!ok)
		return false;

	if (text) {
		snprintf(sub, sizeof(sub), "%s.text", path);
		if (!expect_type(ld, text, sub, P2PG_JSON_STRING))
			return false;
		if (v->count > 1) {
			problem(ld, v->line, "example \"%s\" mixes text and evidence", path);
			return false;
		}
		ex->text = copy(ld, text->string);
		return true;
	}

	if (!r->has_match) {
		problem(ld, v->line,
			"evidence example \"%s\" for a rule without \"match\" (use a text example)",
			path);
		return false;
	}
	const struct p2pg_json *api = p2pg_json_member(v, "api");
	if (api) {
		snprintf(sub, sizeof(sub), "%s.api", path);
		if (!expect_type(ld, api, sub, P2PG_JSON_STRING))
			return false;
		ex->api = copy(ld, api->string);
	}
	const struct p2pg_json *status = p2pg_json_member(v, "status");
	if (status) {
		if (status->type != P2PG_JSON_NUMBER || !status->is_integer ||
		    status->integer < 0 || status->integer > INT_MAX) {
			problem(ld, status->line, "field \"%s.status\" must be a CUDA status code",
				path);
			return false;
		}
		ex->status = (int)status->integer;
	}
	const struct p2pg_json *facts = p2pg_json_member(v, "facts");
	if (facts) {
		snprintf(sub, sizeof(sub), "%s.facts", path);
		if (!expect_type(ld, facts, sub, P2PG_JSON_OBJECT))
			return false;
		ex->facts = alloc_array(ld, facts->count, sizeof(*ex->facts));
		if (!ex->facts)
			return false;
		for (size_t k = 0; k < facts->count; k++) {
			const struct p2pg_json *fv = facts->items[k];
			struct condition *c = &ex->facts[ex->n_facts];
			const struct fact_key *key = parse_fact_key(ld, facts->keys[k], fv->line);
			if (!key)
				return false;
			if (fv->type == P2PG_JSON_ARRAY || fv->type == P2PG_JSON_OBJECT) {
				/* Evidence has one value per key; lists and operators are for
				 * match. */
				problem(ld, fv->line, "example fact \"%s\" must be a single value",
					facts->keys[k]);
				return false;
			}
			c->key = key;
			c->op = OP_ANY;
			c->values = alloc_array(ld, 1, sizeof(*c->values));
			ex->n_facts++;
			if (!c->values || !parse_value(ld, key, fv, &c->values[0]))
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

	snprintf(path, sizeof(path), "examples.%s", name);
	if (!list) {
		problem(ld, examples->line, "missing required field \"%s\"", path);
		return false;
	}
	if (!expect_type(ld, list, path, P2PG_JSON_ARRAY))
		return false;
	if (list->count == 0) {
		problem(ld, list->line, "field \"%s\" needs at least one example", path);
		return false;
	}
	*ret = alloc_array(ld, list->count, sizeof(**ret));
	if (!*ret)
		return false;
	bool ok = true;
	for (size_t k = 0; k < list->count; k++) {
		char sub[64];
		snprintf(sub, sizeof(sub), "%s[%zu]", path, k);
		ok &= parse_example(ld, list->items[k], sub, r, &(*ret)[k]);
		*ret_n = k + 1;
	}
	return ok;
}

static bool parse_examples(struct loader *ld, const struct p2pg_json *v, struct p2pg_rule *r)
{
	if (!expect_type(ld, v, "examples", P2PG_JSON_OBJECT))
		return false;
	bool ok = true;
	for (size_t k = 0; k < v->count; k++)
		if (strcmp(v->keys[k], "matches") != 0 && strcmp(v->keys[k], "near_misses") != 0) {
			problem(ld, v->items[k]->line, "unknown field \"examples.%s\"", v->keys[k]);
			ok = false;
		}
	ok &= parse_example_list(ld, v, "matches", r, &r->matches, &r->n_matches);
	ok &= parse_example_list(ld, v, "near_misses", r, &r->near_misses, &r->n_near_misses);
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

	if (!expect_type(ld, v, name, P2PG_JSON_ARRAY))
		return false;
	if (workarounds && v->count == 0) {
		problem(ld, v->line, "field \"%s\" needs at least one entry", name);
		return false;
	}
	*ret = alloc_array(ld, v->count, sizeof(**ret));
	if (!*ret)
		return false;
	for (size_t k = 0; k < v->count; k++) {
		const struct p2pg_json *item = v->items[k];
		struct workaround *w = &(*ret)[k];
		char path[96];

		*ret_n = k + 1;
		w->order = k;
		snprintf(path, sizeof(path), "%s[%zu]", name, k);
		if (!expect_type(ld, item, path, P2PG_JSON_OBJECT)) {
			ok = false;
			continue;
		}
		for (size_t m = 0; m < item->count; m++) {
			const char *key = item->keys[m];
			if (strcmp(key, text_key) != 0 && strcmp(key, rate_key) != 0 &&
			    strcmp(key, extra_key) != 0 && strcmp(key, "condition") != 0 &&
			    strcmp(key, "sources") != 0) {
				problem(ld, item->items[m]->line, "unknown field \"%s.%s\"", path,
					key);
				ok = false;
			}
		}
		char sub[128];
		const struct p2pg_json *text = member(item, text_key);
		snprintf(sub, sizeof(sub), "%s.%s", path, text_key);
		if (!text) {
			problem(ld, item->line, "missing required field \"%s\"", sub);
			ok = false;
		} else if (expect_type(ld, text, sub, P2PG_JSON_STRING)) {
			if (workarounds)
				w->action = copy(ld, text->string);
			else
				w->how = copy(ld, text->string);
		} else {
			ok = false;
		}
		const struct p2pg_json *extra = member(item, extra_key);
		snprintf(sub, sizeof(sub), "%s.%s", path, extra_key);
		if (extra && expect_type(ld, extra, sub, P2PG_JSON_STRING)) {
			if (workarounds)
				w->how = extra->length ? copy(ld, extra->string) : NULL;
			else
				w->action = copy(ld, extra->string);
		} else if (extra) {
			ok = false;
		}
		const struct p2pg_json *rate = member(item, rate_key);
		snprintf(sub, sizeof(sub), "%s.%s", path, rate_key);
		if (rate) {
			ok &= expect_rate(ld, rate, sub);
			w->rate = rate->number;
		} else if (workarounds) {
			/* Advice is ordered by it; an entry without it cannot be placed. */
			problem(ld, item->line, "missing required field \"%s\"", sub);
			ok = false;
		} else {
			w->rate = -1.0;
		}
	}
	return ok;
}

/*
 * glibc's regcomp() spells repetitions out (x{3} becomes xxx, x+ becomes xx*), copying what they
 * apply to, so stacked or nested repetitions grow its memory exponentially: "c" followed by 27
 * '+' asks for gigabytes, in the guard's process, at its first failure. The estimate below is
 * held to REGEX_MAX_SIZE, fifty times the largest built-in regex's (204).
 */
#define REGEX_MAX_SIZE 10000

/* p is on a bracket expression's '['; returns the character after its ']'. */
static const char *skip_bracket(const char *p)
{
	p++;
	if (*p == '^')
		p++;
	if (*p == ']') /* a leading ']' is a member */
		p++;
	while (*p && *p != ']') {
		if (*p == '[' && (p[1] == ':' || p[1] == '.' || p[1] == '=')) {
			const char *close = strchr(p + 2, p[1]);
			while (close && close[1] != ']')
				close = strchr(close + 1, p[1]);
			if (!close)
				return p + strlen(p);
			p = close + 2;
		} else {
			p++;
		}
	}
	return *p ? p + 1 : p;
}

/* The copies an interval ({n}, {n,}, {n,m}) at *p spells out, moving *p past it; 0 when the '{'
 * starts no interval (it is then an ordinary character). */
static double interval_copies(const char **p)
{
	const char *q = *p + 1;
	char *end;
	if (!isdigit((unsigned char)*q))
		return 0;
	unsigned long low = strtoul(q, &end, 10), high = low;
	if (*end == ',') {
		q = end + 1;
		if (isdigit((unsigned char)*q)) {
			high = strtoul(q, &end, 10);
		} else {
			high = low + 1; /* x{n,} is n copies and a loop */
			end = (char *)q;
		}
	}
	if (*end != '}')
		return 0;
	*p = end + 1;
	return high > low ? (double)high : low > 0 ? (double)low : 1;
}

/* How many copies of its atoms an extended regex makes once repetitions are spelt out. */
static double regex_size(const char *p)
{
	/* Per open group: its finished alternatives, the current one, and the current one's last
	 * element, which a repetition applies to. */
	struct group {
		double alternatives, branch, last;
	} stack[64] = {{0}};
	int depth = 0;

	while (*p) {
		struct group *g = &stack[depth];
		double copies = 0;
		switch (*p) {
		case '(':
			if (depth + 1 == (int)(sizeof(stack) / sizeof(stack[0])))
				return HUGE_VAL;
			stack[++depth] = (struct group){0};
			p++;
			continue;
		case ')': {
			if (depth == 0)
				break; /* unmatched: regcomp() will say so */
			double size = g->alternatives + g->branch;
			g = &stack[--depth];
			g->branch += size;
			g->last = size;
			p++;
			continue;
		}
		case '|':
			g->alternatives += g->branch;
			g->branch = g->last = 0;
			p++;
			continue;
		case '*':
		case '?':
			p++; /* a loop around the element, not a copy of it */
			continue;
		case '+':
			copies = 2;
			p++;
			break;
		case '{':
			copies = interval_copies(&p);
			break;
		default:
			break;
		}
		if (copies > 0) {
			g->branch += g->last * (copies - 1);
			g->last *= copies;
			continue;
		}
		/* An atom: a character, an escaped one, or a bracket expression. */
		if (*p == '[')
			p = skip_bracket(p);
		else
			p += p[0] == '\\' && p[1] ? 2 : 1;
		g->branch += 1;
		g->last = 1;
	}
	double size = 0;
	for (int k = 0; k <= depth; k++)
		size += stack[k].alternatives + stack[k].branch;
	return size;
}

static bool parse_regex(struct loader *ld, const struct p2pg_json *v, struct p2pg_rule *r)
{
	if (!expect_type(ld, v, "regex", P2PG_JSON_STRING))
		return false;
	double size = regex_size(v->string);
	if (size > REGEX_MAX_SIZE) {
		problem(
		    ld, v->line,
		    "regex too large: its repetitions expand it to about %.3g elements (at most "
		    "%d)",
		    size, REGEX_MAX_SIZE);
		return false;
	}
	int rc = regcomp(&r->regex, v->string, REG_EXTENDED | REG_ICASE);
	if (rc != 0) {
		char buf[160];
		regerror(rc, &r->regex, buf, sizeof(buf));
		problem(ld, v->line, "invalid regex: %s", buf);
		return false;
	}
	r->has_regex = true;
	if (regexec(&r->regex, "", 0, NULL, 0) == 0) {
		/* It would "explain" every line anyone pastes. */
		problem(ld, v->line, "regex matches the empty string");
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

static char *percent_lines(struct loader *ld, const struct workaround *w, size_t n,
			   bool workarounds)
{
	size_t size = 1;
	for (size_t k = 0; k < n; k++)
		size += (w[k].action ? strlen(w[k].action) : 0) +
			(w[k].how ? strlen(w[k].how) : 0) + 40;
	char *out = alloc_array(ld, size, 1);
	if (!out)
		return NULL;
	char *p = out;
	for (size_t k = 0; k < n; k++) {
		size_t left = size - (size_t)(p - out);
		if (workarounds)
			p += snprintf(p, left, "%s (%.0f%% success)%s%s\n", w[k].action,
				      w[k].rate * 100.0, w[k].how ? ": " : "",
				      w[k].how ? w[k].how : "");
		else if (w[k].rate >= 0)
			p += snprintf(
			    p, left, "%s%s%s (fails %.0f%%)\n", w[k].action ? w[k].action : "",
			    w[k].action && *w[k].action ? ": " : "", w[k].how, w[k].rate * 100.0);
		else
			p += snprintf(p, left, "%s%s%s\n", w[k].action ? w[k].action : "",
				      w[k].action && *w[k].action ? ": " : "", w[k].how);
	}
	if (p > out)
		p[-1] = '\0'; /* no newline after the last line */
	return out;
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
		problem(ld, root->line, "entry must be a JSON object, not %s",
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
		problem(ld, v->line,
			"invalid id \"%s\" (expected domain/name in lowercase letters, "
			"digits and dashes)",
			v->string);
	} else if (id_path && strcmp(v->string, id_path) != 0) {
		problem(ld, v->line, "id \"%s\" does not match the file path (expected \"%s\")",
			v->string, id_path);
	}
	r->id = copy(ld, v->string);
	r->title = copy(ld, member(root, "signature")->string);
	r->root_cause = copy(ld, member(root, "root_cause")->string);
	v = member(root, "official_doc_url");
	if (v)
		r->doc_url = copy(ld, v->string);
	v = member(root, "confidence");
	if (v)
		r->confidence = v->number;

	v = member(root, "codes");
	if (v)
		parse_int_list(ld, v, "codes", true, &r->codes, &r->n_codes);
	v = member(root, "match");
	if (v && parse_match(ld, v, r)) {
		if (!member(root, "codes")) {
			/* Without codes, the entry is about the statuses it matches. */
			r->codes = alloc_array(ld, r->n_statuses, sizeof(int));
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
					problem(ld, p2pg_json_member(v, "status")->line,
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
		r->aliases = alloc_array(ld, v->count, sizeof(*r->aliases));
		for (size_t k = 0; r->aliases && k < v->count; k++) {
			if (v->items[k]->length == 0) {
				problem(ld, v->items[k]->line, "empty alias");
				continue;
			}
			r->aliases[r->n_aliases++] = copy(ld, v->items[k]->string);
		}
	}
	if (!r->has_match && !member(root, "regex") && r->n_aliases == 0)
		problem(ld, root->line, "a rule without \"match\" needs \"regex\" or \"aliases\"");

	parse_remedies(ld, member(root, "workarounds"), "workarounds", true, &r->workarounds,
		       &r->n_workarounds);
	v = member(root, "dead_ends");
	if (v)
		parse_remedies(ld, v, "dead_ends", false, &r->dead_ends, &r->n_dead_ends);
	parse_examples(ld, member(root, "examples"), r);

	if (ld->problems > before || ld->nomem)
		goto fail_soft;

	qsort(r->workarounds, r->n_workarounds, sizeof(*r->workarounds), compare_workarounds);
	r->advice = percent_lines(ld, r->workarounds, r->n_workarounds, true);
	if (r->n_dead_ends)
		r->dead_ends_text = percent_lines(ld, r->dead_ends, r->n_dead_ends, false);
	if (ld->nomem)
		goto fail_soft;
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

static int add_entry(struct p2pg_ruleset *rs, struct loader *ld, const char *id_path,
		     const char *text, size_t len)
{
	_cleanup_json_ struct p2pg_json *root = NULL;
	struct p2pg_json_error error;
	struct p2pg_rule *r;
	int rc;

	rc = p2pg_json_parse(text, len, &root, &error);
	if (rc == -ENOMEM)
		return rc;
	if (rc < 0) {
		problem(ld, error.line, "syntax error: %s", error.message);
		return -EINVAL;
	}
	r = rule_from_json(ld, root, id_path);
	if (!r)
		return ld->nomem ? -ENOMEM : -EINVAL;

	const struct p2pg_rule *twin = p2pg_ruleset_find(rs, r->id);
	if (twin) {
		problem(ld, member(root, "id")->line, "duplicate id \"%s\" (also in %s)", r->id,
			twin->file);
		rules_rule_free(r);
		return -EEXIST;
	}
	r->file = strdup(ld->file);
	r->json = malloc(len + 1);
	if (!r->file || !r->json || ruleset_append(rs, r) < 0) {
		rules_rule_free(r);
		return -ENOMEM;
	}
	memcpy(r->json, text, len);
	r->json[len] = '\0';
	return 0;
}

/* Adds one entry; *problems grows by the number of problems reported. */
int rules_add_text(struct p2pg_ruleset *rs, const char *file, const char *id_path, const char *text,
		   size_t len, p2pg_rules_report_fn report, void *userdata, int *problems)
{
	struct loader ld = {.file = file, .report = report, .userdata = userdata};
	int rc = add_entry(rs, &ld, id_path, text, len);
	if (problems)
		*problems += ld.problems;
	return rc;
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

/* The rule the example selects, or NULL. Returns false when memory ran out. */
static bool example_selects(const struct p2pg_ruleset *rs, const struct example *ex,
			    const struct p2pg_rule **ret)
{
	if (ex->text) {
		const struct p2pg_rule *best = NULL;
		p2pg_ruleset_explain(rs, ex->text, &best, 1);
		*ret = best;
		return true;
	}
	_cleanup_free_ struct p2pg_facts *facts = example_facts(ex);
	if (!facts)
		return false;
	*ret = p2pg_ruleset_match(rs, ex->api, ex->status, facts);
	return true;
}

int p2pg_ruleset_check_examples(const struct p2pg_ruleset *rs, p2pg_rules_report_fn report,
				void *userdata)
{
	int problems = 0;

	if (!rs)
		return -EINVAL;
	for (size_t k = 0; k < rs->count; k++) {
		const struct p2pg_rule *r = rs->rules[k];
		for (size_t e = 0; e < r->n_matches; e++) {
			const struct example *ex = &r->matches[e];
			const struct p2pg_rule *got;
			if (!example_selects(rs, ex, &got))
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
			if (!example_selects(rs, ex, &got))
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
