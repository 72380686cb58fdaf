/* SPDX-License-Identifier: MIT */
#include "safe_path.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Links followed on one path at most, as the kernel's MAXSYMLINKS. */
#define HOPS_MAX 40

/* May this process follow the link (lstat'ed as link) found in the folder dir? */
static int link_allowed(const char *at, const struct stat *link, const struct stat *dir, char *why,
			size_t why_len)
{
	uid_t me = geteuid();
	if (link->st_uid == me || link->st_uid == dir->st_uid)
		return 0;
	snprintf(why, why_len,
		 "%s is a symbolic link of uid %u in a folder of uid %u; not followed (another "
		 "user could point it at a file of uid %u)",
		 at, (unsigned)link->st_uid, (unsigned)dir->st_uid, (unsigned)me);
	return -EPERM;
}

/* May this process write the existing file (stat'ed) in the folder dir? */
static int file_allowed(const char *at, const struct stat *file, const struct stat *dir, char *why,
			size_t why_len)
{
	if (!S_ISREG(file->st_mode) || file->st_uid == geteuid() || file->st_uid == dir->st_uid ||
	    !(dir->st_mode & S_IWOTH))
		return 0;
	snprintf(why, why_len,
		 "%s belongs to uid %u in a folder anyone may write to; not written (another user "
		 "could have made it for this process to fill)",
		 at, (unsigned)file->st_uid);
	return -EPERM;
}

/* Appends component c to the folder cur (a resolved absolute path). */
static int join(char *cur, size_t len, const char *c, size_t clen)
{
	size_t n = strlen(cur);
	if (strcmp(cur, "/") == 0)
		n = 0;
	if (n + 1 + clen + 1 > len)
		return -ENAMETOOLONG;
	cur[n] = '/';
	memcpy(cur + n + 1, c, clen);
	cur[n + 1 + clen] = '\0';
	return 0;
}

int p2pg_path_check(const char *path, bool companions, char *why, size_t why_len)
{
	snprintf(why, why_len, "%s", "");
	/* What remains to walk, and the folder reached so far (never through an unchecked link). */
	char todo[PATH_MAX * 2], cur[PATH_MAX] = "/";
	if (path[0] == '/') {
		if (snprintf(todo, sizeof(todo), "%s", path) >= (int)sizeof(todo))
			return -ENAMETOOLONG;
	} else {
		char cwd[PATH_MAX];
		if (!getcwd(cwd, sizeof(cwd)))
			return 0; /* nothing to walk from: the open fails or works as it will */
		if (snprintf(todo, sizeof(todo), "%s/%s", cwd, path) >= (int)sizeof(todo))
			return -ENAMETOOLONG;
	}
	int hops = 0;
	size_t pos = 0;
	struct stat dir, st;
	if (stat("/", &dir) < 0)
		return 0;
	for (;;) {
		while (todo[pos] == '/')
			pos++;
		if (!todo[pos])
			break;
		size_t clen = strcspn(todo + pos, "/");
		const char *c = todo + pos;
		pos += clen;
		bool last = todo[pos + strspn(todo + pos, "/")] == '\0';
		if (clen == 1 && c[0] == '.')
			continue;
		if (clen == 2 && c[0] == '.' && c[1] == '.') {
			char *slash = strrchr(cur, '/');
			if (slash && slash != cur)
				*slash = '\0';
			else
				snprintf(cur, sizeof(cur), "/");
			if (stat(cur, &dir) < 0)
				return 0;
			continue;
		}
		char next[PATH_MAX];
		snprintf(next, sizeof(next), "%s", cur);
		if (join(next, sizeof(next), c, clen) < 0)
			return -ENAMETOOLONG;
		if (lstat(next, &st) < 0)
			break; /* made by this process from here on (or not at all) */
		if (S_ISLNK(st.st_mode)) {
			int r = link_allowed(next, &st, &dir, why, why_len);
			if (r < 0)
				return r;
			if (++hops > HOPS_MAX) {
				snprintf(why, why_len, "%s: too many symbolic links", path);
				return -ELOOP;
			}
			char target[PATH_MAX];
			ssize_t n = readlink(next, target, sizeof(target) - 1);
			if (n < 0)
				return 0;
			target[n] = '\0';
			/* The link's text, then what was left after it, walked from the link's
			 * folder (or from / for an absolute one). */
			char rest[PATH_MAX * 2];
			if (snprintf(rest, sizeof(rest), "%s%s", target, todo + pos) >=
			    (int)sizeof(rest))
				return -ENAMETOOLONG;
			memcpy(todo, rest, strlen(rest) + 1);
			pos = 0;
			if (target[0] == '/') {
				snprintf(cur, sizeof(cur), "/");
				if (stat(cur, &dir) < 0)
					return 0;
			}
			continue;
		}
		if (last) {
			int r = file_allowed(next, &st, &dir, why, why_len);
			if (r < 0)
				return r;
		}
		memcpy(cur, next, strlen(next) + 1);
		dir = st;
	}
	if (!companions)
		return 0;
	/* SQLite opens these beside the database, following links: each as the file itself. */
	static const char *const suffixes[] = {"-wal", "-shm", "-journal"};
	char folder[PATH_MAX];
	snprintf(folder, sizeof(folder), "%s", path);
	char *slash = strrchr(folder, '/');
	if (slash)
		*(slash == folder ? slash + 1 : slash) = '\0';
	else
		snprintf(folder, sizeof(folder), ".");
	if (stat(folder, &dir) < 0)
		return 0;
	for (size_t k = 0; k < sizeof(suffixes) / sizeof(suffixes[0]); k++) {
		char companion[PATH_MAX + 16];
		snprintf(companion, sizeof(companion), "%s%s", path, suffixes[k]);
		if (lstat(companion, &st) < 0)
			continue;
		int r = S_ISLNK(st.st_mode) ? link_allowed(companion, &st, &dir, why, why_len)
					    : file_allowed(companion, &st, &dir, why, why_len);
		if (r < 0)
			return r;
	}
	return 0;
}

int p2pg_new_file_open(struct p2pg_new_file *f, const char *path, char *why, size_t why_len)
{
	char folder[PATH_MAX];
	f->fd = -1;
	if (snprintf(folder, sizeof(folder), "%s", path) >= (int)sizeof(folder) ||
	    snprintf(f->path, sizeof(f->path), "%s", path) >= (int)sizeof(f->path)) {
		snprintf(why, why_len, "%s", strerror(ENAMETOOLONG));
		return -ENAMETOOLONG;
	}
	char *slash = strrchr(folder, '/');
	const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	int prefix = slash ? (int)(slash - folder) + 1 : 0; /* "folder/" */
	if (slash)
		*(slash == folder ? slash + 1 : slash) = '\0';
	int r = p2pg_path_check(slash ? folder : ".", false, why, why_len);
	if (r < 0)
		return r;
	/* Hidden, unguessable, made with O_EXCL: nobody can have put a link there first. */
	snprintf(f->tmp, sizeof(f->tmp), "%.*s.%s.XXXXXX", prefix, path, base);
	f->fd = mkostemp(f->tmp, O_CLOEXEC);
	if (f->fd < 0) {
		int e = errno;
		snprintf(why, why_len, "%s", strerror(e));
		return -e;
	}
	return f->fd;
}

int p2pg_new_file_commit(struct p2pg_new_file *f, char *why, size_t why_len)
{
	mode_t mask = umask(0);
	umask(mask);
	int e = 0;
	if (fchmod(f->fd, 0644 & ~mask) < 0)
		e = errno;
	if (!e && rename(f->tmp, f->path) < 0)
		e = errno;
	if (e) {
		unlink(f->tmp);
		snprintf(why, why_len, "%s", strerror(e));
		return -e;
	}
	return 0;
}

void p2pg_new_file_abandon(struct p2pg_new_file *f)
{
	unlink(f->tmp);
}

int p2pg_replace_file(const char *path, const void *data, size_t len, char *why, size_t why_len)
{
	struct p2pg_new_file f;
	int fd = p2pg_new_file_open(&f, path, why, why_len);
	if (fd < 0)
		return fd;
	const char *p = data;
	size_t left = len;
	int e = 0;
	while (left > 0) {
		ssize_t n = write(fd, p, left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			e = errno;
			break;
		}
		p += n;
		left -= (size_t)n;
	}
	if (e) {
		p2pg_new_file_abandon(&f);
		close(fd);
		snprintf(why, why_len, "%s", strerror(e));
		return -e;
	}
	int r = p2pg_new_file_commit(&f, why, why_len);
	if (close(fd) < 0 && r == 0) {
		e = errno;
		snprintf(why, why_len, "%s", strerror(e));
		return -e;
	}
	return r;
}
