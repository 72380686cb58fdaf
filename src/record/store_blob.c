/* SPDX-License-Identifier: MIT */
/* A blob's fields, read by every importer of blobs (failures, crashes, NCCL's communicators, the
 * devices, rows' GPU times): below them all, so that none depends on another for it. */
#include <string.h>

#include "store-private.h"

const char *p2pg_store_blob_next_field(const struct p2pg_spool_blob *b, uint32_t *pos)
{
	uint32_t len = b->length < sizeof(b->text) ? b->length : (uint32_t)sizeof(b->text);
	if (*pos >= len)
		return NULL;
	const char *field = b->text + *pos;
	*pos += (uint32_t)strnlen(field, len - *pos) + 1;
	return field;
}

int p2pg_store_blob_fields(const struct p2pg_spool_blob *b, const char **fields, int max)
{
	int n = 0;
	uint32_t pos = 0;
	const char *field;
	while (n < max && (field = p2pg_store_blob_next_field(b, &pos)))
		fields[n++] = field;
	for (int k = n; k < max; k++)
		fields[k] = "";
	return n;
}
