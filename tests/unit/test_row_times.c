/* SPDX-License-Identifier: MIT */
/*
 * GPU times kept in the spool for rows already in the database (src/record/row_times.h): a blob of
 * them is valid only when every field is one, and importing it fills exactly the rows it names, of
 * the process importing it, that have no time yet.
 */
#include <string.h>

#include "row_times.h"
#include "db_value.h"
#include "tap.h"

static void set_text(struct p2pg_spool_blob *b, const char *field)
{
	memset(b, 0, sizeof(*b));
	b->kind = P2PG_BLOB_ROW_TIMES;
	size_t n = strlen(field);
	memcpy(b->text, field, n + 1);
	b->length = (uint32_t)n + 1;
}

static struct p2pg_spool_blob blob;

int main(void)
{
	memset(&blob, 0, sizeof(blob));
	CHECK(!p2pg_row_times_valid(&blob), "an empty blob is not a blob of row times");
	CHECK(p2pg_row_times_add(&blob, 7, 3, 1000, 123456) && p2pg_row_times_valid(&blob),
	      "one row's time");
	int added = 1;
	while (p2pg_row_times_add(&blob, 9223372036854775807LL, 4294967295u, 9223372036854775807ull,
				  9223372036854775807ull))
		added++;
	CHECK(added > 200 && blob.length <= sizeof(blob.text) && p2pg_row_times_valid(&blob),
	      "a full blob refuses the next time and stays valid (%d times)", added);

	static const char *const bad[] = {
	    "1 2 3",
	    "1 2 3 4 5",
	    "0 2 3 4",
	    "1 0 3 4",
	    "1 2 3 0",
	    "1 2 -3 4",
	    "1 2 3 4x",
	    "x1 2 3 4",
	    "1  2 3 4",
	    " 1 2 3 4",
	    "1 2 3 4 ",
	    "1 4294967296 3 4",
	    "9223372036854775808 2 3 4",
	    "1 2 3 18446744073709551616",
	};
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		set_text(&blob, bad[k]);
		CHECK(!p2pg_row_times_valid(&blob), "refused: \"%s\"", bad[k]);
	}

	sqlite3 *db = NULL;
	sqlite3_open(":memory:", &db);
	sqlite3_exec(db,
		     "CREATE TABLE transfers (id INTEGER PRIMARY KEY, process_id INTEGER, "
		     "thread_serial INTEGER, seq INTEGER, gpu_ns INTEGER);"
		     "INSERT INTO transfers VALUES (1, 1, 1, 10, NULL), (2, 1, 1, 11, NULL), "
		     "(3, 1, 1, 12, 99), (4, 2, 1, 10, NULL), (5, 1, 2, 10, NULL);",
		     NULL, NULL, NULL);
	memset(&blob, 0, sizeof(blob));
	blob.kind = P2PG_BLOB_ROW_TIMES;
	p2pg_row_times_add(&blob, 1, 1, 10, 500); /* its row */
	p2pg_row_times_add(&blob, 2, 1, 99, 600); /* the id of another record's row */
	p2pg_row_times_add(&blob, 3, 1, 12, 700); /* a row that has its time */
	p2pg_row_times_add(&blob, 4, 1, 10, 800); /* another process's row */
	p2pg_row_times_add(&blob, 6, 2, 10, 900); /* no such row */
	CHECK(p2pg_row_times_import(db, 1, &blob) == 0, "imported");
	CHECK(one(db, "SELECT gpu_ns FROM transfers WHERE id = 1") == 500, "its row has its time");
	CHECK(one(db, "SELECT count(*) FROM transfers WHERE gpu_ns IS NOT NULL") == 2 &&
		  one(db, "SELECT gpu_ns FROM transfers WHERE id = 3") == 99,
	      "no other row changed: another record's, one timed already, another process's");
	sqlite3_close(db);
	return TAP_DONE();
}
