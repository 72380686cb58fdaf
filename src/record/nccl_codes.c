/* SPDX-License-Identifier: MIT */
/* NCCL's names of functions, algorithms, protocols and datatypes (ncclFuncToString and its
 * siblings in NVIDIA/nccl src/collectives.cc, 2.28 to 2.30) and their codes in records. */
#include "nccl_codes.h"

#include <string.h>

static const char *const funcs[P2PG_NCCL_FUNC_COUNT] = {
    "unknown", "AllGather", "AllReduce",     "AlltoAll", "Broadcast", "Gather",
    "Recv",    "Reduce",    "ReduceScatter", "Scatter",	 "SendRecv",  "Send",
};
static const char *const algos[P2PG_NCCL_ALGO_COUNT] = {
    "unknown", "TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT",
};
static const char *const protos[P2PG_NCCL_PROTO_COUNT] = {"unknown", "LL", "LL128", "SIMPLE"};
static const char *const dtypes[P2PG_NCCL_DTYPE_COUNT] = {
    "unknown",	    "ncclInt8",	      "ncclUint8",	"ncclInt32",   "ncclUint32",
    "ncclInt64",    "ncclUint64",     "ncclFloat16",	"ncclFloat32", "ncclFloat64",
    "ncclBfloat16", "ncclFloat8e4m3", "ncclFloat8e5m2",
};
static const unsigned char dtype_sizes[P2PG_NCCL_DTYPE_COUNT] = {0, 1, 1, 4, 4, 8, 8,
								 2, 4, 8, 2, 1, 1};

static const char *name_of(const char *const *names, unsigned count, unsigned code)
{
	return code < count ? names[code] : names[0];
}

static unsigned code_of(const char *const *names, unsigned count, const char *s)
{
	for (unsigned k = 1; k < count; k++)
		if (strcmp(names[k], s) == 0)
			return k;
	return 0;
}

const char *p2pg_nccl_func_name(unsigned code)
{
	return name_of(funcs, P2PG_NCCL_FUNC_COUNT, code);
}

const char *p2pg_nccl_algo_name(unsigned code)
{
	return name_of(algos, P2PG_NCCL_ALGO_COUNT, code);
}

const char *p2pg_nccl_proto_name(unsigned code)
{
	return name_of(protos, P2PG_NCCL_PROTO_COUNT, code);
}

const char *p2pg_nccl_dtype_name(unsigned code)
{
	return name_of(dtypes, P2PG_NCCL_DTYPE_COUNT, code);
}

size_t p2pg_nccl_dtype_size(unsigned code)
{
	return code < P2PG_NCCL_DTYPE_COUNT ? dtype_sizes[code] : 0;
}

unsigned p2pg_nccl_func_code(const char *s)
{
	return code_of(funcs, P2PG_NCCL_FUNC_COUNT, s);
}

unsigned p2pg_nccl_algo_code(const char *s)
{
	return code_of(algos, P2PG_NCCL_ALGO_COUNT, s);
}

unsigned p2pg_nccl_proto_code(const char *s)
{
	return code_of(protos, P2PG_NCCL_PROTO_COUNT, s);
}

unsigned p2pg_nccl_dtype_code(const char *s)
{
	return code_of(dtypes, P2PG_NCCL_DTYPE_COUNT, s);
}
