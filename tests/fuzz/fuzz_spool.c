/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the spool file a crashed process left, as `p2pguard recover` and a starting
 * guard read it (p2pg_store_recover_dir). The file is megabytes, sparse, so the input describes it:
 *
 *   byte 0: bit 0: start from a well-formed spool (a header saying 2 devices, rings 0 and 1 in the
 *           file with 3 and 2 records and an overflow aggregate, a failure blob); bit 1: truncate
 *           the file to the length in bytes 1-4 (little endian, modulo its size) after patching;
 *           bit 2: the file has the whole layout's size (575 MB, every ring's space) instead of
 *           the template's two rings
 *   then patches, each: offset (4 bytes LE, modulo the file size), length (2 bytes LE), bytes.
 *
 * scripts/spool-seed.py turns a real spool file into this form. Whatever the damage, the import
 * must not crash (a read past the file's end would be a SIGBUS), and no imported row may be
 * impossible: a kind, API, path or action no writer writes, a negative count or time, or a device
 * past the process's count (or a negative one) in a call that succeeded (checked after each
 * input).
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
#include "crc32c.h"
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
	p2pg_crc32c_init();
	if (!verbose)
		p2pg_notice_set_sink(quiet);
	return 0;
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

#define TEMPLATE_SIZE offsetof(struct p2pg_spool_layout, threads[2])
#define DEVICES	      2

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
	uint32_t crc = p2pg_spool_record_crc(&r, seq);
	if (pwrite(fd, &r, sizeof(r), at) != (ssize_t)sizeof(r) ||
	    pwrite(fd, &crc, sizeof(crc),
		   (off_t)offsetof(struct p2pg_spool_layout, threads[ring].crc[seq])) !=
		(ssize_t)sizeof(crc))
		abort();
}

static void put_ring(int fd, int ring, uint64_t head, uint32_t serial)
{
	/* The ring's counters only: its records are 4 MiB. */
	static struct p2pg_spool_thread t;
	memset(&t, 0, offsetof(struct p2pg_spool_thread, rec));
	atomic_store(&t.head, head);
	atomic_store(&t.state, P2PG_SLOT_RETIRED);
	atomic_store(&t.folded, 7);
	t.serial = serial;
	t.tid = 42;
	off_t at = (off_t)offsetof(struct p2pg_spool_layout, threads[ring]);
	if (pwrite(fd, &t, offsetof(struct p2pg_spool_thread, rec), at) < 0)
		abort();
	/* Seven successful 4 KiB copies folded. */
	struct p2pg_spool_agg agg = {.status = 0,
				     .api = P2PG_API_cudaMemcpyPeerAsync,
				     .src_device = 1,
				     .dst_device = 0,
				     .path = P2PG_PATH_P2P,
				     .size_bucket = 12};
	atomic_store(&agg.used, 1);
	atomic_store(&agg.count, 7);
	atomic_store(&agg.bytes, 7 * 4096);
	atomic_store(&agg.host_ns, 7000);
	if (pwrite(fd, &agg, sizeof(agg),
		   (off_t)offsetof(struct p2pg_spool_layout, threads[ring].agg[ring * 3])) < 0)
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
	h.thread_size = sizeof(struct p2pg_spool_thread);
	h.blob_step = P2PG_SPOOL_BLOB_STEP;
	h.pid = 1;
	h.started_ns = 1;
	snprintf(h.boot_id, sizeof(h.boot_id), "fuzz");
	snprintf(h.hostname, sizeof(h.hostname), "fuzz");
	snprintf(h.mode, sizeof(h.mode), "observe");
	h.record = P2PG_RECORD_ALL + 1;
	snprintf(h.cmdline, sizeof(h.cmdline), "fuzz");
	h.header_crc = p2pg_spool_header_crc(&h);
	atomic_store(&h.device_count, DEVICES);
	atomic_store(&h.rings_in_file[0], 3);
	atomic_store(&h.rings_added, 2);
	atomic_store(&h.blobs_in_file, P2PG_SPOOL_BLOB_STEP);
	if (pwrite(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h))
		abort();
	put_ring(fd, 0, 3, 1);
	for (int k = 0; k < 3; k++)
		put_record(fd, 0, (uint64_t)k, P2PG_API_cudaMemcpyPeer, P2PG_REC_TRANSFER,
			   P2PG_PATH_P2P);
	put_ring(fd, 1, 2, 2);
	put_record(fd, 1, 0, P2PG_API_cudaDeviceEnablePeerAccess, P2PG_REC_PEER,
		   P2PG_ACTION_PASSED);
	put_record(fd, 1, 1, P2PG_API_cudaMemcpyPeerAsync, P2PG_REC_TRANSFER, P2PG_PATH_DRIVER);

	static struct p2pg_spool_blob b;
	memset(&b, 0, sizeof(b));
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
	p2pg_spool_blob_publish(&b);
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

static int print_row(void *arg, int n, char **values, char **names)
{
	(void)arg;
	(void)names;
	for (int k = 0; k < n; k++)
		fprintf(stderr, "%s%s", k ? " " : "fuzz-spool: ", values[k] ? values[k] : "NULL");
	fprintf(stderr, "\n");
	return 0;
}

/* The device count the import will believe: the header's, as the input left it. */
static int devices_said(void)
{
	int32_t n = 0;
	int fd = open(file, O_RDONLY | O_CLOEXEC);
	if (fd >= 0 && pread(fd, &n, sizeof(n),
			     (off_t)offsetof(struct p2pg_spool_header, device_count)) != sizeof(n))
		n = 0;
	if (fd >= 0)
		close(fd);
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	empty_dir();
	uint8_t flags = size > 0 ? data[0] : 1;
	uint32_t full = (flags & 4) ? (uint32_t)P2PG_SPOOL_MAP_SIZE : (uint32_t)TEMPLATE_SIZE;
	int fd = open(file, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || ftruncate(fd, (off_t)full) < 0)
		abort();
	if (flags & 1)
		well_formed(fd);
	size_t pos = 1;
	uint32_t cut = full;
	if ((flags & 2) && size >= 5) {
		cut = le32(data + 1) % full;
		pos = 5;
	}
	while (pos + 6 <= size) {
		uint32_t off = le32(data + pos) % full;
		size_t len = (size_t)data[pos + 4] | (size_t)data[pos + 5] << 8;
		pos += 6;
		if (len > size - pos)
			len = size - pos;
		if (len > full - off)
			len = full - off;
		if (pwrite(fd, data + pos, len, off) < 0)
			abort();
		pos += len;
	}
	if (flags & 2 && ftruncate(fd, cut) < 0)
		abort();
	close(fd);
	int devices = devices_said();

	if (p2pg_store_recover_dir(db, dir, NULL, P2PG_RECORD_ALL) < 0)
		abort();
	/* No imported row is impossible. */
	char sql[4096];
	snprintf(
	    sql, sizeof(sql),
	    "SELECT (SELECT count(*) FROM transfers WHERE path NOT IN "
	    "('p2p','driver','staged','captured') OR api = 'unknown' OR bytes < 0 OR "
	    "host_ns < 0 OR started_ns < 0 OR gpu_ns < 0 OR (status = 0 AND (src_device < 0 "
	    "OR dst_device < 0 OR (%d > 0 AND (src_device >= %d OR dst_device >= %d))))) + "
	    "(SELECT count(*) FROM peer_access WHERE api = 'unknown' OR action NOT IN "
	    "('passed','absorbed','staged','reported') OR started_ns < 0 OR (status = 0 AND "
	    "(device < 0 OR peer_device < 0 OR (%d > 0 AND (device >= %d OR peer_device >= "
	    "%d))))) + "
	    "(SELECT count(*) FROM failures WHERE api = 'unknown' OR started_ns < 0 OR "
	    "(status = 0 AND (device < 0 OR peer_device < 0 OR (%d > 0 AND (device >= %d OR "
	    "peer_device >= %d))))) + "
	    "(SELECT count(*) FROM transfer_overflow WHERE api = 'unknown' OR status != 0 OR "
	    "count < 0 OR bytes < 0 OR host_ns_total < 0 OR src_device < 0 OR dst_device < 0 "
	    "OR (%d > 0 AND (src_device >= %d OR dst_device >= %d))) + "
	    "(SELECT count(*) FROM processes WHERE records_invalid < 0 OR records_dropped < 0 OR "
	    "started_ns < 0 OR pid <= 0)",
	    devices, devices, devices, devices, devices, devices, devices, devices, devices,
	    devices, devices, devices);
	if (one(sql) != 0) {
		/* What was let through, for whoever reads the crash. */
		sqlite3_exec(
		    db,
		    "SELECT 'transfer', api, path, bytes, status, src_device, dst_device, "
		    "host_ns, started_ns FROM transfers UNION ALL SELECT 'peer', api, action, "
		    "0, status, device, peer_device, 0, started_ns FROM peer_access UNION ALL "
		    "SELECT 'failure', api, '', 0, status, device, peer_device, 0, started_ns "
		    "FROM failures UNION ALL SELECT 'overflow', api, path, bytes, status, "
		    "src_device, dst_device, host_ns_total, count FROM transfer_overflow UNION ALL "
		    "SELECT 'process', pid, mode, records_dropped, records_invalid, rank, "
		    "local_rank, 0, started_ns FROM processes",
		    print_row, NULL, NULL);
		fprintf(stderr, "fuzz-spool: an impossible row (the header says %d devices)\n",
			devices);
		abort();
	}
	if (verbose)
		fprintf(stderr,
			"fuzz-spool: %lld transfers, %lld peer calls, %lld failures, %lld crashes, "
			"%lld folded, %lld invalid\n",
			one("SELECT count(*) FROM transfers"),
			one("SELECT count(*) FROM peer_access"),
			one("SELECT count(*) FROM failures"), one("SELECT count(*) FROM crashes"),
			one("SELECT coalesce(sum(count), 0) FROM transfer_overflow"),
			one("SELECT coalesce(sum(records_invalid), 0) FROM processes"));
	sqlite3_exec(db,
		     "DELETE FROM transfers; DELETE FROM peer_access; DELETE FROM failures; "
		     "DELETE FROM crashes; DELETE FROM processes; DELETE FROM spool_progress; "
		     "DELETE FROM transfer_summary; DELETE FROM transfer_overflow;",
		     NULL, NULL, NULL);
	return 0;
}
