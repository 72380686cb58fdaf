/* SPDX-License-Identifier: MIT */
/*
 * The validator's loader, shared by rules_validate.c (a rule's fields) and rules_examples.c (its
 * examples): every problem is reported as "FILE:LINE: message" through the loader.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "json.h"
#include "rules-private.h"

struct loader {
	const char *file;
	p2pg_rules_report_fn report;
	void *userdata;
	int problems;
	bool nomem;
	bool builtin;	       /* a built-in rule: its regex is compiled at first use */
	size_t builtin_values; /* a built-in text's JSON values, as the build counted them */
};

void ld_problem(struct loader *ld, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* strdup and calloc that remember a failure, so one check at the end covers every copy. */
char *ld_copy(struct loader *ld, const char *s);
void *ld_alloc_array(struct loader *ld, size_t n, size_t size);
/* "field "x" must be a string, not a number" */
bool ld_expect_type(struct loader *ld, const struct p2pg_json *v, const char *path,
		    enum p2pg_json_type type);
bool ld_expect_strings(struct loader *ld, const struct p2pg_json *v, const char *path);
/* A field's name for messages: path.key, path[k]. Every field of every entry gets one, so they
 * are put together without printf, which cost a fifth of loading the built-in rules. Truncated
 * to size like snprintf. */
void ld_field_key(char *buf, size_t size, const char *path, const char *key);
void ld_field_index(char *buf, size_t size, const char *path, size_t k);
/* A scalar JSON value as a fact value of the key's kind. */
bool ld_parse_value(struct loader *ld, const struct fact_key *key, const struct p2pg_json *v,
		    struct value *ret);
/* cu or cuda followed by letters, digits and '_'. */
bool ld_valid_api_name(const char *api);
/* One condition of "facts" (match.facts, notes[N].facts) into *c. */
bool ld_parse_condition(struct loader *ld, const char *name, const struct p2pg_json *v,
			struct condition *c);
/* A fact key a rule may name in its conditions or examples, or NULL (reported). */
const struct fact_key *ld_parse_fact_key(struct loader *ld, const char *name, int line);

/* The fact keys (rules_factkeys.c): the contract with the evidence gatherer. */
const struct fact_key *rules_fact_key_lookup(const char *name);
const char *rules_kind_name(enum kind kind);

/*
 * glibc's regcomp() spells repetitions out (x{3} becomes xxx, x+ becomes xx*, x{,9} nine optional
 * x), copying what they apply to, so stacked or nested repetitions grow its memory exponentially:
 * "c" followed by 27 '+' asks for gigabytes, in the guard's process, at its first failure. Each
 * optional part (x?, x*, the optional copies of an interval) is a branch of its automaton, and
 * glibc computes, recursively, the closure of every branch over the ones that follow: a run of n
 * optional parts costs memory and time like n squared and stack like n ("(x?){1000}": 82 MB and a
 * stack deeper than 256 KiB; "(x?){5000}": 1.9 GB). So both are counted before regcomp() runs:
 * the copies are held to REGEX_MAX_SIZE, thirty times the largest built-in regex's (323), the
 * optional parts to REGEX_MAX_OPTIONAL, seventeen times the built-ins' most (15), and groups
 * nest at most REGEX_MAX_DEPTH deep. Within them regcomp() takes at most a few MB and milliseconds
 * (tests/rules/test-regex-cost.c measures it), and the guard compiles on a stack of its own.
 */
#define REGEX_MAX_SIZE	   10000
#define REGEX_MAX_OPTIONAL 256
#define REGEX_MAX_DEPTH	   32
struct rules_regex_cost {
	double size;	 /* copies of its atoms once repetitions are spelt out */
	double optional; /* optional parts once repetitions are spelt out */
};
/* p is on a bracket expression's '['; returns the character after its ']' (or the NUL). */
const char *rules_regex_skip_bracket(const char *p);
/* True when a bracket expression of regex holds a backslash and a letter; why says which. */
bool rules_regex_escape_in_bracket(const char *regex, char *why, size_t why_size);
/* The literals one of which every line the regex matches contains, case aside
 * (rules_regex_literal.c): 0 and none when it cannot tell; -ENOMEM. */
int rules_regex_literals(const char *regex, char ***ret, size_t *ret_n);
/* What an extended regex costs regcomp(); both HUGE_VAL for groups nested too deep. */
struct rules_regex_cost rules_regex_cost(const char *regex);

/* The "context" object (rules_context.c) and the "notes" array (rules_notes.c), into r. */
bool rules_parse_context(struct loader *ld, const struct p2pg_json *v, struct p2pg_rule *r);
/* The framework whose folder holds the rule with this id (tensorrt-llm/..., nccl/...), as a bit of
 * line_clues.frameworks; 0 for cuda/, ipc/ and the other folders that name no framework. */
unsigned rules_folder_framework(const char *id);
bool rules_parse_notes(struct loader *ld, const struct p2pg_json *v, struct p2pg_rule *r);

/* The "examples" object: its matches and near misses, into r. */
bool rules_parse_examples(struct loader *ld, const struct p2pg_json *v, struct p2pg_rule *r);
