/* SPDX-License-Identifier: MIT */
/* Scope-bound cleanup, as systemd does it: each helper accepts a NULL or -1 value. */
#pragma once

#include <dirent.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <unistd.h>

static inline void p2pg_freep(void *p)
{
	free(*(void **)p);
}

static inline void p2pg_closep(int *fd)
{
	if (*fd >= 0)
		close(*fd);
}

static inline void p2pg_closedirp(DIR **d)
{
	if (*d)
		closedir(*d);
}

static inline void p2pg_sqlite_finalizep(sqlite3_stmt **st)
{
	sqlite3_finalize(*st);
}

static inline void p2pg_sqlite_closep(sqlite3 **db)
{
	sqlite3_close(*db);
}

#define _cleanup_(f)	      __attribute__((cleanup(f)))
#define _cleanup_free_	      _cleanup_(p2pg_freep)
#define _cleanup_close_	      _cleanup_(p2pg_closep)
#define _cleanup_closedir_    _cleanup_(p2pg_closedirp)
#define _cleanup_sqlite_stmt_ _cleanup_(p2pg_sqlite_finalizep)
#define _cleanup_sqlite_      _cleanup_(p2pg_sqlite_closep)
