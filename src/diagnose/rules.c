/* SPDX-License-Identifier: MIT */
/*
 * The knowledge base (rules/README.md is the specification): the rule and the rule set, their
 * lifetime and their accessors. Loading is in rules_load.c, validation in rules_validate.c,
 * matching and explaining in rules_match.c.
 */
#include "p2pguard/rules.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rules-private.h"

static void values_free(struct value *values, size_t n)
{
	for (size_t k = 0; k < n; k++)
		free(values[k].s);
	free(values);
}

void rules_conditions_free(struct condition *c, size_t n)
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
		rules_conditions_free(e[k].facts, e[k].n_facts);
	}
	free(e);
}

static void workarounds_free(struct workaround *w, size_t n)
{
	for (size_t k = 0; k < n; k++) {
		free(w[k].action);
		free(w[k].how);
		free(w[k].condition);
	}
	free(w);
}

void rules_strings_free(char **s, size_t n)
{
	for (size_t k = 0; k < n; k++)
		free(s[k]);
	free(s);
}

void rules_rule_free(struct p2pg_rule *r)
{
	if (!r)
		return;
	free(r->id);
	free(r->title);
	free(r->root_cause);
	free(r->doc_url);
	free(r->file);
	if (!r->json_is_builtin)
		free(r->json);
	free(atomic_load(&r->advice));
	free(atomic_load(&r->dead_ends_text));
	free(r->codes);
	rules_strings_free(r->apis, r->n_apis);
	free(r->statuses);
	rules_conditions_free(r->conditions, r->n_conditions);
	rules_strings_free(r->context_apis, r->n_context_apis);
	rules_strings_free(r->context_files, r->n_context_files);
	for (size_t k = 0; k < r->n_notes; k++) {
		rules_conditions_free(r->notes[k].facts, r->notes[k].n_facts);
		free(r->notes[k].text);
	}
	free(r->notes);
	regex_t *re = atomic_load(&r->regex);
	if (re && re != &rules_regex_broken) {
		regfree(re);
		free(re);
	}
	free(r->regex_text);
	rules_strings_free(r->regex_literals, r->n_regex_literals);
	rules_strings_free(r->aliases, r->n_aliases);
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
		rules_rule_free(rs->rules[k]);
	free(rs->rules);
	free(rs);
}

void rules_report(p2pg_rules_report_fn report, void *userdata, const char *file, int line,
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

/* The workarounds (or dead ends) as "action (NN% success): how" lines, or NULL without memory. */
static char *remedy_lines(const struct workaround *w, size_t n, bool workarounds)
{
	size_t size = 1;
	for (size_t k = 0; k < n; k++)
		size += (w[k].action ? strlen(w[k].action) : 0) +
			(w[k].how ? strlen(w[k].how) : 0) +
			(w[k].condition ? strlen(w[k].condition) : 0) + 48;
	char *out = malloc(size);
	if (!out)
		return NULL;
	char *p = out;
	*p = '\0';
	for (size_t k = 0; k < n; k++) {
		size_t left = size - (size_t)(p - out);
		/* An entry for one cause only says which, so that a reader of the stored advice
		 * does not follow a step meant for another setup. */
		const char *when = w[k].condition ? "; when " : "";
		const char *cond = w[k].condition ? w[k].condition : "";
		if (workarounds)
			p += snprintf(p, left, "%s (%.0f%% success%s%s)%s%s\n", w[k].action,
				      w[k].rate * 100.0, when, cond, w[k].how ? ": " : "",
				      w[k].how ? w[k].how : "");
		else if (w[k].rate >= 0)
			p += snprintf(p, left, "%s%s%s (fails %.0f%%%s%s)\n",
				      w[k].action ? w[k].action : "",
				      w[k].action && *w[k].action ? ": " : "", w[k].how,
				      w[k].rate * 100.0, when, cond);
		else if (w[k].condition)
			p += snprintf(p, left, "%s%s%s (when %s)\n", w[k].action ? w[k].action : "",
				      w[k].action && *w[k].action ? ": " : "", w[k].how, cond);
		else
			p += snprintf(p, left, "%s%s%s\n", w[k].action ? w[k].action : "",
				      w[k].action && *w[k].action ? ": " : "", w[k].how);
	}
	if (p > out)
		p[-1] = '\0'; /* no newline after the last line */
	return out;
}

/* Built by the first caller; threads that race each build one and all but the first to publish
 * free theirs, so every caller gets the same text for the life of the rule. */
static const char *remedies_once(_Atomic(char *) *slot, const struct workaround *w, size_t n,
				 bool workarounds)
{
	char *text = atomic_load_explicit(slot, memory_order_acquire);
	if (text)
		return text;
	char *built = remedy_lines(w, n, workarounds);
	if (!built)
		return "";
	if (atomic_compare_exchange_strong_explicit(slot, &text, built, memory_order_acq_rel,
						    memory_order_acquire))
		return built;
	free(built);
	return text;
}

const char *p2pg_rule_advice(const struct p2pg_rule *rule)
{
	if (!rule)
		return NULL;
	struct p2pg_rule *r = (struct p2pg_rule *)rule;
	return remedies_once(&r->advice, r->workarounds, r->n_workarounds, true);
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
	if (!rule || rule->n_dead_ends == 0)
		return NULL;
	struct p2pg_rule *r = (struct p2pg_rule *)rule;
	return remedies_once(&r->dead_ends_text, r->dead_ends, r->n_dead_ends, false);
}

size_t p2pg_rule_codes(const struct p2pg_rule *rule, const int **ret_codes)
{
	if (!rule)
		return 0;
	if (ret_codes)
		*ret_codes = rule->codes;
	return rule->n_codes;
}

bool p2pg_rule_needs_evidence(const struct p2pg_rule *rule)
{
	return rule && rule->n_conditions > 0;
}

bool p2pg_rule_is_triage(const struct p2pg_rule *rule)
{
	return rule && rule->triage;
}

bool rules_is_notice_category(const char *category)
{
	static const char *const notices[] = {"performance", "info", "warning",
					      "configuration_warning", "diagnostic"};
	for (size_t k = 0; k < sizeof(notices) / sizeof(notices[0]); k++)
		if (strcmp(category, notices[k]) == 0)
			return true;
	return false;
}

bool p2pg_rule_is_notice(const struct p2pg_rule *rule)
{
	return rule && rule->notice;
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

const char *p2pg_rule_workaround_condition(const struct p2pg_rule *rule, size_t index)
{
	return rule && index < rule->n_workarounds ? rule->workarounds[index].condition : NULL;
}

const char *p2pg_rule_dead_end_condition(const struct p2pg_rule *rule, size_t index)
{
	return rule && index < rule->n_dead_ends ? rule->dead_ends[index].condition : NULL;
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
