/* SPDX-License-Identifier: MIT */
/*
 * NCCL's records into nccl_comms, nccl_ops and, in summary mode or under overload, their
 * aggregates. An operation the drainer already wrote as 'running' (nccl_watch.c) is completed in
 * its row; any other gets a row of its own, or in summary mode a share of its bucket.
 */
#include "store_nccl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "nccl_codes.h"
#include "spool.h"
#include "spool_ring.h"
#include "store-private.h"

struct nccl_bucket {
	uint16_t comm;
	uint8_t func;
	uint8_t size_bucket;
	uint32_t kind_flags; /* P2PG_NCCL_F_P2P or _CE, or 0 */
	int32_t peer;
	uint64_t count, bytes, host_ns, gpu_ns, gpu_timed;
};

struct p2pg_nccl_import {
	/* the pass's statements, prepared at its first NCCL record */
	sqlite3_stmt *complete, *insert, *comm, *comm_seen, *comm_end, *agg, *summary;
	struct nccl_bucket *buckets; /* summary mode: this pass's operations */
	size_t nbuckets, cap;
};

static const char *kind_name(uint32_t flags)
{
	return (flags & P2PG_NCCL_F_P2P) ? "p2p" : (flags & P2PG_NCCL_F_CE) ? "ce" : "coll";
}

bool p2pg_nccl_record_valid(const struct p2pg_record *r)
{
	if (r->kind == P2PG_REC_NCCL_COMM_END)
		return r->api == P2PG_NCCL_API;
	if (r->kind != P2PG_REC_NCCL_OP || r->api <= P2PG_NCCL_API ||
	    r->api >= P2PG_NCCL_API + P2PG_NCCL_FUNC_COUNT)
		return false;
	return (r->path & 15) < P2PG_NCCL_ALGO_COUNT && (r->path >> 4) < P2PG_NCCL_PROTO_COUNT &&
	       P2PG_NCCL_F_DTYPE(r->flags) < P2PG_NCCL_DTYPE_COUNT &&
	       (r->status == 0 || r->status == P2PG_NCCL_UNREPORTED) &&
	       !((r->flags & P2PG_NCCL_F_P2P) && (r->flags & P2PG_NCCL_F_CE));
}

bool p2pg_nccl_blob_valid(const struct p2pg_spool_blob *b)
{
	if (b->kind != P2PG_BLOB_NCCL_COMM || b->api < 1 || b->api > 6)
		return false;
	return b->length <= sizeof(b->text) && (b->length == 0 || b->text[b->length - 1] == '\0');
}

bool p2pg_nccl_agg(const struct p2pg_spool_agg *a)
{
	return a->api > P2PG_NCCL_API && a->api < P2PG_NCCL_API + P2PG_NCCL_FUNC_COUNT;
}

static struct p2pg_nccl_import *state(struct p2pg_importer *im)
{
	if (!im->nccl)
		im->nccl = calloc(1, sizeof(*im->nccl));
	return im->nccl;
}

static void finalize_statements(struct p2pg_nccl_import *n)
{
	sqlite3_stmt **all[] = {&n->complete, &n->insert, &n->comm,   &n->comm_seen,
				&n->comm_end, &n->agg,	  &n->summary};
	for (size_t k = 0; k < sizeof(all) / sizeof(all[0]); k++) {
		sqlite3_finalize(*all[k]);
		*all[k] = NULL;
	}
}

static int prepare(sqlite3 *db, sqlite3_stmt **st, const char *sql)
{
	if (*st) {
		sqlite3_reset(*st);
		sqlite3_clear_bindings(*st);
		return 0;
	}
	return sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL) == SQLITE_OK
		   ? 0
		   : -EIO;
}

static void bind_text_or_null(sqlite3_stmt *st, int index, const char *text)
{
	if (text && *text)
		sqlite3_bind_text(st, index, text, -1, SQLITE_TRANSIENT);
	else
		sqlite3_bind_null(st, index);
}

/* What a record says of an operation, in the columns' terms. */
struct op_fields {
	const char *kind, *func, *state, *dtype, *algo, *proto;
	bool done, timed, size_known;
	size_t size;
};

static void op_fields(const struct p2pg_record *r, struct op_fields *f)
{
	unsigned dtype = P2PG_NCCL_F_DTYPE(r->flags);
	f->kind = kind_name(r->flags);
	f->func = p2pg_nccl_func_name(r->api - P2PG_NCCL_API);
	f->done = r->status == 0;
	f->state = f->done ? "done" : "unreported";
	f->dtype = dtype ? p2pg_nccl_dtype_name(dtype) : NULL;
	f->algo = (r->path & 15) ? p2pg_nccl_algo_name(r->path & 15) : NULL;
	f->proto = (r->path >> 4) ? p2pg_nccl_proto_name(r->path >> 4) : NULL;
	f->timed = (r->flags & P2PG_NCCL_F_GPU_TIMED) && r->gpu_ns > 0;
	f->size = p2pg_nccl_dtype_size(dtype);
	f->size_known = !(r->flags & P2PG_NCCL_F_SIZE_UNKNOWN);
}

static void bind_count_bytes(sqlite3_stmt *st, int count_index, int bytes_index,
			     const struct p2pg_record *r, const struct op_fields *f)
{
	if (!f->size_known) {
		sqlite3_bind_int64(st, count_index, (int64_t)r->bytes);
		sqlite3_bind_null(st, bytes_index);
		return;
	}
	if (f->size)
		sqlite3_bind_int64(st, count_index, (int64_t)(r->bytes / f->size));
	else
		sqlite3_bind_null(st, count_index);
	sqlite3_bind_int64(st, bytes_index, (int64_t)r->bytes);
}

/* The 'running' row the drainer wrote for it, if any, takes the end. 1: it did. */
static int complete_running(sqlite3 *db, struct p2pg_nccl_import *n, int64_t process_id,
			    uint32_t serial, uint64_t seq, const struct p2pg_record *r,
			    const struct op_fields *f)
{
	if (prepare(
		db, &n->complete,
		"UPDATE nccl_ops SET state = ?1, thread_id = ?2, ended_ns = ?3, host_ns = ?4, "
		"gpu_ns = ?5, channels_done = ?6, thread_serial = ?7, seq = ?8, count = "
		"?9, bytes = ?10 WHERE process_id = ?11 AND comm_serial = ?12 AND kind = ?13 AND "
		"func = ?14 AND op_seq = ?15 AND state = 'running'") < 0)
		return -EIO;
	sqlite3_stmt *st = n->complete;
	sqlite3_bind_text(st, 1, f->state, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, r->tid);
	if (f->done) {
		sqlite3_bind_int64(st, 3, (int64_t)(r->started_ns + r->host_ns));
		sqlite3_bind_int64(st, 4, (int64_t)r->host_ns);
	}
	if (f->timed)
		sqlite3_bind_int64(st, 5, (int64_t)r->gpu_ns);
	sqlite3_bind_int(st, 6, (int)P2PG_NCCL_F_CHANNELS_DONE(r->flags));
	sqlite3_bind_int64(st, 7, serial);
	sqlite3_bind_int64(st, 8, (int64_t)seq);
	bind_count_bytes(st, 9, 10, r, f);
	sqlite3_bind_int64(st, 11, process_id);
	sqlite3_bind_int(st, 12, (uint16_t)r->src_device);
	sqlite3_bind_text(st, 13, f->kind, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 14, f->func, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 15, (int64_t)r->stream);
	if (sqlite3_step(st) != SQLITE_DONE)
		return -EIO;
	return sqlite3_changes(db) > 0;
}

static int insert_op(sqlite3 *db, struct p2pg_nccl_import *n, int64_t process_id, uint32_t serial,
		     uint64_t seq, const struct p2pg_record *r, const struct op_fields *f)
{
	if (prepare(db, &n->insert,
		    "INSERT INTO nccl_ops (process_id, comm_serial, thread_id, kind, func, op_seq, "
		    "peer, root, count, datatype, bytes, channels, channels_done, algorithm, "
		    "protocol, state, started_ns, ended_ns, host_ns, gpu_ns, thread_serial, "
		    "seq) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,"
		    "?18,?19,?20,?21,?22)") < 0)
		return -EIO;
	sqlite3_stmt *st = n->insert;
	bool p2p = r->flags & P2PG_NCCL_F_P2P;
	sqlite3_bind_int64(st, 1, process_id);
	sqlite3_bind_int(st, 2, (uint16_t)r->src_device);
	sqlite3_bind_int64(st, 3, r->tid);
	sqlite3_bind_text(st, 4, f->kind, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 5, f->func, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 6, (int64_t)r->stream);
	sqlite3_bind_int(st, p2p ? 7 : 8, r->value);
	bind_count_bytes(st, 9, 11, r, f);
	bind_text_or_null(st, 10, f->dtype);
	sqlite3_bind_int(st, 12, (int)P2PG_NCCL_F_CHANNELS(r->flags));
	sqlite3_bind_int(st, 13, (int)P2PG_NCCL_F_CHANNELS_DONE(r->flags));
	bind_text_or_null(st, 14, f->algo);
	bind_text_or_null(st, 15, f->proto);
	sqlite3_bind_text(st, 16, f->state, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 17, (int64_t)r->started_ns);
	if (f->done) {
		sqlite3_bind_int64(st, 18, (int64_t)(r->started_ns + r->host_ns));
		sqlite3_bind_int64(st, 19, (int64_t)r->host_ns);
	}
	if (f->timed)
		sqlite3_bind_int64(st, 20, (int64_t)r->gpu_ns);
	sqlite3_bind_int64(st, 21, serial);
	sqlite3_bind_int64(st, 22, (int64_t)seq);
	return sqlite3_step(st) == SQLITE_DONE ? 1 : -EIO;
}

/* Summary mode: the operation joins its bucket; false when no memory is left (it keeps a row). */
static bool fold(struct p2pg_nccl_import *n, const struct p2pg_record *r, const struct op_fields *f)
{
	uint32_t kind = r->flags & (P2PG_NCCL_F_P2P | P2PG_NCCL_F_CE);
	int32_t peer = (r->flags & P2PG_NCCL_F_P2P) ? r->value : -1;
	uint8_t func = (uint8_t)(r->api - P2PG_NCCL_API);
	uint8_t size_bucket = p2pg_size_bucket(r->bytes);
	struct nccl_bucket *b = NULL;
	for (size_t k = 0; k < n->nbuckets && !b; k++) {
		struct nccl_bucket *c = &n->buckets[k];
		if (c->comm == (uint16_t)r->src_device && c->func == func && c->peer == peer &&
		    c->kind_flags == kind && c->size_bucket == size_bucket)
			b = c;
	}
	if (!b) {
		if (n->nbuckets == n->cap) {
			size_t cap = n->cap ? n->cap * 2 : 16;
			struct nccl_bucket *grown = realloc(n->buckets, cap * sizeof(*grown));
			if (!grown)
				return false;
			n->buckets = grown;
			n->cap = cap;
		}
		b = &n->buckets[n->nbuckets++];
		*b = (struct nccl_bucket){.comm = (uint16_t)r->src_device,
					  .func = func,
					  .size_bucket = size_bucket,
					  .kind_flags = kind,
					  .peer = peer};
	}
	b->count++;
	b->bytes += f->size_known ? r->bytes : 0;
	b->host_ns += r->host_ns;
	if (f->timed) {
		b->gpu_ns += r->gpu_ns;
		b->gpu_timed++;
	}
	return true;
}

static int comm_end(sqlite3 *db, struct p2pg_nccl_import *n, int64_t process_id,
		    const struct p2pg_record *r)
{
	/* The communicator's blob is imported after the rings: a communicator made and freed
	 * within one pass has no row yet, so its end makes one that the blob then completes. */
	char hash[24];
	snprintf(hash, sizeof(hash), "%016llx", (unsigned long long)r->stream);
	if (prepare(db, &n->comm_seen,
		    "INSERT OR IGNORE INTO nccl_comms (process_id, comm_serial, comm_hash) VALUES "
		    "(?1, ?2, ?3)") < 0 ||
	    prepare(db, &n->comm_end,
		    "UPDATE nccl_comms SET finalized_ns = ?3, ops_recorded = ?4, ops_unreported = "
		    "?5, events_untracked = ?6 WHERE process_id = ?1 AND comm_serial = ?2") < 0)
		return -EIO;
	sqlite3_bind_int64(n->comm_seen, 1, process_id);
	sqlite3_bind_int(n->comm_seen, 2, (uint16_t)r->src_device);
	sqlite3_bind_text(n->comm_seen, 3, hash, -1, SQLITE_TRANSIENT);
	sqlite3_stmt *st = n->comm_end;
	sqlite3_bind_int64(st, 1, process_id);
	sqlite3_bind_int(st, 2, (uint16_t)r->src_device);
	sqlite3_bind_int64(st, 3, (int64_t)r->started_ns);
	sqlite3_bind_int64(st, 4, (int64_t)r->bytes);
	sqlite3_bind_int64(st, 5, (int64_t)r->host_ns);
	sqlite3_bind_int64(st, 6, (int64_t)(uint32_t)r->value);
	if (sqlite3_step(n->comm_seen) != SQLITE_DONE || sqlite3_step(st) != SQLITE_DONE)
		return -EIO;
	return 0;
}

int p2pg_nccl_import_record(sqlite3 *db, struct p2pg_importer *im, uint32_t serial, uint64_t seq,
			    const struct p2pg_record *r)
{
	struct p2pg_nccl_import *n = state(im);
	if (!n)
		return -ENOMEM;
	if (r->kind == P2PG_REC_NCCL_COMM_END)
		return comm_end(db, n, im->process_id, r);
	struct op_fields f;
	op_fields(r, &f);
	int rc = complete_running(db, n, im->process_id, serial, seq, r, &f);
	if (rc != 0)
		return rc < 0 ? rc : 0;
	if (im->record == P2PG_RECORD_SUMMARY && f.done && fold(n, r, &f))
		return 0;
	return insert_op(db, n, im->process_id, serial, seq, r, &f);
}

int p2pg_nccl_import_comm(sqlite3 *db, int64_t process_id, const struct p2pg_spool_blob *b)
{
	/* A statement of its own: blobs are few, and come after the pass's records. */
	sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(
		db,
		"INSERT INTO nccl_comms (process_id, comm_serial, comm_hash, comm_name, rank, "
		"nranks, nnodes, device, uuid, pci_bus_id, hostname, profiler_version, chained, "
		"thread_id, started_ns) VALUES "
		"(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15) "
		"ON CONFLICT (process_id, comm_serial) DO UPDATE SET comm_hash = "
		"excluded.comm_hash, comm_name = excluded.comm_name, rank = excluded.rank, nranks "
		"= "
		"excluded.nranks, nnodes = excluded.nnodes, device = excluded.device, uuid = "
		"excluded.uuid, pci_bus_id = excluded.pci_bus_id, hostname = excluded.hostname, "
		"profiler_version = excluded.profiler_version, chained = excluded.chained, "
		"thread_id = excluded.thread_id, started_ns = excluded.started_ns",
		-1, &st, NULL) != SQLITE_OK)
		return -EIO;
	const char *f[P2PG_NCCL_COMM_FIELDS];
	p2pg_store_blob_fields(b, f, P2PG_NCCL_COMM_FIELDS);
	char hash[24];
	snprintf(hash, sizeof(hash), "%016llx", (unsigned long long)b->seq);
	sqlite3_bind_int64(st, 1, process_id);
	sqlite3_bind_int(st, 2, (uint16_t)b->serial);
	sqlite3_bind_text(st, 3, hash, -1, SQLITE_TRANSIENT);
	bind_text_or_null(st, 4, f[P2PG_NCCL_COMM_NAME]);
	sqlite3_bind_int(st, 5, b->signal);
	sqlite3_bind_int(st, 6, b->status);
	sqlite3_bind_int(st, 7, b->peer_device);
	if (b->device >= 0)
		sqlite3_bind_int(st, 8, b->device);
	bind_text_or_null(st, 9, f[P2PG_NCCL_COMM_UUID]);
	bind_text_or_null(st, 10, f[P2PG_NCCL_COMM_PCI]);
	bind_text_or_null(st, 11, f[P2PG_NCCL_COMM_HOST]);
	sqlite3_bind_int(st, 12, (int)b->api);
	bind_text_or_null(st, 13, f[P2PG_NCCL_COMM_CHAINED]);
	sqlite3_bind_int64(st, 14, b->tid);
	sqlite3_bind_int64(st, 15, (int64_t)b->started_ns);
	int rc = sqlite3_step(st) == SQLITE_DONE ? 0 : -EIO;
	sqlite3_finalize(st);
	return rc;
}

int p2pg_nccl_import_agg(sqlite3 *db, int64_t process_id, const struct p2pg_spool_thread *t,
			 const struct p2pg_spool_agg *a, const struct p2pg_spool_totals *sum)
{
	sqlite3_stmt *st = NULL;
	/* Snapshots of counters that only grow: max() makes a repeated import a no-op. */
	if (sqlite3_prepare_v2(
		db,
		"INSERT INTO nccl_op_overflow (process_id, thread_serial, comm_serial, func, peer, "
		"algorithm, protocol, size_bucket, count, bytes, host_ns_total) VALUES "
		"(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11) ON CONFLICT (process_id, thread_serial, "
		"comm_serial, func, peer, algorithm, protocol, size_bucket) DO UPDATE SET count = "
		"max(count, excluded.count), bytes = max(bytes, excluded.bytes), host_ns_total = "
		"max(host_ns_total, excluded.host_ns_total)",
		-1, &st, NULL) != SQLITE_OK)
		return -EIO;
	sqlite3_bind_int64(st, 1, process_id);
	sqlite3_bind_int64(st, 2, t->serial);
	sqlite3_bind_int(st, 3, (uint16_t)a->src_device);
	sqlite3_bind_text(st, 4, p2pg_nccl_func_name(a->api - P2PG_NCCL_API), -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 5, a->dst_device);
	sqlite3_bind_text(st, 6, p2pg_nccl_algo_name(a->path & 15), -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 7, p2pg_nccl_proto_name(a->path >> 4), -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 8, a->size_bucket);
	sqlite3_bind_int64(st, 9, (int64_t)sum->count);
	sqlite3_bind_int64(st, 10, (int64_t)sum->bytes);
	sqlite3_bind_int64(st, 11, (int64_t)sum->host_ns);
	int rc = sqlite3_step(st) == SQLITE_DONE ? 0 : -EIO;
	sqlite3_finalize(st);
	return rc;
}

static int flush_summary(sqlite3 *db, struct p2pg_importer *im, struct p2pg_nccl_import *n)
{
	for (size_t k = 0; k < n->nbuckets; k++) {
		const struct nccl_bucket *b = &n->buckets[k];
		if (prepare(
			db, &n->summary,
			"INSERT INTO nccl_op_summary (process_id, comm_serial, kind, func, peer, "
			"size_bucket, count, bytes, host_ns_total, gpu_ns_total, gpu_timed) "
			"VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11) ON CONFLICT (process_id, "
			"comm_serial, kind, func, peer, size_bucket) DO UPDATE SET count = count "
			"+ excluded.count, bytes = bytes + excluded.bytes, host_ns_total = "
			"host_ns_total + excluded.host_ns_total, gpu_ns_total = gpu_ns_total + "
			"excluded.gpu_ns_total, gpu_timed = gpu_timed + excluded.gpu_timed") < 0)
			return -EIO;
		sqlite3_stmt *st = n->summary;
		sqlite3_bind_int64(st, 1, im->process_id);
		sqlite3_bind_int(st, 2, b->comm);
		sqlite3_bind_text(st, 3, kind_name(b->kind_flags), -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 4, p2pg_nccl_func_name(b->func), -1, SQLITE_STATIC);
		sqlite3_bind_int(st, 5, b->peer);
		sqlite3_bind_int(st, 6, b->size_bucket);
		sqlite3_bind_int64(st, 7, (int64_t)b->count);
		sqlite3_bind_int64(st, 8, (int64_t)b->bytes);
		sqlite3_bind_int64(st, 9, (int64_t)b->host_ns);
		sqlite3_bind_int64(st, 10, (int64_t)b->gpu_ns);
		sqlite3_bind_int64(st, 11, (int64_t)b->gpu_timed);
		if (sqlite3_step(st) != SQLITE_DONE)
			return -EIO;
	}
	return 0;
}

int p2pg_nccl_import_end(sqlite3 *db, struct p2pg_importer *im, bool ok)
{
	struct p2pg_nccl_import *n = im->nccl;
	if (!n)
		return 0;
	int rc = ok ? flush_summary(db, im, n) : 0;
	/* Written (or rolled back, and imported again by the next pass): either way done. */
	n->nbuckets = 0;
	finalize_statements(n);
	return rc;
}

void p2pg_nccl_import_free(struct p2pg_importer *im)
{
	if (!im->nccl)
		return;
	finalize_statements(im->nccl);
	free(im->nccl->buckets);
	free(im->nccl);
	im->nccl = NULL;
}

void p2pg_nccl_process_ended(sqlite3 *db, int64_t process_id)
{
	sqlite3_stmt *st = NULL;
	if (process_id == 0 ||
	    sqlite3_prepare_v2(db,
			       "UPDATE nccl_ops SET state = 'unreported' WHERE process_id = ?1 AND "
			       "state = 'running'",
			       -1, &st, NULL) != SQLITE_OK)
		return;
	sqlite3_bind_int64(st, 1, process_id);
	sqlite3_step(st);
	sqlite3_finalize(st);
}
