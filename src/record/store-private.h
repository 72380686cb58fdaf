/* SPDX-License-Identifier: MIT */
/* What the store's files share and nobody else needs. */
#pragma once

#include <stdbool.h>

#include "store.h"

static inline const char *p2pg_path_name(uint8_t path)
{
	switch (path) {
	case P2PG_PATH_P2P:
		return "p2p";
	case P2PG_PATH_DRIVER:
		return "driver";
	case P2PG_PATH_STAGED:
		return "staged";
	case P2PG_PATH_CAPTURED:
		return "captured";
	}
	return "unknown";
}

/*
 * What a spool's writer can have published (store_import_check.c); anything else is damage,
 * skipped and counted by the import. devices: the process's device count (0 or less: unknown).
 */
/* A record at seq with its checksum crc. */
bool p2pg_store_record_valid(const struct p2pg_record *r, uint32_t crc, uint64_t seq,
			     int32_t devices);
bool p2pg_store_blob_valid(const struct p2pg_spool_blob *b, int32_t devices);
/* An overflow aggregate with its counters as read (they change under the reader). */
bool p2pg_store_aggregate_valid(const struct p2pg_spool_agg *a, const struct p2pg_spool_totals *sum,
				int32_t devices);
/* A ring's counters as read. */
bool p2pg_store_ring_valid(const struct p2pg_spool_thread *t, uint64_t head, uint64_t tail);
/* Whether ring k lies within the file (im->file_size); one that does not is counted once. */
bool p2pg_store_ring_readable(struct p2pg_importer *im, const struct p2pg_spool_header *h, int k);
/* How many blob slots lie within the file; a file that ends inside them is counted once. */
uint32_t p2pg_store_blobs_readable(struct p2pg_importer *im, const struct p2pg_spool_header *h);

/* Summary mode: counts r in its bucket. True when r is folded there and needs no row; a failure,
 * or an outlier (at least 8x its bucket's median host time), keeps its row (false). */
bool p2pg_summary_note(struct p2pg_importer *im, const struct p2pg_record *r);
/* Writes the buckets changed since the last flush, inside the caller's transaction. 0 or -EIO. */
int p2pg_summary_flush(sqlite3 *db, struct p2pg_importer *im);

/* A devices blob (P2PG_BLOB_DEVICES) into the devices table, inside the caller's transaction: its
 * rows replace the process's earlier ones for the same ordinals. A blob that is not valid is
 * never imported (the caller counts it invalid). */
bool p2pg_store_devices_valid(const struct p2pg_spool_blob *b, int32_t devices);
/* 0, or -EIO. */
int p2pg_store_import_devices(sqlite3 *db, int64_t process_id, const struct p2pg_spool_blob *b);

/* Mapping records (store_mappings.c): statements prepared at a pass's first such record. */
struct p2pg_mapping_import {
	sqlite3_stmt *insert, *count, *end, *start;
};
/* Imports one mapping record inside the caller's transaction: 1 (a row), 0 (counted) or -EIO. */
int p2pg_store_mapping(sqlite3 *db, struct p2pg_mapping_import *mi, int64_t process_id,
		       uint32_t serial, uint64_t seq, const struct p2pg_record *r);
void p2pg_store_mapping_finish(struct p2pg_mapping_import *mi);

/* A blob's text split into its NUL-separated fields, within its length: returns how many (at most
 * max); the fields past them are "" (a damaged blob yields empty fields, never a read past it). */
int p2pg_store_blob_fields(const struct p2pg_spool_blob *b, const char **fields, int max);
/* The field at *pos, *pos moved past it; NULL after the last (within the blob's length). */
const char *p2pg_store_blob_next_field(const struct p2pg_spool_blob *b, uint32_t *pos);
