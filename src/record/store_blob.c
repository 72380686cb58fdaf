/* SPDX-License-Identifier: MIT */
/* A blob's fields, read by every importer of blobs (failures, crashes, NCCL's communicators, the
 * devices): below them all, so that none depends on another for it. */
#include <string.h>

#include "store-private.h"

int p2pg_store_blob_fields(const struct p2pg_spool_blob *b, const char **fields, int max)
{
	int n = 0;
	uint32_t pos = 0;
	uint32_t len = b->length < sizeof(b->text) ? b->length : (uint32_t)sizeof(b->text);
	while (pos < len && n < max) {
		fields[n++] = b->text + pos;
		pos += (uint32_t)strnlen(b->text + pos, len - pos) + 1;
	}
	for (int k = n; k < max; k++)
		fields[k] = "";
	return n;
}
