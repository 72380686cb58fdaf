/* SPDX-License-Identifier: MIT */
/*
 * A mapping record (kind P2PG_REC_MAPPING): one call that makes, grants or ends access to memory
 * across a process or a device (CUDA IPC, cuMem export/import/map/access), in the 64 bytes of
 * struct p2pg_record:
 *
 *   started_ns, host_ns, tid, api, status  as for every record
 *   path        the event: enum p2pg_map_event
 *   src_device  the device whose memory it is (the owner); -1 unknown
 *   dst_device  the device that gains (or loses) access; -1 none (export, import, map)
 *   bytes       the size of the memory or range
 *   stream      the device address of the mapping, where there is one; 0 otherwise
 *   value       the mapping's id, process-unique, from 1: an end record carries the id of what
 *               it ends; 0 none
 *   flags       the call's flags (P2PG_MAP_CALL_FLAGS: 1 = cudaIpcMemLazyEnablePeerAccess on an
 *               IPC open; CUmemAccess_flags on cuMemSetAccess), the handle type
 *               (P2PG_MAP_HANDLE_SHIFT) and the P2PG_MAP_F_* bits
 *   gpu_ns      unused (0)
 *
 * A process's own mappings of its own device's memory (expandable segments make them by the
 * thousand) carry P2PG_MAP_F_COUNTED: the importer counts them in mapping_counts instead of
 * giving each a row.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

enum p2pg_map_event {
	P2PG_MAP_EXPORT = 1, /* the owner made a handle others can open (IPC get, cuMem export) */
	P2PG_MAP_IMPORT = 2, /* another process's memory opened here (IPC open, cuMem import) */
	P2PG_MAP_MAP = 3,    /* an allocation mapped at an address (cuMemMap) */
	P2PG_MAP_ACCESS = 4, /* a device granted (or refused) access (cuMemSetAccess) */
	P2PG_MAP_END = 5,    /* an unmap, close or release: ends the mapping with its id */
};

enum p2pg_map_handle_type {
	P2PG_MAP_HANDLE_NONE = 0,
	P2PG_MAP_HANDLE_IPC = 1,      /* a legacy CUDA IPC handle */
	P2PG_MAP_HANDLE_POSIX_FD = 2, /* CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR */
	P2PG_MAP_HANDLE_FABRIC = 3,   /* CU_MEM_HANDLE_TYPE_FABRIC */
	P2PG_MAP_HANDLE_OTHER = 4,
};

#define P2PG_MAP_CALL_FLAGS   0xffffu
#define P2PG_MAP_HANDLE_SHIFT 16
#define P2PG_MAP_HANDLE_MASK  (0xffu << P2PG_MAP_HANDLE_SHIFT)
/* The memory belongs to another process (opened or imported here, or a mapping of that). */
#define P2PG_MAP_F_CROSS_PROCESS 0x01000000u
/* An end that dropped one reference: the mapping lives on (an IPC handle opened twice). */
#define P2PG_MAP_F_PARTIAL 0x02000000u
/* Counted, not rowed: the process's own memory on its own device. */
#define P2PG_MAP_F_COUNTED 0x80000000u

static inline unsigned p2pg_map_handle_type(uint32_t flags)
{
	return (flags & P2PG_MAP_HANDLE_MASK) >> P2PG_MAP_HANDLE_SHIFT;
}

static inline const char *p2pg_map_event_name(unsigned event)
{
	switch (event) {
	case P2PG_MAP_EXPORT:
		return "export";
	case P2PG_MAP_IMPORT:
		return "import";
	case P2PG_MAP_MAP:
		return "map";
	case P2PG_MAP_ACCESS:
		return "access";
	case P2PG_MAP_END:
		return "end";
	}
	return "unknown";
}

/* NULL for none. */
static inline const char *p2pg_map_handle_name(unsigned type)
{
	switch (type) {
	case P2PG_MAP_HANDLE_IPC:
		return "ipc";
	case P2PG_MAP_HANDLE_POSIX_FD:
		return "posix_fd";
	case P2PG_MAP_HANDLE_FABRIC:
		return "fabric";
	case P2PG_MAP_HANDLE_OTHER:
		return "other";
	}
	return NULL;
}
