/* SPDX-License-Identifier: MIT */
#pragma once

/*
 * The text as the program printed it, from text as it reached the user: what carried it (a
 * terminal, a web page, a container's log, a mail client) is taken off. Lines keep their numbers:
 * the continuation of a wrapped line joins it and leaves its own line blank. Returns a new string
 * (free() it), or NULL when out of memory.
 */
char *p2pg_explain_paste_clean(const char *text);

/*
 * The line a terminal of any width cut in two, when cleaned text is two lines that read as one:
 * the first at least 50 columns wide, the second no wider and not beginning a record of its own.
 * Both halves joined (free() it), or NULL when the text is not such a pair or out of memory. Any
 * width is possible, so explain takes the joined line only when the two lines say nothing more.
 */
char *p2pg_explain_paste_join_pair(const char *text);
