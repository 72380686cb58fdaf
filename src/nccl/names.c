/* SPDX-License-Identifier: MIT */
/* NCCL's strings to codes, without trusting the pointers (nccl_plugin.h). */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "nccl_codes.h"
#include "nccl_plugin.h"

#define CACHE	256 /* a power of two; NCCL has about 40 names */
#define LONGEST 32

/* Each entry: the pointer << 16 | kind << 8 | code, one word so a reader sees all or nothing.
 * User-space pointers fit in 48 bits. */
static _Atomic uint64_t cache[CACHE];
static atomic_bool no_readv; /* the kernel refuses process_vm_readv (a seccomp filter) */

/* Reads up to len bytes at s without touching them here: the kernel returns an error for a bad
 * address. Returns the bytes read, 0 for none. */
static size_t read_checked(const char *s, char *buf, size_t len)
{
	struct iovec local = {buf, len};
	struct iovec remote = {(void *)s, len};
	ssize_t n = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
	if (n < 0 && (errno == EFAULT || errno == ENOMEM || errno == ESRCH)) {
		/* The string may end a page before an unmapped one: read up to the page end. */
		size_t to_page = 4096 - ((uintptr_t)s & 4095);
		if (to_page < len) {
			local.iov_len = remote.iov_len = to_page;
			n = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
		}
	}
	if (n < 0 && (errno == ENOSYS || errno == EPERM)) {
		atomic_store(&no_readv, true);
		return 0;
	}
	return n > 0 ? (size_t)n : 0;
}

static unsigned parse(enum p2pg_nccl_name kind, const char *s)
{
	switch (kind) {
	case P2PG_NAME_FUNC:
		return p2pg_nccl_func_code(s);
	case P2PG_NAME_ALGO:
		return p2pg_nccl_algo_code(s);
	case P2PG_NAME_PROTO:
		return p2pg_nccl_proto_code(s);
	case P2PG_NAME_DTYPE:
		return p2pg_nccl_dtype_code(s);
	}
	return 0;
}

unsigned p2pg_nccl_name_code(enum p2pg_nccl_name kind, const char *s)
{
	uintptr_t p = (uintptr_t)s;
	if (p < 4096 || p >> 48)
		return 0; /* NULL, a small integer, or no user-space address */
	uint64_t key = (uint64_t)p << 16 | (uint64_t)kind << 8;
	unsigned h = (unsigned)((p >> 3) * 2654435761u) & (CACHE - 1);
	uint64_t e = atomic_load_explicit(&cache[h], memory_order_relaxed);
	if ((e & ~0xffull) == key)
		return (unsigned)(e & 0xff);
	char buf[LONGEST + 1];
	size_t n = atomic_load_explicit(&no_readv, memory_order_relaxed)
		       ? 0
		       : read_checked(s, buf, LONGEST);
	unsigned code = 0;
	if (n > 0) {
		buf[n] = '\0';
		if (memchr(buf, '\0', n))
			code = parse(kind, buf);
	} else if (atomic_load_explicit(&no_readv, memory_order_relaxed)) {
		/* No way to check: NCCL's names are static strings, read as NCCL wrote them. */
		code = parse(kind, s);
	}
	atomic_store_explicit(&cache[h], key | code, memory_order_relaxed);
	return code;
}

void p2pg_nccl_copy_string(const char *s, char *buf, size_t len)
{
	buf[0] = '\0';
	uintptr_t p = (uintptr_t)s;
	if (len < 2 || p < 4096 || p >> 48)
		return;
	size_t n = atomic_load_explicit(&no_readv, memory_order_relaxed)
		       ? 0
		       : read_checked(s, buf, len - 1);
	if (n == 0 && atomic_load_explicit(&no_readv, memory_order_relaxed)) {
		n = strnlen(s, len - 1); /* no way to check: read as NCCL wrote it */
		memcpy(buf, s, n);
	}
	buf[n] = '\0';
}
