/* SPDX-License-Identifier: MIT */
/*
 * What NCCL's records in the spool mean: the profiler plugin (src/nccl/) writes them, the importer
 * reads them. NCCL names functions, algorithms, protocols and datatypes by strings; a record holds
 * small codes for them, listed here once for both sides.
 *
 * P2PG_REC_NCCL_OP, one operation that finished, or whose end NCCL never reported:
 *   started_ns   CLOCK_REALTIME when NCCL started the operation's event (its enqueue)
 *   host_ns      from then to the end NCCL reported (its last kernel channel done, seen by NCCL's
 *                proxy thread), or to NCCL's stop of the event when it reports no channel
 *   bytes        count x datatype size (the count itself with P2PG_NCCL_F_SIZE_UNKNOWN)
 *   stream       NCCL's sequence number of a collective; the plugin's own count for the
 *                point-to-point and copy-engine operations of a communicator
 *   api          P2PG_NCCL_API + enum p2pg_nccl_func
 *   path         enum p2pg_nccl_algo | enum p2pg_nccl_proto << 4
 *   status       0 finished; P2PG_NCCL_UNREPORTED: NCCL never reported its end (its communicator
 *                was freed first)
 *   src_device   the communicator's serial in the process (its blob's serial)
 *   dst_device   the peer rank of a point-to-point operation, clamped to int16; -1 otherwise
 *   flags        P2PG_NCCL_F_* with the channel counts and the datatype code
 *   value        the peer rank (point-to-point) or the root rank (collectives)
 *   gpu_ns       the last channel's end minus the first channel's start, by the GPU's clock
 * The overflow aggregates key folded operations by (api, src_device, dst_device, path, status,
 * size bucket): per communicator, function, peer, algorithm and size.
 *
 * P2PG_REC_NCCL_COMM_END, a communicator's finalize: started_ns its time, src_device its serial,
 * stream its hash, bytes the operations it recorded, host_ns those unreported, value the events
 * that found no free slot (not recorded), api P2PG_NCCL_API.
 *
 * P2PG_BLOB_NCCL_COMM, a communicator's start: serial its serial, seq its hash, started_ns its
 * time, status nranks, signal rank, device the CUDA ordinal (-1 unknown), peer_device nNodes, api
 * the profiler interface version NCCL chose; text fields in enum p2pg_nccl_comm_field's order.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define P2PG_NCCL_API 0x4000u /* above every CUDA API number */

enum p2pg_nccl_func {
	P2PG_NCCL_FUNC_UNKNOWN,
	P2PG_NCCL_FUNC_ALLGATHER,
	P2PG_NCCL_FUNC_ALLREDUCE,
	P2PG_NCCL_FUNC_ALLTOALL,
	P2PG_NCCL_FUNC_BROADCAST,
	P2PG_NCCL_FUNC_GATHER,
	P2PG_NCCL_FUNC_RECV,
	P2PG_NCCL_FUNC_REDUCE,
	P2PG_NCCL_FUNC_REDUCESCATTER,
	P2PG_NCCL_FUNC_SCATTER,
	P2PG_NCCL_FUNC_SENDRECV,
	P2PG_NCCL_FUNC_SEND,
	P2PG_NCCL_FUNC_COUNT
};

enum p2pg_nccl_algo {
	P2PG_NCCL_ALGO_NONE, /* not given (point-to-point) or not known */
	P2PG_NCCL_ALGO_TREE,
	P2PG_NCCL_ALGO_RING,
	P2PG_NCCL_ALGO_COLLNET_DIRECT,
	P2PG_NCCL_ALGO_COLLNET_CHAIN,
	P2PG_NCCL_ALGO_NVLS,
	P2PG_NCCL_ALGO_NVLS_TREE,
	P2PG_NCCL_ALGO_PAT,
	P2PG_NCCL_ALGO_COUNT
};

enum p2pg_nccl_proto {
	P2PG_NCCL_PROTO_NONE,
	P2PG_NCCL_PROTO_LL,
	P2PG_NCCL_PROTO_LL128,
	P2PG_NCCL_PROTO_SIMPLE,
	P2PG_NCCL_PROTO_COUNT
};

enum p2pg_nccl_dtype {
	P2PG_NCCL_DTYPE_UNKNOWN,
	P2PG_NCCL_DTYPE_INT8,
	P2PG_NCCL_DTYPE_UINT8,
	P2PG_NCCL_DTYPE_INT32,
	P2PG_NCCL_DTYPE_UINT32,
	P2PG_NCCL_DTYPE_INT64,
	P2PG_NCCL_DTYPE_UINT64,
	P2PG_NCCL_DTYPE_FLOAT16,
	P2PG_NCCL_DTYPE_FLOAT32,
	P2PG_NCCL_DTYPE_FLOAT64,
	P2PG_NCCL_DTYPE_BFLOAT16,
	P2PG_NCCL_DTYPE_FLOAT8E4M3,
	P2PG_NCCL_DTYPE_FLOAT8E5M2,
	P2PG_NCCL_DTYPE_COUNT /* at most 16: four bits of the flags */
};

#define P2PG_NCCL_UNREPORTED 1 /* status: still running when its communicator was freed */

/* flags */
#define P2PG_NCCL_F_CHANNELS(f)	     ((f)&0xffu)	  /* channels NCCL gave it */
#define P2PG_NCCL_F_CHANNELS_DONE(f) (((f) >> 8) & 0xffu) /* kernel channels seen finished */
#define P2PG_NCCL_F_DTYPE(f)	     (((f) >> 16) & 0xfu) /* enum p2pg_nccl_dtype */
#define P2PG_NCCL_F_P2P		     (1u << 20)		  /* point-to-point */
#define P2PG_NCCL_F_CE		     (1u << 21)		  /* copy-engine collective (v6) */
#define P2PG_NCCL_F_GPU_TIMED	     (1u << 22)		  /* gpu_ns is the kernel's */
#define P2PG_NCCL_F_SIZE_UNKNOWN     (1u << 24)		  /* bytes holds the element count */
#define P2PG_NCCL_F_NO_CHANNELS	     (1u << 25)		  /* NCCL reported no kernel channel */
#define P2PG_NCCL_F_MAKE(channels, done, dtype)                         \
	((uint32_t)((channels)&0xffu) | (uint32_t)((done)&0xffu) << 8 | \
	 (uint32_t)((dtype)&0xfu) << 16)

/* The blob's text fields. */
enum p2pg_nccl_comm_field {
	P2PG_NCCL_COMM_NAME,	/* NCCL's commName (v4+), may be empty */
	P2PG_NCCL_COMM_HOST,	/* the host name */
	P2PG_NCCL_COMM_UUID,	/* GPU-xxxxxxxx-..., as nvidia-smi prints it; empty: unknown */
	P2PG_NCCL_COMM_PCI,	/* 00000000:1B:00.0; empty: unknown */
	P2PG_NCCL_COMM_CHAINED, /* the user's profiler plugin the guard forwards to, or empty */
	P2PG_NCCL_COMM_FIELDS
};

/* Names as NCCL spells them ("AllReduce", "RING", "SIMPLE", "ncclFloat32"); "unknown" for 0. */
const char *p2pg_nccl_func_name(unsigned code);
const char *p2pg_nccl_algo_name(unsigned code);
const char *p2pg_nccl_proto_name(unsigned code);
const char *p2pg_nccl_dtype_name(unsigned code);
/* Bytes per element; 0 when unknown. */
size_t p2pg_nccl_dtype_size(unsigned code);

/* The codes of NCCL's names (exact match); 0 for anything else. s is NUL-terminated. */
unsigned p2pg_nccl_func_code(const char *s);
unsigned p2pg_nccl_algo_code(const char *s);
unsigned p2pg_nccl_proto_code(const char *s);
unsigned p2pg_nccl_dtype_code(const char *s);
