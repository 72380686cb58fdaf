/* SPDX-License-Identifier: MIT */
#include "notice.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void stderr_sink(const char *line)
{
	/* write(2), not stdio: the program's own stderr buffering stays untouched. */
	char buf[1024];
	int n = snprintf(buf, sizeof(buf), "p2pguard: %s\n", line);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(buf))
		n = sizeof(buf) - 1;
	ssize_t ignored = write(2, buf, (size_t)n);
	(void)ignored;
}

static void (*notice_sink)(const char *line) = stderr_sink;

void p2pg_notice_set_sink(void (*sink)(const char *line))
{
	notice_sink = sink ? sink : stderr_sink;
}

void p2pg_keep_one_line(char *line)
{
	for (char *p = line; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
}

void p2pg_notice(const char *fmt, ...)
{
	char line[900];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	p2pg_keep_one_line(line);
	notice_sink(line);
}
