/* SPDX-License-Identifier: MIT */
/*
 * Paths another user may have planted something in. The database's path (and its -wal, -shm and
 * -journal companions, which SQLite makes beside it) and the files the command writes go through
 * symbolic links only as the kernel's protected_symlinks rule lets them in a sticky world-writable
 * folder, but in every folder: a link is followed when this process's user or the owner of the
 * folder holding the link made it (the folder's owner can change the folder anyway). And a file
 * that another user made in a folder anyone may write to is not written, unless that user owns the
 * folder (protected_regular). So a link that user nobody planted in a shared folder cannot turn a
 * file of root's into a database.
 */
#pragma once

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

/*
 * Checks every component of path (made absolute against the current folder) and, when
 * companions is set, the database's companions beside it. Returns 0, or -EPERM (-ELOOP for a link
 * loop) with the reason in why. A component that does not exist ends the check: what is to be
 * made there is made by this process.
 */
int p2pg_path_check(const char *path, bool companions, char *why, size_t why_len);

/*
 * Writes len bytes as path's new content, all at once for a reader: into a new file of an
 * unguessable name beside it (O_EXCL: never through a link), then renamed over path (which
 * replaces a link at path, never follows it). The folder is checked as p2pg_path_check does. The
 * file gets mode 0644 less the umask. Returns 0, or a negative errno with the reason in why.
 */
int p2pg_replace_file(const char *path, const void *data, size_t len, char *why, size_t why_len);

/*
 * The same for a file written as a stream (a trace, an HTML report): p2pg_new_file_open makes the
 * hidden file beside path and returns its descriptor (or a negative errno, the reason in why);
 * p2pg_new_file_commit, once everything is written and flushed, renames it over path (the
 * descriptor stays open: close it after); p2pg_new_file_abandon removes it.
 */
struct p2pg_new_file {
	int fd;
	char path[PATH_MAX];
	char tmp[PATH_MAX + 16];
};

int p2pg_new_file_open(struct p2pg_new_file *f, const char *path, char *why, size_t why_len);
int p2pg_new_file_commit(struct p2pg_new_file *f, char *why, size_t why_len);
void p2pg_new_file_abandon(struct p2pg_new_file *f);
