/* SPDX-License-Identifier: MIT */
/*
 * Summary mode (P2PGUARD_RECORD=summary): successful copies folded per (process, API, pair, path,
 * size bucket) into transfer_summary, with a histogram of their host times; outliers and failures
 * keep their rows.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "cleanup.h"
#include "spool.h"
#include "spool_ring.h"
#include "store-private.h"

#define HIST_BUCKETS 40 /* host_ns in powers of two up to ~18 minutes */

struct p2pg_summary_bucket {
	uint16_t api;
	int16_t src, dst;
	uint8_t path;
	uint8_t size_bucket;
	bool loaded;
	bool dirty;
	uint64_t count, bytes, failures, host_ns_total;
	uint64_t hist[HIST_BUCKETS];
};

static int log2_floor(uint64_t v)
{
	return v ? 63 - __builtin_clzll(v) : 0;
}

static struct p2pg_summary_bucket *bucket_for(struct p2pg_importer *im, const struct p2pg_record *r)
{
	uint8_t sb = p2pg_size_bucket(r->bytes);
	for (size_t k = 0; k < im->nbuckets; k++) {
		struct p2pg_summary_bucket *b = &im->buckets[k];
		if (b->api == r->api && b->src == r->src_device && b->dst == r->dst_device &&
		    b->path == r->path && b->size_bucket == sb)
			return b;
	}
	if ((im->nbuckets & (im->nbuckets + 1)) == 0 || im->nbuckets == 0) {
		size_t cap = im->nbuckets ? (im->nbuckets + 1) * 2 : 16;
		struct p2pg_summary_bucket *grown = realloc(im->buckets, cap * sizeof(*grown));
		if (!grown)
			return NULL;
		im->buckets = grown;
	}
	struct p2pg_summary_bucket *b = &im->buckets[im->nbuckets++];
	memset(b, 0, sizeof(*b));
	b->api = r->api;
	b->src = r->src_device;
	b->dst = r->dst_device;
	b->path = r->path;
	b->size_bucket = sb;
	return b;
}

/* The histogram bucket holding the median, or -1 with too few samples to judge. */
static int median_bucket(const struct p2pg_summary_bucket *b)
{
	if (b->count < 16)
		return -1;
	uint64_t seen = 0;
	for (int k = 0; k < HIST_BUCKETS; k++) {
		seen += b->hist[k];
		if (seen * 2 >= b->count)
			return k;
	}
	return HIST_BUCKETS - 1;
}

/* Summary mode keeps a row for a transfer that failed or took at least 8x its bucket's median. */
bool p2pg_summary_note(struct p2pg_importer *im, const struct p2pg_record *r)
{
	struct p2pg_summary_bucket *b = bucket_for(im, r);
	if (!b)
		return false;
	int hb = log2_floor(r->host_ns);
	if (hb >= HIST_BUCKETS)
		hb = HIST_BUCKETS - 1;
	int median = median_bucket(b);
	b->count++;
	b->bytes += r->bytes;
	b->host_ns_total += r->host_ns;
	b->hist[hb]++;
	b->dirty = true;
	if (r->status != 0) {
		b->failures++;
		return false;
	}
	return !(median >= 0 && hb >= median + 3);
}

/* Parameters 1 to 6 of both summary statements: the bucket's key. */
static void bind_bucket_key(sqlite3_stmt *st, int64_t process_id,
			    const struct p2pg_summary_bucket *b)
{
	sqlite3_bind_int64(st, 1, process_id);
	sqlite3_bind_text(st, 2, p2pg_api_name(b->api), -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 3, b->src);
	sqlite3_bind_int(st, 4, b->dst);
	sqlite3_bind_text(st, 5, p2pg_path_name(b->path), -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 6, b->size_bucket);
}

int p2pg_summary_flush(sqlite3 *db, struct p2pg_importer *im)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *load = NULL, *save = NULL;
	if (sqlite3_prepare_v2(
		db,
		"SELECT count, bytes, failures, host_ns_total, host_ns_hist FROM "
		"transfer_summary WHERE process_id=?1 AND api=?2 AND src_device=?3 AND "
		"dst_device=?4 AND path=?5 AND size_bucket=?6",
		-1, &load, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(
		db,
		"INSERT OR REPLACE INTO transfer_summary (process_id, api, src_device, "
		"dst_device, path, size_bucket, count, bytes, failures, host_ns_total, "
		"host_ns_hist) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11)",
		-1, &save, NULL) != SQLITE_OK)
		return -EIO;
	for (size_t k = 0; k < im->nbuckets; k++) {
		struct p2pg_summary_bucket *b = &im->buckets[k];
		if (!b->dirty)
			continue;
		if (!b->loaded) {
			/* Another import (an earlier run of recover) may have summarised part of
			 * this process already: add to it. */
			sqlite3_reset(load);
			bind_bucket_key(load, im->process_id, b);
			if (sqlite3_step(load) == SQLITE_ROW) {
				b->count += (uint64_t)sqlite3_column_int64(load, 0);
				b->bytes += (uint64_t)sqlite3_column_int64(load, 1);
				b->failures += (uint64_t)sqlite3_column_int64(load, 2);
				b->host_ns_total += (uint64_t)sqlite3_column_int64(load, 3);
				const char *h = (const char *)sqlite3_column_text(load, 4);
				for (int i = 0; h && *h && i < HIST_BUCKETS; i++) {
					while (*h == '[' || *h == ',' || *h == ' ')
						h++;
					b->hist[i] += strtoull(h, (char **)&h, 10);
				}
			}
			b->loaded = true;
		}
		char hist[HIST_BUCKETS * 21 + 4];
		size_t pos = 0;
		hist[pos++] = '[';
		for (int i = 0; i < HIST_BUCKETS; i++)
			pos += (size_t)snprintf(hist + pos, sizeof(hist) - pos, "%s%llu",
						i ? "," : "", (unsigned long long)b->hist[i]);
		snprintf(hist + pos, sizeof(hist) - pos, "]");
		sqlite3_reset(save);
		bind_bucket_key(save, im->process_id, b);
		sqlite3_bind_int64(save, 7, (int64_t)b->count);
		sqlite3_bind_int64(save, 8, (int64_t)b->bytes);
		sqlite3_bind_int64(save, 9, (int64_t)b->failures);
		sqlite3_bind_int64(save, 10, (int64_t)b->host_ns_total);
		sqlite3_bind_text(save, 11, hist, -1, SQLITE_TRANSIENT);
		if (sqlite3_step(save) != SQLITE_DONE)
			return -EIO;
		b->dirty = false;
	}
	return 0;
}
