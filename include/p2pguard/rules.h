/* SPDX-License-Identifier: MIT */
/*
 * The knowledge base: rule files (rules/README.md specifies the format), their validation, and the
 * choice of the most specific rule for a failure. Shared by the guard, the CLI and the tests.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "p2pguard/facts.h"

typedef struct sqlite3 sqlite3; /* the same typedef as <sqlite3.h>; C11 allows the repetition */

struct p2pg_rule;
struct p2pg_ruleset;

/* Called once per problem found while loading: "FILE:LINE: message". */
typedef void (*p2pg_rules_report_fn)(void *userdata, const char *file, int line,
				     const char *message);

struct p2pg_ruleset *p2pg_ruleset_new(void);
void p2pg_ruleset_free(struct p2pg_ruleset *rs); /* accepts NULL */

/*
 * Parses one rule from text. Returns 0 and adds the rule, or a negative errno (-EINVAL for a
 * malformed rule, reported through report with its line; -EEXIST for a duplicate id).
 */
int p2pg_ruleset_add_text(struct p2pg_ruleset *rs, const char *file, const char *text, size_t len,
			  p2pg_rules_report_fn report, void *userdata);

/*
 * Loads every *.json file below dir (recursively). A broken file is reported and skipped; the
 * others load. Returns the number of problems found (0 when all files loaded) or a negative errno
 * when dir cannot be read.
 */
int p2pg_ruleset_load_dir(struct p2pg_ruleset *rs, const char *dir, p2pg_rules_report_fn report,
			  void *userdata);

/* Loads the rules compiled into the binary from the shipped rules/ folder. Returns the problem
 * count. */
int p2pg_ruleset_load_builtin(struct p2pg_ruleset *rs, p2pg_rules_report_fn report, void *userdata);

/*
 * Runs every rule's "examples" against the whole set: each "matches" example must select that rule
 * (evidence through p2pg_ruleset_match, text through p2pg_ruleset_explain), each near miss must
 * not. A rule's examples can only be judged against its competitors, so this is a separate step
 * after loading. Each failure is reported at the example's line. Returns the number of problems.
 */
int p2pg_ruleset_check_examples(const struct p2pg_ruleset *rs, p2pg_rules_report_fn report,
				void *userdata);

/*
 * The rule a reader is shown first for a pasted text. p2pg_ruleset_explain reads the text as one
 * line; `p2pguard explain` reads a text of several lines as a log, line by line, after taking off
 * what carried the paste, so `rules validate` judges text examples by the command's answer.
 * Sets *ret (NULL when nothing explains the text); returns 0, or -ENOMEM.
 */
typedef int (*p2pg_rules_answer_fn)(const struct p2pg_ruleset *rs, const char *text,
				    const struct p2pg_rule **ret);

/* p2pg_ruleset_check_examples with text examples judged by answer instead of read as one line. */
int p2pg_ruleset_check_examples_answered(const struct p2pg_ruleset *rs, p2pg_rules_answer_fn answer,
					 p2pg_rules_report_fn report, void *userdata);

size_t p2pg_ruleset_count(const struct p2pg_ruleset *rs);
const struct p2pg_rule *p2pg_ruleset_at(const struct p2pg_ruleset *rs, size_t index);
const struct p2pg_rule *p2pg_ruleset_find(const struct p2pg_ruleset *rs, const char *id);

/*
 * The most specific rule whose match conditions all hold for this failure (api name, CUDA status,
 * evidence). Ties go to the higher confidence, then to the smaller id. NULL when none matches.
 * api may carry its ABI suffix (_ptds, _ptsz, _v2); api and facts may be NULL, and then no
 * condition on them holds. Rules without "match" are never returned. Read-only: safe to call
 * from several threads once the set is loaded.
 */
const struct p2pg_rule *p2pg_ruleset_match(const struct p2pg_ruleset *rs, const char *api,
					   int status, const struct p2pg_facts *facts);

/*
 * Rules that explain a line pasted from a log (any framework's message, an error name such as
 * cudaErrorPeerAccessUnsupported, CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, or a bare number such as
 * 217), best first (rules/README.md, "Explain", gives the order). Returns how many were found;
 * at most max are stored in out, which may be NULL when max is 0.
 */
size_t p2pg_ruleset_explain(const struct p2pg_ruleset *rs, const char *text,
			    const struct p2pg_rule **out, size_t max);

/*
 * As p2pg_ruleset_explain, for a line read with what surrounds it in a paste: the frames of the
 * Python traceback above an exception. The calls, source files and frameworks that surroundings
 * names count as named by the line (PyTorch's rebuild_cuda_tensor frame over a bare "invalid
 * argument" is an IPC open); which rules can match still depends on the line's own statuses and
 * words only. surroundings may be NULL.
 */
size_t p2pg_ruleset_explain_within(const struct p2pg_ruleset *rs, const char *text,
				   const char *surroundings, const struct p2pg_rule **out,
				   size_t max);

/* Accessors. Strings are owned by the rule set; NULL when the entry has no such field. */
const char *p2pg_rule_id(const struct p2pg_rule *rule);
const char *p2pg_rule_title(const struct p2pg_rule *rule); /* the "signature" */
const char *p2pg_rule_root_cause(const struct p2pg_rule *rule);
const char *
p2pg_rule_advice(const struct p2pg_rule *rule); /* workarounds, best first, one a line */
const char *p2pg_rule_doc_url(const struct p2pg_rule *rule);
const char *p2pg_rule_source_file(const struct p2pg_rule *rule);
const char *p2pg_rule_json(const struct p2pg_rule *rule); /* the whole entry as loaded */
double p2pg_rule_confidence(const struct p2pg_rule *rule);
const char *p2pg_rule_dead_ends(const struct p2pg_rule *rule); /* one a line; NULL when none */

/*
 * The root cause followed by each of the rule's notes whose conditions hold for facts, their {key}
 * placeholders filled in from facts (rules/README.md, "Notes"). A malloc'd string the caller
 * frees; NULL for a NULL rule or when memory runs out. facts may be NULL (no note then).
 */
char *p2pg_rule_root_cause_for(const struct p2pg_rule *rule, const struct p2pg_facts *facts);

/* True when the rule's match has conditions on evidence ("facts"): pasted text cannot show
 * them, so explain lists such a rule as a narrower cause rather than as the answer. */
bool p2pg_rule_needs_evidence(const struct p2pg_rule *rule);

/* True for a triage answer (category "triage"): the line it explains names no cause, and the
 * rule says how to find one; a rule that names a cause comes before it. */
bool p2pg_rule_is_triage(const struct p2pg_rule *rule);

/* True for a notice: a rule whose category (performance, info, warning, configuration_warning,
 * diagnostic) is about what a log notes on the way, such as NCCL's "GPU Direct RDMA Disabled",
 * rather than a failure; in a log, the first failure that names a cause comes before it. */
bool p2pg_rule_is_notice(const struct p2pg_rule *rule);

/* The CUDA statuses the rule is about; *ret_codes stays valid as long as the rule set. */
size_t p2pg_rule_codes(const struct p2pg_rule *rule, const int **ret_codes);

/* Number of match conditions (rules/README.md, "Specificity"); 0 for a rule without "match",
 * which p2pg_ruleset_match never selects and only p2pg_ruleset_explain finds. */
int p2pg_rule_specificity(const struct p2pg_rule *rule);

/* Workarounds, best first, and dead ends, in file order. Return 0, or -ERANGE past the end.
 * ret_how is NULL when the entry has no "how". */
size_t p2pg_rule_workaround_count(const struct p2pg_rule *rule);
int p2pg_rule_workaround(const struct p2pg_rule *rule, size_t index, const char **ret_action,
			 const char **ret_how, double *ret_success_rate);
size_t p2pg_rule_dead_end_count(const struct p2pg_rule *rule);
int p2pg_rule_dead_end(const struct p2pg_rule *rule, size_t index, const char **ret_action,
		       const char **ret_why, double *ret_fail_rate);
/* The entry's "condition" (the one cause or setup it applies to); NULL when it has none or past
 * the end. */
const char *p2pg_rule_workaround_condition(const struct p2pg_rule *rule, size_t index);
const char *p2pg_rule_dead_end_condition(const struct p2pg_rule *rule, size_t index);

/* The fact keys rules may name, in the order rules/README.md lists them; NULL past the end. */
const char *p2pg_rules_fact_key(size_t index);

/*
 * Creates the table rules(id TEXT PRIMARY KEY, title, error_codes, root_cause, advice, doc_url,
 * confidence REAL, json) when missing and stores every rule of rs with INSERT OR REPLACE, all
 * in one savepoint (so it also works inside a caller's transaction). error_codes holds the codes
 * as a JSON array ("[217]"). Returns 0, or a negative errno (-ENOMEM, -EBUSY when the database
 * is locked, -EROFS when it is read-only, -EIO for any other SQLite failure); on failure nothing
 * is changed.
 */
int p2pg_rules_write_sqlite(sqlite3 *db, const struct p2pg_ruleset *rs);

/* Records rs in rule_sets(fingerprint, rules): which knowledge base the database's diagnoses came
 * from (the same set twice: one row). Errors as p2pg_rules_write_sqlite's. */
int p2pg_rules_note_set_sqlite(sqlite3 *db, const struct p2pg_ruleset *rs);

/* Where p2pg_rules_write_named_sqlite has read up to: the rowid of failures, stalls and
 * nccl_stalls, in that order. Zeroed: from the first row. */
#define P2PG_RULES_NAMING_TABLES 3
struct p2pg_rules_named {
	long long upto[P2PG_RULES_NAMING_TABLES];
};

/*
 * Writes into rules the entries of rs that rows of the database name (their rule_id) and the table
 * lacks, reading only rows past named's marks, which it moves on. A database then holds the rules
 * its own records need, not the whole knowledge base (megabytes, growing with every rule). An id rs
 * does not hold (another process's own rule folder) is left to that process. Returns the number of
 * rules written, or an errno as p2pg_rules_write_sqlite's (marks unchanged: the next call reads
 * the same rows again).
 */
int p2pg_rules_write_named_sqlite(sqlite3 *db, const struct p2pg_ruleset *rs,
				  struct p2pg_rules_named *named);
