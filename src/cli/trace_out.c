/* SPDX-License-Identifier: MIT */
#include "trace_out.h"

#include <string.h>

#include "dbread.h"

void trace_flush(struct trace_out *o)
{
	if (o->len && fwrite(o->buf, 1, o->len, o->f) != o->len)
		o->written = -1;
	else if (o->written >= 0)
		o->written += (int64_t)o->len;
	o->len = 0;
}

void trace_put(struct trace_out *o, const char *s, size_t n)
{
	if (o->len + n > sizeof(o->buf))
		trace_flush(o);
	if (n > sizeof(o->buf)) {
		if (fwrite(s, 1, n, o->f) != n)
			o->written = -1;
		return;
	}
	memcpy(o->buf + o->len, s, n);
	o->len += n;
}

void trace_put_str(struct trace_out *o, const char *s)
{
	trace_put(o, s, strlen(s));
}

void trace_put_i64(struct trace_out *o, int64_t v)
{
	char tmp[24];
	int n = 0;
	uint64_t u = v < 0 ? (uint64_t)(-(v + 1)) + 1 : (uint64_t)v;
	do
		tmp[n++] = (char)('0' + u % 10);
	while ((u /= 10) && n < 23);
	if (o->len + 24 > sizeof(o->buf))
		trace_flush(o);
	if (v < 0)
		o->buf[o->len++] = '-';
	while (n)
		o->buf[o->len++] = tmp[--n];
}

/* v / 1000 with three decimals ("12.345"): ns as microseconds, as Kineto writes them. */
void trace_put_us(struct trace_out *o, int64_t ns)
{
	if (ns < 0) {
		TRACE_PUTS(o, "-");
		ns = -ns;
	}
	trace_put_i64(o, ns / 1000);
	char frac[4] = {'.', (char)('0' + ns / 100 % 10), (char)('0' + ns / 10 % 10),
			(char)('0' + ns % 10)};
	trace_put(o, frac, 4);
}

void trace_put_json(struct trace_out *o, const char *text)
{
	if (!text) {
		TRACE_PUTS(o, "null");
		return;
	}
	TRACE_PUTS(o, "\"");
	for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
		char esc[8];
		if (*p == '"' || *p == '\\') {
			esc[0] = '\\';
			esc[1] = (char)*p;
			trace_put(o, esc, 2);
		} else if (*p < 0x20) {
			int n = snprintf(esc, sizeof(esc), "\\u%04x", *p);
			trace_put(o, esc, (size_t)n);
		} else if (*p < 0x80) {
			trace_put(o, (const char *)p, 1);
		} else {
			/* As p2pg_cli_json_string: strict parsers read U+FFFD, not a stray byte. */
			size_t n = p2pg_utf8_sequence(p);
			if (n) {
				trace_put(o, (const char *)p, n);
				p += n - 1;
			} else {
				TRACE_PUTS(o, "\\ufffd");
			}
		}
	}
	TRACE_PUTS(o, "\"");
}

void trace_sep(struct trace_out *o)
{
	trace_put(o, o->first ? "\n" : ",\n", o->first ? 1 : 2);
	o->first = false;
}

/* Every column of a row as args, except the ones the event itself carries. */
void trace_put_row_args(struct trace_out *o, sqlite3_stmt *st)
{
	bool first = true;
	TRACE_PUTS(o, "\"args\":{");
	for (int c = 0; c < sqlite3_column_count(st); c++) {
		const char *name = sqlite3_column_name(st, c);
		if (strcmp(name, "process_id") == 0 || sqlite3_column_type(st, c) == SQLITE_NULL)
			continue;
		if (!first)
			TRACE_PUTS(o, ",");
		first = false;
		trace_put_json(o, name);
		TRACE_PUTS(o, ":");
		if (sqlite3_column_type(st, c) == SQLITE_INTEGER) {
			trace_put_i64(o, sqlite3_column_int64(st, c));
		} else if (sqlite3_column_type(st, c) == SQLITE_FLOAT) {
			char num[32];
			trace_put(o, num,
				  (size_t)snprintf(num, sizeof(num), "%.6g",
						   sqlite3_column_double(st, c)));
		} else {
			trace_put_json(o, p2pg_cli_col(st, c));
		}
	}
	TRACE_PUTS(o, "}");
}

void trace_put_text_arg(struct trace_out *o, const char *key, const char *value)
{
	if (!value)
		return;
	TRACE_PUTS(o, ",\"");
	trace_put_str(o, key);
	TRACE_PUTS(o, "\":");
	trace_put_json(o, value);
}

void trace_put_int_arg(struct trace_out *o, const char *key, int64_t value)
{
	TRACE_PUTS(o, ",\"");
	trace_put_str(o, key);
	TRACE_PUTS(o, "\":");
	trace_put_i64(o, value);
}

void trace_put_track_meta(struct trace_out *o, int64_t pid, int64_t tid, const char *name,
			  int64_t sort_index)
{
	trace_sep(o);
	TRACE_PUTS(o, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":");
	trace_put_i64(o, pid);
	TRACE_PUTS(o, ",\"tid\":");
	trace_put_i64(o, tid);
	TRACE_PUTS(o, ",\"args\":{\"name\":");
	trace_put_json(o, name);
	TRACE_PUTS(o, "}}");
	trace_sep(o);
	TRACE_PUTS(o, "{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":");
	trace_put_i64(o, pid);
	TRACE_PUTS(o, ",\"tid\":");
	trace_put_i64(o, tid);
	TRACE_PUTS(o, ",\"args\":{\"sort_index\":");
	trace_put_i64(o, sort_index);
	TRACE_PUTS(o, "}}");
}
