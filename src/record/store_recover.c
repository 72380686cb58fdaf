/* SPDX-License-Identifier: MIT */
/* Spools of processes that are gone: found in the spool folder, imported, then deleted. */
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
#include <unistd.h>

#include "api.h"
#include "backtrace.h"
#include "cleanup.h"
#include "notice.h"
#include "spool.h"
#include "store_nccl.h"

/* A file whose owner died before it wrote the header: all zero, no record in any ring. */
static bool never_written(const struct p2pg_spool_layout *spool)
{
	static const char zero[sizeof(spool->header.magic)];
	if (memcmp(spool->header.magic, zero, sizeof(zero)) != 0)
		return false;
	for (int k = 0; k < P2PG_SPOOL_THREADS; k++)
		if (atomic_load_explicit(&((struct p2pg_spool_layout *)spool)->threads[k].head,
					 memory_order_relaxed) != 0)
			return false;
	return true;
}

int p2pg_store_recover_dir(sqlite3 *db, const char *dir, const char *skip_path,
			   enum p2pg_record_mode record)
{
	/* Said once per process: the drainer looks again every second. */
	static bool said_dir, said_file;
	char why[256];
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
		size_t len = strlen(de->d_name), suffix = strlen(P2PG_SPOOL_SUFFIX);
		if (len <= suffix || strcmp(de->d_name + len - suffix, P2PG_SPOOL_SUFFIX) != 0)
			continue;
		char path[PATH_MAX];
		if (snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >= (int)sizeof(path))
			continue;
		if (skip_path && strcmp(path, skip_path) == 0)
			continue;
		/* Never through a link, never blocking on a FIFO: only a regular file of ours. */
		_cleanup_close_ int fd = openat(
		    dirfd(d), de->d_name, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
		struct stat owner;
		if (fd < 0 && errno != ELOOP)
			continue;
		if (fd < 0 || fstat(fd, &owner) < 0 || !S_ISREG(owner.st_mode) ||
		    owner.st_uid != geteuid()) {
			if (!said_file)
				p2pg_notice("not importing %s: %s", path,
					    fd < 0 ? "a symbolic link"
					    : !S_ISREG(owner.st_mode)
						? "not a regular file"
						: "it belongs to another user");
			said_file = true;
			continue;
		}
		/* A living owner holds the lock; so does another recoverer working on this file. */
		if (flock(fd, LOCK_EX | LOCK_NB) < 0)
			continue;
		/* Another layout under this name (a damaged or foreign file) is left alone. */
		char magic[8];
		if (pread(fd, magic, sizeof(magic), 0) == (ssize_t)sizeof(magic) &&
		    memcmp(magic, P2PG_SPOOL_MAGIC, 7) == 0 &&
		    memcmp(magic, P2PG_SPOOL_MAGIC, sizeof(magic)) != 0)
			continue;
		struct stat stbuf;
		if (fstat(fd, &stbuf) < 0 || (size_t)stbuf.st_size < P2PG_SPOOL_FILE_SIZE) {
			/* The owner died before it sized the file: it holds no records. */
			unlinkat(dirfd(d), de->d_name, 0);
			continue;
		}
		struct p2pg_spool_layout *spool = p2pg_spool_map(fd);
		if (spool == MAP_FAILED)
			continue;
		if (!p2pg_spool_header_valid(&spool->header) && !never_written(spool)) {
			/* Its records cannot be told from garbage: kept aside for a person, never
			 * imported, never tried again. */
			munmap(spool, P2PG_SPOOL_FILE_SIZE);
			char aside[PATH_MAX + 16];
			snprintf(aside, sizeof(aside), "%s.damaged", path);
			p2pg_notice(
			    "%s has a damaged header; not imported, kept as %s", path,
			    renameat(dirfd(d), de->d_name, dirfd(d), aside + strlen(dir) + 1) == 0
				? aside
				: path);
			continue;
		}
		/* A dead process's rows are imported the way it recorded them, not the way the
		 * recoverer does. */
		uint32_t said = spool->header.record;
		struct p2pg_importer im;
		p2pg_importer_init(&im, said == P2PG_RECORD_SUMMARY + 1 ? P2PG_RECORD_SUMMARY
					: said == P2PG_RECORD_ALL + 1	? P2PG_RECORD_ALL
									: record);
		int rc = 0; /* never initialised: nothing in it */
		if (p2pg_spool_header_valid(&spool->header))
			rc = p2pg_store_import(db, spool, &im, true);
		if (rc >= 0)
			p2pg_nccl_process_ended(db, im.process_id);
		if (rc >= 0 && im.invalid > 0)
			p2pg_notice("%s: %llu damaged record%s skipped (counted in "
				    "processes.records_invalid)",
				    path, (unsigned long long)im.invalid,
				    im.invalid == 1 ? "" : "s");
		p2pg_importer_release(&im);
		munmap(spool, P2PG_SPOOL_FILE_SIZE);
		if (rc >= 0) {
			unlinkat(dirfd(d), de->d_name, 0);
			imported++;
		}
	}
	return imported;
}
