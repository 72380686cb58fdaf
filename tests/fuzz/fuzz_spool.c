/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the spool file a crashed process left, as `p2pguard recover` and a starting
 * guard read it (p2pg_store_recover_dir). The file is megabytes, sparse, so the input describes it:
 *
 *   byte 0: bit 0: start from a well-formed spool (a header saying 2 devices, rings 0 and 1 in the
 *           file, ring 0 with 3 copies, ring 1 with a peer call, a copy and seven mapping calls,
 *           an overflow aggregate each; a failure, a devices and a crash blob); bit 1: truncate
 *           the file to the length in bytes 1-4 (little endian, modulo its size) after patching;
 *           bit 2: the file has the whole layout's size (575 MB, every ring's space) instead of
 *           the template's two rings
 *   then patches, each: offset (4 bytes LE, modulo the file size), length (2 bytes LE), bytes.
 *
 * scripts/spool-seed.py turns a real spool file into this form. Whatever the damage, the import
 * must not crash (a read past the file's end would be a SIGBUS), and no imported row may be
 * impossible: a kind, API, path, action, mapping event or handle type no writer writes, a negative
 * count, size, address or time (or a sum that is no longer an integer), a device past the
 * process's count (or a negative one) in a call that succeeded, a devices row that is not one of
 * the ordinals 0..n-1 the writer lists, or a crash without a signal's number (checked after each
 * input).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api.h"
#include "crc32c.h"
#include "failure.h"
#include "mapping_record.h"
#include "notice.h"
#include "spool.h"
#include "spool_blob.h"
#include "spool_ring.h"
#include "store.h"
#include "db_value.h"

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

/* A mapping call as the guard records it (src/record/mapping_record.h): owner and accessor -1 where
 * there is none or it is not known. */
static void put_mapping(int fd, int ring, uint64_t seq, uint16_t api, uint8_t event, int32_t status,
			int16_t owner, int16_t accessor, uint32_t flags, int32_t id,
			uint64_t address)
{
	struct p2pg_record r = {.started_ns = 1700000000000000000ull + seq,
				.host_ns = 2000,
				.bytes = 2u << 20,
				.stream = address,
				.tid = 42,
				.api = api,
				.kind = P2PG_REC_MAPPING,
				.path = event,
				.status = status,
				.src_device = owner,
				.dst_device = accessor,
				.flags = flags,
				.value = id};
	off_t at = (off_t)offsetof(struct p2pg_spool_layout, threads[ring].rec[seq]);
	uint32_t crc = p2pg_spool_record_crc(&r, seq);
	if (pwrite(fd, &r, sizeof(r), at) != (ssize_t)sizeof(r) ||
	    pwrite(fd, &crc, sizeof(crc),
		   (off_t)offsetof(struct p2pg_spool_layout, threads[ring].crc[seq])) !=
		(ssize_t)sizeof(crc))
		abort();
}

static void put_blob(int fd, int slot, struct p2pg_spool_blob *b)
{
	p2pg_spool_blob_publish(b);
	if (pwrite(fd, b, sizeof(*b), (off_t)offsetof(struct p2pg_spool_layout, blobs[slot])) < 0)
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
	atomic_store(&agg.version, 1);
	atomic_store(&agg.slot[1].count, 7);
	atomic_store(&agg.slot[1].bytes, 7 * 4096);
	atomic_store(&agg.slot[1].host_ns, 7000);
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
	put_ring(fd, 1, 9, 2);
	put_record(fd, 1, 0, P2PG_API_cudaDeviceEnablePeerAccess, P2PG_REC_PEER,
		   P2PG_ACTION_PASSED);
	put_record(fd, 1, 1, P2PG_API_cudaMemcpyPeerAsync, P2PG_REC_TRANSFER, P2PG_PATH_DRIVER);
	/* Another process's cuMem allocation on device 1 imported, mapped, given to device 0 and
	 * unmapped; an export of device 0's memory; a mapping of the process's own memory, counted
	 * not rowed; a failed IPC open, whose owner it cannot tell. */
	const uint32_t fd_handle = P2PG_MAP_HANDLE_POSIX_FD << P2PG_MAP_HANDLE_SHIFT;
	put_mapping(fd, 1, 2, P2PG_API_cuMemImportFromShareableHandle, P2PG_MAP_IMPORT, 0, 1, -1,
		    fd_handle | P2PG_MAP_F_CROSS_PROCESS, 1, 0);
	put_mapping(fd, 1, 3, P2PG_API_cuMemMap, P2PG_MAP_MAP, 0, 1, -1,
		    fd_handle | P2PG_MAP_F_CROSS_PROCESS, 2, 0x7f0000200000ull);
	put_mapping(fd, 1, 4, P2PG_API_cuMemSetAccess, P2PG_MAP_ACCESS, 0, 1, 0,
		    fd_handle | P2PG_MAP_F_CROSS_PROCESS | 3, 2, 0x7f0000200000ull);
	put_mapping(fd, 1, 5, P2PG_API_cuMemUnmap, P2PG_MAP_END, 0, 1, 0,
		    fd_handle | P2PG_MAP_F_CROSS_PROCESS, 2, 0x7f0000200000ull);
	put_mapping(fd, 1, 6, P2PG_API_cuMemExportToShareableHandle, P2PG_MAP_EXPORT, 0, 0, -1,
		    fd_handle, 0, 0);
	put_mapping(fd, 1, 7, P2PG_API_cuMemMap, P2PG_MAP_MAP, 0, 0, -1, P2PG_MAP_F_COUNTED, 0, 0);
	put_mapping(fd, 1, 8, P2PG_API_cudaIpcOpenMemHandle, P2PG_MAP_IMPORT, 400, -1, 0,
		    P2PG_MAP_HANDLE_IPC << P2PG_MAP_HANDLE_SHIFT | P2PG_MAP_F_CROSS_PROCESS | 1, 0,
		    0);

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
	put_blob(fd, 3, &b);

	/* The devices as src/record/devices.c writes them: ordinal, UUID, PCI bus id, name and
	 * nvidia-smi's index (empty: NVML does not know it), DEVICES of them. */
	memset(&b, 0, sizeof(b));
	b.kind = P2PG_BLOB_DEVICES;
	b.started_ns = 2;
	b.device = DEVICES;
	const char *devices[] = {"0",
				 "GPU-53696d43-5544-412d-6465-766963652d00",
				 "00000000:10:00.0",
				 "SimCUDA H200 sim #0",
				 "0",
				 "1",
				 "GPU-53696d43-5544-412d-6465-766963652d01",
				 "00000000:11:00.0",
				 "SimCUDA H200 sim #1",
				 ""};
	for (size_t k = 0; k < sizeof(devices) / sizeof(devices[0]); k++)
		p2pg_spool_blob_add(&b, devices[k]);
	put_blob(fd, 4, &b);

	/* A crash: its raw backtrace (address, module, base) and its Python stack. */
	memset(&b, 0, sizeof(b));
	b.kind = P2PG_BLOB_CRASH;
	b.started_ns = 3;
	b.tid = 42;
	b.signal = SIGSEGV;
	p2pg_spool_blob_add(&b, "0x401000 /nonexistent/fuzz 0x400000\n");
	p2pg_spool_blob_add(&b, "train.py:42 in step");
	put_blob(fd, 5, &b);
}

/*
 * Rows no writer can have published, whatever the damage, each table's counted apart; ?1 is the
 * device count the import believed (0: not known). A failed call's devices are the program's own
 * arguments, so only a successful one's are bounded. A mapping names no device (NULL) where it
 * has none or does not know it, and its own memory counted in mapping_counts is the owner's
 * device, -1 unknown. The devices blob lists the ordinals 0..n-1, n at most 64, each once. A crash
 * row is a fatal signal's, a signal's number.
 */
static long long impossible_rows(int devices)
{
	static const char sql[] =
	    "SELECT (SELECT count(*) FROM transfers WHERE path NOT IN "
	    "('p2p','driver','staged','captured') OR api = 'unknown' OR bytes < 0 OR host_ns < 0 "
	    "OR started_ns < 0 OR gpu_ns < 0 OR (status = 0 AND (src_device < 0 OR dst_device < "
	    "0 OR (?1 > 0 AND (src_device >= ?1 OR dst_device >= ?1))))) + "
	    "(SELECT count(*) FROM peer_access WHERE api = 'unknown' OR action NOT IN "
	    "('passed','absorbed','staged','reported') OR started_ns < 0 OR (status = 0 AND "
	    "(device < 0 OR peer_device < 0 OR (?1 > 0 AND (device >= ?1 OR peer_device >= "
	    "?1))))) + "
	    "(SELECT count(*) FROM failures WHERE api = 'unknown' OR started_ns < 0 OR (status = "
	    "0 AND (device < 0 OR peer_device < 0 OR (?1 > 0 AND (device >= ?1 OR peer_device >= "
	    "?1))))) + "
	    "(SELECT count(*) FROM transfer_overflow WHERE api = 'unknown' OR status != 0 OR "
	    "count < 0 OR bytes < 0 OR host_ns_total < 0 OR src_device < 0 OR dst_device < 0 OR "
	    "(?1 > 0 AND (src_device >= ?1 OR dst_device >= ?1))) + "
	    "(SELECT count(*) FROM processes WHERE records_invalid < 0 OR records_dropped < 0 OR "
	    "started_ns < 0 OR pid <= 0) + "
	    "(SELECT count(*) FROM peer_mappings WHERE api = 'unknown' OR event NOT IN "
	    "('export','import','map','access','end','unref') OR handle_type NOT IN "
	    "('ipc','posix_fd','fabric','other') OR bytes < 0 OR host_ns < 0 OR started_ns < 0 OR "
	    "address <= 0 OR flags < 0 OR flags > 65535 OR mapping_id <= 0 OR cross_process NOT "
	    "IN (0, 1) OR owner_device < 0 OR accessor_device < 0 OR is_peer IS NOT (owner_device "
	    "!= accessor_device) OR ended_ns < 0 OR ended_by = 'unknown' OR (status = 0 AND ?1 > "
	    "0 AND (owner_device >= ?1 OR accessor_device >= ?1))) + "
	    "(SELECT count(*) FROM mapping_counts WHERE api = 'unknown' OR typeof(calls) != "
	    "'integer' OR calls <= 0 OR typeof(bytes) != 'integer' OR bytes < 0 OR device < -1 OR "
	    "(?1 > 0 AND device >= ?1)) + "
	    "(SELECT count(*) FROM devices WHERE ordinal < 0 OR ordinal >= 64 OR (?1 > 0 AND "
	    "ordinal >= ?1) OR physical_index < 0) + "
	    "(SELECT count(*) FROM (SELECT process_id FROM devices GROUP BY process_id HAVING "
	    "max(ordinal) + 1 != count(*))) + "
	    "(SELECT count(*) FROM crashes WHERE signal < 1 OR signal >= ?2 OR started_ns < 0)";
	sqlite3_stmt *st = NULL;
	long long v = -1;
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
		sqlite3_bind_int(st, 1, devices);
		sqlite3_bind_int(st, 2, NSIG);
		if (sqlite3_step(st) == SQLITE_ROW)
			v = sqlite3_column_int64(st, 0);
	}
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
	if (impossible_rows(devices) != 0) {
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
		    "local_rank, 0, started_ns FROM processes UNION ALL SELECT 'mapping', api, "
		    "event || ' ' || coalesce(handle_type, '-') || ' id ' || coalesce(mapping_id, "
		    "'-') || ' flags ' || flags || ' address ' || coalesce(address, '-'), bytes, "
		    "status, owner_device, accessor_device, host_ns, started_ns FROM peer_mappings "
		    "UNION ALL SELECT 'mapping_count', api, typeof(bytes), bytes, calls, device, "
		    "NULL, 0, 0 FROM mapping_counts UNION ALL SELECT 'device', ordinal, uuid, "
		    "physical_index, process_id, pci_bus_id, name, 0, 0 FROM devices UNION ALL "
		    "SELECT 'crash', signal, thread_id, 0, 0, NULL, NULL, 0, started_ns FROM "
		    "crashes",
		    print_row, NULL, NULL);
		fprintf(stderr, "fuzz-spool: an impossible row (the header says %d devices)\n",
			devices);
		abort();
	}
	if (verbose)
		fprintf(
		    stderr,
		    "fuzz-spool: %lld transfers, %lld peer calls, %lld failures, %lld crashes, "
		    "%lld folded, %lld mappings, %lld counted mapping calls, %lld devices, %lld "
		    "invalid\n",
		    one(db, "SELECT count(*) FROM transfers"),
		    one(db, "SELECT count(*) FROM peer_access"),
		    one(db, "SELECT count(*) FROM failures"),
		    one(db, "SELECT count(*) FROM crashes"),
		    one(db, "SELECT coalesce(sum(count), 0) FROM transfer_overflow"),
		    one(db, "SELECT count(*) FROM peer_mappings"),
		    one(db, "SELECT coalesce(sum(calls), 0) FROM mapping_counts"),
		    one(db, "SELECT count(*) FROM devices"),
		    one(db, "SELECT coalesce(sum(records_invalid), 0) FROM processes"));
	sqlite3_exec(db,
		     "DELETE FROM transfers; DELETE FROM peer_access; DELETE FROM failures; "
		     "DELETE FROM crashes; DELETE FROM processes; DELETE FROM spool_progress; "
		     "DELETE FROM transfer_summary; DELETE FROM transfer_overflow; DELETE FROM "
		     "peer_mappings; DELETE FROM mapping_counts; DELETE FROM devices;",
		     NULL, NULL, NULL);
	return 0;
}
