/* SPDX-License-Identifier: MIT */
/*
 * Which GPU a legacy CUDA IPC handle's memory is on, told by the exporting process to the
 * importing one. The driver cannot tell the importer: it names an opened mapping by the device of
 * the context it is mapped into, whatever device the memory is on (measured on two H200s,
 * 2026-11-29), and the handle's 64 bytes are opaque. So a guarded exporter notes each handle it
 * makes, with its GPU's UUID, in a small table shared by the processes of one database (a file in
 * its spool folder), and a guarded importer looks its handle up there and finds the GPU among its
 * own devices by UUID (its numbering may differ: CUDA_VISIBLE_DEVICES). A handle whose exporter
 * has ended gives its slot to a new one when the table is full around it. An unguarded exporter,
 * a table of another database or one full of live processes' handles: the owner stays unknown.
 */
#pragma once

#include <stdbool.h>

/* Notes that handle (CU_IPC_HANDLE_SIZE bytes) was made for memory of device ordinal. Never
 * fails the caller: a table that cannot be used is said once on stderr. */
void p2pg_ipc_owners_note(const void *handle, int device);

/* The ordinal, in this process, of the device whose memory handle names; -1 when not known. */
int p2pg_ipc_owners_find(const void *handle);

/* The table's file name in the spool folder. */
#define P2PG_IPC_OWNERS_FILE "ipc-owners.v2"
