/* SPDX-License-Identifier: MIT */
#include "report_format.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

void rbuf_printf(struct rbuf *b, const char *fmt, ...)
{
	va_list ap;
	for (;;) {
		size_t room = b->cap - b->len;
		va_start(ap, fmt);
		int n = vsnprintf(b->text ? b->text + b->len : NULL, b->text ? room : 0, fmt, ap);
		va_end(ap);
		if (n < 0)
			return;
		if (b->text && (size_t)n < room) {
			b->len += (size_t)n;
			return;
		}
		size_t cap = b->cap ? b->cap : 64;
		while (cap < b->len + (size_t)n + 1)
			cap *= 2;
		char *bigger = realloc(b->text, cap);
		if (!bigger)
			return; /* out of memory: the text stays what it was */
		b->text = bigger;
		b->cap = cap;
		if (b->len == 0)
			b->text[0] = '\0';
	}
}

void rbuf_free(struct rbuf *b)
{
	free(b->text);
	*b = (struct rbuf){0};
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

void fmt_ranges(struct rbuf *b, int *values, size_t n)
{
	sort_n(values, n, sizeof(*values), cmp_int);
	bool first = true;
	for (size_t k = 0; k < n;) {
		size_t end = k;
		while (end + 1 < n &&
		       (values[end + 1] == values[end] || values[end + 1] == values[end] + 1))
			end++;
		rbuf_printf(b, "%s%d", first ? "" : ",", values[k]);
		if (values[end] != values[k])
			rbuf_printf(b, "%s%d", values[end] == values[k] + 1 ? "," : "-",
				    values[end]);
		first = false;
		k = end + 1;
	}
}

static int cmp_pair(const void *a, const void *b)
{
	const struct dev_pair *x = a, *y = b;
	if (x->src != y->src)
		return (x->src > y->src) - (x->src < y->src);
	return (x->dst > y->dst) - (x->dst < y->dst);
}

static const char *or_empty(const char *s)
{
	return s ? s : "";
}

/*
 * Device ordinals as ranges, a negative one (an end the guard could not know, such as the owner
 * of the memory a failed IPC open named) as "?": "-1" would read as a device, and "-1-1" as a
 * range. values is sorted in place.
 */
static void fmt_devices(struct rbuf *b, int *values, size_t n)
{
	sort_n(values, n, sizeof(*values), cmp_int);
	size_t unknown = 0;
	while (unknown < n && values[unknown] < 0)
		unknown++;
	if (unknown)
		rbuf_printf(b, "?%s", unknown < n ? "," : "");
	fmt_ranges(b, values + unknown, n - unknown);
}

void fmt_pairs(struct rbuf *b, struct dev_pair *pairs, size_t n)
{
	sort_n(pairs, n, sizeof(*pairs), cmp_pair);
	/* Every ordered pair of a set of known devices: said as such. */
	int *devs = malloc((2 * n + 1) * sizeof(int));
	size_t nd = 0, distinct_pairs = 0;
	bool unknown_end = false;
	for (size_t k = 0; devs && k < n; k++) {
		devs[nd++] = pairs[k].src;
		devs[nd++] = pairs[k].dst;
		distinct_pairs += (k == 0 || cmp_pair(&pairs[k], &pairs[k - 1]) != 0) &&
				  pairs[k].src != pairs[k].dst;
		unknown_end = unknown_end || pairs[k].src < 0 || pairs[k].dst < 0;
	}
	if (devs) {
		sort_n(devs, nd, sizeof(int), cmp_int);
		size_t u = 0;
		for (size_t k = 0; k < nd; k++)
			if (k == 0 || devs[k] != devs[k - 1])
				devs[u++] = devs[k];
		if (u > 2 && distinct_pairs == u * (u - 1) && !unknown_end) {
			rbuf_printf(b, "every pair of ");
			fmt_ranges(b, devs, u);
			free(devs);
			return;
		}
		free(devs);
	}
	/* Each source's destinations as a range text; sources with equal texts are merged. */
	struct src_set {
		int src;
		char *dsts;
		bool done;
	} *sets = calloc(n ? n : 1, sizeof(*sets));
	int *tmp = malloc((n ? n : 1) * sizeof(int));
	size_t nsets = 0;
	if (!sets || !tmp)
		goto out;
	for (size_t k = 0; k < n;) {
		size_t m = 0, j = k;
		for (; j < n && pairs[j].src == pairs[k].src; j++)
			tmp[m++] = pairs[j].dst;
		struct rbuf d = {0};
		fmt_devices(&d, tmp, m);
		sets[nsets++] = (struct src_set){pairs[k].src, d.text, false};
		k = j;
	}
	bool first = true;
	for (size_t k = 0; k < nsets; k++) {
		if (sets[k].done)
			continue;
		size_t m = 0;
		for (size_t j = k; j < nsets; j++)
			if (!sets[j].done &&
			    strcmp(or_empty(sets[j].dsts), or_empty(sets[k].dsts)) == 0) {
				tmp[m++] = sets[j].src;
				sets[j].done = true;
			}
		struct rbuf s = {0};
		fmt_devices(&s, tmp, m);
		rbuf_printf(b, "%s%s->%s", first ? "" : "; ", rbuf_str(&s), or_empty(sets[k].dsts));
		rbuf_free(&s);
		first = false;
	}
out:
	for (size_t k = 0; k < nsets; k++)
		free(sets[k].dsts);
	free(sets);
	free(tmp);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* name = prefix + digits (the number at the very end); *ret_digits = how many. */
static size_t number_suffix(const char *name, size_t *ret_digits)
{
	size_t len = strlen(name), d = 0;
	while (d < len && d < 9 && isdigit((unsigned char)name[len - 1 - d]))
		d++;
	*ret_digits = d;
	return len - d;
}

void fmt_hosts(struct rbuf *b, char **names, size_t n, size_t max_shown)
{
	sort_n(names, n, sizeof(*names), cmp_str);
	size_t groups = 0;
	for (size_t k = 0; k < n;) {
		size_t digits, plen = number_suffix(names[k], &digits);
		size_t j = k + 1;
		/* Names of the same prefix and width go together: node-[01-04]. */
		if (digits > 0)
			while (j < n) {
				size_t dj, pj = number_suffix(names[j], &dj);
				if (pj != plen || dj != digits ||
				    strncmp(names[j], names[k], plen) != 0)
					break;
				j++;
			}
		if (groups == max_shown) {
			size_t left = 0;
			for (size_t r = k; r < n; r++)
				left += r == 0 || strcmp(names[r], names[r - 1]) != 0;
			rbuf_printf(b, " and %zu more", left);
			return;
		}
		if (groups)
			rbuf_printf(b, ",");
		if (j - k == 1 || digits == 0) {
			rbuf_printf(b, "%s", names[k]);
			j = k + 1;
			while (j < n && strcmp(names[j], names[k]) == 0)
				j++;
		} else {
			rbuf_printf(b, "%.*s[", (int)plen, names[k]);
			bool first = true;
			for (size_t r = k; r < j;) {
				long lo = strtol(names[r] + plen, NULL, 10), hi = lo;
				size_t e = r + 1;
				while (e < j && strtol(names[e] + plen, NULL, 10) <= hi + 1) {
					hi = strtol(names[e] + plen, NULL, 10);
					e++;
				}
				rbuf_printf(b, "%s%0*ld", first ? "" : ",", (int)digits, lo);
				if (hi != lo)
					rbuf_printf(b, "-%0*ld", (int)digits, hi);
				first = false;
				r = e;
			}
			rbuf_printf(b, "]");
		}
		groups++;
		k = j;
	}
}

void fmt_wrap(FILE *out, const char *text, int at, int indent, int width)
{
	int col = at;
	const char *p = text ? text : "";
	bool line_empty = true;
	while (*p) {
		if (*p == '\n') {
			fprintf(out, "\n%*s", indent, "");
			col = indent;
			line_empty = true;
			p++;
			continue;
		}
		if (*p == ' ') {
			p++;
			continue;
		}
		size_t w = strcspn(p, " \n");
		if (!line_empty && col + 1 + (int)w > width) {
			fprintf(out, "\n%*s", indent, "");
			col = indent;
			line_empty = true;
		}
		if (!line_empty) {
			fputc(' ', out);
			col++;
		}
		fwrite(p, 1, w, out);
		col += (int)w;
		line_empty = false;
		p += w;
	}
	fputc('\n', out);
}

void fmt_bytes(char *buf, size_t len, double bytes)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
	int u = 0;
	while (bytes >= 1024 && u < 5) {
		bytes /= 1024;
		u++;
	}
	snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", bytes, units[u]);
}

void fmt_count(char *buf, size_t len, long long n)
{
	char digits[32];
	int d = snprintf(digits, sizeof(digits), "%lld", n < 0 ? -n : n);
	size_t o = 0;
	if (n < 0 && o + 1 < len)
		buf[o++] = '-';
	for (int k = 0; k < d && o + 1 < len; k++) {
		if (k && (d - k) % 3 == 0 && o + 2 < len)
			buf[o++] = ',';
		buf[o++] = digits[k];
	}
	buf[o] = '\0';
}

void fmt_utc(char *buf, size_t len, int64_t ns)
{
	time_t s = (time_t)(ns / 1000000000);
	struct tm tm;
	if (!gmtime_r(&s, &tm) || strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm) == 0)
		snprintf(buf, len, "?");
}

int fmt_width(FILE *out)
{
	struct winsize ws;
	if (isatty(fileno(out)) && ioctl(fileno(out), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
		return ws.ws_col < 60 ? 60 : ws.ws_col;
	return 100;
}

static uint64_t mix(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdULL;
	k ^= k >> 33;
	return k;
}

int32_t imap_get(const struct imap *m, uint64_t key)
{
	if (!m->cap)
		return -1;
	for (size_t i = mix(key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
		if (m->keys[i] == key)
			return m->vals[i];
		if (m->keys[i] == 0)
			return -1;
	}
}

int imap_put(struct imap *m, uint64_t key, int32_t val)
{
	if ((m->n + 1) * 2 > m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 64;
		struct imap bigger = {calloc(cap, sizeof(uint64_t)), calloc(cap, sizeof(int32_t)),
				      cap, 0};
		if (!bigger.keys || !bigger.vals) {
			free(bigger.keys);
			free(bigger.vals);
			return -ENOMEM;
		}
		for (size_t i = 0; i < m->cap; i++)
			if (m->keys[i])
				imap_put(&bigger, m->keys[i], m->vals[i]);
		free(m->keys);
		free(m->vals);
		*m = bigger;
	}
	size_t i = mix(key) & (m->cap - 1);
	while (m->keys[i] && m->keys[i] != key)
		i = (i + 1) & (m->cap - 1);
	m->n += m->keys[i] == 0;
	m->keys[i] = key;
	m->vals[i] = val;
	return 0;
}

void imap_free(struct imap *m)
{
	free(m->keys);
	free(m->vals);
}

int array_grow(void *array, size_t *cap, size_t n, size_t size)
{
	if (n < *cap)
		return 0;
	size_t c = *cap ? *cap * 2 : 16;
	void *bigger = realloc(*(void **)array, c * size);
	if (!bigger)
		return -ENOMEM;
	*(void **)array = bigger;
	*cap = c;
	return 0;
}

void fmt_numbered(FILE *out, long long number, const char *text, int width)
{
	char num[32];
	int at = snprintf(num, sizeof(num), "  %lld. ", number);
	fputs(num, out);
	fmt_wrap(out, text, at, 5, width);
}
