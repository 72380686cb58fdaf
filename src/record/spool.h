/* SPDX-License-Identifier: MIT */
/* The writing side of the spool (include/p2pguard/spool.h describes the file). */
#pragma once

#include "p2pguard/spool.h"

#include <stdbool.h>
#include <stddef.h>

struct p2pg_process_info {
	char hostname[64];
	int rank;
	int local_rank;
	const char *mode;
	int record; /* enum p2pg_record_mode: how the rows of this spool are to be imported */
	char cmdline[2048];
	char run_id[40]; /* "" when the process was not started by `p2pguard run` */
};

/*
 * Opens the spool folder dir (creating it 0700 when create is set) as an O_DIRECTORY fd, refusing
 * what another user could have planted there to read the records or to make the guard write
 * elsewhere: a symbolic link, something not a folder, a folder owned by another user. A folder of
 * ours that others may enter (an older guard made them 0775) is made 0700. Returns the fd, or a
 * negative errno with the reason in why (-ENOENT: no folder and !create).
 */
int p2pg_spool_dir_open(const char *dir, bool create, char *why, size_t why_len);

/*
 * Maps a spool file shared, read-write, at its whole layout's size (P2PG_SPOOL_MAP_SIZE), whatever
 * the file's own; MAP_FAILED on failure. Only what the file holds may be touched (a page past its
 * end is a SIGBUS). The rings sit megabytes apart: readahead would zero-fill large folios around
 * every first touch (155 ms for a first import pass of 128 rows, measured), so it is turned off.
 */
struct p2pg_spool_layout *p2pg_spool_map(int fd);

/*
 * Makes [offset, offset + len) of the spool file hold disk blocks, growing the file when it ends
 * before (a store into a hole of a file on a full disk is a SIGBUS; a failed fallocate only an
 * error). Never asks past RLIMIT_FSIZE: the kernel would answer with SIGXFSZ, which kills the
 * program. Returns 0, -EFBIG for the limit, or another negative errno (-ENOSPC...).
 */
int p2pg_spool_grow(int fd, size_t offset, size_t len);

/* The checksum of the header's fields written once (all after the magic, up to header_crc). */
uint32_t p2pg_spool_header_crc(const struct p2pg_spool_header *h);

/*
 * Creates this process's spool file under dir and maps it. Returns the mapping or NULL (errno set,
 * the reason in why when why_len > 0); on success *ret_fd holds an fd with an exclusive flock,
 * which marks the file as owned by a living process (close-on-exec, so an exec'd image leaves it to
 * recovery). The file is made 0600, never through a symbolic link; a folder p2pg_spool_dir_open
 * refuses is refused.
 */
struct p2pg_spool_layout *p2pg_spool_create(const char *dir, const struct p2pg_process_info *info,
					    int *ret_fd, char *ret_path, size_t path_len, char *why,
					    size_t why_len);

/*
 * Claims a thread ring for the calling thread: a free one the file holds, or a new one, the file
 * grown for it first (fd: the spool file). Returns NULL when all are taken (errno 0) or the file
 * cannot grow (errno set: EFBIG for the file size limit, ENOSPC...). Lock-free; called once per
 * thread.
 */
struct p2pg_spool_thread *p2pg_spool_claim_thread(struct p2pg_spool_layout *spool, int fd,
						  uint32_t tid);

/*
 * Gives the ring's next record slots disk blocks (doubling the slots that have them) in spool's
 * file fd. Only the ring's owner calls it. Returns the ring's records_in_file after it; a refusal
 * (a full disk) leaves it as it was, and the owner's next P2PG_SPOOL_RING_FIRST records do not ask
 * again.
 */
uint64_t p2pg_spool_ring_grow(const struct p2pg_spool_layout *spool, int fd,
			      struct p2pg_spool_thread *t);

/* The machine's boot id (/proc/sys/kernel/random/boot_id), or "unknown". */
void p2pg_boot_id(char *buf, size_t len);
