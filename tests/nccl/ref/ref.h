/* SPDX-License-Identifier: MIT */
/*
 * NCCL's profiler plugin interface as NCCL itself declares it, for the simulated NCCL and the
 * test plugin: NVIDIA's own headers, unchanged (README.md says where each comes from), so that the
 * guard's separate declarations (src/nccl/nccl_abi.h) are checked against them, not against
 * themselves. The event types and states are NCCL's ncclProfile* and ncclProfiler* values.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common.h"
#include "err.h"

enum {
	ncclProfileGroup = (1 << 0),
	ncclProfileColl = (1 << 1),
	ncclProfileP2p = (1 << 2),
	ncclProfileProxyOp = (1 << 3),
	ncclProfileProxyStep = (1 << 4),
	ncclProfileProxyCtrl = (1 << 5),
	ncclProfileKernelCh = (1 << 6),
	ncclProfileNetPlugin = (1 << 7),
	ncclProfileGroupApi = (1 << 8),
	ncclProfileCollApi = (1 << 9),
	ncclProfileP2pApi = (1 << 10),
	ncclProfileKernelLaunch = (1 << 11),
	ncclProfileCeColl = (1 << 12),
	ncclProfileCeSync = (1 << 13),
	ncclProfileCeBatch = (1 << 14),
};

typedef enum {
	ncclProfilerProxyStepSendGPUWait = 8,
	ncclProfilerProxyCtrlIdle = 13,
	ncclProfilerProxyCtrlActive = 14,
	ncclProfilerProxyCtrlSleep = 15,
	ncclProfilerProxyCtrlWakeup = 16,
	ncclProfilerProxyCtrlAppend = 17,
	ncclProfilerProxyCtrlAppendEnd = 18,
	ncclProfilerKernelChStop = 22,
	ncclProfilerGroupStartApiStop = 23,
	ncclProfilerGroupEndApiStart = 24,
} ncclProfilerEventState_t;

typedef ncclProfilerEventState_t ncclProfilerEventState_v3_t;
typedef ncclProfilerEventState_t ncclProfilerEventState_v4_t;
typedef ncclProfilerEventState_t ncclProfilerEventState_v5_t;
typedef ncclProfilerEventState_t ncclProfilerEventState_v6_t;

#include "profiler_v3.h"
#include "profiler_v4.h"
#include "profiler_v5.h"
#include "profiler_v6.h"
