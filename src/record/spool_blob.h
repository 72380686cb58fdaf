/* SPDX-License-Identifier: MIT */
/*
 * The spool's variable-size records (struct p2pg_spool_blob: failures, crashes, NCCL's
 * communicators, the devices, rows' GPU times): a slot claimed, filled with fields, checksummed and
 * published, async-signal-safe except where the file must grow.
 */
#pragma once

#include "p2pguard/spool.h"

#include <stdint.h>

/*
 * Claims a blob slot the file holds (one that is empty or already persisted). Returns NULL when
 * every such slot waits for the drainer. The caller fills it and calls p2pg_spool_blob_publish.
 * Async-signal-safe: it never grows the file (see p2pg_spool_blobs_grow).
 */
struct p2pg_spool_blob *p2pg_spool_blob_claim(struct p2pg_spool_layout *spool);
/* Adds P2PG_SPOOL_BLOB_STEP blob slots to the file (fd); 0, or a negative errno (-ENOSPC when all
 * are there already, -EFBIG for the file size limit). */
int p2pg_spool_blobs_grow(struct p2pg_spool_layout *spool, int fd);
/* Checksums the blob and marks it READY. Async-signal-safe. */
void p2pg_spool_blob_publish(struct p2pg_spool_blob *blob);
/* The checksum a blob's crc must hold (length already checked to fit text). */
uint32_t p2pg_spool_blob_crc(const struct p2pg_spool_blob *blob);

/* Appends a NUL-terminated field to blob->text; truncates to fit. */
void p2pg_spool_blob_add(struct p2pg_spool_blob *blob, const char *field);
