/* SPDX-License-Identifier: MIT */
/*
 * A rule's "context" (rules/README.md, "Explain"): the calls, source files and frameworks a pasted
 * line must name, at least one of them, for explain to list the rule. Explain ranks a rule by how
 * many of its clues the line names before it looks at how much text the rule accounts for.
 */
#include <stdio.h>
#include <string.h>

#include "explain-line.h"
#include "rules-loader.h"

unsigned rules_folder_framework(const char *id)
{
	char folder[32];
	const char *slash = id ? strchr(id, '/') : NULL;
	size_t n = slash ? (size_t)(slash - id) : 0;
	if (n == 0 || n >= sizeof(folder))
		return 0;
	memcpy(folder, id, n);
	folder[n] = '\0';
	int k = explain_framework_lookup(folder);
	return k < 0 ? 0 : 1u << k;
}

static bool parse_list(struct loader *ld, const struct p2pg_json *v, const char *path, char ***ret,
		       size_t *ret_n)
{
	bool ok = true;

	if (!ld_expect_strings(ld, v, path))
		return false;
	if (v->count == 0) {
		ld_problem(ld, v->line, "empty list for \"%s\"", path);
		return false;
	}
	*ret = ld_alloc_array(ld, v->count, sizeof(**ret));
	if (!*ret)
		return false;
	for (size_t k = 0; k < v->count; k++) {
		const char *name = v->items[k]->string;
		int line = v->items[k]->line;
		if (strcmp(path, "context.api") == 0 && !ld_valid_api_name(name)) {
			ld_problem(ld, line, "invalid API name \"%s\"", name);
			ok = false;
			continue;
		}
		if (strcmp(path, "context.file") == 0 && !explain_valid_file_name(name)) {
			ld_problem(
			    ld, line,
			    "invalid source file name \"%s\" (expected a name such as shm.cc "
			    "or custom_all_reduce.cuh, without folders)",
			    name);
			ok = false;
			continue;
		}
		(*ret)[(*ret_n)++] = ld_copy(ld, name);
	}
	return ok;
}

static bool parse_frameworks(struct loader *ld, const struct p2pg_json *v, unsigned *ret)
{
	bool ok = true;

	if (!ld_expect_strings(ld, v, "context.framework"))
		return false;
	if (v->count == 0) {
		ld_problem(ld, v->line, "empty list for \"context.framework\"");
		return false;
	}
	for (size_t k = 0; k < v->count; k++) {
		int fw = explain_framework_lookup(v->items[k]->string);
		if (fw < 0) {
			ld_problem(ld, v->items[k]->line,
				   "unknown framework \"%s\" (expected one of %s)",
				   v->items[k]->string, explain_framework_names());
			ok = false;
			continue;
		}
		*ret |= 1u << fw;
	}
	return ok;
}

bool rules_parse_context(struct loader *ld, const struct p2pg_json *v, struct p2pg_rule *r)
{
	bool ok = true;

	if (!ld_expect_type(ld, v, "context", P2PG_JSON_OBJECT))
		return false;
	if (v->count == 0) {
		ld_problem(ld, v->line, "context needs at least one clue");
		return false;
	}
	for (size_t k = 0; k < v->count; k++) {
		const char *key = v->keys[k];
		const struct p2pg_json *item = v->items[k];
		if (strcmp(key, "api") == 0)
			ok &= parse_list(ld, item, "context.api", &r->context_apis,
					 &r->n_context_apis);
		else if (strcmp(key, "file") == 0)
			ok &= parse_list(ld, item, "context.file", &r->context_files,
					 &r->n_context_files);
		else if (strcmp(key, "framework") == 0)
			ok &= parse_frameworks(ld, item, &r->context_frameworks);
		else {
			ld_problem(ld, item->line,
				   "unknown context clue \"%s\" (expected api, file or framework)",
				   key);
			ok = false;
		}
	}
	r->has_context = true;
	return ok;
}
