/* SPDX-License-Identifier: MIT */
/*
 * The knowledge base: loading and validating rule files (rules/README.md is the specification and
 * lists every message this file reports), choosing the most specific rule for a failure, and
 * finding the rules that explain a pasted log line.
 */
#include "p2pguard/rules.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "driver.h"
#include "json.h"
#include "rules-builtin.h"

/* Rule files are small; anything larger is a mistake (a log pasted into the folder). */
#define RULE_FILE_MAX (1024 * 1024)
/* load_dir follows symbolic links; a link loop must end somewhere. */
#define DIR_DEPTH_MAX 16

static inline void json_freep(struct p2pg_json **p)
{
	p2pg_json_free(*p);
}
#define _cleanup_json_ _cleanup_(json_freep)

/* ---- Fact keys: the contract with the evidence gatherer (rules/README.md, "Fact keys") ---- */

enum kind {
	KIND_BOOL,
	KIND_INT,
	KIND_STR,
};

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

struct fact_key {
	const char *name;
	enum kind kind;
	const char *const *values; /* the allowed strings; NULL when free-form */
};

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

/* ---- The rule ---- */

struct value {
	enum kind kind;
	long long i; /* BOOL (0/1), INT */
	char *s;     /* STR */
};

enum op {
	OP_ANY, /* a scalar is a list of one */
	OP_GTE,
	OP_LTE,
	OP_NE,
	OP_EXISTS,
};

struct condition {
	const struct fact_key *key;
	enum op op;
	struct value *values;
	size_t n_values;
	bool exists;
};

struct example {
	int line;
	char *text; /* a text example when not NULL */
	char *api;
	int status;		 /* -1 when the example has none */
	struct condition *facts; /* OP_ANY with one value each */
	size_t n_facts;
};

struct workaround {
	char *action;
	char *how;
	double rate;
	size_t order; /* position in the file, to keep it among equal rates */
};

struct p2pg_rule {
	char *id;
	char *title;
	char *root_cause;
	char *doc_url;
	char *file;
	char *json;
	char *advice;
	char *dead_ends_text;
	double confidence;

	int *codes;
	size_t n_codes;

	bool has_match;
	char **apis;
	size_t n_apis;
	int *statuses;
	size_t n_statuses;
	struct condition *conditions;
	size_t n_conditions;
	int specificity;

	bool has_regex;
	regex_t regex;
	char **aliases;
	size_t n_aliases;

	struct workaround *workarounds;
	size_t n_workarounds;
	struct workaround *dead_ends; /* action, why (in how), fail rate */
	size_t n_dead_ends;

	struct example *matches;
	size_t n_matches;
	struct example *near_misses;
	size_t n_near_misses;
};

struct p2pg_ruleset {
	struct p2pg_rule **rules;
	size_t count;
};

static void values_free(struct value *values, size_t n)
{
	for (size_t k = 0; k < n; k++)
		free(values[k].s);
	free(values);
}

static void conditions_free(struct condition *c, size_t n)
{
	for (size_t k = 0; k < n; k++)
		values_free(c[k].values, c[k].n_values);
	free(c);
}

static void examples_free(struct example *e, size_t n)
{
	for (size_t k = 0; k < n; k++) {
		free(e[k].text);
		free(e[k].api);
		conditions_free(e[k].facts, e[k].n_facts);
	}
	free(e);
}

static void workarounds_free(struct workaround *w, size_t n)
{
	for (size_t k = 0; k < n; k++) {
		free(w[k].action);
		free(w[k].how);
	}
	free(w);
}

static void strings_free(char **s, size_t n)
{
	for (size_t k = 0; k < n; k++)
		free(s[k]);
	free(s);
}

static void rule_free(struct p2pg_rule *r)
{
	if (!r)
		return;
	free(r->id);
	free(r->title);
	free(r->root_cause);
	free(r->doc_url);
	free(r->file);
	free(r->json);
	free(r->advice);
	free(r->dead_ends_text);
	free(r->codes);
	strings_free(r->apis, r->n_apis);
	free(r->statuses);
	conditions_free(r->conditions, r->n_conditions);
	if (r->has_regex)
		regfree(&r->regex);
	strings_free(r->aliases, r->n_aliases);
	workarounds_free(r->workarounds, r->n_workarounds);
	workarounds_free(r->dead_ends, r->n_dead_ends);
	examples_free(r->matches, r->n_matches);
	examples_free(r->near_misses, r->n_near_misses);
	free(r);
}

struct p2pg_ruleset *p2pg_ruleset_new(void)
{
	return calloc(1, sizeof(struct p2pg_ruleset));
}

void p2pg_ruleset_free(struct p2pg_ruleset *rs)
{
	if (!rs)
		return;
	for (size_t k = 0; k < rs->count; k++)
		rule_free(rs->rules[k]);
	free(rs->rules);
	free(rs);
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

static bool parse_regex(struct loader *ld, const struct p2pg_json *v, struct p2pg_rule *r)
{
	if (!expect_type(ld, v, "regex", P2PG_JSON_STRING))
		return false;
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
	rule_free(r);
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
		rule_free(r);
		return -EEXIST;
	}
	r->file = strdup(ld->file);
	r->json = malloc(len + 1);
	if (!r->file || !r->json || ruleset_append(rs, r) < 0) {
		rule_free(r);
		return -ENOMEM;
	}
	memcpy(r->json, text, len);
	r->json[len] = '\0';
	return 0;
}

/* Adds one entry; *problems grows by the number of problems reported. */
static int add_text(struct p2pg_ruleset *rs, const char *file, const char *id_path,
		    const char *text, size_t len, p2pg_rules_report_fn report, void *userdata,
		    int *problems)
{
	struct loader ld = {.file = file, .report = report, .userdata = userdata};
	int rc = add_entry(rs, &ld, id_path, text, len);
	if (problems)
		*problems += ld.problems;
	return rc;
}

int p2pg_ruleset_add_text(struct p2pg_ruleset *rs, const char *file, const char *text, size_t len,
			  p2pg_rules_report_fn report, void *userdata)
{
	if (!rs || !file || !text)
		return -EINVAL;
	return add_text(rs, file, NULL, text, len, report, userdata, NULL);
}

static void report_plain(p2pg_rules_report_fn report, void *userdata, const char *file, int line,
			 const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void report_plain(p2pg_rules_report_fn report, void *userdata, const char *file, int line,
			 const char *fmt, ...)
{
	char message[512];
	va_list ap;
	if (!report)
		return;
	va_start(ap, fmt);
	vsnprintf(message, sizeof(message), fmt, ap);
	va_end(ap);
	report(userdata, file, line, message);
}

static int read_file(const char *path, char **ret, size_t *ret_len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct stat st;
	if (fstat(fd, &st) < 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	if (st.st_size > RULE_FILE_MAX) {
		close(fd);
		return -EFBIG;
	}
	size_t cap = (size_t)st.st_size + 1, len = 0;
	char *buf = malloc(cap);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	for (;;) {
		ssize_t n = read(fd, buf + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = -errno;
			free(buf);
			close(fd);
			return e;
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (len + 1 == cap) {
			/* The file grew since fstat. */
			if (cap > RULE_FILE_MAX) {
				free(buf);
				close(fd);
				return -EFBIG;
			}
			char *bigger = realloc(buf, cap * 2);
			if (!bigger) {
				free(buf);
				close(fd);
				return -ENOMEM;
			}
			buf = bigger;
			cap *= 2;
		}
	}
	close(fd);
	buf[len] = '\0';
	*ret = buf;
	*ret_len = len;
	return 0;
}

static int compare_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool has_suffix(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Loads root/rel (a folder) recursively, in name order so problems come out the same each time.
 * Returns the problem count or a negative errno when the top folder cannot be read. */
static int load_tree(struct p2pg_ruleset *rs, const char *root, const char *rel, int depth,
		     p2pg_rules_report_fn report, void *userdata)
{
	char path[PATH_MAX];
	int problems = 0;
	DIR *d;
	char **names = NULL;
	size_t n_names = 0, cap = 0;

	snprintf(path, sizeof(path), "%s%s%s", root, *rel ? "/" : "", rel);
	d = opendir(path);
	if (!d)
		return -errno;
	for (struct dirent *de; (de = readdir(d));) {
		if (de->d_name[0] == '.')
			continue;
		if (n_names == cap) {
			cap = cap ? cap * 2 : 16;
			char **more = realloc(names, cap * sizeof(*names));
			if (!more)
				goto nomem;
			names = more;
		}
		names[n_names] = strdup(de->d_name);
		if (!names[n_names])
			goto nomem;
		n_names++;
	}
	closedir(d);
	d = NULL;
	if (n_names)
		qsort(names, n_names, sizeof(*names), compare_names);

	for (size_t k = 0; k < n_names; k++) {
		char sub[PATH_MAX], file[PATH_MAX];
		struct stat st;

		if (snprintf(sub, sizeof(sub), "%s%s%s", rel, *rel ? "/" : "", names[k]) >=
			(int)sizeof(sub) ||
		    snprintf(file, sizeof(file), "%s/%s", root, sub) >= (int)sizeof(file))
			continue; /* no such path can be opened anyway */
		if (stat(file, &st) < 0)
			continue; /* a dangling link is not a rule file */
		if (S_ISDIR(st.st_mode)) {
			if (depth >= DIR_DEPTH_MAX) {
				report_plain(report, userdata, file, 0,
					     "folders nested deeper than %d levels", DIR_DEPTH_MAX);
				problems++;
				continue;
			}
			int r = load_tree(rs, root, sub, depth + 1, report, userdata);
			if (r < 0) {
				report_plain(report, userdata, file, 0, "cannot read folder: %s",
					     strerror(-r));
				problems++;
			} else {
				problems += r;
			}
			continue;
		}
		if (!S_ISREG(st.st_mode) || !has_suffix(names[k], ".json"))
			continue;

		char *text = NULL;
		size_t len = 0;
		int r = read_file(file, &text, &len);
		if (r < 0) {
			report_plain(report, userdata, file, 0, "cannot read file: %s",
				     r == -EFBIG ? "larger than 1 MiB" : strerror(-r));
			problems++;
			continue;
		}
		sub[strlen(sub) - strlen(".json")] = '\0';
		r = add_text(rs, file, sub, text, len, report, userdata, &problems);
		free(text);
		if (r == -ENOMEM) {
			strings_free(names, n_names);
			return r;
		}
	}
	strings_free(names, n_names);
	return problems;

nomem:
	if (d)
		closedir(d);
	strings_free(names, n_names);
	return -ENOMEM;
}

int p2pg_ruleset_load_dir(struct p2pg_ruleset *rs, const char *dir, p2pg_rules_report_fn report,
			  void *userdata)
{
	char root[PATH_MAX];
	size_t n;

	if (!rs || !dir || !*dir)
		return -EINVAL;
	/* "rules/" and "rules" name the same folder; keep "rules//cuda/x.json" out of messages. */
	n = (size_t)snprintf(root, sizeof(root), "%s", dir);
	if (n >= sizeof(root))
		return -ENAMETOOLONG;
	while (n > 1 && root[n - 1] == '/')
		root[--n] = '\0';
	return load_tree(rs, root, "", 0, report, userdata);
}

int p2pg_ruleset_load_builtin(struct p2pg_ruleset *rs, p2pg_rules_report_fn report, void *userdata)
{
	int problems = 0;

	if (!rs)
		return -EINVAL;
	for (size_t k = 0; k < p2pg_builtin_rule_count; k++) {
		const struct p2pg_builtin_rule *b = &p2pg_builtin_rules[k];
		char file[PATH_MAX], id_path[PATH_MAX];

		snprintf(file, sizeof(file), "rules/%s", b->path);
		snprintf(id_path, sizeof(id_path), "%s", b->path);
		if (has_suffix(id_path, ".json"))
			id_path[strlen(id_path) - strlen(".json")] = '\0';
		int r = add_text(rs, file, id_path, b->text, b->len, report, userdata, &problems);
		if (r == -ENOMEM)
			return r;
	}
	return problems;
}

/* ---- Access ---- */

size_t p2pg_ruleset_count(const struct p2pg_ruleset *rs)
{
	return rs ? rs->count : 0;
}

const struct p2pg_rule *p2pg_ruleset_at(const struct p2pg_ruleset *rs, size_t index)
{
	return rs && index < rs->count ? rs->rules[index] : NULL;
}

const struct p2pg_rule *p2pg_ruleset_find(const struct p2pg_ruleset *rs, const char *id)
{
	if (!rs || !id)
		return NULL;
	for (size_t k = 0; k < rs->count; k++)
		if (strcmp(rs->rules[k]->id, id) == 0)
			return rs->rules[k];
	return NULL;
}

const char *p2pg_rule_id(const struct p2pg_rule *rule)
{
	return rule ? rule->id : NULL;
}

const char *p2pg_rule_title(const struct p2pg_rule *rule)
{
	return rule ? rule->title : NULL;
}

const char *p2pg_rule_root_cause(const struct p2pg_rule *rule)
{
	return rule ? rule->root_cause : NULL;
}

const char *p2pg_rule_advice(const struct p2pg_rule *rule)
{
	return rule ? rule->advice : NULL;
}

const char *p2pg_rule_doc_url(const struct p2pg_rule *rule)
{
	return rule ? rule->doc_url : NULL;
}

const char *p2pg_rule_source_file(const struct p2pg_rule *rule)
{
	return rule ? rule->file : NULL;
}

const char *p2pg_rule_json(const struct p2pg_rule *rule)
{
	return rule ? rule->json : NULL;
}

double p2pg_rule_confidence(const struct p2pg_rule *rule)
{
	return rule ? rule->confidence : 0.0;
}

const char *p2pg_rule_dead_ends(const struct p2pg_rule *rule)
{
	return rule ? rule->dead_ends_text : NULL;
}

size_t p2pg_rule_codes(const struct p2pg_rule *rule, const int **ret_codes)
{
	if (!rule)
		return 0;
	if (ret_codes)
		*ret_codes = rule->codes;
	return rule->n_codes;
}

int p2pg_rule_specificity(const struct p2pg_rule *rule)
{
	return rule ? rule->specificity : 0;
}

size_t p2pg_rule_workaround_count(const struct p2pg_rule *rule)
{
	return rule ? rule->n_workarounds : 0;
}

int p2pg_rule_workaround(const struct p2pg_rule *rule, size_t index, const char **ret_action,
			 const char **ret_how, double *ret_success_rate)
{
	if (!rule || index >= rule->n_workarounds)
		return -ERANGE;
	const struct workaround *w = &rule->workarounds[index];
	if (ret_action)
		*ret_action = w->action;
	if (ret_how)
		*ret_how = w->how;
	if (ret_success_rate)
		*ret_success_rate = w->rate;
	return 0;
}

size_t p2pg_rule_dead_end_count(const struct p2pg_rule *rule)
{
	return rule ? rule->n_dead_ends : 0;
}

int p2pg_rule_dead_end(const struct p2pg_rule *rule, size_t index, const char **ret_action,
		       const char **ret_why, double *ret_fail_rate)
{
	if (!rule || index >= rule->n_dead_ends)
		return -ERANGE;
	const struct workaround *w = &rule->dead_ends[index];
	if (ret_action)
		*ret_action = w->action && *w->action ? w->action : NULL;
	if (ret_why)
		*ret_why = w->how;
	if (ret_fail_rate)
		*ret_fail_rate = w->rate;
	return 0;
}

/* ---- Matching ---- */

/* The api the program called may carry its ABI suffix (cuMemcpyPeer_ptds, cuMemcpyDtoD_v2);
 * rules name the plain function. */
static bool api_matches(const char *listed, const char *api)
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

static bool condition_holds(const struct condition *c, const struct p2pg_facts *facts)
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
			any = api_matches(r->apis[k], api);
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
		if (!condition_holds(&r->conditions[k], facts))
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

/* ---- Explaining pasted text ---- */

static bool is_word_char(char c)
{
	return isalnum((unsigned char)c) || c == '_';
}

/* Finds word in text, ignoring case, where it is not part of a longer identifier. */
static bool find_word(const char *text, const char *word)
{
	size_t n = strlen(word);
	for (const char *p = text; (p = strcasestr(p, word)); p++) {
		bool left = p == text || !is_word_char(p[-1]) || !is_word_char(word[0]);
		bool right = !is_word_char(p[n]) || !is_word_char(word[n - 1]);
		if (left && right)
			return true;
	}
	return false;
}

/* A number is read as a status when it is all the text, or when it follows a word that
 * introduces one ("Error 802", "Cuda failure 217", "status=700"); other numbers in a log line
 * are device ordinals, bus ids and sizes. */
static bool number_is_status(const char *text, const char *start, const char *end)
{
	static const char *const words[] = {"error",  "err",	  "code", "status", "failure",
					    "result", "returned", "rc",	  NULL};
	const char *p = text, *q = end;

	while (*p && isspace((unsigned char)*p))
		p++;
	while (*q && isspace((unsigned char)*q))
		q++;
	if (p == start && *q == '\0')
		return true;

	p = start;
	while (p > text && strchr(" \t:=#(", p[-1]))
		p--;
	const char *word_end = p;
	while (p > text && isalpha((unsigned char)p[-1]))
		p--;
	size_t n = (size_t)(word_end - p);
	for (size_t k = 0; words[k]; k++)
		if (n == strlen(words[k]) && strncasecmp(p, words[k], n) == 0)
			return true;
	return false;
}

static bool mentions_number(const char *text, int code)
{
	for (const char *p = text; *p;) {
		if (!isdigit((unsigned char)*p)) {
			p++;
			continue;
		}
		const char *start = p;
		while (isdigit((unsigned char)*p))
			p++;
		if ((start > text && (is_word_char(start[-1]) || start[-1] == '.')) ||
		    is_word_char(*p) || (*p == '.' && isdigit((unsigned char)p[1])))
			continue;
		if (p - start <= 6 && atoi(start) == code && number_is_status(text, start, p))
			return true;
	}
	return false;
}

/* How much of the text a mention of code accounts for: the longest of its names or message
 * found, or the digits of a bare status number. */
static size_t code_score(const char *text, int code)
{
	size_t best = 0;
	const char *names[3];
	if (p2pg_status_spellings(code, &names[0], &names[1], &names[2]))
		for (size_t m = 0; m < 3; m++)
			if (names[m] && strlen(names[m]) > best && find_word(text, names[m]))
				best = strlen(names[m]);
	if (best == 0 && mentions_number(text, code)) {
		char digits[16];
		best = (size_t)snprintf(digits, sizeof(digits), "%d", code);
	}
	return best;
}

static size_t explain_score(const struct p2pg_rule *r, const char *text)
{
	size_t score = 0;
	regmatch_t m;

	if (r->has_regex && regexec(&r->regex, text, 1, &m, 0) == 0 && m.rm_eo > m.rm_so)
		score = (size_t)(m.rm_eo - m.rm_so);
	for (size_t k = 0; k < r->n_aliases; k++)
		if (strlen(r->aliases[k]) > score && strcasestr(text, r->aliases[k]))
			score = strlen(r->aliases[k]);
	/* Text-only rules are about one framework's wording; a bare status says nothing about
	 * the framework, so only rules about the status itself are found through it. */
	for (size_t k = 0; r->has_match && k < r->n_codes; k++) {
		size_t s = code_score(text, r->codes[k]);
		if (s > score)
			score = s;
	}
	return score;
}

struct candidate {
	const struct p2pg_rule *rule;
	size_t score;
};

static int compare_candidates(const void *a, const void *b)
{
	const struct candidate *x = a, *y = b;
	if (x->score != y->score)
		return x->score > y->score ? -1 : 1;
	/* Text carries no evidence: the general rule first, the narrower causes after it. */
	if (x->rule->specificity != y->rule->specificity)
		return x->rule->specificity < y->rule->specificity ? -1 : 1;
	if (x->rule->confidence != y->rule->confidence)
		return x->rule->confidence > y->rule->confidence ? -1 : 1;
	return strcmp(x->rule->id, y->rule->id);
}

size_t p2pg_ruleset_explain(const struct p2pg_ruleset *rs, const char *text,
			    const struct p2pg_rule **out, size_t max)
{
	struct candidate *c;
	size_t n = 0;

	if (!rs || !text || rs->count == 0)
		return 0;
	c = calloc(rs->count, sizeof(*c));
	if (!c)
		return 0;
	for (size_t k = 0; k < rs->count; k++) {
		size_t score = explain_score(rs->rules[k], text);
		if (score > 0)
			c[n++] = (struct candidate){rs->rules[k], score};
	}
	qsort(c, n, sizeof(*c), compare_candidates);
	for (size_t k = 0; out && k < n && k < max; k++)
		out[k] = c[k].rule;
	free(c);
	return n;
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
				report_plain(report, userdata, r->file, ex->line,
					     "example text explains nothing");
			else if (ex->text)
				report_plain(report, userdata, r->file, ex->line,
					     "example text is explained first by %s, not this rule",
					     got->id);
			else if (!got)
				report_plain(report, userdata, r->file, ex->line,
					     "example selects no rule");
			else
				report_plain(report, userdata, r->file, ex->line,
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
			report_plain(report, userdata, r->file, ex->line,
				     ex->text ? "near-miss text is explained first by this rule"
					      : "near miss selects this rule");
		}
	}
	return problems;
}
