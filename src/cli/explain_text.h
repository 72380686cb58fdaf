/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stdio.h>

struct p2pg_ruleset;

/* Prints to out the rules of rs that explain text, best first (--all: every one in full); a text
 * of several lines is a log, explained a line at a time (explain_log.h). Returns 0 when something
 * matched, 1 when nothing did, 2 when memory ran out: explain's exit status. */
int p2pg_explain_text(FILE *out, const struct p2pg_ruleset *rs, const char *text, bool all);
