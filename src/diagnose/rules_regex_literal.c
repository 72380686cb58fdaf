/* SPDX-License-Identifier: MIT */
/*
 * The words a rule's regex cannot match without. explain looks for one of them in the line, a
 * substring search ignoring case as the regex does, before it compiles or runs the regex; most
 * rules are done with a line there, and a one-line command compiles only the regexes of the rules
 * whose words the line has.
 *
 * Sound, not complete: a character counts only where the extended grammar makes it certain that
 * every match holds it next to its neighbours. So a run of plain characters ends at anything else
 * (a group, a bracket expression, '.', an anchor, a class escape such as \w or \b, a byte outside
 * ASCII); a character a '?', '*' or interval applies to is left out, one that '+' applies to
 * ends the run it closes; a group counts only when it is the whole branch. Each top-level
 * alternative needs a word of its own, or the regex gets none and is always run.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rules-loader.h"

/* Shorter words rule out too few lines to be worth the search. */
#define LITERAL_MIN 3
#define LITERAL_MAX 128
/* A whole branch in a group ("(a|b)"), and that group's branches, at most this deep. */
#define NESTING_MAX 8

/* p is on '('; the character after its ')', or NULL when it has none before end. */
static const char *skip_group(const char *p, const char *end)
{
	int depth = 0;
	while (p < end && *p) {
		if (*p == '\\' && p + 1 < end) {
			p += 2;
			continue;
		}
		if (*p == '[') {
			p = rules_regex_skip_bracket(p);
			continue;
		}
		if (*p == '(')
			depth++;
		else if (*p == ')' && --depth == 0)
			return p + 1;
		p++;
	}
	return NULL;
}

/* The end of the branch that starts at p: the first '|' outside groups and brackets, or end. */
static const char *branch_end(const char *p, const char *end)
{
	while (p < end && *p && *p != '|') {
		if (*p == '\\' && p + 1 < end) {
			p += 2;
		} else if (*p == '[') {
			p = rules_regex_skip_bracket(p);
		} else if (*p == '(') {
			const char *after = skip_group(p, end);
			p = after ? after : end;
		} else {
			p++;
		}
	}
	return p < end ? p : end;
}

struct word {
	char best[LITERAL_MAX];
	size_t best_len;
	char run[LITERAL_MAX];
	size_t run_len;
};

static void end_run(struct word *w)
{
	if (w->run_len > w->best_len) {
		memcpy(w->best, w->run, w->run_len);
		w->best_len = w->run_len;
	}
	w->run_len = 0;
}

static void add_char(struct word *w, char c)
{
	if (w->run_len == LITERAL_MAX - 1)
		end_run(w);
	w->run[w->run_len++] = c;
}

/* The longest run of characters every match of the branch [p, end) holds, into w->best. */
static void longest_run(const char *p, const char *end, struct word *w)
{
	while (p < end) {
		const char *next = p + 1;
		bool literal = false;
		char c = *p;

		if (c == '\\') {
			if (p + 1 >= end)
				break;
			c = p[1];
			next = p + 2;
			literal = !isalnum((unsigned char)c) && (unsigned char)c < 0x80;
		} else if (c == '[') {
			next = rules_regex_skip_bracket(p);
		} else if (c == '(') {
			next = skip_group(p, end);
			if (!next)
				break;
		} else if (!strchr(".^$)|*+?{", c) && (unsigned char)c >= 0x20 &&
			   (unsigned char)c < 0x80) {
			literal = true;
		}
		/* What repeats the atom: '+' alone keeps it once; '?', '*' or an interval anywhere
		 * in the chain may leave it out. */
		bool optional = false, repeated = false;
		while (next < end && strchr("?*+{", *next)) {
			if (*next == '{') {
				const char *close = memchr(next, '}', (size_t)(end - next));
				if (!close) {
					end_run(w);
					return;
				}
				next = close + 1;
				optional = true;
			} else {
				optional |= *next != '+';
				repeated = true;
				next++;
			}
		}
		if (literal && !optional)
			add_char(w, c);
		if (!literal || optional || repeated)
			end_run(w);
		p = next;
	}
	end_run(w);
}

static int add_literal(char ***list, size_t *n, const char *s, size_t len)
{
	char **grown = realloc(*list, (*n + 1) * sizeof(**list));
	if (!grown)
		return -ENOMEM;
	*list = grown;
	if (!(grown[*n] = strndup(s, len)))
		return -ENOMEM;
	(*n)++;
	return 0;
}

/* A word for each branch of [p, end) into *list; 1 when a branch has none. */
static int branch_words(const char *p, const char *end, int depth, char ***list, size_t *n)
{
	while (p <= end) {
		const char *stop = branch_end(p, end);
		/* A branch that is one group and nothing after: its own branches. */
		if (stop - p >= 2 && *p == '(' && skip_group(p, stop) == stop &&
		    depth < NESTING_MAX) {
			int r = branch_words(p + 1, stop - 1, depth + 1, list, n);
			if (r != 0)
				return r;
		} else {
			struct word w = {.best_len = 0};
			longest_run(p, stop, &w);
			if (w.best_len < LITERAL_MIN)
				return 1;
			int r = add_literal(list, n, w.best, w.best_len);
			if (r < 0)
				return r;
		}
		if (stop == end)
			break;
		p = stop + 1; /* past the '|' */
	}
	return 0;
}

int rules_regex_literals(const char *regex, char ***ret, size_t *ret_n)
{
	char **list = NULL;
	size_t n = 0;
	int r = branch_words(regex, regex + strlen(regex), 0, &list, &n);
	if (r != 0) {
		for (size_t k = 0; k < n; k++)
			free(list[k]);
		free(list);
		*ret = NULL;
		*ret_n = 0;
		return r < 0 ? r : 0;
	}
	*ret = list;
	*ret_n = n;
	return 0;
}
