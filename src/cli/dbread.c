/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "dbread.h"
#include "p2pguard/rules.h"
#include "p2pguard/spool.h"
#include "store.h"

/* Spool files in dir whose owner is gone (their lock is free): what an import left behind. Only
 * regular files of ours count, as the import takes no other: a FIFO planted there must not block
 * the open, nor a link lead elsewhere. */
static int count_dead_spools(const char *dir)
{
	_cleanup_closedir_ DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;
	size_t suffix = strlen(P2PG_SPOOL_SUFFIX);

	while (d && (de = readdir(d))) {
		size_t len = strlen(de->d_name);
		char path[PATH_MAX];
		if (len <= suffix || strcmp(de->d_name + len - suffix, P2PG_SPOOL_SUFFIX) != 0 ||
		    snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >= (int)sizeof(path))
			continue;
		_cleanup_close_ int fd =
		    open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
		struct stat st;
		if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
		    st.st_uid == geteuid() && flock(fd, LOCK_SH | LOCK_NB) == 0)
			n++;
	}
	return n;
}

/* Spool files another layout's guard left in dir ("<pid>-<start>.spool", ".spool3" ... : ".spool"
 * and digits, not this layout's suffix), which this version never opens; the first one's name in
 * first. */
static int count_other_layouts(const char *dir, char *first, size_t first_len)
{
	_cleanup_closedir_ DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;
	while (d && (de = readdir(d))) {
		const char *at = strstr(de->d_name, ".spool");
		while (at && strstr(at + 1, ".spool"))
			at = strstr(at + 1, ".spool");
		if (!at || at == de->d_name || strcmp(at, P2PG_SPOOL_SUFFIX) == 0 ||
		    strspn(at + 6, "0123456789") != strlen(at + 6))
			continue;
		if (n++ == 0)
			snprintf(first, first_len, "%s", de->d_name);
	}
	return n;
}

/* The rows just imported may name rules the database lacks: the guard that recorded them would have
 * written them with its next pass, had it lived. */
static void write_named_rules(sqlite3 *db)
{
	/* Quietly: a problem of the user's rule folder is `rules validate`'s to say. */
	struct p2pg_ruleset *rs = p2pg_ruleset_new();
	const char *user = getenv("P2PGUARD_RULES");
	if (rs && p2pg_ruleset_load_builtin(rs, NULL, NULL) >= 0 && user && *user)
		(void)p2pg_ruleset_load_dir(rs, user, NULL, NULL);
	struct p2pg_rules_named marks = {{0}};
	int r = rs ? p2pg_rules_write_named_sqlite(db, rs, &marks) : 0;
	if (r < 0)
		fprintf(stderr,
			"p2pguard: the rules the recovered failures name were not written: %s\n",
			strerror(-r));
	p2pg_ruleset_free(rs);
}

int p2pg_cli_import_dead_spools(const char *db_path, bool quiet)
{
	char dir[PATH_MAX];
	struct stat st;

	if (p2pg_spool_dir_for(db_path, dir, sizeof(dir)) < 0) {
		fprintf(stderr, "p2pguard: could not import dead spools: path too long: %s\n",
			db_path);
		return -ENAMETOOLONG;
	}
	if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		if (!quiet)
			printf("recovered 0 spool files into %s\n", db_path);
		return 0;
	}
	_cleanup_sqlite_ sqlite3 *db = NULL;
	char err[256];
	/* A command that only reads waits less for a writer than `recover` does. */
	int r = p2pg_store_open_wait(db_path, &db, err, sizeof(err), quiet ? 2000 : 10000);
	if (r < 0) {
		fprintf(stderr, "p2pguard: could not import the dead spools in %s: %s\n", dir, err);
		return r;
	}
	struct p2pg_recovery recovery = {.record = P2PG_RECORD_ALL};
	int n = p2pg_store_recover_dir_with(db, dir, &recovery);
	if (n < 0) {
		fprintf(stderr, "p2pguard: could not import the dead spools in %s: %s\n", dir,
			recovery.error[0] ? recovery.error : strerror(-n));
		return n;
	}
	if (n > 0)
		write_named_rules(db);
	if (!quiet || n > 0)
		fprintf(quiet ? stderr : stdout, "%srecovered %d spool file%s into %s\n",
			quiet ? "p2pguard: " : "", n, n == 1 ? "" : "s", db_path);
	/* After an upgrade, a crash's spool of the version before is still there: its records are
	 * not lost, but this version cannot read them. */
	char other[256];
	int others = quiet ? 0 : count_other_layouts(dir, other, sizeof(other));
	if (others > 0)
		fprintf(stderr,
			"p2pguard: %s holds %d spool file%s of another p2pguard version (%s%s), "
			"which this version cannot read: that version's `p2pguard recover` "
			"imports %s\n",
			dir, others, others == 1 ? "" : "s", other, others == 1 ? "" : ", ...",
			others == 1 ? "it" : "them");
	/* The import skips a file it cannot import now (the database locked past the wait) and
	 * leaves it for the next command: say so, since what is shown lacks its records. */
	int left = count_dead_spools(dir);
	if (left > 0) {
		fprintf(stderr,
			"p2pguard: could not import %d dead spool file%s in %s (database busy?); "
			"their records are not shown\n",
			left, left == 1 ? "" : "s", dir);
		return -EBUSY;
	}
	return n;
}

static char damage[128];

static void note_damage(void *unused, int code, const char *message)
{
	(void)unused;
	(void)message; /* SQLite's source line: the code says what happened */
	int primary = code & 0xff;
	if (!damage[0] &&
	    (primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB || primary == SQLITE_IOERR))
		snprintf(damage, sizeof(damage), "%s", sqlite3_errstr(code));
}

void p2pg_cli_watch_damage(void)
{
	sqlite3_config(SQLITE_CONFIG_LOG, note_damage, NULL);
}

const char *p2pg_cli_damage(void)
{
	return damage[0] ? damage : NULL;
}

int p2pg_cli_open_read(const char *db_path, sqlite3 **ret_db)
{
	char dir[PATH_MAX];
	bool has_spools =
	    p2pg_spool_dir_for(db_path, dir, sizeof(dir)) == 0 && access(dir, F_OK) == 0;

	/* A process that crashed before its first import leaves only a spool: it still counts. */
	if (access(db_path, F_OK) < 0 && !has_spools) {
		fprintf(stderr, "p2pguard: no database at %s\n", db_path);
		return -ENOENT;
	}
	/* A damaged database (said by the import) is not read as if it were whole. */
	if (p2pg_cli_import_dead_spools(db_path, true) == -EBADMSG)
		return -EIO;

	sqlite3 *db = NULL;
	if (sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK ||
	    sqlite3_exec(db, "SELECT count(*) FROM sqlite_master", NULL, NULL, NULL) != SQLITE_OK) {
		fprintf(stderr, "p2pguard: cannot read %s: %s\n", db_path,
			db ? sqlite3_errmsg(db) : "out of memory");
		sqlite3_close(db);
		return -EIO;
	}
	sqlite3_busy_timeout(db, 5000);
	if (!p2pg_cli_has_table(db, "processes")) {
		fprintf(stderr, "p2pguard: %s is not a p2pguard database (no processes table)\n",
			db_path);
		sqlite3_close(db);
		return -EINVAL;
	}
	*ret_db = db;
	return 0;
}

bool p2pg_cli_has_table(sqlite3 *db, const char *table)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(db, "SELECT 1 FROM sqlite_master WHERE name = ?1", -1, &st, NULL) !=
	    SQLITE_OK)
		return false;
	sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
	return sqlite3_step(st) == SQLITE_ROW;
}

bool p2pg_cli_has_column(sqlite3 *db, const char *table, const char *column)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(db, "SELECT 1 FROM pragma_table_info(?1) WHERE name = ?2", -1, &st,
			       NULL) != SQLITE_OK)
		return false;
	sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, column, -1, SQLITE_STATIC);
	return sqlite3_step(st) == SQLITE_ROW;
}

void p2pg_cli_json_string(FILE *out, const char *text)
{
	if (!text) {
		fputs("null", out);
		return;
	}
	fputc('"', out);
	for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
		switch (*p) {
		case '"':
			fputs("\\\"", out);
			break;
		case '\\':
			fputs("\\\\", out);
			break;
		case '\n':
			fputs("\\n", out);
			break;
		case '\t':
			fputs("\\t", out);
			break;
		case '\r':
			fputs("\\r", out);
			break;
		default:
			if (*p < 0x20) {
				fprintf(out, "\\u%04x", *p);
			} else if (*p < 0x80) {
				fputc(*p, out);
			} else {
				/* JSON is UTF-8: a byte that begins no well-formed sequence (a
				 * program's argument in another encoding) is U+FFFD, which strict
				 * parsers read. */
				size_t n = p2pg_utf8_sequence(p);
				if (n) {
					fwrite(p, 1, n, out);
					p += n - 1;
				} else {
					fputs("\\ufffd", out);
				}
			}
		}
	}
	fputc('"', out);
}

void p2pg_cli_html_text(FILE *out, const char *text)
{
	for (const char *p = text ? text : ""; *p; p++) {
		switch (*p) {
		case '<':
			fputs("&lt;", out);
			break;
		case '>':
			fputs("&gt;", out);
			break;
		case '&':
			fputs("&amp;", out);
			break;
		case '"':
			fputs("&quot;", out);
			break;
		default:
			fputc(*p, out);
		}
	}
}

const char *p2pg_cli_col(sqlite3_stmt *st, int col)
{
	return (const char *)sqlite3_column_text(st, col);
}

int p2pg_cli_unknown_option(const char *cmd, const char *arg)
{
	fprintf(stderr, "p2pguard %s: unknown option %s (p2pguard %s --help)\n", cmd, arg, cmd);
	return 2;
}

/* Every table with a process_id column is seen through a temporary view of the same name that
 * keeps the chosen processes' rows: unqualified names find the temp schema first, so every query
 * of every form (and of the sections other files add) reads only them. */
int p2pg_cli_restrict(sqlite3 *db)
{
	static const char list_sql[] =
	    "SELECT m.name FROM main.sqlite_master m WHERE m.type = 'table' AND EXISTS (SELECT 1 "
	    "FROM pragma_table_info(m.name) i WHERE i.name = 'process_id')";
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(db, list_sql, -1, &st, NULL) != SQLITE_OK)
		return -EIO;
	sqlite3_str *sql = sqlite3_str_new(db);
	sqlite3_str_appendall(sql,
			      "CREATE TEMP VIEW processes AS SELECT * FROM main.processes WHERE "
			      "id IN (SELECT id FROM temp.chosen);");
	while (sqlite3_step(st) == SQLITE_ROW) {
		const char *name = p2pg_cli_col(st, 0);
		/* Names come from the database: quoted as identifiers, never trusted as SQL. */
		sqlite3_str_appendf(sql,
				    "CREATE TEMP VIEW \"%w\" AS SELECT * FROM main.\"%w\" WHERE "
				    "process_id IN (SELECT id FROM temp.chosen);",
				    name, name);
	}
	char *err = NULL, *text = sqlite3_str_finish(sql);
	int rc = text ? sqlite3_exec(db, text, NULL, NULL, &err) : SQLITE_NOMEM;
	sqlite3_free(text);
	if (rc != SQLITE_OK)
		fprintf(stderr, "p2pguard: cannot choose the processes: %s\n",
			err ? err : sqlite3_errmsg(db));
	sqlite3_free(err);
	return rc == SQLITE_OK ? 0 : -EIO;
}

int p2pg_cli_json_rows(sqlite3 *db, FILE *out, const char *sql, int indent)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		return -EIO;
	fputc('[', out);
	for (int n = 0; sqlite3_step(st) == SQLITE_ROW; n++) {
		fprintf(out, "%s\n%*s{", n ? "," : "", indent, "");
		for (int c = 0; c < sqlite3_column_count(st); c++) {
			if (c)
				fputs(", ", out);
			p2pg_cli_json_string(out, sqlite3_column_name(st, c));
			fputs(": ", out);
			switch (sqlite3_column_type(st, c)) {
			case SQLITE_INTEGER:
				fprintf(out, "%lld", sqlite3_column_int64(st, c));
				break;
			case SQLITE_FLOAT:
				fprintf(out, "%.17g", sqlite3_column_double(st, c));
				break;
			case SQLITE_NULL:
				fputs("null", out);
				break;
			default:
				p2pg_cli_json_string(out, p2pg_cli_col(st, c));
			}
		}
		fputc('}', out);
	}
	fputc(']', out);
	return 0;
}

char *p2pg_cli_col_dup(sqlite3_stmt *st, int col)
{
	const char *t = p2pg_cli_col(st, col);
	return t ? strdup(t) : NULL;
}

int p2pg_cli_col_int_or(sqlite3_stmt *st, int col, int null_value)
{
	return sqlite3_column_type(st, col) == SQLITE_NULL ? null_value
							   : sqlite3_column_int(st, col);
}

int64_t p2pg_cli_scalar(sqlite3 *db, const char *sql)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK ||
	    sqlite3_step(st) != SQLITE_ROW)
		return 0;
	return sqlite3_column_int64(st, 0);
}

const char *p2pg_cli_db_path(const char *arg)
{
	if (arg && *arg)
		return arg;
	const char *env = getenv("P2PGUARD_DB");
	return env && *env ? env : "p2pguard.db";
}
