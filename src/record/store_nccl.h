/* SPDX-License-Identifier: MIT */
/* The import of NCCL's records, blobs and overflow aggregates (store_nccl.c), inside the store's
 * pass; nccl_codes.h says what they hold. */
#pragma once

#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>

#include "p2pguard/spool.h"
#include "store.h"

static inline bool p2pg_nccl_record_kind(uint8_t kind)
{
	return kind == P2PG_REC_NCCL_OP || kind == P2PG_REC_NCCL_COMM_END;
}

/* What a writer of NCCL records can have published; anything else is damage. */
bool p2pg_nccl_record_valid(const struct p2pg_record *r);
bool p2pg_nccl_blob_valid(const struct p2pg_spool_blob *b);
/* An overflow aggregate of NCCL operations (its api is P2PG_NCCL_API + a function). */
bool p2pg_nccl_agg(const struct p2pg_spool_agg *a);

/* Each returns the rows written (0 or 1) or a negative errno; serial and seq: the record's ring
 * and place in it. */
int p2pg_nccl_import_record(sqlite3 *db, struct p2pg_importer *im, uint32_t serial, uint64_t seq,
			    const struct p2pg_record *r);
int p2pg_nccl_import_comm(sqlite3 *db, int64_t process_id, const struct p2pg_spool_blob *b);
int p2pg_nccl_import_agg(sqlite3 *db, int64_t process_id, const struct p2pg_spool_thread *t,
			 const struct p2pg_spool_agg *a, const struct p2pg_spool_totals *sum);

/* The pass ends: ok, before its COMMIT (summary buckets written; 0 or -EIO); !ok, after a
 * rollback (what the pass folded is forgotten: its records are imported again). Either way the
 * pass's statements are finalized. */
int p2pg_nccl_import_end(sqlite3 *db, struct p2pg_importer *im, bool ok);
void p2pg_nccl_import_free(struct p2pg_importer *im);

/* A process is gone and its spool imported: what its drainer wrote as still running never ended
 * that it could see ('unreported'). */
void p2pg_nccl_process_ended(sqlite3 *db, int64_t process_id);
