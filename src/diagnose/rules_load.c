/* SPDX-License-Identifier: MIT */
/*
 * The knowledge base's loader: rule text, rule files and folders (in name order, following links,
 * each folder once and a bounded number of them), and the rules compiled into the binary. Each
 * entry goes through rules_validate.c.
 */
#include "p2pguard/rules.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "rules-builtin.h"
#include "rules-private.h"

/* Rule files are small; anything larger is a mistake (a log pasted into the folder). */
#define RULE_FILE_MAX (1024 * 1024)
/* load_dir follows symbolic links: a folder is read once (a link back to one already read, such as
 * "x -> .", is a loop), at most DIR_DEPTH_MAX deep and at most DIR_COUNT_MAX in all, so that no
 * folder, however linked, costs more than a look at each of its entries. */
#define DIR_DEPTH_MAX 16
#define DIR_COUNT_MAX 1024

struct walk {
	struct p2pg_ruleset *rs;
	const char *root;
	p2pg_rules_report_fn report;
	void *userdata;
	size_t folders;
	struct {
		dev_t dev;
		ino_t ino;
	} seen[DIR_COUNT_MAX];
	bool said_too_many;
};

/* Notes a folder about to be read; false (said) when it was read already or too many were. */
static bool first_visit(struct walk *w, const char *file, const struct stat *st, int *problems)
{
	for (size_t k = 0; k < w->folders; k++) {
		if (w->seen[k].dev == st->st_dev && w->seen[k].ino == st->st_ino) {
			rules_report(w->report, w->userdata, file, 0,
				     "a folder already read (a link loop, or a second link to it): "
				     "not read again");
			(*problems)++;
			return false;
		}
	}
	if (w->folders == DIR_COUNT_MAX) {
		if (!w->said_too_many) {
			rules_report(w->report, w->userdata, file, 0,
				     "more than %d folders: the rest is not read", DIR_COUNT_MAX);
			(*problems)++;
		}
		w->said_too_many = true;
		return false;
	}
	w->seen[w->folders].dev = st->st_dev;
	w->seen[w->folders].ino = st->st_ino;
	w->folders++;
	return true;
}

int p2pg_ruleset_add_text(struct p2pg_ruleset *rs, const char *file, const char *text, size_t len,
			  p2pg_rules_report_fn report, void *userdata)
{
	if (!rs || !file || !text)
		return -EINVAL;
	return rules_add_text(rs, file, NULL, text, len, report, userdata, NULL);
}

static int read_file(const char *path, char **ret, size_t *ret_len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct stat st;
	if (fstat(fd, &st) < 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	if (st.st_size > RULE_FILE_MAX) {
		close(fd);
		return -EFBIG;
	}
	size_t cap = (size_t)st.st_size + 1, len = 0;
	char *buf = malloc(cap);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	for (;;) {
		ssize_t n = read(fd, buf + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = -errno;
			free(buf);
			close(fd);
			return e;
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (len + 1 == cap) {
			/* The file grew since fstat. */
			if (cap > RULE_FILE_MAX) {
				free(buf);
				close(fd);
				return -EFBIG;
			}
			char *bigger = realloc(buf, cap * 2);
			if (!bigger) {
				free(buf);
				close(fd);
				return -ENOMEM;
			}
			buf = bigger;
			cap *= 2;
		}
	}
	close(fd);
	buf[len] = '\0';
	*ret = buf;
	*ret_len = len;
	return 0;
}

static int compare_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Loads root/rel (a folder) recursively, in name order so problems come out the same each time.
 * Returns the problem count or a negative errno when the top folder cannot be read. */
static int load_tree(struct walk *w, const char *rel, int depth)
{
	struct p2pg_ruleset *rs = w->rs;
	const char *root = w->root;
	p2pg_rules_report_fn report = w->report;
	void *userdata = w->userdata;
	char path[PATH_MAX];
	int problems = 0;
	DIR *d;
	char **names = NULL;
	size_t n_names = 0, cap = 0;

	snprintf(path, sizeof(path), "%s%s%s", root, *rel ? "/" : "", rel);
	d = opendir(path);
	if (!d)
		return -errno;
	struct stat self;
	if (depth == 0 && fstat(dirfd(d), &self) == 0)
		first_visit(w, path, &self, &problems);
	for (struct dirent *de; (de = readdir(d));) {
		if (de->d_name[0] == '.')
			continue;
		if (n_names == cap) {
			cap = cap ? cap * 2 : 16;
			char **more = realloc(names, cap * sizeof(*names));
			if (!more)
				goto nomem;
			names = more;
		}
		names[n_names] = strdup(de->d_name);
		if (!names[n_names])
			goto nomem;
		n_names++;
	}
	closedir(d);
	d = NULL;
	if (n_names)
		qsort(names, n_names, sizeof(*names), compare_names);

	for (size_t k = 0; k < n_names; k++) {
		char sub[PATH_MAX], file[PATH_MAX];
		struct stat st;

		if (snprintf(sub, sizeof(sub), "%s%s%s", rel, *rel ? "/" : "", names[k]) >=
			(int)sizeof(sub) ||
		    snprintf(file, sizeof(file), "%s/%s", root, sub) >= (int)sizeof(file))
			continue; /* no such path can be opened anyway */
		if (stat(file, &st) < 0)
			continue; /* a dangling link is not a rule file */
		if (S_ISDIR(st.st_mode)) {
			if (depth >= DIR_DEPTH_MAX) {
				rules_report(report, userdata, file, 0,
					     "folders nested deeper than %d levels", DIR_DEPTH_MAX);
				problems++;
				continue;
			}
			if (!first_visit(w, file, &st, &problems))
				continue;
			int r = load_tree(w, sub, depth + 1);
			if (r < 0) {
				rules_report(report, userdata, file, 0, "cannot read folder: %s",
					     strerror(-r));
				problems++;
			} else {
				problems += r;
			}
			continue;
		}
		if (!S_ISREG(st.st_mode) || !has_suffix(names[k], ".json"))
			continue;

		char *text = NULL;
		size_t len = 0;
		int r = read_file(file, &text, &len);
		if (r < 0) {
			rules_report(report, userdata, file, 0, "cannot read file: %s",
				     r == -EFBIG ? "larger than 1 MiB" : strerror(-r));
			problems++;
			continue;
		}
		sub[strlen(sub) - strlen(".json")] = '\0';
		r = rules_add_text(rs, file, sub, text, len, report, userdata, &problems);
		free(text);
		if (r == -ENOMEM) {
			rules_strings_free(names, n_names);
			return r;
		}
	}
	rules_strings_free(names, n_names);
	return problems;

nomem:
	if (d)
		closedir(d);
	rules_strings_free(names, n_names);
	return -ENOMEM;
}

int p2pg_ruleset_load_dir(struct p2pg_ruleset *rs, const char *dir, p2pg_rules_report_fn report,
			  void *userdata)
{
	char root[PATH_MAX];
	size_t n;

	if (!rs || !dir || !*dir)
		return -EINVAL;
	/* "rules/" and "rules" name the same folder; keep "rules//cuda/x.json" out of messages. */
	n = (size_t)snprintf(root, sizeof(root), "%s", dir);
	if (n >= sizeof(root))
		return -ENAMETOOLONG;
	while (n > 1 && root[n - 1] == '/')
		root[--n] = '\0';
	struct walk *w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->rs = rs;
	w->root = root;
	w->report = report;
	w->userdata = userdata;
	int r = load_tree(w, "", 0);
	free(w);
	return r;
}

int rules_load_builtin_one(struct p2pg_ruleset *rs, size_t k, p2pg_rules_report_fn report,
			   void *userdata, int *problems)
{
	const struct p2pg_builtin_rule *b = &p2pg_builtin_rules[k];
	char file[PATH_MAX], id_path[PATH_MAX];

	snprintf(file, sizeof(file), "rules/%s", b->path);
	snprintf(id_path, sizeof(id_path), "%s", b->path);
	if (has_suffix(id_path, ".json"))
		id_path[strlen(id_path) - strlen(".json")] = '\0';
	return b->checked
		   ? rules_add_builtin_text(rs, file, id_path, b->text, b->len, b->values, report,
					    userdata, problems)
		   : rules_add_text(rs, file, id_path, b->text, b->len, report, userdata, problems);
}

int p2pg_ruleset_load_builtin(struct p2pg_ruleset *rs, p2pg_rules_report_fn report, void *userdata)
{
	int problems = 0;

	if (!rs)
		return -EINVAL;
	for (size_t k = 0; k < p2pg_builtin_rule_count; k++)
		if (rules_load_builtin_one(rs, k, report, userdata, &problems) == -ENOMEM)
			return -ENOMEM;
	return problems;
}
