/* SPDX-License-Identifier: MIT */
/* Spools of processes that are gone: found in the spool folder, imported, then deleted, or kept
 * aside when damaged. */
#include "store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "api.h"
#include "backtrace.h"
#include "cleanup.h"
#include "notice.h"
#include "spool.h"
#include "store_nccl.h"

/* A file being made is renamed to its final name within milliseconds; one older than this whose
 * maker is gone (its lock free) never got there and holds nothing. */
#define UNFINISHED_AGE_S 60

static bool has_suffix(const char *name, const char *suffix)
{
	size_t len = strlen(name), n = strlen(suffix);
	return len > n && strcmp(name + len - n, suffix) == 0;
}

/* Sets the file aside for a person: never imported again, never deleted. */
static void keep_aside(int dfd, const char *dir, const char *name, const char *why)
{
	char path[PATH_MAX + 16], aside[NAME_MAX + 16];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	snprintf(aside, sizeof(aside), "%s.damaged", name);
	bool kept = renameat(dfd, name, dfd, aside) == 0;
	p2pg_notice("%s %s; %s%s", path, why, kept ? "kept as " : "it stays where it is",
		    kept ? aside : "");
}

/* A .new file: a spool whose maker died before it was complete (no record can have been written
 * into it: a spool is used only once renamed). Removed when its maker is surely gone. */
static void remove_unfinished(int dfd, const char *name)
{
	_cleanup_close_ int fd =
	    openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    flock(fd, LOCK_EX | LOCK_NB) < 0 || time(NULL) - st.st_mtime < UNFINISHED_AGE_S)
		return;
	unlinkat(dfd, name, 0);
}

/* One dead process's file, mapped: imported in transactions of P2PG_RECOVER_BATCH records. Returns
 * what p2pg_store_import returns last, or 1 when stopped by the callback (the file waits). */
static int import_file(sqlite3 *db, struct p2pg_spool_layout *spool, uint64_t size,
		       struct p2pg_recovery *r, struct p2pg_importer *im)
{
	/* A dead process's rows are imported the way it recorded them, not the way the recoverer
	 * does. */
	uint32_t said = spool->header.record;
	p2pg_importer_init(im, said == P2PG_RECORD_SUMMARY + 1 ? P2PG_RECORD_SUMMARY
			       : said == P2PG_RECORD_ALL + 1   ? P2PG_RECORD_ALL
							       : r->record);
	im->file_size = size;
	im->budget = P2PG_RECOVER_BATCH;
	for (;;) {
		int rc = p2pg_store_import(db, spool, im, true);
		if (rc < 0) {
			snprintf(r->error, sizeof(r->error), "%s", im->error);
			return im->error_code == SQLITE_CORRUPT || im->error_code == SQLITE_NOTADB
				   ? -EBADMSG
				   : rc;
		}
		if (!im->more)
			return 0;
		if (r->between && !r->between(r->userdata))
			return 1;
	}
}

int p2pg_store_recover_dir_with(sqlite3 *db, const char *dir, struct p2pg_recovery *r)
{
	/* Said once per process: the drainer looks again every second. */
	static bool said_dir, said_file;
	char why[256];
	r->error[0] = '\0';
	int dfd = p2pg_spool_dir_open(dir, false, why, sizeof(why));
	if (dfd == -ENOENT)
		return 0;
	if (dfd < 0) {
		if (!said_dir)
			p2pg_notice("not importing the spools in %s: %s", dir, why);
		said_dir = true;
		return dfd == -EPERM || dfd == -ELOOP || dfd == -ENOTDIR ? 0 : dfd;
	}
	_cleanup_closedir_ DIR *d = fdopendir(dfd);
	if (!d) {
		int e = errno;
		close(dfd);
		return -e;
	}
	int imported = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (has_suffix(de->d_name, P2PG_SPOOL_SUFFIX ".new")) {
			remove_unfinished(dirfd(d), de->d_name);
			continue;
		}
		if (!has_suffix(de->d_name, P2PG_SPOOL_SUFFIX))
			continue;
		char path[PATH_MAX];
		if (snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >= (int)sizeof(path))
			continue;
		if (r->skip_path && strcmp(path, r->skip_path) == 0)
			continue;
		if (imported > 0 && r->between && !r->between(r->userdata))
			break; /* the rest waits for the next try */
		/* Never through a link, never blocking on a FIFO: only a regular file of ours. */
		_cleanup_close_ int fd = openat(
		    dirfd(d), de->d_name, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
		struct stat st;
		if (fd < 0 && errno != ELOOP)
			continue;
		if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
		    st.st_uid != geteuid()) {
			if (!said_file)
				p2pg_notice("not importing %s: %s", path,
					    fd < 0		   ? "a symbolic link"
					    : !S_ISREG(st.st_mode) ? "not a regular file"
								   : "it belongs to another user");
			said_file = true;
			continue;
		}
		/* A living owner holds the lock; so does another recoverer working on this file. */
		if (flock(fd, LOCK_EX | LOCK_NB) < 0)
			continue;
		/* A file gets its final name only once its header is whole: anything shorter, or a
		 * header that is not this layout's, is damage. Its records cannot be told from
		 * garbage: kept aside, never imported, never tried again. */
		if ((uint64_t)st.st_size < sizeof(struct p2pg_spool_header)) {
			keep_aside(dirfd(d), dir, de->d_name,
				   st.st_size == 0 ? "is empty" : "is shorter than its header");
			continue;
		}
		struct p2pg_spool_layout *spool = p2pg_spool_map(fd);
		if (spool == MAP_FAILED)
			continue;
		if (!p2pg_spool_header_valid(&spool->header)) {
			munmap(spool, P2PG_SPOOL_MAP_SIZE);
			keep_aside(dirfd(d), dir, de->d_name, "has a damaged header; not imported");
			continue;
		}
		struct p2pg_importer im;
		int rc = import_file(db, spool, (uint64_t)st.st_size, r, &im);
		/* Imported whole: its NCCL operations still running are unreported, for good. */
		if (rc == 0)
			p2pg_nccl_process_ended(db, im.process_id);
		p2pg_importer_release(&im);
		munmap(spool, P2PG_SPOOL_MAP_SIZE);
		if (rc < 0) {
			/* Busy: the next try. Anything else is said once and stops the pass: the
			 * other files would fail the same way. */
			if (rc == -EBUSY)
				continue;
			return rc;
		}
		if (rc > 0)
			break; /* stopped between two transactions: the rest waits */
		imported++;
		if (im.invalid > 0 || im.truncated) {
			char what[160];
			snprintf(what, sizeof(what),
				 "%s: %llu damaged %s skipped (counted in "
				 "processes.records_invalid)",
				 im.truncated ? "is truncated" : "is damaged",
				 (unsigned long long)im.invalid,
				 im.truncated	   ? "records or rings past its end"
				 : im.invalid == 1 ? "record"
						   : "records");
			keep_aside(dirfd(d), dir, de->d_name, what);
		} else {
			unlinkat(dirfd(d), de->d_name, 0);
		}
	}
	return imported;
}

int p2pg_store_recover_dir(sqlite3 *db, const char *dir, const char *skip_path,
			   enum p2pg_record_mode record)
{
	struct p2pg_recovery r = {.skip_path = skip_path, .record = record};
	return p2pg_store_recover_dir_with(db, dir, &r);
}
