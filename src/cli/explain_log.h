/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct p2pg_rule;
struct p2pg_ruleset;

#define P2PG_EXPLAIN_LINE_RULES 16  /* rules kept for each line, best first */
#define P2PG_EXPLAIN_LOG_LINES	256 /* distinct explained lines listed */

/* One distinct line of a log that a rule explains. */
struct p2pg_explain_line {
	const char *text; /* the line, NUL-terminated, without its end of line */
	size_t number;	  /* 1-based, of its first occurrence */
	size_t repeats;	  /* further lines that differ from it only in their digits */
	size_t n_rules;
	const struct p2pg_rule *rules[P2PG_EXPLAIN_LINE_RULES];
};

struct p2pg_explain_log {
	char *buf;			 /* the log's copy the lines point into */
	size_t n_lines;			 /* non-blank lines read */
	size_t n_listed;		 /* entries of lines[] */
	long cause;			 /* index in lines[] of the line answered first: the
					  * first failure, else the first notice; -1 when every
					  * line is answered by a triage */
	size_t n_unlisted;		 /* distinct explained lines past the cap, counted only */
	struct p2pg_explain_line *lines; /* in the order they came: lines[0] came first */
	/*
	 * n_listed indexes into lines[], in the order a log's answers are given: the lines whose
	 * best rule is a failure and its cause, then those whose best rule is a notice
	 * (p2pg_rule_is_notice: NCCL's "GPU Direct RDMA Disabled" printed before the failure),
	 * then those answered by a triage, each in the order they came. A generic error printed
	 * first ("unhandled cuda error") is often followed by the line that names its cause
	 * (PyTorch prints NCCL's last warning under "Last error:"), and that line is the answer.
	 */
	size_t answers[P2PG_EXPLAIN_LOG_LINES];
};

/*
 * Splits text at its ends of line and explains each line on its own with rs, keeping the
 * distinct lines a rule explains (lines that differ only in their digits, such as the same
 * warning from another rank or at another time, count as one). Returns 0, or -ENOMEM.
 */
int p2pg_explain_log_read(const struct p2pg_ruleset *rs, const char *text,
			  struct p2pg_explain_log *ret);
void p2pg_explain_log_done(struct p2pg_explain_log *log);

/*
 * The next line of a log in the buffer at *p, cut in place (its end of line and a '\r' before it
 * removed), *p moved past it; NULL at the buffer's end. Lines come as the log reader reads them.
 */
char *p2pg_explain_log_next_line(char **p);

/* True when two lines differ only in their digits (each run of digits read as one): the same
 * record from another rank, process or time. */
bool p2pg_explain_same_shape(const char *a, size_t alen, const char *b, size_t blen);

/* True when the line holds nothing but blanks: the log reader skips it. */
bool p2pg_explain_line_is_blank(const char *s);

/* True when text holds more than one non-blank line: explain reads it as a log. */
bool p2pg_explain_is_log(const char *text);
