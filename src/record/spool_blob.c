/* SPDX-License-Identifier: MIT */
#include "spool_blob.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "crc32c.h"
#include "spool.h"

struct p2pg_spool_blob *p2pg_spool_blob_claim(struct p2pg_spool_layout *spool)
{
	uint32_t n = atomic_load_explicit(&spool->header.blobs_in_file, memory_order_acquire);
	for (uint32_t k = 0; k < n && k < P2PG_SPOOL_BLOBS; k++) {
		struct p2pg_spool_blob *b = &spool->blobs[k];
		uint32_t st = atomic_load(&b->state);
		if (st != P2PG_BLOB_EMPTY && st != P2PG_BLOB_PERSISTED)
			continue;
		if (!atomic_compare_exchange_strong(&b->state, &st, P2PG_BLOB_WRITING))
			continue;
		b->length = 0;
		b->text[0] = '\0';
		return b;
	}
	return NULL;
}

void p2pg_spool_blob_add(struct p2pg_spool_blob *blob, const char *field)
{
	size_t room = sizeof(blob->text) - blob->length;
	if (room == 0)
		return;
	size_t n = strlen(field);
	if (n + 1 > room)
		n = room - 1;
	memcpy(blob->text + blob->length, field, n);
	blob->text[blob->length + n] = '\0';
	blob->length += (uint32_t)n + 1;
}

int p2pg_spool_blobs_grow(struct p2pg_spool_layout *spool, int fd)
{
	struct p2pg_spool_header *h = &spool->header;
	uint32_t n = atomic_load(&h->blobs_in_file);
	if (n + P2PG_SPOOL_BLOB_STEP > P2PG_SPOOL_BLOBS)
		return -ENOSPC;
	int r = p2pg_spool_grow(fd, offsetof(struct p2pg_spool_layout, blobs[n]),
				P2PG_SPOOL_BLOB_STEP * sizeof(struct p2pg_spool_blob));
	if (r < 0)
		return r;
	/* Two threads may grow the same slots at once: both allocations are the same, and one of
	 * them publishes. */
	atomic_compare_exchange_strong(&h->blobs_in_file, &n, n + P2PG_SPOOL_BLOB_STEP);
	return 0;
}

uint32_t p2pg_spool_blob_crc(const struct p2pg_spool_blob *blob)
{
	const char *from = (const char *)blob + offsetof(struct p2pg_spool_blob, kind);
	uint32_t crc = p2pg_crc32c(0, from,
				   offsetof(struct p2pg_spool_blob, crc) -
				       offsetof(struct p2pg_spool_blob, kind));
	return p2pg_crc32c(crc, blob->text, blob->length);
}

void p2pg_spool_blob_publish(struct p2pg_spool_blob *blob)
{
	blob->crc = p2pg_spool_blob_crc(blob);
	atomic_store_explicit(&blob->state, P2PG_BLOB_READY, memory_order_release);
}
