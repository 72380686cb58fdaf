/* SPDX-License-Identifier: MIT */
/* The one way the core speaks to a person: a line for the boundary to print ("p2pguard: ..."). */
#pragma once

/* Values echoed from the environment or a file may hold any byte but NUL: control characters
 * become '?', so that one line stays one line and cannot rewrite a terminal. */
void p2pg_keep_one_line(char *line);

void p2pg_notice(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The boundary decides where lines go; the default writes them to stderr. */
void p2pg_notice_set_sink(void (*sink)(const char *line));
