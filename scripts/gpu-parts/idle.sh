#!/usr/bin/env bash
# Issue 28 on the GPU machine: what the preload costs processes that never touch CUDA (/bin/true,
# sh, python3 -c pass) and a CUDA process's shortest life against the real driver
# (scripts/bench-idle.sh), then a PyTorch process's start, bare and guarded, medians of 5
# interleaved.
set -uo pipefail
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
BUILD=${BUILD:-.carry/build}
RESULTS=${RESULTS:-$(mktemp -d /tmp/gpu-idle.XXXXXX)}
echo "### processes under the preload (bench-idle.sh, real driver)"
BUILD=$BUILD REAL_CUDA=1 ROUNDS=7 RUNS=200 CUDA_RUNS=3 PYTHON=/usr/bin/python3 bash scripts/bench-idle.sh \
	| tee "$RESULTS/bench-idle.md"

echo "### the dynamic loader's time, and the libraries copied to /dev/shm (loader-time.sh)"
BUILD=$BUILD bash scripts/loader-time.sh | tee "$RESULTS/loader-time.md"

echo "### PyTorch process start, bare and guarded (s, 5 interleaved)"
BUILD=$BUILD bash scripts/torch-start.sh | tee "$RESULTS/torch-start.md"
