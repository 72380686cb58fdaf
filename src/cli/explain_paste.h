/* SPDX-License-Identifier: MIT */
#pragma once

/*
 * The text as the program printed it, from text as it reached the user: what carried it (a
 * terminal, a web page, a container's log, a mail client) is taken off. Lines keep their numbers:
 * the continuation of a wrapped line joins it and leaves its own line blank. Returns a new string
 * (free() it), or NULL when out of memory.
 */
char *p2pg_explain_paste_clean(const char *text);
