/* SPDX-License-Identifier: MIT */
/*
 * A pasted log, explained a line at a time: which lines a rule explains, in the order they came.
 * A log repeats itself (every rank prints the same warning, with its own rank, pid and time), so
 * lines that differ only in their digits are explained once and counted.
 */
#include "explain_log.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "p2pguard/rules.h"

bool p2pg_explain_line_is_blank(const char *s)
{
	return s[strspn(s, " \t\r\f\v")] == '\0';
}

bool p2pg_explain_is_log(const char *text)
{
	size_t non_blank = 0;

	for (const char *p = text; *p;) {
		size_t len = strcspn(p, "\n");
		if (len > strspn(p, " \t\r\f\v") && ++non_blank > 1)
			return true;
		p += len;
		if (*p)
			p++;
	}
	return false;
}

char *p2pg_explain_log_next_line(char **p)
{
	char *line = *p;
	if (!*line)
		return NULL;
	size_t len = strcspn(line, "\n");
	*p = line + len;
	if (**p)
		*(*p)++ = '\0';
	if (len && line[len - 1] == '\r')
		line[len - 1] = '\0';
	return line;
}

/* Digits read as one '0' each run, so that "rank 3 pid 1234" and "rank 12 pid 77" are alike. */
static uint64_t shape_hash(const char *s)
{
	uint64_t h = 1469598103934665603ULL;

	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c >= '0' && c <= '9') {
			while (s[1] >= '0' && s[1] <= '9')
				s++;
			c = '0';
		}
		h = (h ^ c) * 1099511628211ULL;
	}
	return h;
}

static size_t digits(const char *s, size_t len)
{
	size_t n = 0;
	while (n < len && s[n] >= '0' && s[n] <= '9')
		n++;
	return n;
}

bool p2pg_explain_same_shape(const char *a, size_t alen, const char *b, size_t blen)
{
	size_t i = 0, j = 0;
	while (i < alen && j < blen) {
		size_t da = digits(a + i, alen - i), db = digits(b + j, blen - j);
		if ((da == 0) != (db == 0) || (!da && a[i] != b[j]))
			return false;
		i += da ? da : 1;
		j += db ? db : 1;
	}
	return i == alen && j == blen;
}

/* Open addressing over every distinct line seen, explained or not: a line seen before is
 * neither explained again nor listed again. */
struct seen {
	size_t cap;
	struct seen_slot {
		uint64_t hash;
		const char *line; /* NULL: free */
		long listed;	  /* index in the log's lines[], -1 when not listed */
	} * slots;
};

static int seen_grow(struct seen *set)
{
	size_t cap = set->cap ? set->cap * 2 : 256;
	struct seen_slot *slots = calloc(cap, sizeof(*slots));

	if (!slots)
		return -ENOMEM;
	for (size_t k = 0; k < set->cap; k++) {
		if (!set->slots[k].line)
			continue;
		size_t at = set->slots[k].hash & (cap - 1);
		while (slots[at].line)
			at = (at + 1) & (cap - 1);
		slots[at] = set->slots[k];
	}
	free(set->slots);
	set->slots = slots;
	set->cap = cap;
	return 0;
}

/* The slot of line: found (its line set) or free (its line NULL, to be filled by the caller). */
static struct seen_slot *seen_find(struct seen *set, const char *line, uint64_t hash)
{
	size_t at = hash & (set->cap - 1);

	for (; set->slots[at].line; at = (at + 1) & (set->cap - 1))
		if (set->slots[at].hash == hash &&
		    p2pg_explain_same_shape(set->slots[at].line, strlen(set->slots[at].line), line,
					    strlen(line)))
			return &set->slots[at];
	set->slots[at].hash = hash;
	return &set->slots[at];
}

/*
 * A Python traceback: the files and functions of its frames are read as the surroundings of the
 * exception printed under them and of the lines that continue its message (PyTorch's "Last
 * error:" and NCCL's warning under it), up to a blank line and at most TRACEBACK_MESSAGE_LINES:
 * the log's later lines are not the exception's. A prefix before "Traceback" ("[rank0]: ") is on
 * every line of it.
 */
#define TRACEBACK_FRAMES 1024
/* The exception's line and those continuing its message: PyTorch adds up to five ("Search for
 * ...", "CUDA kernel errors might be ...", NCCL's "Last error:" and its warning). */
#define TRACEBACK_MESSAGE_LINES 8

struct traceback {
	char prefix[64];
	size_t prefix_len;
	char frames[TRACEBACK_FRAMES]; /* "file.py function file.py function ..." */
	size_t len;
	bool in_frames; /* after the "Traceback" line, before the exception */
	size_t applies; /* the exception's lines still to come */
};

static const char traceback_marker[] = "Traceback (most recent call last):";

/* In '  File "/path/to/file.py", line 130, in __init__': the end of the path, its start in
 * *ret_path; NULL when the line is not a frame. */
static const char *frame_path(const char *line, const char **ret_path)
{
	const char *p = strstr(line, "File \"");
	if (!p)
		return NULL;
	const char *end = strchr(p + 6, '"');
	if (!end || strncmp(end, "\", line ", 8) != 0)
		return NULL;
	*ret_path = p + 6;
	return end;
}

/* A frame line alone, with nothing after its function: not a one-line paste of a whole
 * traceback, whose exception follows on the same line and is read as that line. */
static bool is_frame(const char *line)
{
	const char *path, *end = frame_path(line, &path);
	if (!end)
		return false;
	const char *function = strstr(end, ", in ");
	if (!function)
		return false;
	const char *rest = function + 5 + strcspn(function + 5, " \t\r");
	return rest[strspn(rest, " \t\r")] == '\0';
}

/* '  File "/path/to/file.py", line 130, in __init__': appends "file.py __init__". */
static bool read_frame(struct traceback *tb, const char *line)
{
	const char *path, *end = frame_path(line, &path);
	if (!end)
		return false;
	const char *base = end;
	while (base > path && base[-1] != '/' && base[-1] != '\\')
		base--;
	const char *function = strstr(end, ", in ");
	function = function ? function + 5 : end;
	int n = snprintf(tb->frames + tb->len, sizeof(tb->frames) - tb->len, "%.*s %s ",
			 (int)(end - base), base, function);
	if (n > 0 && (size_t)n < sizeof(tb->frames) - tb->len)
		tb->len += (size_t)n;
	return true;
}

/* A traceback starts at line, whose first len bytes are the prefix on every line of it. */
static void traceback_start(struct traceback *tb, const char *line, size_t len)
{
	*tb = (struct traceback){.in_frames = true};
	if (len < sizeof(tb->prefix)) {
		memcpy(tb->prefix, line, len);
		tb->prefix_len = len;
	}
}

/* The surroundings line is read in, or NULL: what the traceback around it names. */
static const char *traceback_read(struct traceback *tb, const char *line)
{
	const char *marker = strstr(line, traceback_marker);
	if (marker) {
		traceback_start(tb, line, (size_t)(marker - line));
		return NULL;
	}
	if (!tb->in_frames && is_frame(line)) {
		/* A paste that starts inside a traceback, below its "Traceback" line: its frames
		 * name the exception's surroundings all the same. Python indents a frame by two
		 * spaces after the prefix that every line of the traceback carries. */
		size_t len = (size_t)(strstr(line, "File \"") - line);
		if (len >= 2 && line[len - 1] == ' ' && line[len - 2] == ' ')
			len -= 2;
		traceback_start(tb, line, len);
	}
	if (tb->in_frames) {
		if (read_frame(tb, line))
			return NULL;
		const char *own = line;
		if (strncmp(own, tb->prefix, tb->prefix_len) == 0)
			own += tb->prefix_len;
		if (*own == ' ' || *own == '\t')
			return NULL; /* the frame's source line, or a caret under it */
		tb->in_frames = false;
		tb->applies = tb->len > 0 ? TRACEBACK_MESSAGE_LINES : 0;
	}
	if (!tb->applies)
		return NULL;
	tb->applies--;
	return tb->frames;
}

/* What a line's best rule is, in the order a log's answers are given. */
enum answer_kind {
	ANSWER_FAILURE, /* a failure and its cause */
	ANSWER_NOTICE,	/* something the log notes on the way (a performance note, a warning) */
	ANSWER_TRIAGE,	/* a line that names no cause, and how to find one */
};

static enum answer_kind answer_kind(const struct p2pg_rule *rule)
{
	if (p2pg_rule_is_triage(rule))
		return ANSWER_TRIAGE;
	return p2pg_rule_is_notice(rule) ? ANSWER_NOTICE : ANSWER_FAILURE;
}

int p2pg_explain_log_read(const struct p2pg_ruleset *rs, const char *text,
			  struct p2pg_explain_log *ret)
{
	struct traceback tb = {0};
	struct p2pg_explain_log log = {0};
	struct seen set = {0};
	size_t used = 0, number = 0;
	int r = -ENOMEM;

	log.buf = strdup(text);
	log.lines = calloc(P2PG_EXPLAIN_LOG_LINES, sizeof(*log.lines));
	if (!log.buf || !log.lines || seen_grow(&set) < 0)
		goto out;

	char *p = log.buf;
	for (char *line; (line = p2pg_explain_log_next_line(&p));) {
		number++;
		if (p2pg_explain_line_is_blank(line)) {
			tb.applies = 0;
			continue;
		}
		log.n_lines++;
		const char *surroundings = traceback_read(&tb, line);

		uint64_t hash = shape_hash(line);
		struct seen_slot *slot = seen_find(&set, line, hash);
		if (slot->line) {
			if (slot->listed >= 0)
				log.lines[slot->listed].repeats++;
			continue;
		}
		slot->line = line;
		slot->listed = -1;
		if (++used * 2 > set.cap && seen_grow(&set) < 0)
			goto out;
		/* slot may have moved: look it up again only when it is needed below */

		const struct p2pg_rule *found[P2PG_EXPLAIN_LINE_RULES];
		size_t n = p2pg_ruleset_explain_within(rs, line, surroundings, found,
						       P2PG_EXPLAIN_LINE_RULES);
		if (n == 0)
			continue;
		if (log.n_listed == P2PG_EXPLAIN_LOG_LINES) {
			log.n_unlisted++;
			continue;
		}
		struct p2pg_explain_line *entry = &log.lines[log.n_listed];
		entry->text = line;
		entry->number = number;
		entry->n_rules = n < P2PG_EXPLAIN_LINE_RULES ? n : P2PG_EXPLAIN_LINE_RULES;
		memcpy(entry->rules, found, entry->n_rules * sizeof(found[0]));
		seen_find(&set, line, hash)->listed = (long)log.n_listed++;
	}
	size_t n_answers = 0;
	for (enum answer_kind kind = ANSWER_FAILURE; kind <= ANSWER_TRIAGE; kind++)
		for (size_t k = 0; k < log.n_listed; k++)
			if (answer_kind(log.lines[k].rules[0]) == kind)
				log.answers[n_answers++] = k;
	log.cause = log.n_listed && answer_kind(log.lines[log.answers[0]].rules[0]) != ANSWER_TRIAGE
			? (long)log.answers[0]
			: -1;
	*ret = log;
	log = (struct p2pg_explain_log){0};
	r = 0;
out:
	free(set.slots);
	p2pg_explain_log_done(&log);
	return r;
}

void p2pg_explain_log_done(struct p2pg_explain_log *log)
{
	free(log->buf);
	free(log->lines);
	*log = (struct p2pg_explain_log){0};
}
