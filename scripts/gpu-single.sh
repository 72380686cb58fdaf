#!/usr/bin/env bash
# The one-GPU pass (nvidia-h100-x1 or nvidia-h200), in one run of a few minutes:
#   1. scripts/gpu-postmortem.sh: the post-mortem proof (Python lines with the GIL released, a
#      PyTorch segfault's crash row at once, a one-GPU run's processes row, the outputs);
#   2. the cost of the GIL-less Python stack capture on this machine's Python;
#   3. what the guard adds to a PyTorch process's start (its spool and processes row are made at
#      the first cuInit now): bare and guarded, interleaved.
# Prepare here with scripts/prepare-carry.sh, then on the GPU machine: bash scripts/gpu-single.sh
# Results: tables on stdout and in $OUT (or a new folder under /tmp).
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
ROOT=$PWD
BUILD=${BUILD:-$ROOT/.carry/build}
RESULTS=${OUT:-$(mktemp -d /tmp/gpu-single.XXXXXX)}
mkdir -p "$RESULTS"
export LD_LIBRARY_PATH=$ROOT/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

echo "## 1. post-mortem"
OUT=$RESULTS bash scripts/gpu-postmortem.sh 2>&1 | tee "$RESULTS/postmortem.log" | grep -v '^== '

echo "## 2. Python stack capture"
python3 tests/bench/bench_pystack.py "$BUILD" 2000 2>&1 | tee "$RESULTS/bench-pystack.txt"

echo "## 3. PyTorch process start, bare and guarded (s, interleaved)"
BUILD=$BUILD bash scripts/torch-start.sh | tee "$RESULTS/torch-start.md"
