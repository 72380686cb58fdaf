/* SPDX-License-Identifier: MIT */
/*
 * The knowledge base's insides, shared by its files: rules.c (the rule and the set), rules_load.c
 * (files and folders), rules_validate.c with rules_factkeys.c, rules_regex.c and rules_examples.c
 * (JSON to a checked rule, and the examples) and rules_match.c (matching a failure, explaining a
 * pasted line). Not for use outside them.
 */
#pragma once

#include <regex.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include <string.h>

#include "p2pguard/rules.h"

/* The kinds of value a fact key holds (rules/README.md, "Fact keys"). */
enum kind {
	KIND_BOOL,
	KIND_INT,
	KIND_STR,
};

struct fact_key {
	const char *name;
	enum kind kind;
	const char *const *values; /* the allowed strings; NULL when free-form */
};

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

/* One of "notes": text added to the root cause when its conditions hold for the evidence. */
struct note {
	struct condition *facts;
	size_t n_facts;
	char *text; /* may name facts as {key} */
};

struct workaround {
	char *action;
	char *how;
	char *condition; /* the one cause or setup the entry is for; NULL when it holds for all */
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
	bool json_is_builtin; /* json is the compiled-in text, not a copy to free */
	/* "action (NN% success): how" a line each, built at first use (rules.c): explain prints
	 * the workarounds of a few rules and needs neither, and building them for every rule was a
	 * twentieth of loading the rules. */
	_Atomic(char *) advice;
	_Atomic(char *) dead_ends_text;
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

	/* A rule file's regex is compiled when it is read, so that the validator can say what is
	 * wrong with it; a built-in rule's when explain first needs it (rules_rule_regex), since
	 * the guard's process, which reads the rules at a failure, never explains text, and the
	 * build's tests compiled it (p2pg_ruleset_check_examples compiles them all). */
	char *regex_text;
	int regex_line;
	_Atomic(regex_t *) regex; /* NULL until compiled; rules_regex_broken when it did not */
	/* A line the regex matches holds one of these, case aside (none: it cannot be told). */
	char **regex_literals;
	size_t n_regex_literals;
	char **aliases;
	size_t n_aliases;

	/* "context": what a pasted line must name for explain to list the rule. */
	bool has_context;
	char **context_apis;
	size_t n_context_apis;
	char **context_files;
	size_t n_context_files;
	unsigned context_frameworks; /* bit k: enum framework k (explain-line.h) */
	unsigned folder_framework; /* the framework whose folder holds the rule (nccl/...), or 0 */
	bool triage; /* category "triage": the answer for a line that names no cause */
	bool notice; /* a category of what a log notes rather than a failure */

	struct note *notes;
	size_t n_notes;

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
	/* Set once an id arrived that does not sort after the one before it (see add_entry). */
	bool ids_unordered;
};

void rules_rule_free(struct p2pg_rule *r); /* accepts NULL */

/* The rule's regex compiled (at its first use for a built-in rule), or NULL when it has none or
 * it does not compile. Safe from several threads at once and in a forked child: no lock, the first
 * compilation stored wins. glibc's regcomp() recurses: the caller's stack must be a CLI's. */
const regex_t *rules_rule_regex(const struct p2pg_rule *r);
/* Compiles the regex now if it is not yet; reports a regex that does not compile or that matches
 * the empty string. Returns the number of problems (0 or 1). */
int rules_check_regex(const struct p2pg_rule *r, p2pg_rules_report_fn report, void *userdata);
extern regex_t rules_regex_broken;
/* regex compiled into a new regex_t (case-insensitive ERE), or &rules_regex_broken with regerror's
 * words in why (when not NULL); NULL when out of memory. */
regex_t *rules_regex_compile(const char *regex, char *why, size_t why_size);
void rules_conditions_free(struct condition *c, size_t n);

/* listed is a rule's plain call name; api may carry its ABI suffix (_ptds, _ptsz, _v2). */
bool rules_api_matches(const char *listed, const char *api);
/* Whether one condition holds for the evidence (a missing fact holds only for exists: false). */
bool rules_condition_holds(const struct condition *c, const struct p2pg_facts *facts);
void rules_strings_free(char **s, size_t n);

static inline bool has_suffix(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Reports "FILE:LINE: message" through report, when there is one. */
void rules_report(p2pg_rules_report_fn report, void *userdata, const char *file, int line,
		  const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/*
 * Parses and validates one entry and adds it to rs. id_path, when not NULL, is the id the file's
 * path implies. *problems (when not NULL) grows by the number of problems reported. Returns 0,
 * -EINVAL (malformed, reported), -EEXIST (duplicate id, reported) or -ENOMEM.
 */
int rules_add_text(struct p2pg_ruleset *rs, const char *file, const char *id_path, const char *text,
		   size_t len, p2pg_rules_report_fn report, void *userdata, int *problems);
/* The same for a built-in rule: text the build has checked, NUL-terminated, which lives as long as
 * the program, with the number of JSON values the build counted in it (0: count them). It is read
 * without jansson unless the faster reader finds it is not what the build passed, and the rule
 * keeps it rather than a copy. */
int rules_add_builtin_text(struct p2pg_ruleset *rs, const char *file, const char *id_path,
			   const char *text, size_t len, size_t values, p2pg_rules_report_fn report,
			   void *userdata, int *problems);
/* Adds p2pg_builtin_rules[k] to rs, as rules_add_builtin_text. */
int rules_load_builtin_one(struct p2pg_ruleset *rs, size_t k, p2pg_rules_report_fn report,
			   void *userdata, int *problems);

/* Whether a rule's category is one of a notice's: performance, info, warning,
 * configuration_warning, diagnostic (rules/README.md, "Explain"). */
bool rules_is_notice_category(const char *category);
