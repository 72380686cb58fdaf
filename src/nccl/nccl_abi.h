/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * NCCL's profiler plugin interface, versions 1 to 6: only the binary layouts the guard exchanges
 * with NCCL and with a user's own plugin, under the guard's names. The layouts are NVIDIA's, as
 * defined by NVIDIA/nccl src/include/plugin/nccl_profiler.h and
 * src/include/plugin/profiler/profiler_v1.h ... profiler_v5.h of NCCL 2.28.9 (under this notice)
 * and profiler_v6.h of NCCL 2.30.7 (Apache-2.0, same copyright holder).
 *
 * Copyright (c) 2015-2024, NVIDIA CORPORATION. All rights reserved.
 *
 * Redistribution and use in source and binary forms, with or without modification, are permitted
 * provided that the following conditions are met:
 *  * Redistributions of source code must retain the above copyright notice, this list of
 *    conditions and the following disclaimer.
 *  * Redistributions in binary form must reproduce the above copyright notice, this list of
 *    conditions and the following disclaimer in the documentation and/or other materials provided
 *    with the distribution.
 *  * Neither the name of NVIDIA CORPORATION, Lawrence Berkeley National Laboratory, the U.S.
 *    Department of Energy, nor the names of their contributors may be used to endorse or promote
 *    products derived from this software without specific prior written permission.
 *
 * THIS SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS AND CONTRIBUTORS ``AS IS'' AND ANY EXPRESS OR
 * IMPLIED WARRANTIES, INCLUDING, BUT NOT LIMITED TO, THE IMPLIED WARRANTIES OF MERCHANTABILITY AND
 * FITNESS FOR A PARTICULAR PURPOSE ARE DISCLAIMED. IN NO EVENT SHALL THE COPYRIGHT OWNER OR
 * CONTRIBUTORS BE LIABLE FOR ANY DIRECT, INDIRECT, INCIDENTAL, SPECIAL, EXEMPLARY, OR
 * CONSEQUENTIAL DAMAGES (INCLUDING, BUT NOT LIMITED TO, PROCUREMENT OF SUBSTITUTE GOODS OR
 * SERVICES; LOSS OF USE, DATA, OR PROFITS; OR BUSINESS INTERRUPTION) HOWEVER CAUSED AND ON ANY
 * THEORY OF LIABILITY, WHETHER IN CONTRACT, STRICT LIABILITY, OR TORT (INCLUDING NEGLIGENCE OR
 * OTHERWISE) ARISING IN ANY WAY OUT OF THE USE OF THIS SOFTWARE, EVEN IF ADVISED OF THE
 * POSSIBILITY OF SUCH DAMAGE.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef int nccl_result; /* ncclResult_t: 0 success, 3 internal error */
#define NCCL_OK		    0
#define NCCL_INTERNAL_ERROR 3

typedef void (*nccl_logger)(int level, unsigned long flags, const char *file, int line,
			    const char *fmt, ...);

/* Event types (a bit each: the activation mask is their union). */
enum {
	NCCL_EV_GROUP = 1 << 0,
	NCCL_EV_COLL = 1 << 1,
	NCCL_EV_P2P = 1 << 2,
	NCCL_EV_PROXY_OP = 1 << 3,
	NCCL_EV_PROXY_STEP = 1 << 4,
	NCCL_EV_PROXY_CTRL = 1 << 5,
	NCCL_EV_KERNEL_CH = 1 << 6,
	NCCL_EV_NET_PLUGIN = 1 << 7,
	NCCL_EV_GROUP_API = 1 << 8,	 /* v5 */
	NCCL_EV_COLL_API = 1 << 9,	 /* v5 */
	NCCL_EV_P2P_API = 1 << 10,	 /* v5 */
	NCCL_EV_KERNEL_LAUNCH = 1 << 11, /* v5 */
	NCCL_EV_CE_COLL = 1 << 12,	 /* v6 */
	NCCL_EV_CE_SYNC = 1 << 13,	 /* v6 */
	NCCL_EV_CE_BATCH = 1 << 14,	 /* v6 */
};

/* recordEventState's states (one enum for every version). */
enum {
	NCCL_STATE_PROXY_OP_IN_PROGRESS_V4 = 19,
	NCCL_STATE_PROXY_STEP_SEND_GPU_WAIT = 8,
	NCCL_STATE_PROXY_STEP_SEND_PEER_WAIT_V4 = 20,
	NCCL_STATE_PROXY_STEP_SEND_WAIT = 9,
	NCCL_STATE_PROXY_STEP_RECV_WAIT = 10,
	NCCL_STATE_PROXY_STEP_RECV_FLUSH_WAIT = 11,
	NCCL_STATE_PROXY_STEP_RECV_GPU_WAIT = 12,
	NCCL_STATE_PROXY_CTRL_IDLE = 13,
	NCCL_STATE_PROXY_CTRL_ACTIVE = 14,
	NCCL_STATE_PROXY_CTRL_SLEEP = 15,
	NCCL_STATE_PROXY_CTRL_WAKEUP = 16,
	NCCL_STATE_PROXY_CTRL_APPEND = 17,
	NCCL_STATE_PROXY_CTRL_APPEND_END = 18,
	NCCL_STATE_NET_PLUGIN_UPDATE = 21,
	NCCL_STATE_KERNEL_CH_STOP = 22,
	NCCL_STATE_GROUP_START_API_STOP = 23,
	NCCL_STATE_GROUP_END_API_START = 24,
};

struct nccl_proxy_op_v1 {
	pid_t pid;
	uint8_t channelId;
	int peer;
	int nSteps;
	int chunkSize;
	int isSend;
};

/* ---- v6 (NCCL 2.29+): v5's events plus the copy-engine ones ---- */

struct nccl_v6_descr {
	uint64_t type;
	void *parentObj;
	int rank;
	union {
		struct {
			bool graphCaptured;
			int groupDepth;
		} groupApi;
		struct {
			const char *func;
			size_t count;
			const char *datatype;
			int root;
			void *stream;
			bool graphCaptured;
		} collApi;
		struct {
			const char *func;
			size_t count;
			const char *datatype;
			void *stream;
			bool graphCaptured;
		} p2pApi;
		struct {
			void *stream;
		} kernelLaunch;
		struct {
			uint64_t seqNumber;
			const char *func;
			const void *sendBuff;
			void *recvBuff;
			size_t count;
			int root;
			const char *datatype;
			uint8_t nChannels;
			uint8_t nWarps;
			const char *algo;
			const char *proto;
			void *parentGroup;
		} coll;
		struct {
			const char *func;
			void *buff;
			const char *datatype;
			size_t count;
			int peer;
			uint8_t nChannels;
			void *parentGroup;
		} p2p;
		struct nccl_proxy_op_v1 proxyOp;
		struct {
			int step;
		} proxyStep;
		struct {
			uint8_t channelId;
			uint64_t pTimer;
		} kernelCh;
		struct {
			int64_t id;
			void *data;
		} netPlugin;
		struct {
			uint64_t seqNumber;
			const char *func;
			const void *sendBuff;
			void *recvBuff;
			size_t count;
			int root;
			const char *datatype;
			const char *syncStrategy;
			bool intraBatchSync;
			uint32_t batchSize;
			uint32_t numBatches;
			uint32_t ceSeqNum;
			void *stream;
		} ceColl;
		struct {
			bool isComplete;
			int nRanks;
		} ceCollSync;
		struct {
			int numOps;
			size_t totalBytes;
			bool useIntraSync;
		} ceCollBatch;
	};
};

/* v4 to v6 */
union nccl_v4_state_args {
	struct {
		size_t transSize;
	} proxyStep;
	struct {
		int appendedProxyOps;
	} proxyCtrl;
	struct {
		void *data;
	} netPlugin;
	struct {
		uint64_t pTimer;
	} kernelCh;
};

struct nccl_v6_plugin {
	const char *name;
	nccl_result (*init)(void **context, uint64_t commId, int *eActivationMask,
			    const char *commName, int nNodes, int nranks, int rank,
			    nccl_logger logfn);
	nccl_result (*startEvent)(void *context, void **eHandle, struct nccl_v6_descr *eDescr);
	nccl_result (*stopEvent)(void *eHandle);
	nccl_result (*recordEventState)(void *eHandle, int eState,
					union nccl_v4_state_args *eStateArgs);
	nccl_result (*finalize)(void *context);
};

/* ---- v5 (NCCL 2.28): v6 without the copy-engine members; the same offsets ---- */

struct nccl_v5_descr {
	uint64_t type;
	void *parentObj;
	int rank;
	union {
		struct {
			bool graphCaptured;
			int groupDepth;
		} groupApi;
		struct {
			const char *func;
			size_t count;
			const char *datatype;
			int root;
			void *stream;
			bool graphCaptured;
		} collApi;
		struct {
			const char *func;
			size_t count;
			const char *datatype;
			void *stream;
			bool graphCaptured;
		} p2pApi;
		struct {
			void *stream;
		} kernelLaunch;
		struct {
			uint64_t seqNumber;
			const char *func;
			const void *sendBuff;
			void *recvBuff;
			size_t count;
			int root;
			const char *datatype;
			uint8_t nChannels;
			uint8_t nWarps;
			const char *algo;
			const char *proto;
			void *parentGroup;
		} coll;
		struct {
			const char *func;
			void *buff;
			const char *datatype;
			size_t count;
			int peer;
			uint8_t nChannels;
			void *parentGroup;
		} p2p;
		struct nccl_proxy_op_v1 proxyOp;
		struct {
			int step;
		} proxyStep;
		struct {
			uint8_t channelId;
			uint64_t pTimer;
		} kernelCh;
		struct {
			int64_t id;
			void *data;
		} netPlugin;
	};
};

struct nccl_v5_plugin {
	const char *name;
	nccl_result (*init)(void **context, uint64_t commId, int *eActivationMask,
			    const char *commName, int nNodes, int nranks, int rank,
			    nccl_logger logfn);
	nccl_result (*startEvent)(void *context, void **eHandle, struct nccl_v5_descr *eDescr);
	nccl_result (*stopEvent)(void *eHandle);
	nccl_result (*recordEventState)(void *eHandle, int eState,
					union nccl_v4_state_args *eStateArgs);
	nccl_result (*finalize)(void *context);
};

/* ---- v4 (NCCL 2.27): a one-byte type, no API events, a collective's parent is its group ---- */

struct nccl_v4_descr {
	uint8_t type;
	void *parentObj;
	int rank;
	union {
		struct {
			uint64_t seqNumber;
			const char *func;
			const void *sendBuff;
			void *recvBuff;
			size_t count;
			int root;
			const char *datatype;
			uint8_t nChannels;
			uint8_t nWarps;
			const char *algo;
			const char *proto;
		} coll;
		struct {
			const char *func;
			void *buff;
			const char *datatype;
			size_t count;
			int peer;
			uint8_t nChannels;
		} p2p;
		struct nccl_proxy_op_v1 proxyOp;
		struct {
			int step;
		} proxyStep;
		struct {
			uint8_t channelId;
			uint64_t pTimer;
		} kernelCh;
		struct {
			int64_t id;
			void *data;
		} netPlugin;
	};
};

struct nccl_v4_plugin {
	const char *name;
	nccl_result (*init)(void **context, int *eActivationMask, const char *commName,
			    uint64_t commHash, int nNodes, int nranks, int rank, nccl_logger logfn);
	nccl_result (*startEvent)(void *context, void **eHandle, struct nccl_v4_descr *eDescr);
	nccl_result (*stopEvent)(void *eHandle);
	nccl_result (*recordEventState)(void *eHandle, int eState,
					union nccl_v4_state_args *eStateArgs);
	nccl_result (*finalize)(void *context);
};

/* ---- v1 to v3 (NCCL 2.23 to 2.26): init without the communicator ---- */

union nccl_v1_state_args {
	struct {
		size_t transSize;
		int steps;
	} proxyOp;
	struct {
		int appendedProxyOps;
	} proxyCtrl;
};

struct nccl_v3_descr {
	uint8_t type;
	void *parentObj;
	int rank;
	union {
		struct {
			const char *name;
			uint64_t commHash;
			uint64_t seqNumber;
			const char *func;
			const void *sendBuff;
			void *recvBuff;
			size_t count;
			int root;
			const char *datatype;
			uint8_t nMaxChannels;
			uint8_t nWarps;
			const char *algo;
			const char *proto;
		} coll;
		struct {
			const char *name;
			uint64_t commHash;
			const char *func;
			void *buff;
			const char *datatype;
			size_t count;
			int peer;
		} p2p;
		struct nccl_proxy_op_v1 proxyOp;
		struct {
			int step;
		} proxyStep;
		struct {
			uint8_t channelId;
		} kernelCh;
		struct {
			int64_t id;
			void *data;
		} netPlugin;
	};
};

struct nccl_v2_descr {
	uint8_t type;
	void *parentObj;
	int rank;
	union {
		struct {
			const char *name;
			uint64_t commHash;
			uint64_t seqNumber;
			const char *func;
			const void *sendBuff;
			void *recvBuff;
			size_t count;
			int root;
			const char *datatype;
			size_t trafficBytes;
			uint8_t nMaxChannels;
			uint8_t nWarps;
			const char *algo;
			const char *proto;
		} coll;
		struct {
			const char *name;
			uint64_t commHash;
			const char *func;
			void *buff;
			const char *datatype;
			size_t count;
			int peer;
		} p2p;
		struct nccl_proxy_op_v1 proxyOp;
		struct {
			int step;
		} proxyStep;
	};
};

struct nccl_v1_descr {
	uint8_t type;
	void *parentObj;
	int rank;
	union {
		struct {
			const char *name;
			uint64_t commHash;
			uint64_t seqNumber;
			uint8_t func;
			const void *sendBuff;
			void *recvBuff;
			size_t count;
			int root;
			uint8_t datatype;
			uint32_t op;
			size_t trafficBytes;
			uint8_t nMaxChannels;
			uint8_t nWarps;
			uint8_t algo;
			uint8_t proto;
			int isCollnet;
			int isNvls;
		} coll;
		struct {
			const char *name;
			uint64_t commHash;
			uint8_t func;
			void *buff;
			uint8_t datatype;
			size_t count;
			int peer;
		} p2p;
		struct nccl_proxy_op_v1 proxyOp;
		struct {
			int step;
		} proxyStep;
	};
};

/* v1 to v3 share this shape; the descriptor differs. */
struct nccl_v1_plugin {
	const char *name;
	nccl_result (*init)(void **context, int *eActivationMask);
	nccl_result (*startEvent)(void *context, void **eHandle, void *eDescr);
	nccl_result (*stopEvent)(void *eHandle);
	nccl_result (*recordEventState)(void *eHandle, int eState,
					union nccl_v1_state_args *eStateArgs);
	nccl_result (*finalize)(void *context);
};

_Static_assert(offsetof(struct nccl_v6_descr, coll.parentGroup) ==
		   offsetof(struct nccl_v5_descr, coll.parentGroup),
	       "v5 is v6's prefix");
_Static_assert(offsetof(struct nccl_v6_descr, kernelCh.pTimer) ==
		   offsetof(struct nccl_v5_descr, kernelCh.pTimer),
	       "v5 is v6's prefix");
_Static_assert(sizeof(struct nccl_v5_descr) == 112, "NCCL 2.28's v5 descriptor (LP64)");
