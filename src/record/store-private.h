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

/* Summary mode: counts r in its bucket. True when r is folded there and needs no row; a failure,
 * or an outlier (at least 8x its bucket's median host time), keeps its row (false). */
bool p2pg_summary_note(struct p2pg_importer *im, const struct p2pg_record *r);
/* Writes the buckets changed since the last flush, inside the caller's transaction. 0 or -EIO. */
int p2pg_summary_flush(sqlite3 *db, struct p2pg_importer *im);

/* A devices blob (P2PG_BLOB_DEVICES) into the devices table, inside the caller's transaction: its
 * rows replace the process's earlier ones for the same ordinals. A blob that is not valid is
 * never imported (the caller counts it invalid). */
bool p2pg_store_devices_valid(const struct p2pg_spool_blob *b);
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
