/* SPDX-License-Identifier: MIT */
/*
 * The import of a spool's records, blobs and overflow aggregates into SQLite, one transaction a
 * pass: the statements and rows, each ring's progress, and the ring space handed back to the
 * writers once the rows are durable. What may be believed of the file (damage, truncation) is
 * store_import_check.c's; the GPU times and stalls written later, store_timing.c's.
 */
#include "store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "backtrace.h"
#include "cleanup.h"
#include "crc32c.h"
#include "row_times.h"
#include "spool.h"
#include "spool_ring.h"
#include "store-private.h"
#include "store_nccl.h"

void p2pg_importer_init(struct p2pg_importer *im, enum p2pg_record_mode record)
{
	memset(im, 0, sizeof(*im));
	im->record = record;
	/* A count no ring has: the first pass reads every ring's aggregates, even one whose owner
	 * died between a fold and its count. */
	memset(im->folded, 0xff, sizeof(im->folded));
	p2pg_crc32c_init();
}

void p2pg_importer_release(struct p2pg_importer *im)
{
	free(im->timed);
	im->timed = NULL;
	im->ntimed = im->cap_timed = 0;
	free(im->buckets);
	im->buckets = NULL;
	im->nbuckets = 0;
	p2pg_nccl_import_free(im);
}

/* ---- import ---- */

#define TRANSFER_COLUMNS 14
#define TRANSFER_BATCH	 32

struct pending_transfer {
	struct p2pg_record r;
	uint32_t serial;
	uint64_t seq;
};

struct statements {
	sqlite3_stmt *transfer_many;
	int batched;
	struct pending_transfer batch[TRANSFER_BATCH];
	sqlite3_stmt *transfer, *peer, *failure, *crash, *progress_get, *progress_set, *overflow;
	struct p2pg_mapping_import mappings;
};

static void statements_finalize(struct statements *s)
{
	sqlite3_finalize(s->transfer_many);
	sqlite3_finalize(s->transfer);
	sqlite3_finalize(s->peer);
	sqlite3_finalize(s->failure);
	sqlite3_finalize(s->crash);
	sqlite3_finalize(s->progress_get);
	sqlite3_finalize(s->progress_set);
	sqlite3_finalize(s->overflow);
	p2pg_store_mapping_finish(&s->mappings);
}

#define TRANSFER_INSERT                                                                      \
	"INSERT INTO transfers (process_id, thread_id, api, src_device, dst_device, bytes, " \
	"stream, "                                                                           \
	"path, status, started_ns, host_ns, gpu_ns, thread_serial, seq) VALUES "

/* Rows go in TRANSFER_BATCH at a time: one statement step per batch instead of per row is most of
 * what it takes to sustain a million rows a second. */
static int prepare_transfer_many(sqlite3 *db, sqlite3_stmt **st)
{
	char sql[TRANSFER_BATCH * 48 + 256];
	size_t pos = (size_t)snprintf(sql, sizeof(sql), "%s", TRANSFER_INSERT);
	for (int k = 0; k < TRANSFER_BATCH; k++)
		pos += (size_t)snprintf(sql + pos, sizeof(sql) - pos,
					"%s(?,?,?,?,?,?,?,?,?,?,?,?,?,?)", k ? "," : "");
	return sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL);
}

static int statements_prepare(sqlite3 *db, struct statements *s)
{
	memset(s, 0, sizeof(*s));
	if (prepare_transfer_many(db, &s->transfer_many) != SQLITE_OK ||
	    sqlite3_prepare_v3(
		db,
		"INSERT INTO transfers (process_id, thread_id, api, src_device, "
		"dst_device, bytes, stream, path, status, started_ns, host_ns, gpu_ns, "
		"thread_serial, seq) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14)",
		-1, SQLITE_PREPARE_PERSISTENT, &s->transfer, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v3(
		db,
		"INSERT INTO peer_access (process_id, thread_id, api, device, peer_device, "
		"flags, status, started_ns, result, thread_serial, seq, action) VALUES "
		"(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12)",
		-1, SQLITE_PREPARE_PERSISTENT, &s->peer, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v3(
		db,
		"INSERT OR IGNORE INTO failures (process_id, thread_id, api, args, status, "
		"error_name, error_string, device, peer_device, rule_id, diagnosis, advice, "
		"backtrace, python_stack, evidence, action, started_ns, thread_serial, seq) "
		"VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18,?19)",
		-1, SQLITE_PREPARE_PERSISTENT, &s->failure, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v3(
		db,
		"INSERT OR IGNORE INTO crashes (process_id, thread_id, signal, backtrace, "
		"started_ns, python_stack) VALUES (?1,?2,?3,?4,?5,?6)",
		-1, SQLITE_PREPARE_PERSISTENT, &s->crash, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v3(db,
			       "SELECT imported FROM spool_progress WHERE process_id=?1 AND "
			       "thread_serial=?2",
			       -1, SQLITE_PREPARE_PERSISTENT, &s->progress_get,
			       NULL) != SQLITE_OK ||
	    sqlite3_prepare_v3(db,
			       "INSERT OR REPLACE INTO spool_progress (process_id, thread_serial, "
			       "imported) VALUES (?1,?2,?3)",
			       -1, SQLITE_PREPARE_PERSISTENT, &s->progress_set,
			       NULL) != SQLITE_OK ||
	    /* Snapshots of counters that only grow: max() makes a repeated import a no-op. */
	    sqlite3_prepare_v3(
		db,
		"INSERT INTO transfer_overflow (process_id, thread_serial, thread_id, api, "
		"src_device, dst_device, path, status, size_bucket, count, bytes, host_ns_total) "
		"VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12) ON CONFLICT (process_id, "
		"thread_serial, api, src_device, dst_device, path, status, size_bucket) DO UPDATE "
		"SET count=max(count, excluded.count), bytes=max(bytes, excluded.bytes), "
		"host_ns_total=max(host_ns_total, excluded.host_ns_total)",
		-1, SQLITE_PREPARE_PERSISTENT, &s->overflow, NULL) != SQLITE_OK) {
		statements_finalize(s);
		return -EIO;
	}
	return 0;
}

#define FIELD_LEN(field) ((int)strnlen((field), sizeof(field)))

static int64_t process_row(sqlite3 *db, const struct p2pg_spool_header *h, bool dead)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *ins = NULL, *sel = NULL;
	if (sqlite3_prepare_v2(
		db,
		"INSERT OR IGNORE INTO processes (pid, hostname, rank, local_rank, cmdline, "
		"started_ns, mode, guard_version, driver_version, boot_id, recovered, run_id) "
		"VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12)",
		-1, &ins, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(
		db, "SELECT id FROM processes WHERE boot_id=?1 AND pid=?2 AND started_ns=?3", -1,
		&sel, NULL) != SQLITE_OK)
		return -EIO;
	sqlite3_bind_int(ins, 1, h->pid);
	/* A damaged file's text fields need not be terminated: bound by their arrays. */
	sqlite3_bind_text(ins, 2, h->hostname, FIELD_LEN(h->hostname), SQLITE_STATIC);
	if (h->rank >= 0)
		sqlite3_bind_int(ins, 3, h->rank);
	if (h->local_rank >= 0)
		sqlite3_bind_int(ins, 4, h->local_rank);
	sqlite3_bind_text(ins, 5, h->cmdline, FIELD_LEN(h->cmdline), SQLITE_STATIC);
	sqlite3_bind_int64(ins, 6, (int64_t)h->started_ns);
	sqlite3_bind_text(ins, 7, h->mode, FIELD_LEN(h->mode), SQLITE_STATIC);
	sqlite3_bind_text(ins, 8, h->guard_version, FIELD_LEN(h->guard_version), SQLITE_STATIC);
	int driver = atomic_load(&((struct p2pg_spool_header *)h)->driver_version);
	if (driver > 0)
		sqlite3_bind_int(ins, 9, driver);
	sqlite3_bind_text(ins, 10, h->boot_id, FIELD_LEN(h->boot_id), SQLITE_STATIC);
	/* Recovered: imported after the process was gone, and it did not end by exit() (one that
	 * did may still leave records when its last import could not finish: a locked database). */
	bool recovered = dead && !atomic_load(&((struct p2pg_spool_header *)h)->clean_exit);
	sqlite3_bind_int(ins, 11, recovered ? 1 : 0);
	if (h->run_id[0])
		sqlite3_bind_text(ins, 12, h->run_id, FIELD_LEN(h->run_id), SQLITE_STATIC);
	if (sqlite3_step(ins) != SQLITE_DONE)
		return -EIO;
	sqlite3_bind_text(sel, 1, h->boot_id, FIELD_LEN(h->boot_id), SQLITE_STATIC);
	sqlite3_bind_int(sel, 2, h->pid);
	sqlite3_bind_int64(sel, 3, (int64_t)h->started_ns);
	if (sqlite3_step(sel) != SQLITE_ROW)
		return -EIO;
	int64_t id = sqlite3_column_int64(sel, 0);
	if (recovered) {
		char sql[96];
		snprintf(sql, sizeof(sql), "UPDATE processes SET recovered=1 WHERE id=%lld",
			 (long long)id);
		sqlite3_exec(db, sql, NULL, NULL, NULL);
	}
	return id;
}

static int by_start(const void *a, const void *b)
{
	const struct p2pg_pending_timing *x = a, *y = b;
	return (x->started_ns > y->started_ns) - (x->started_ns < y->started_ns);
}

/* Remembers a timed copy's row until the pass commits (a rolled-back pass hands nothing over). */
static void note_timed(struct p2pg_importer *im, int64_t row, const struct pending_transfer *p)
{
	const struct p2pg_record *r = &p->r;
	if (!(r->flags & (P2PG_REC_F_TIMED | P2PG_REC_F_CUPTI)) || r->gpu_ns || !im->on_timed)
		return;
	struct p2pg_pending_timing t = {
	    .row = row,
	    .slot = (uint32_t)r->value,
	    .cupti = (r->flags & P2PG_REC_F_CUPTI) != 0,
	    .cupti_context = (uint16_t)(r->flags >> P2PG_REC_CUPTI_CONTEXT_SHIFT),
	    .src_device = r->src_device,
	    .dst_device = r->dst_device,
	    .started_ns = r->started_ns,
	    .bytes = r->bytes,
	    .serial = p->serial,
	    .seq = p->seq,
	};
	if (im->ntimed == im->cap_timed) {
		size_t cap = im->cap_timed ? im->cap_timed * 2 : 256;
		struct p2pg_pending_timing *grown = realloc(im->timed, cap * sizeof(*grown));
		if (!grown) {
			/* Row 0: "no row for this time", which gives the event pair back. */
			t.row = 0;
			im->on_timed(im->userdata, &t);
			return;
		}
		im->timed = grown;
		im->cap_timed = cap;
	}
	im->timed[im->ntimed++] = t;
}

static void bind_transfer(sqlite3_stmt *st, int base, int64_t process_id,
			  const struct pending_transfer *p)
{
	const struct p2pg_record *r = &p->r;
	sqlite3_bind_int64(st, base + 1, process_id);
	sqlite3_bind_int64(st, base + 2, r->tid);
	sqlite3_bind_text(st, base + 3, p2pg_api_name(r->api), -1, SQLITE_STATIC);
	sqlite3_bind_int(st, base + 4, r->src_device);
	sqlite3_bind_int(st, base + 5, r->dst_device);
	sqlite3_bind_int64(st, base + 6, (int64_t)r->bytes);
	sqlite3_bind_int64(st, base + 7, (int64_t)r->stream);
	sqlite3_bind_text(st, base + 8, p2pg_path_name(r->path), -1, SQLITE_STATIC);
	sqlite3_bind_int(st, base + 9, r->status);
	sqlite3_bind_int64(st, base + 10, (int64_t)r->started_ns);
	sqlite3_bind_int64(st, base + 11, (int64_t)r->host_ns);
	if (r->gpu_ns)
		sqlite3_bind_int64(st, base + 12, (int64_t)r->gpu_ns);
	else
		sqlite3_bind_null(st, base + 12);
	sqlite3_bind_int64(st, base + 13, p->serial);
	sqlite3_bind_int64(st, base + 14, (int64_t)p->seq);
}

/* Writes the transfers held back for batching. Rows of one statement get consecutive ids. */
static int flush_transfers(sqlite3 *db, struct statements *s, struct p2pg_importer *im)
{
	int n = s->batched;
	s->batched = 0;
	if (n == 0)
		return 0;
	int64_t last;
	if (n == TRANSFER_BATCH) {
		sqlite3_reset(s->transfer_many);
		for (int k = 0; k < n; k++)
			bind_transfer(s->transfer_many, k * TRANSFER_COLUMNS, im->process_id,
				      &s->batch[k]);
		if (sqlite3_step(s->transfer_many) != SQLITE_DONE)
			return -EIO;
		last = sqlite3_last_insert_rowid(db);
		for (int k = 0; k < n; k++)
			note_timed(im, last - (n - 1 - k), &s->batch[k]);
		return 0;
	}
	for (int k = 0; k < n; k++) {
		sqlite3_reset(s->transfer);
		bind_transfer(s->transfer, 0, im->process_id, &s->batch[k]);
		if (sqlite3_step(s->transfer) != SQLITE_DONE)
			return -EIO;
		note_timed(im, sqlite3_last_insert_rowid(db), &s->batch[k]);
	}
	return 0;
}

/* A ring's overflow aggregates as they stand, in the pass's transaction. */
static int import_aggregates(sqlite3 *db, struct statements *s, struct p2pg_importer *im, int ring,
			     const struct p2pg_spool_thread *t, int32_t devices)
{
	int64_t process_id = im->process_id;
	for (int k = 0; k < P2PG_SPOOL_AGGS; k++) {
		const struct p2pg_spool_agg *a = &t->agg[k];
		if (!atomic_load_explicit(&a->used, memory_order_acquire))
			continue;
		struct p2pg_spool_totals sum;
		if (!p2pg_spool_agg_read(a, &sum) || sum.count == 0)
			continue;
		/* NCCL's operations fold into the same aggregates (nccl_codes.h): theirs to check.
		 */
		if (p2pg_nccl_agg(a)) {
			if (p2pg_nccl_import_agg(db, process_id, t, a, &sum) < 0)
				return -EIO;
			continue;
		}
		if (!p2pg_store_aggregate_valid(a, &sum, devices)) {
			uint64_t bit = 1ull << (k & 63);
			if (!(im->agg_damaged[ring][k >> 6] & bit))
				im->invalid++;
			im->agg_damaged[ring][k >> 6] |= bit;
			continue;
		}
		sqlite3_stmt *st = s->overflow;
		sqlite3_reset(st);
		sqlite3_bind_int64(st, 1, process_id);
		sqlite3_bind_int64(st, 2, t->serial);
		sqlite3_bind_int64(st, 3, t->tid);
		sqlite3_bind_text(st, 4, p2pg_api_name(a->api), -1, SQLITE_STATIC);
		sqlite3_bind_int(st, 5, a->src_device);
		sqlite3_bind_int(st, 6, a->dst_device);
		sqlite3_bind_text(st, 7, p2pg_path_name(a->path), -1, SQLITE_STATIC);
		sqlite3_bind_int(st, 8, a->status);
		sqlite3_bind_int(st, 9, a->size_bucket);
		sqlite3_bind_int64(st, 10, (int64_t)sum.count);
		sqlite3_bind_int64(st, 11, (int64_t)sum.bytes);
		sqlite3_bind_int64(st, 12, (int64_t)sum.host_ns);
		if (sqlite3_step(st) != SQLITE_DONE)
			return -EIO;
	}
	return 0;
}

/* A retired ring's aggregates, all imported, cleared for the ring's next owner (a new serial). */
static void clear_aggregates(struct p2pg_spool_thread *t)
{
	for (int k = 0; k < P2PG_SPOOL_AGGS; k++) {
		struct p2pg_spool_agg *a = &t->agg[k];
		if (!atomic_load_explicit(&a->used, memory_order_relaxed))
			continue;
		for (int s = 0; s < 2; s++) {
			atomic_store_explicit(&a->slot[s].count, 0, memory_order_relaxed);
			atomic_store_explicit(&a->slot[s].bytes, 0, memory_order_relaxed);
			atomic_store_explicit(&a->slot[s].host_ns, 0, memory_order_relaxed);
		}
		atomic_store_explicit(&a->version, 0, memory_order_relaxed);
		atomic_store_explicit(&a->used, 0, memory_order_relaxed);
	}
}

static int insert_record(sqlite3 *db, struct statements *s, struct p2pg_importer *im,
			 const struct p2pg_spool_thread *t, uint64_t seq,
			 const struct p2pg_record *r)
{
	sqlite3_stmt *st;
	if (r->kind == P2PG_REC_TRANSFER) {
		if (im->record == P2PG_RECORD_SUMMARY && p2pg_summary_note(im, r)) {
			note_timed(im, 0, &(struct pending_transfer){*r, t->serial, seq});
			return 0;
		}
		s->batch[s->batched++] = (struct pending_transfer){*r, t->serial, seq};
		if (s->batched == TRANSFER_BATCH && flush_transfers(db, s, im) < 0)
			return -EIO;
		return 1;
	} else if (p2pg_nccl_record_kind(r->kind)) {
		return p2pg_nccl_import_record(db, im, t->serial, seq, r);
	} else if (r->kind == P2PG_REC_PEER) {
		st = s->peer;
		sqlite3_reset(st);
		sqlite3_bind_int64(st, 1, im->process_id);
		sqlite3_bind_int64(st, 2, r->tid);
		sqlite3_bind_text(st, 3, p2pg_api_name(r->api), -1, SQLITE_STATIC);
		sqlite3_bind_int(st, 4, r->src_device);
		sqlite3_bind_int(st, 5, r->dst_device);
		sqlite3_bind_int64(st, 6, r->flags);
		sqlite3_bind_int(st, 7, r->status);
		sqlite3_bind_int64(st, 8, (int64_t)r->started_ns);
		if (r->api == P2PG_API_cudaDeviceCanAccessPeer ||
		    r->api == P2PG_API_cuDeviceCanAccessPeer ||
		    r->api == P2PG_API_cudaDeviceGetP2PAttribute ||
		    r->api == P2PG_API_cuDeviceGetP2PAttribute)
			sqlite3_bind_int(st, 9, r->value);
		else
			sqlite3_bind_null(st, 9);
		sqlite3_bind_int64(st, 10, t->serial);
		sqlite3_bind_int64(st, 11, (int64_t)seq);
		sqlite3_bind_text(st, 12, p2pg_action_name(r->path), -1, SQLITE_STATIC);
	} else if (r->kind == P2PG_REC_MAPPING) {
		return p2pg_store_mapping(db, &s->mappings, im->process_id, t->serial, seq, r);
	} else {
		return 0; /* a record of a kind this version does not know: skipped, not fatal */
	}
	if (sqlite3_step(st) != SQLITE_DONE)
		return -EIO;
	return 1;
}

static void bind_text_or_null(sqlite3_stmt *st, int index, const char *text)
{
	if (text && *text)
		sqlite3_bind_text(st, index, text, -1, SQLITE_TRANSIENT);
	else
		sqlite3_bind_null(st, index);
}

enum failure_field {
	FF_ARGS,
	FF_ERROR_NAME,
	FF_ERROR_STRING,
	FF_RULE_ID,
	FF_DIAGNOSIS,
	FF_ADVICE,
	FF_BACKTRACE,
	FF_PYTHON_STACK,
	FF_EVIDENCE,
	FF_ACTION,
	FF_COUNT
};

static int insert_blob(sqlite3 *db, sqlite3_stmt *failure, sqlite3_stmt *crash, int64_t process_id,
		       const struct p2pg_spool_blob *b)
{
	if (b->kind == P2PG_BLOB_NCCL_COMM)
		return p2pg_nccl_import_comm(db, process_id, b);
	if (b->kind == P2PG_BLOB_ROW_TIMES)
		return p2pg_row_times_import(db, process_id, b);
	if (b->kind == P2PG_BLOB_FAILURE) {
		const char *f[FF_COUNT];
		p2pg_store_blob_fields(b, f, FF_COUNT);
		sqlite3_stmt *st = failure;
		sqlite3_reset(st);
		sqlite3_bind_int64(st, 1, process_id);
		sqlite3_bind_int64(st, 2, b->tid);
		sqlite3_bind_text(st, 3, p2pg_api_name(b->api), -1, SQLITE_STATIC);
		bind_text_or_null(st, 4, f[FF_ARGS]);
		sqlite3_bind_int(st, 5, b->status);
		bind_text_or_null(st, 6, f[FF_ERROR_NAME]);
		bind_text_or_null(st, 7, f[FF_ERROR_STRING]);
		sqlite3_bind_int(st, 8, b->device);
		sqlite3_bind_int(st, 9, b->peer_device);
		bind_text_or_null(st, 10, f[FF_RULE_ID]);
		bind_text_or_null(st, 11, f[FF_DIAGNOSIS]);
		bind_text_or_null(st, 12, f[FF_ADVICE]);
		bind_text_or_null(st, 13, f[FF_BACKTRACE]);
		bind_text_or_null(st, 14, f[FF_PYTHON_STACK]);
		bind_text_or_null(st, 15, f[FF_EVIDENCE]);
		bind_text_or_null(st, 16, f[FF_ACTION]);
		sqlite3_bind_int64(st, 17, (int64_t)b->started_ns);
		sqlite3_bind_int64(st, 18, b->serial);
		sqlite3_bind_int64(st, 19, (int64_t)b->seq);
		return sqlite3_step(st) == SQLITE_DONE ? 0 : -EIO;
	}
	if (b->kind == P2PG_BLOB_CRASH) {
		/* The raw backtrace, then the Python stack (crash.c writes them). */
		const char *f[2];
		p2pg_store_blob_fields(b, f, 2);
		/* The handler stored raw addresses with their modules; symbols come from the files.
		 */
		size_t cap = 64 << 10;
		char *text = malloc(cap);
		if (!text)
			return -ENOMEM;
		p2pg_backtrace_symbolise_raw(f[0], text, cap);
		sqlite3_stmt *st = crash;
		sqlite3_reset(st);
		sqlite3_bind_int64(st, 1, process_id);
		sqlite3_bind_int64(st, 2, b->tid);
		sqlite3_bind_int(st, 3, b->signal);
		bind_text_or_null(st, 4, text);
		sqlite3_bind_int64(st, 5, (int64_t)b->started_ns);
		bind_text_or_null(st, 6, f[1]);
		int rc = sqlite3_step(st) == SQLITE_DONE ? 0 : -EIO;
		free(text);
		return rc;
	}
	return 0;
}

int p2pg_store_import(sqlite3 *db, struct p2pg_spool_layout *spool, struct p2pg_importer *im,
		      bool dead)
{
	struct p2pg_spool_header *h = &spool->header;
	im->more = false;
	im->error[0] = '\0';
	im->error_code = SQLITE_OK;
	if (!p2pg_spool_header_valid(h))
		return -EINVAL;

	int rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
	if (rc != SQLITE_OK) {
		snprintf(im->error, sizeof(im->error), "%s", sqlite3_errmsg(db));
		im->error_code = sqlite3_errcode(db) & 0xff;
		return rc == SQLITE_BUSY ? -EBUSY : -EIO;
	}

	struct statements s;
	int written = 0;
	uint64_t new_tail[P2PG_SPOOL_THREADS];
	uint64_t folded[P2PG_SPOOL_THREADS];
	bool readable[P2PG_SPOOL_THREADS];
	bool blob_done[P2PG_SPOOL_BLOBS];
	memset(blob_done, 0, sizeof(blob_done));
	uint64_t budget = im->budget ? im->budget : UINT64_MAX;
	int32_t devices = atomic_load(&h->device_count);
	int err = statements_prepare(db, &s);
	if (err < 0)
		goto fail;

	if (im->process_id == 0) {
		int64_t id = process_row(db, h, dead);
		if (id < 0) {
			err = (int)id;
			goto fail;
		}
		im->process_id = id;
	}

	/* Counters that grow by one per lost record: one past what a signed column holds is
	 * damage, counted once and left out. */
	uint64_t dropped = atomic_load(&h->dropped_no_slot);
	if (dropped > INT64_MAX) {
		if (!im->header_dropped_damaged)
			im->invalid++;
		im->header_dropped_damaged = true;
		dropped = 0;
	}
	for (int k = 0; k < P2PG_SPOOL_THREADS; k++) {
		readable[k] = p2pg_store_ring_readable(im, h, k);
		if (!readable[k])
			continue;
		struct p2pg_spool_thread *t = &spool->threads[k];
		uint64_t head = atomic_load_explicit(&t->head, memory_order_acquire);
		uint64_t tail = atomic_load_explicit(&t->tail, memory_order_relaxed);
		new_tail[k] = tail;
		uint64_t ring_dropped = atomic_load(&t->dropped);
		if (ring_dropped > INT64_MAX) {
			if (!im->ring_damaged[k])
				im->invalid++;
			im->ring_damaged[k] = true;
			continue;
		}
		dropped = ring_dropped > INT64_MAX - dropped ? INT64_MAX : dropped + ring_dropped;
		if (head == tail && im->serial[k] == t->serial)
			continue;
		if (!p2pg_store_ring_valid(t, head, tail)) {
			if (!im->ring_damaged[k])
				im->invalid++;
			im->ring_damaged[k] = true;
			continue;
		}
		if (im->serial[k] != t->serial || im->imported[k] == 0) {
			/* First look at this ring (or a new thread in it): the database knows how
			 * far a previous import of this file got. */
			im->serial[k] = t->serial;
			im->imported[k] = tail;
			sqlite3_reset(s.progress_get);
			sqlite3_bind_int64(s.progress_get, 1, im->process_id);
			sqlite3_bind_int64(s.progress_get, 2, t->serial);
			if (sqlite3_step(s.progress_get) == SQLITE_ROW) {
				uint64_t done = (uint64_t)sqlite3_column_int64(s.progress_get, 0);
				if (done > im->imported[k])
					im->imported[k] = done;
			}
		}
		uint64_t from = im->imported[k] > tail ? im->imported[k] : tail;
		if (from > head) {
			/* The database saw more of this ring than its head says: a damaged head. */
			if (!im->ring_damaged[k])
				im->invalid++;
			im->ring_damaged[k] = true;
			continue;
		}
		if (head - from > P2PG_SPOOL_RING) /* cannot happen unless the file is damaged */
			from = head - P2PG_SPOOL_RING;
		/* This pass's share: the rest waits for the next pass, from the watermark. */
		uint64_t until = head;
		if (until - from > budget) {
			until = from + budget;
			im->more = true;
		}
		budget -= until - from;
		for (uint64_t seq = from; seq < until; seq++) {
			uint64_t slot = seq & (P2PG_SPOOL_RING - 1);
			struct p2pg_record r = t->rec[slot];
			if (!p2pg_store_record_valid(&r, t->crc[slot], seq, devices)) {
				im->invalid++;
				continue;
			}
			int n = insert_record(db, &s, im, t, seq, &r);
			if (n < 0) {
				err = n;
				goto fail;
			}
			written += n;
		}
		if (from != until) {
			sqlite3_reset(s.progress_set);
			sqlite3_bind_int64(s.progress_set, 1, im->process_id);
			sqlite3_bind_int64(s.progress_set, 2, t->serial);
			sqlite3_bind_int64(s.progress_set, 3, (int64_t)until);
			if (sqlite3_step(s.progress_set) != SQLITE_DONE) {
				err = -EIO;
				goto fail;
			}
		}
		im->imported[k] = until;
		new_tail[k] = until;
	}

	if ((err = flush_transfers(db, &s, im)) < 0)
		goto fail;

	uint32_t blobs = p2pg_store_blobs_readable(im, h);
	for (uint32_t k = 0; k < blobs; k++) {
		struct p2pg_spool_blob *b = &spool->blobs[k];
		uint32_t st = atomic_load_explicit(&b->state, memory_order_acquire);
		/* A dead writer may have left a blob half written: it never reached READY, so it is
		 * not the record of a call that returned. */
		if (st != P2PG_BLOB_READY)
			continue;
		if (!p2pg_store_blob_valid(b, devices)) {
			/* Marked persisted like an imported one: counted once. */
			im->invalid++;
			blob_done[k] = true;
			continue;
		}
		err = b->kind == P2PG_BLOB_DEVICES
			  ? p2pg_store_import_devices(db, im->process_id, b)
			  : insert_blob(db, s.failure, s.crash, im->process_id, b);
		if (err < 0)
			goto fail;
		blob_done[k] = true;
		written++;
	}

	for (int k = 0; k < P2PG_SPOOL_THREADS; k++) {
		if (!readable[k])
			continue;
		struct p2pg_spool_thread *t = &spool->threads[k];
		folded[k] = atomic_load_explicit(&t->folded, memory_order_acquire);
		if (folded[k] != im->folded[k] &&
		    (err = import_aggregates(db, &s, im, k, t, devices)) < 0)
			goto fail;
	}

	if (im->record == P2PG_RECORD_SUMMARY && (err = p2pg_summary_flush(db, im)) < 0)
		goto fail;
	if ((err = p2pg_nccl_import_end(db, im, true)) < 0)
		goto fail;

	if (dropped != im->dropped_reported || im->invalid != im->invalid_reported) {
		_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
		if (sqlite3_prepare_v2(
			db,
			"UPDATE processes SET records_dropped=?1, records_invalid=?4, "
			"driver_version=COALESCE(driver_version, NULLIF(?3, 0)) "
			"WHERE id=?2",
			-1, &st, NULL) == SQLITE_OK) {
			sqlite3_bind_int64(st, 1, (int64_t)dropped);
			sqlite3_bind_int64(st, 2, im->process_id);
			sqlite3_bind_int(st, 3, atomic_load(&h->driver_version));
			sqlite3_bind_int64(st, 4, (int64_t)im->invalid);
			sqlite3_step(st);
		}
	}

	if (sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
		err = -EIO;
		goto fail;
	}
	statements_finalize(&s);
	im->dropped_reported = dropped;
	im->invalid_reported = im->invalid;
	/* Rings are imported one after another; a stream's copies from several threads must queue
	 * for pairing in the order they were called. */
	if (im->ntimed > 1)
		qsort(im->timed, im->ntimed, sizeof(im->timed[0]), by_start);
	for (size_t k = 0; k < im->ntimed; k++)
		im->on_timed(im->userdata, &im->timed[k]);
	im->ntimed = 0;
	/* Only now, with the rows durable, may the writers reuse their ring space. */
	/* Only rings that changed are written: a store into a page the file does not hold would
	 * be a SIGBUS. */
	for (int k = 0; k < P2PG_SPOOL_THREADS; k++) {
		if (!readable[k])
			continue;
		struct p2pg_spool_thread *t = &spool->threads[k];
		if (atomic_load_explicit(&t->tail, memory_order_relaxed) != new_tail[k])
			atomic_store_explicit(&t->tail, new_tail[k], memory_order_release);
		im->folded[k] = folded[k];
		/* A ring is free again once its thread ended and everything it published, records
		 * and folds, is in the database. Retired is final for the thread: only this
		 * importer moves it on. */
		if (atomic_load_explicit(&t->state, memory_order_acquire) != P2PG_SLOT_RETIRED ||
		    atomic_load(&t->head) != new_tail[k] || atomic_load(&t->folded) != folded[k])
			continue;
		clear_aggregates(t);
		uint32_t retired = P2PG_SLOT_RETIRED;
		atomic_compare_exchange_strong_explicit(&t->state, &retired, P2PG_SLOT_FREE,
							memory_order_release, memory_order_relaxed);
	}
	for (uint32_t k = 0; k < blobs; k++)
		if (blob_done[k])
			atomic_store_explicit(&spool->blobs[k].state, P2PG_BLOB_PERSISTED,
					      memory_order_release);
	return written;

fail:
	/* The reason, before the rollback replaces it ("cannot rollback", "not an error"). */
	snprintf(im->error, sizeof(im->error), "%s", sqlite3_errmsg(db));
	im->error_code = sqlite3_errcode(db) & 0xff;
	statements_finalize(&s);
	p2pg_nccl_import_end(db, im, false);
	sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
	im->more = false;
	/* Their rows are gone: the next pass imports those records again and notes them then. */
	im->ntimed = 0;
	/* The rollback undid the progress rows: forget what this pass believed it imported. */
	memset(im->serial, 0, sizeof(im->serial));
	memset(im->imported, 0, sizeof(im->imported));
	memset(im->folded, 0xff, sizeof(im->folded));
	/* ...and what it counted as damaged: the next pass counts it again. */
	im->invalid = im->invalid_reported;
	memset(im->ring_damaged, 0, sizeof(im->ring_damaged));
	memset(im->agg_damaged, 0, sizeof(im->agg_damaged));
	im->blobs_cut = false;
	im->header_dropped_damaged = false;
	if (im->record == P2PG_RECORD_SUMMARY) {
		p2pg_importer_release(im);
	}
	return err;
}
