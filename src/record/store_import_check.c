/* SPDX-License-Identifier: MIT */
/*
 * What the import believes of a spool: its header, each ring's counters, each record, blob and
 * overflow aggregate, and how much of them the file really holds. A spool is a shared file that a
 * dying writer, a crash, a disk or another user can leave damaged, and whatever passes here becomes
 * a row; so the checks are kept together, apart from the SQL that writes the rows
 * (store_import.c), and read as one statement of what a writer can have published.
 */
#include <signal.h>
#include <stddef.h>
#include <string.h>

#include "api.h"
#include "mapping_record.h"
#include "row_times.h"
#include "spool.h"
#include "spool_ring.h"
#include "spool_blob.h"
#include "store-private.h"
#include "store_nccl.h"

bool p2pg_spool_header_valid(const struct p2pg_spool_header *h)
{
	return memcmp(h->magic, P2PG_SPOOL_MAGIC, sizeof(h->magic)) == 0 &&
	       h->header_size == sizeof(*h) && h->threads == P2PG_SPOOL_THREADS &&
	       h->ring == P2PG_SPOOL_RING && h->blobs == P2PG_SPOOL_BLOBS &&
	       h->blob_size == P2PG_SPOOL_BLOB_SIZE && h->aggs == P2PG_SPOOL_AGGS &&
	       h->reserve == P2PG_SPOOL_RESERVE &&
	       h->thread_size == sizeof(struct p2pg_spool_thread) &&
	       h->blob_step == P2PG_SPOOL_BLOB_STEP && h->header_crc == p2pg_spool_header_crc(h) &&
	       h->pid > 0 && h->started_ns <= INT64_MAX;
}

/* A device a call that succeeded can have named: an ordinal of the process's, once their count is
 * known. (A failed call's devices are the program's own arguments: any value is honest there.) */
static bool device_possible(int32_t device, int32_t devices)
{
	return device >= 0 && (devices <= 0 || device < devices);
}

/* A mapping names -1 for a device it does not know (an export's accessor, an owner a failed open
 * could not tell). */
static bool mapping_device_possible(int32_t device, int32_t devices)
{
	return device == -1 || device_possible(device, devices);
}

/*
 * What a writer can have published: anything else is damage (a bit flip, a zero-filled page of a
 * file that a crash or a disk left behind), skipped and counted, never a row. The checksum catches
 * nearly all of it; the values are checked too, since what they would put in the database must be
 * possible whatever the checksum says: a known kind, API and path or action, no count past what a
 * signed column holds, and for a call that succeeded devices of the process's. NCCL's records
 * keep other things in the same fields: nccl_codes.h checks them.
 */
bool p2pg_store_record_valid(const struct p2pg_record *r, uint32_t crc, uint64_t seq,
			     int32_t devices)
{
	if (!p2pg_spool_record_crc_ok(r, crc, seq))
		return false;
	if (p2pg_nccl_record_kind(r->kind))
		return p2pg_nccl_record_valid(r);
	if (r->api >= P2PG_API_COUNT || r->bytes > INT64_MAX || r->host_ns > INT64_MAX ||
	    r->gpu_ns > INT64_MAX || r->started_ns > INT64_MAX)
		return false;
	switch (r->kind) {
	case P2PG_REC_TRANSFER:
		if (r->path < P2PG_PATH_P2P || r->path > P2PG_PATH_CAPTURED)
			return false;
		break;
	case P2PG_REC_PEER:
		if (r->path > P2PG_ACTION_REPORTED)
			return false;
		break;
	case P2PG_REC_MAPPING:
		/* The guard counts a process's own mapping only when it succeeded (the count's
		 * device is then one of the process's), and an address is a pointer, which a
		 * signed column holds. */
		return r->path >= P2PG_MAP_EXPORT && r->path <= P2PG_MAP_END &&
		       r->stream <= INT64_MAX &&
		       (r->status == 0 || !(r->flags & P2PG_MAP_F_COUNTED)) &&
		       (r->status != 0 || (mapping_device_possible(r->src_device, devices) &&
					   mapping_device_possible(r->dst_device, devices)));
	default:
		return false; /* a kind this version does not know */
	}
	return r->status != 0 ||
	       (device_possible(r->src_device, devices) && device_possible(r->dst_device, devices));
}

bool p2pg_store_blob_valid(const struct p2pg_spool_blob *b, int32_t devices)
{
	if (b->length > sizeof(b->text) || (b->length > 0 && b->text[b->length - 1] != '\0'))
		return false;
	if (b->crc != p2pg_spool_blob_crc(b) || b->started_ns > INT64_MAX)
		return false;
	switch (b->kind) {
	case P2PG_BLOB_FAILURE:
		/* A probe's finding is a failure row of a call that succeeded. */
		return b->api < P2PG_API_COUNT &&
		       (b->status != 0 || (device_possible(b->device, devices) &&
					   device_possible(b->peer_device, devices)));
	case P2PG_BLOB_CRASH:
		/* A fatal signal's number; its other fields are not the crash's: not imported. */
		return b->signal > 0 && b->signal < NSIG;
	case P2PG_BLOB_NCCL_COMM:
		return p2pg_nccl_blob_valid(b);
	case P2PG_BLOB_DEVICES:
		return p2pg_store_devices_valid(b, devices);
	case P2PG_BLOB_ROW_TIMES:
		return p2pg_row_times_valid(b);
	}
	return false;
}

/* An overflow aggregate a writer can have left: only successful copies fold. Its counters change
 * under the reader (no checksum can hold them), so they are checked by what they must satisfy
 * whenever read: bytes of at least 2^size_bucket a call. */
bool p2pg_store_aggregate_valid(const struct p2pg_spool_agg *a, const struct p2pg_spool_totals *sum,
				int32_t devices)
{
	return a->api < P2PG_API_COUNT && a->path >= P2PG_PATH_P2P &&
	       a->path <= P2PG_PATH_CAPTURED && a->status == 0 && a->size_bucket < 64 &&
	       device_possible(a->src_device, devices) && device_possible(a->dst_device, devices) &&
	       sum->count <= INT64_MAX && sum->bytes <= INT64_MAX && sum->host_ns <= INT64_MAX &&
	       (sum->bytes >> a->size_bucket) >= sum->count;
}

/* A ring whose counters no writer could have left. */
bool p2pg_store_ring_valid(const struct p2pg_spool_thread *t, uint64_t head, uint64_t tail)
{
	uint32_t state =
	    atomic_load_explicit(&((struct p2pg_spool_thread *)t)->state, memory_order_relaxed);
	if (state > P2PG_SLOT_RETIRED || head < tail || head - tail > P2PG_SPOOL_RING)
		return false;
	return head == 0 || t->serial != 0;
}

/* What the file holds of ring k: true when it may be read. A ring the header says is there but the
 * file ends before is damage, counted once. */
bool p2pg_store_ring_readable(struct p2pg_importer *im, const struct p2pg_spool_header *h, int k)
{
	if (!p2pg_spool_ring_in_file(h, k))
		return false;
	if (!im->file_size || offsetof(struct p2pg_spool_layout, threads[k + 1]) <= im->file_size)
		return true;
	if (!im->ring_damaged[k])
		im->invalid++;
	im->ring_damaged[k] = true;
	im->truncated = true;
	return false;
}

/* The blob slots that may be read: those the header says the file holds, up to its end. */
uint32_t p2pg_store_blobs_readable(struct p2pg_importer *im, const struct p2pg_spool_header *h)
{
	uint32_t n = atomic_load_explicit(&((struct p2pg_spool_header *)h)->blobs_in_file,
					  memory_order_acquire);
	if (n > P2PG_SPOOL_BLOBS)
		n = P2PG_SPOOL_BLOBS;
	if (!im->file_size)
		return n;
	uint32_t fit = 0;
	while (fit < n && offsetof(struct p2pg_spool_layout, blobs[fit + 1]) <= im->file_size)
		fit++;
	if (fit < n) {
		if (!im->blobs_cut)
			im->invalid++;
		im->blobs_cut = true;
		im->truncated = true;
	}
	return fit;
}
