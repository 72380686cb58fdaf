/* SPDX-License-Identifier: MIT */
/*
 * The shipped rules/ folder, compiled in: scripts/embed-rules.py writes the table (a meson
 * custom_target in src/diagnose/meson.build) so the guard needs no data files at run time.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct p2pg_builtin_rule {
	const char *path; /* relative to rules/, e.g. "cuda/too-many-peers.json" */
	const char *text; /* the file's bytes, NUL-terminated */
	size_t len;	  /* without the NUL */
	bool checked;	  /* strict JSON, as scripts/embed-rules.py checks it */
	size_t values;	  /* JSON values in the text, keys not counted (0: not counted) */
};

extern const struct p2pg_builtin_rule p2pg_builtin_rules[];
extern const size_t p2pg_builtin_rule_count;
