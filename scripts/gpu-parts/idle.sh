#!/usr/bin/env bash
# Issue 28 on the GPU machine: what the preload costs processes that never touch CUDA (/bin/true,
# sh, python3 -c pass) and a CUDA process's shortest life against the real driver
# (scripts/bench-idle.sh), then a PyTorch process's start, bare and guarded, medians of 5
# interleaved.
set -uo pipefail
source "$(dirname "$0")/../gpu-part-env.sh" idle
echo "### processes under the preload (bench-idle.sh, real driver)"
BUILD=$BUILD REAL_CUDA=1 ROUNDS=7 RUNS=200 CUDA_RUNS=3 PYTHON=/usr/bin/python3 bash scripts/bench-idle.sh \
	| tee "$RESULTS/bench-idle.md"

echo "### the dynamic loader's time, and the libraries copied to /dev/shm (loader-time.sh)"
BUILD=$BUILD bash scripts/loader-time.sh | tee "$RESULTS/loader-time.md"

echo "### PyTorch process start, bare and guarded (s, 5 interleaved)"
BUILD=$BUILD bash scripts/torch-start.sh | tee "$RESULTS/torch-start.md"
