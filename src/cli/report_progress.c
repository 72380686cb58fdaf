/* SPDX-License-Identifier: MIT */
/*
 * Progress of a command that reads a large database: nothing for the first second (most reads
 * are faster), then on a terminal one line redrawn in place, and into a pipe or a file one line
 * per stage. Always on stderr: stdout is the command's answer.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "clock.h"
#include "report.h"

#define QUIET_NS 1000000000LL /* a command that ends within this says nothing */
#define DRAW_NS	 100000000LL  /* a terminal line is redrawn at most this often */

void progress_start(struct report_progress *p, const char *command)
{
	*p = (struct report_progress){.command = command,
				      .start_ns = (int64_t)p2pg_now_ns(),
				      .quiet_ns = QUIET_NS,
				      .tty = isatty(STDERR_FILENO) == 1};
	/* P2PGUARD_PROGRESS_MS: after how long progress shows (tests use 0). */
	const char *ms = getenv("P2PGUARD_PROGRESS_MS");
	char *end;
	long v = ms && *ms ? strtol(ms, &end, 10) : -1;
	if (v >= 0 && *end == '\0')
		p->quiet_ns = (int64_t)v * 1000000;
}

static void draw(struct report_progress *p, int64_t now)
{
	double s = (double)(now - p->start_ns) / 1e9;
	if (p->tty) {
		if (p->total > 0)
			fprintf(stderr, "\r\033[K%s: %s %d%% (%.1f s)", p->command, p->stage,
				(int)(100 * p->done / p->total), s);
		else
			fprintf(stderr, "\r\033[K%s: %s (%.1f s)", p->command, p->stage, s);
		p->shown = true;
	} else if (!p->stage_said) {
		fprintf(stderr, "%s: %s (%.1f s so far)\n", p->command, p->stage, s);
		p->stage_said = true;
	}
	p->last_draw_ns = now;
}

void progress_stage(struct report_progress *p, const char *stage, int64_t total)
{
	if (!p || !p->command)
		return;
	p->stage = stage;
	p->total = total;
	p->done = 0;
	p->stage_said = false;
	int64_t now = (int64_t)p2pg_now_ns();
	if (now - p->start_ns >= p->quiet_ns)
		draw(p, now);
}

void progress_tick(struct report_progress *p, int64_t done)
{
	if (!p || !p->command || !p->stage)
		return;
	p->done = done;
	int64_t now = (int64_t)p2pg_now_ns();
	if (now - p->start_ns >= p->quiet_ns && (!p->tty || now - p->last_draw_ns >= DRAW_NS))
		draw(p, now);
}

void progress_end(struct report_progress *p)
{
	if (p && p->command && p->tty && p->shown)
		fputs("\r\033[K", stderr);
	if (p)
		p->shown = false;
}

static int on_sqlite_progress(void *arg)
{
	struct report_progress *p = arg;
	progress_tick(p, p->done);
	return 0;
}

void progress_attach(struct report_progress *p, sqlite3 *db)
{
	sqlite3_progress_handler(db, 200000, on_sqlite_progress, p);
}
