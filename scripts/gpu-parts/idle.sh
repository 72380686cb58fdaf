#!/usr/bin/env bash
# The preload's cost to processes that never touch CUDA, and a CUDA process's start, against the
# real driver (scripts/bench-idle.sh), on the GPU machine's Python too.
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-.carry/build} REAL_CUDA=1 bash scripts/bench-idle.sh
