/* SPDX-License-Identifier: MIT */
/*
 * Rules are written for a program's own words; a paste brings what carried it too. A terminal's
 * colour codes, or what is left of them when a web page dropped the escape byte ("[1;36m"); a
 * web page's entities ("&#39;"), non-breaking spaces and typographic quotes; a Markdown
 * editor's or a quoted string's backslashes; Windows' ends of line; the JSON records a container
 * runtime writes around each line; the hard wrap of a terminal that cut every line at its width.
 * Each would hide the words a rule looks for, so they are taken off before any line is read. Every
 * change shortens the text, so it is done in place.
 */
#include "explain_paste.h"

#include <jansson.h>
#include <regex.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "explain_log.h"

/* Keys under which log collectors keep the program's line (Docker's json-file, Fluent Bit,
 * Cloud Logging, journald's export, most Python JSON formatters). */
static const char *const record_keys[] = {"log", "message", "msg", "MESSAGE", "textPayload"};

/* A line that is a JSON object holding the program's line: that line, its own ends of line
 * turned to spaces so that the paste keeps its line numbers. */
static size_t unwrap_json_record(char *s, size_t len)
{
	size_t lead = strspn(s, " \t");
	size_t end = len;
	while (end > lead && (s[end - 1] == ' ' || s[end - 1] == '\t'))
		end--;
	if (end - lead < 2 || s[lead] != '{' || s[end - 1] != '}')
		return len;
	json_t *record = json_loadb(s + lead, end - lead, 0, NULL);
	if (!json_is_object(record)) {
		json_decref(record);
		return len;
	}
	for (size_t k = 0; k < sizeof(record_keys) / sizeof(record_keys[0]); k++) {
		json_t *value = json_object_get(record, record_keys[k]);
		if (!json_is_string(value))
			continue;
		/* A JSON string is never shorter than the text it encodes. */
		size_t n = json_string_length(value);
		memcpy(s, json_string_value(value), n);
		for (size_t j = 0; j < n; j++)
			if (s[j] == '\n' || s[j] == '\r' || s[j] == '\0')
				s[j] = ' ';
		while (n && s[n - 1] == ' ')
			n--;
		len = n;
		break;
	}
	json_decref(record);
	return len;
}

static const struct {
	const char *name; /* after '&', with its ';' */
	char c;
} entities[] = {
    {"quot;", '"'}, {"apos;", '\''}, {"amp;", '&'}, {"lt;", '<'}, {"gt;", '>'}, {"nbsp;", ' '},
};

/* The length of the entity at s ("&...;") and its character in *c; 0 when s is not one. Numeric
 * entities are read for printable ASCII only: the rest of Unicode is left as written. */
static size_t entity_length(const char *s, size_t n, char *c)
{
	for (size_t k = 0; k < sizeof(entities) / sizeof(entities[0]); k++) {
		size_t len = strlen(entities[k].name);
		if (len < n && strncmp(s + 1, entities[k].name, len) == 0) {
			*c = entities[k].c;
			return len + 1;
		}
	}
	if (n < 4 || s[1] != '#')
		return 0;
	bool hex = s[2] == 'x' || s[2] == 'X';
	size_t k = hex ? 3 : 2, digits = k;
	unsigned long value = 0;
	for (; k < n && k < digits + 6; k++) {
		char d = s[k];
		if (d >= '0' && d <= '9')
			value = value * (hex ? 16 : 10) + (unsigned long)(d - '0');
		else if (hex && ((d >= 'a' && d <= 'f') || (d >= 'A' && d <= 'F')))
			value = value * 16 + (unsigned long)((d | 0x20) - 'a' + 10);
		else
			break;
	}
	if (k == digits || k >= n || s[k] != ';' || value < 0x20 || value > 0x7e)
		return 0;
	*c = (char)value;
	return k + 1;
}

/* The length of the terminal control sequence at s, 0 when there is none. The escape byte may
 * be written "^[" (cat -v, less) or lost altogether, which leaves "[0;31m". */
static size_t terminal_code_length(const char *s, size_t n)
{
	size_t esc = s[0] == '\033'					    ? 1
		     : (n > 2 && s[0] == '^' && s[1] == '[' && s[2] == '[') ? 2
									    : 0;
	size_t k;

	if (esc) {
		if (esc == n)
			return n;
		if (s[esc] == '[') { /* CSI: parameters, intermediates, one final byte */
			for (k = esc + 1; k < n && s[k] >= 0x20 && s[k] <= 0x3f; k++)
				;
			return k < n && s[k] >= 0x40 && s[k] <= 0x7e ? k + 1 : k;
		}
		if (s[esc] == ']') { /* OSC (a title, a link): to BEL or ESC '\' */
			for (k = esc + 1; k < n && s[k] != '\a' && s[k] != '\033'; k++)
				;
			if (k < n && s[k] == '\033' && k + 1 < n && s[k + 1] == '\\')
				k++;
			return k < n ? k + 1 : n;
		}
		for (k = esc; k < n && s[k] >= 0x20 && s[k] <= 0x2f; k++)
			;
		return k < n ? k + 1 : n;
	}
	/* A colour code without its escape: "[" digits and ';' "m", and not "[30m]" (a time). */
	if (s[0] != '[')
		return 0;
	for (k = 1; k < n && k < 16 && ((s[k] >= '0' && s[k] <= '9') || s[k] == ';'); k++)
		;
	if (k == 1 || k >= n || s[k] != 'm' || (k + 1 < n && s[k + 1] == ']'))
		return 0;
	return k + 1;
}

/* UTF-8 that web pages and chat clients put where the program wrote ASCII. */
static const struct {
	const char *utf8;
	const char *ascii;
} typography[] = {
    {"\xc2\xa0", " "},	   /* no-break space */
    {"\xe2\x80\xaf", " "}, /* narrow no-break space */
    {"\xe2\x80\x89", " "}, /* thin space */
    {"\xe2\x80\x8b", ""},  /* zero width space */
    {"\xe2\x80\x8c", ""},  /* zero width non-joiner */
    {"\xe2\x80\x8d", ""},  /* zero width joiner */
    {"\xe2\x81\xa0", ""},  /* word joiner */
    {"\xef\xbb\xbf", ""},  /* byte order mark */
    {"\xe2\x80\x98", "'"},  {"\xe2\x80\x99", "'"}, {"\xe2\x80\x9c", "\""},
    {"\xe2\x80\x9d", "\""}, {"\xe2\x80\x90", "-"}, /* hyphen */
    {"\xe2\x80\x91", "-"},			   /* non-breaking hyphen */
    {"\xe2\x88\x92", "-"},			   /* minus sign */
};

static size_t typography_length(const char *s, size_t n, const char **ascii)
{
	if (!((unsigned char)s[0] & 0x80))
		return 0;
	for (size_t k = 0; k < sizeof(typography) / sizeof(typography[0]); k++) {
		size_t len = strlen(typography[k].utf8);
		if (len <= n && memcmp(s, typography[k].utf8, len) == 0) {
			*ascii = typography[k].ascii;
			return len;
		}
	}
	return 0;
}

/*
 * A backslash that a carrier added: Markdown editors write "custom\_all\_reduce", a line quoted
 * inside a Python or JSON string has its quotes escaped, and its ends of line and tabs written
 * as "\n" and "\t" ("...failed.\nCuda failure"). Those are read as a space where a new word
 * starts after them; a Windows path's "\nccl" or "..\torch" keeps its backslash.
 */
static char escaped_char(const char *s, size_t n)
{
	if (n < 2)
		return 0;
	switch (s[1]) {
	case '_':
	case '*':
	case '`':
	case '\'':
	case '"':
		return s[1];
	case 'n':
	case 't':
	case 'r':
		if (n > 2 && ((s[2] >= 'A' && s[2] <= 'Z') || (s[2] >= '0' && s[2] <= '9') ||
			      s[2] == '[' || s[2] == '(' || s[2] == ' '))
			return ' ';
		return 0;
	default:
		return 0;
	}
}

/* A line written as Markdown's inline code ("`...`"): the line inside. */
static size_t unquote_inline_code(char *s, size_t len)
{
	size_t lead = strspn(s, " \t"), end = len;
	while (end > lead && (s[end - 1] == ' ' || s[end - 1] == '\t'))
		end--;
	size_t ticks = 0;
	while (lead + ticks < end && s[lead + ticks] == '`')
		ticks++;
	if (!ticks || end - lead <= 2 * ticks)
		return len;
	for (size_t k = 1; k <= ticks; k++)
		if (s[end - k] != '`')
			return len;
	len = end - lead - 2 * ticks;
	memmove(s, s + lead + ticks, len);
	return len;
}

/* One line cleaned in place; its new length. */
static size_t clean_line(char *s, size_t len)
{
	size_t r = 0, w = 0;

	while (len && s[len - 1] == '\r')
		len--;
	len = unwrap_json_record(s, len);
	len = unquote_inline_code(s, len);
	while (r < len) {
		const char *ascii;
		char c;
		size_t n = len - r, skip;

		if ((skip = terminal_code_length(s + r, n))) {
			r += skip;
		} else if (s[r] == '&' && (skip = entity_length(s + r, n, &c))) {
			s[w++] = c;
			r += skip;
		} else if (s[r] == '\\' && (c = escaped_char(s + r, n))) {
			s[w++] = c;
			r += 2;
		} else if ((skip = typography_length(s + r, n, &ascii))) {
			size_t a = strlen(ascii);
			memcpy(s + w, ascii, a);
			w += a;
			r += skip;
		} else {
			s[w++] = s[r] == '\r' ? ' ' : s[r];
			r++;
		}
	}
	return w;
}

/* A terminal narrower than this is rare; a line this long that stops short may have been cut. */
#define PAIR_MIN_WIDTH 50

/* Characters, not bytes: a terminal wraps at a column. */
static size_t columns(const char *s, size_t len)
{
	size_t n = 0;
	for (size_t k = 0; k < len; k++)
		n += ((unsigned char)s[k] & 0xc0) != 0x80;
	return n;
}

/* Widths terminals open at (80, Windows 10's console 120) and common wider ones. */
static bool terminal_width(size_t width)
{
	static const size_t widths[] = {80, 100, 120, 132, 160, 200};
	for (size_t k = 0; k < sizeof(widths) / sizeof(widths[0]); k++)
		if (width == widths[k])
			return true;
	return false;
}

/*
 * A terminal that wraps cuts every long line at its width, so the paste's widest lines are all
 * exactly that wide and each continues on the next line. Only a terminal's usual width is taken
 * for one, or any width when every line but the last has it: a log whose longest lines are
 * merely equal (every rank printing the same warning, one after another) must not be joined. A
 * cut line is joined with what follows it, and each continuation's own line is left blank so that
 * line numbers hold.
 */
static void join_wrapped_lines(char *text)
{
	size_t width = 0, lines = 0, at_width = 0, last = 0;

	for (const char *p = text; *p; p += *p == '\n') {
		size_t len = strcspn(p, "\n");
		last = columns(p, len);
		if (last > width)
			width = last, at_width = 0;
		at_width += last == width;
		lines++;
		p += len;
	}
	/* Two records of that width in a row, alike but for their digits, are a log's own lines. */
	const char *previous = NULL;
	size_t previous_len = 0;
	for (const char *p = text; *p; p += *p == '\n') {
		size_t len = strcspn(p, "\n");
		bool wide = columns(p, len) == width;
		if (wide && previous && p2pg_explain_same_shape(previous, previous_len, p, len))
			return;
		previous = wide ? p : NULL, previous_len = len;
		p += len;
	}
	/* One long line cut into three or more: all but the last exactly as wide. */
	bool one_line_cut = lines >= 3 && width >= 40 && last < width && at_width == lines - 1;
	/* A log line that happens to be as wide as a terminal is not joined with the next: a
	 * terminal's width counts when two lines have it, or when the paste is one line cut in two.
	 */
	bool cut_at_terminal = terminal_width(width) && (at_width >= 2 || lines == 2);
	if (lines < 2 || !(cut_at_terminal || one_line_cut))
		return;

	char *w = text, *p = text;
	while (*p) {
		size_t continuations = 0;
		for (;;) {
			size_t len = strcspn(p, "\n");
			bool cut = columns(p, len) == width;
			memmove(w, p, len);
			w += len;
			p += len;
			if (!*p || !cut || !p[1] || p[1] == '\n')
				break;
			p++; /* the end of a cut line: what follows continues it */
			continuations++;
		}
		while (continuations--)
			*w++ = '\n';
		if (*p)
			*w++ = *p++;
	}
	*w = '\0';
}

/* A text of one line that is not blank is that line: a line piped in ends with its end of
 * line, and a rule may need to see where the line ends. */
static void keep_only_line(char *text)
{
	char *only = NULL;
	size_t only_len = 0;

	for (char *p = text; *p; p += *p == '\n') {
		size_t len = strcspn(p, "\n");
		if (len > strspn(p, " \t\f\v")) {
			if (only)
				return;
			only = p, only_len = len;
		}
		p += len;
	}
	if (!only)
		return;
	memmove(text, only, only_len);
	text[only_len] = '\0';
}

char *p2pg_explain_paste_clean(const char *text)
{
	size_t len = strlen(text);
	char *out = malloc(len + 1), *w = out;

	if (!out)
		return NULL;
	for (const char *p = text; *p;) {
		size_t n = strcspn(p, "\n");
		memcpy(w, p, n);
		w += clean_line(w, n);
		p += n;
		if (*p)
			*w++ = *p++;
	}
	*w = '\0';
	join_wrapped_lines(out);
	keep_only_line(out);
	return out;
}

/*
 * A record of a log begins with its header: a time, a bracketed tag, a glog or NCCL prefix, an
 * exception's name. What continues a cut line begins wherever the terminal cut it.
 */
static bool starts_record(const char *s)
{
	static regex_t header;
	static int compiled; /* 1: compiled, -1: could not be */

	if (!compiled)
		compiled =
		    regcomp(&header,
			    "^([[(<]|[0-9]{2,4}[-/:.][0-9]|[IWEF][0-9]{4} |"
			    "[A-Za-z0-9_.-]+:[0-9]+:[0-9]+ |"
			    "(Traceback|NCCL|ERROR|WARN|WARNING|INFO|DEBUG|FATAL|CRITICAL)[ :]|"
			    "[A-Za-z_][A-Za-z0-9_.]*(Error|Exception|Warning|Fault):|[ \t]{2})",
			    REG_EXTENDED | REG_NOSUB) == 0
			? 1
			: -1;
	return compiled < 0 || regexec(&header, s, 0, NULL, 0) == 0;
}

char *p2pg_explain_paste_join_pair(const char *text)
{
	const char *line[2];
	size_t len[2], n = 0;
	bool blank_between = false;

	for (const char *p = text; *p; p += *p == '\n') {
		size_t l = strcspn(p, "\n");
		if (l > strspn(p, " \t\f\v")) {
			if (n == 2)
				return NULL;
			if (n == 1 && blank_between)
				return NULL;
			line[n] = p, len[n++] = l;
		} else if (n) {
			blank_between = true;
		}
		p += l;
	}
	if (n != 2)
		return NULL;
	size_t width = columns(line[0], len[0]);
	if (width < PAIR_MIN_WIDTH || columns(line[1], len[1]) > width ||
	    p2pg_explain_same_shape(line[0], len[0], line[1], len[1]))
		return NULL;
	/* No header starts_record knows spans an end of line: the line is read in place. */
	if (starts_record(line[1]))
		return NULL;
	char *joined = malloc(len[0] + len[1] + 1);
	if (!joined)
		return NULL;
	memcpy(joined, line[0], len[0]);
	memcpy(joined + len[0], line[1], len[1]);
	joined[len[0] + len[1]] = '\0';
	return joined;
}
