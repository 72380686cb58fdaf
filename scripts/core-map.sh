#!/usr/bin/env bash
# Whether the CPU a process runs on decides what a CUDA call costs it: `rt_peer bench CALLS 256`
# without the guard, pinned to one CPU at a time, RUNS runs each (default 2), CPUs in CPUS (default
# all). Prints one line per CPU: its runs' ns per call. On the GPU machine, from the repository root
# with .carry/ beside it: bash scripts/core-map.sh
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/.carry/build}
export LD_LIBRARY_PATH=$ROOT/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
P=$BUILD/tests/programs/rt_peer
for c in ${CPUS:-$(seq 0 $(($(nproc) - 1)))}; do
	line="cpu $c:"
	for _ in $(seq 1 "${RUNS:-2}"); do
		line+=" $(taskset -c "$c" "$P" bench "${CALLS:-20000}" 256 2>/dev/null | sed -n 's/.*ns_per_call=\([0-9.]*\).*/\1/p')"
	done
	echo "$line"
done
