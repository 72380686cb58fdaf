/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: `p2pguard merge` of a hostile input database (p2pg_merge_database). The input
 * describes the database to merge:
 *
 *   byte 0: bit 0: it starts as a p2pguard database (the schema, a process with a transfer and a
 *           peer call); bit 1: the output holds its processes already (merged once before)
 *   the rest: SQL run on it, statement by statement (its names, tables, columns, types, keys,
 *           views, triggers: whatever an input can hold), attaching nothing.
 *
 * Whatever it holds, the merge must not crash, and it must do nothing the input chose: an
 * authorizer on the output's connection aborts on any ATTACH of a named file, any DETACH but the
 * input's, any DELETE or DROP in the output's own database, any trigger or view made, any pragma
 * that writes; and after it the output's own process and rows are all there, nothing is
 * attached, and no file appeared.
 */
#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "merge_db.h"
#include "notice.h"
#include "store.h"
#include "db_value.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[64], in_path[128], out_path[128];
/* The databases each input starts from, made once: a p2pguard database with a process, and the
 * output with its own process; with the input's processes merged in too (bit 1). */
struct image {
	char *bytes;
	size_t len;
};
static struct image input_image, output_image, output_merged_image;
static bool verbose; /* P2PG_FUZZ_VERBOSE=1: what each input merged, on stderr */

static void quiet(const char *line)
{
	(void)line;
}

static void save(const char *path, struct image *img)
{
	FILE *f = fopen(path, "rb");
	if (!f || fseek(f, 0, SEEK_END) < 0)
		abort();
	img->len = (size_t)ftell(f);
	img->bytes = malloc(img->len);
	rewind(f);
	if (!img->bytes || fread(img->bytes, 1, img->len, f) != img->len)
		abort();
	fclose(f);
}

static void restore(const char *path, const struct image *img)
{
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(img->bytes, 1, img->len, f) != img->len || fclose(f) != 0)
		abort();
}

static void make_images(void);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	snprintf(dir, sizeof(dir), "%s/p2pg-fuzz-merge-XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(dir))
		abort();
	snprintf(in_path, sizeof(in_path), "%s/in.db", dir);
	snprintf(out_path, sizeof(out_path), "%s/out.db", dir);
	verbose = getenv("P2PG_FUZZ_VERBOSE") != NULL;
	if (!verbose)
		p2pg_notice_set_sink(quiet);
	make_images();
	return 0;
}

static void empty_dir(void)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		char path[512];
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		unlink(path);
	}
	if (d)
		closedir(d);
}

/* Files other than the two databases and their companions. */
static int strangers(void)
{
	int n = 0;
	DIR *d = opendir(dir);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		if (strncmp(de->d_name, "in.db", 5) != 0 && strncmp(de->d_name, "out.db", 6) != 0)
			n++;
	}
	if (d)
		closedir(d);
	return n;
}

static const char *const rows_sql =
    "INSERT INTO processes (pid, hostname, started_ns, boot_id) VALUES (7, 'h', 70, 'b');"
    "INSERT INTO transfers (process_id, api, src_device, dst_device, bytes, path, status, "
    "thread_serial, seq) VALUES (last_insert_rowid(), 'cudaMemcpyPeer', 0, 1, 64, 'p2p', 0, 1, "
    "0);"
    "INSERT INTO peer_access (process_id, api, device, peer_device, status, action, "
    "thread_serial, seq) VALUES ((SELECT max(id) FROM processes), 'cudaDeviceEnablePeerAccess', "
    "0, 1, 0, 'passed', 1, 1);";

static int deny(void *userdata, int action, const char *a, const char *b, const char *db,
		const char *trigger)
{
	(void)userdata;
	(void)trigger;
	bool main_db = db && strcmp(db, "main") == 0;
	switch (action) {
	case SQLITE_ATTACH:
		if (a)
			abort(); /* a file the input named */
		break;
	case SQLITE_DETACH:
		if (!a || strcmp(a, "src") != 0)
			abort();
		break;
	case SQLITE_DELETE:
	case SQLITE_DROP_TABLE:
	case SQLITE_DROP_INDEX:
	case SQLITE_DROP_TRIGGER:
	case SQLITE_DROP_VIEW:
		if (main_db)
			abort();
		break;
	case SQLITE_CREATE_TRIGGER:
	case SQLITE_CREATE_TEMP_TRIGGER:
	case SQLITE_CREATE_VIEW:
	case SQLITE_CREATE_TEMP_VIEW:
		abort();
	case SQLITE_PRAGMA:
		/* The merge reads tables' shapes; a pragma given any other value writes. */
		if (b && strcmp(a, "table_info") != 0 && strcmp(a, "index_list") != 0 &&
		    strcmp(a, "index_info") != 0)
			abort();
		break;
	}
	return SQLITE_OK;
}

static void make_images(void)
{
	char err[256];
	sqlite3 *db = NULL;
	if (p2pg_store_open(in_path, &db, err, sizeof(err)) < 0 ||
	    sqlite3_exec(db, rows_sql, NULL, NULL, NULL) != SQLITE_OK)
		abort();
	sqlite3_close(db);
	save(in_path, &input_image);
	if (p2pg_store_open(out_path, &db, err, sizeof(err)) < 0 ||
	    sqlite3_exec(
		db,
		"INSERT INTO processes (pid, started_ns, boot_id) VALUES (1, 1, "
		"'sentinel'); INSERT INTO transfers (process_id, api, bytes) VALUES "
		"(last_insert_rowid(), 'cudaMemcpy', 1), ((SELECT max(id) FROM processes), "
		"'cudaMemcpy', 2);",
		NULL, NULL, NULL) != SQLITE_OK)
		abort();
	sqlite3_close(db);
	save(out_path, &output_image);
	if (sqlite3_open(out_path, &db) != SQLITE_OK ||
	    sqlite3_exec(db, rows_sql, NULL, NULL, NULL) != SQLITE_OK)
		abort();
	sqlite3_close(db);
	save(out_path, &output_merged_image);
	empty_dir();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	empty_dir();
	uint8_t flags = size > 0 ? data[0] : 1;

	/* The input: as the fuzzer made it. */
	sqlite3 *in = NULL;
	if (flags & 1)
		restore(in_path, &input_image);
	if (sqlite3_open(in_path, &in) != SQLITE_OK)
		abort();
	sqlite3_limit(in, SQLITE_LIMIT_ATTACHED, 0);
	/* No fsync: nothing here has to survive a crash, and a disk's sync is 40 ms a run. */
	sqlite3_exec(in, "PRAGMA synchronous=OFF", NULL, NULL, NULL);
	if (size > 1) {
		char *sql = malloc(size);
		if (!sql)
			return 0;
		memcpy(sql, data + 1, size - 1);
		sql[size - 1] = '\0';
		sqlite3_exec(in, sql, NULL, NULL, NULL);
		free(sql);
	}
	sqlite3_close(in);

	/* The output: its own process and rows, and the input's processes when bit 1 says. */
	restore(out_path, (flags & 2) ? &output_merged_image : &output_image);
	sqlite3 *out = NULL;
	if (sqlite3_open(out_path, &out) != SQLITE_OK)
		abort();
	sqlite3_exec(out, "PRAGMA synchronous=OFF", NULL, NULL, NULL);
	p2pg_merge_prepare(out);
	int before = strangers();
	sqlite3_set_authorizer(out, deny, NULL);
	int processes = 0, fresh = 0;
	int r = p2pg_merge_database(out, in_path, &processes, &fresh);
	sqlite3_set_authorizer(out, NULL, NULL);
	if (verbose)
		fprintf(stderr, "fuzz-merge: %d, %d processes, %d new\n", r, processes, fresh);

	if (one(out, "SELECT count(*) FROM transfers WHERE process_id = (SELECT id FROM processes "
		     "WHERE boot_id = 'sentinel')") != 2 ||
	    one(out, "SELECT count(*) FROM pragma_database_list WHERE name NOT IN ('main', "
		     "'temp')") != 0 ||
	    strangers() != before)
		abort();
	sqlite3_close(out);
	return 0;
}
