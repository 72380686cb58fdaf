/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the spool file a crashed process left, as `p2pguard recover` and a starting
 * guard read it (p2pg_store_recover_dir). The file is 0.5 GB and sparse, so the input describes it:
 *
 *   byte 0: bit 0: start from a well-formed spool (a header, 3 records in ring 0, 2 in ring 5, a
 *           failure blob); bit 1: truncate the file to the length in bytes 1-4 (little endian,
 *           modulo the full size) after patching
 *   then patches, each: offset (4 bytes LE, modulo the file size), length (2 bytes LE), bytes.
 *
 * scripts/spool-seed.py turns a real spool file into this form. Whatever the damage, the import
 * must not crash, and no row may be what no writer writes (checked after each input).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api.h"
#include "failure.h"
#include "notice.h"
#include "spool.h"
#include "store.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[64];
static char file[128];
static sqlite3 *db;
static bool verbose; /* P2PG_FUZZ_VERBOSE=1: what each input imported, on stderr */

static void quiet(const char *line)
{
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	snprintf(dir, sizeof(dir), "%s/p2pg-fuzz-spool-XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	char err[256];
	if (!mkdtemp(dir) || p2pg_store_open(":memory:", &db, err, sizeof(err)) < 0)
		abort();
	snprintf(file, sizeof(file), "%s/1-1" P2PG_SPOOL_SUFFIX, dir);
	verbose = getenv("P2PG_FUZZ_VERBOSE") != NULL;
	if (!verbose)
		p2pg_notice_set_sink(quiet);
	return 0;
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_record(int fd, int ring, uint64_t seq, uint16_t api, uint8_t kind, uint8_t path)
{
	struct p2pg_record r = {.started_ns = 1700000000000000000ull + seq,
				.host_ns = 1000,
				.bytes = 4096,
				.tid = 42,
				.api = api,
				.kind = kind,
				.path = path,
				.src_device = 0,
				.dst_device = 1};
	off_t at = (off_t)offsetof(struct p2pg_spool_layout, threads[ring].rec[seq]);
	if (pwrite(fd, &r, sizeof(r), at) != (ssize_t)sizeof(r))
		abort();
}

static void put_ring(int fd, int ring, uint64_t head, uint32_t serial)
{
	/* The ring's counters only: its records are 4 MiB. */
	static struct p2pg_spool_thread t;
	memset(&t, 0, offsetof(struct p2pg_spool_thread, rec));
	atomic_store(&t.head, head);
	atomic_store(&t.state, P2PG_SLOT_RETIRED);
	t.serial = serial;
	t.tid = 42;
	off_t at = (off_t)offsetof(struct p2pg_spool_layout, threads[ring]);
	if (pwrite(fd, &t, offsetof(struct p2pg_spool_thread, rec), at) < 0)
		abort();
}

static void well_formed(int fd)
{
	struct p2pg_spool_header h;
	memset(&h, 0, sizeof(h));
	memcpy(h.magic, P2PG_SPOOL_MAGIC, sizeof(h.magic));
	h.header_size = sizeof(h);
	h.threads = P2PG_SPOOL_THREADS;
	h.ring = P2PG_SPOOL_RING;
	h.blobs = P2PG_SPOOL_BLOBS;
	h.blob_size = P2PG_SPOOL_BLOB_SIZE;
	h.aggs = P2PG_SPOOL_AGGS;
	h.reserve = P2PG_SPOOL_RESERVE;
	h.pid = 1;
	h.started_ns = 1;
	snprintf(h.boot_id, sizeof(h.boot_id), "fuzz");
	snprintf(h.hostname, sizeof(h.hostname), "fuzz");
	snprintf(h.mode, sizeof(h.mode), "observe");
	h.record = P2PG_RECORD_ALL + 1;
	snprintf(h.cmdline, sizeof(h.cmdline), "fuzz");
	if (pwrite(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h))
		abort();
	put_ring(fd, 0, 3, 1);
	for (int k = 0; k < 3; k++)
		put_record(fd, 0, (uint64_t)k, P2PG_API_cudaMemcpyPeer, P2PG_REC_TRANSFER,
			   P2PG_PATH_P2P);
	put_ring(fd, 5, 2, 2);
	put_record(fd, 5, 0, P2PG_API_cudaDeviceEnablePeerAccess, P2PG_REC_PEER,
		   P2PG_ACTION_PASSED);
	put_record(fd, 5, 1, P2PG_API_cudaMemcpyPeerAsync, P2PG_REC_TRANSFER, P2PG_PATH_DRIVER);

	static struct p2pg_spool_blob b;
	memset(&b, 0, sizeof(b));
	atomic_store(&b.state, P2PG_BLOB_READY);
	b.kind = P2PG_BLOB_FAILURE;
	b.serial = 2;
	b.started_ns = 1;
	b.status = 217;
	b.api = P2PG_API_cudaDeviceEnablePeerAccess;
	const char *fields[] = {
	    "device=0 peer=1", "cudaErrorPeerAccessUnsupported", "msg", "", "", "", "", "", "",
	    "passed"};
	for (size_t k = 0; k < sizeof(fields) / sizeof(fields[0]); k++)
		p2pg_spool_blob_add(&b, fields[k]);
	if (pwrite(fd, &b, sizeof(b), (off_t)offsetof(struct p2pg_spool_layout, blobs[3])) < 0)
		abort();
}

static long long one(const char *sql)
{
	sqlite3_stmt *st = NULL;
	long long v = -1;
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

static void empty_dir(void)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		char path[512];
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		unlink(path);
	}
	if (d)
		closedir(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	empty_dir();
	int fd = open(file, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || ftruncate(fd, (off_t)P2PG_SPOOL_FILE_SIZE) < 0)
		abort();
	uint8_t flags = size > 0 ? data[0] : 1;
	if (flags & 1)
		well_formed(fd);
	size_t pos = 1;
	uint32_t cut = P2PG_SPOOL_FILE_SIZE;
	if ((flags & 2) && size >= 5) {
		cut = le32(data + 1) % P2PG_SPOOL_FILE_SIZE;
		pos = 5;
	}
	while (pos + 6 <= size) {
		uint32_t off = le32(data + pos) % P2PG_SPOOL_FILE_SIZE;
		size_t len = (size_t)data[pos + 4] | (size_t)data[pos + 5] << 8;
		pos += 6;
		if (len > size - pos)
			len = size - pos;
		if (len > P2PG_SPOOL_FILE_SIZE - off)
			len = P2PG_SPOOL_FILE_SIZE - off;
		if (pwrite(fd, data + pos, len, off) < 0)
			abort();
		pos += len;
	}
	if (flags & 2 && ftruncate(fd, cut) < 0)
		abort();
	close(fd);

	if (p2pg_store_recover_dir(db, dir, NULL, P2PG_RECORD_ALL) < 0)
		abort();
	/* Only what a writer writes became rows. */
	if (one("SELECT count(*) FROM transfers WHERE path NOT IN "
		"('p2p','driver','staged','captured') OR api='unknown'") != 0 ||
	    one("SELECT count(*) FROM peer_access WHERE api='unknown'") != 0)
		abort();
	if (verbose)
		fprintf(stderr,
			"fuzz-spool: %lld transfers, %lld peer calls, %lld failures, %lld crashes, "
			"%lld invalid\n",
			one("SELECT count(*) FROM transfers"),
			one("SELECT count(*) FROM peer_access"),
			one("SELECT count(*) FROM failures"), one("SELECT count(*) FROM crashes"),
			one("SELECT coalesce(sum(records_invalid), 0) FROM processes"));
	sqlite3_exec(db,
		     "DELETE FROM transfers; DELETE FROM peer_access; DELETE FROM failures; "
		     "DELETE FROM crashes; DELETE FROM processes; DELETE FROM spool_progress; "
		     "DELETE FROM transfer_summary;",
		     NULL, NULL, NULL);
	return 0;
}
