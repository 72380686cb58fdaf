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

echo "### PyTorch process start, bare and guarded (s, 5 interleaved)"
lib=$(realpath "$BUILD")/src/preload/libp2pguard.so
start_cmd=(python3 -c 'import torch; torch.zeros(1, device="cuda"); torch.cuda.synchronize()')
bare=() guarded=()
for k in 1 2 3 4 5; do
	t0=$EPOCHREALTIME; "${start_cmd[@]}" 2>/dev/null; t1=$EPOCHREALTIME
	bare+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}')")
	db=$(mktemp -u /tmp/gpu-idle-start.XXXXXX.db)
	t0=$EPOCHREALTIME; P2PGUARD_DB=$db LD_PRELOAD=$lib "${start_cmd[@]}" 2>"$RESULTS/torch-guarded.err"; t1=$EPOCHREALTIME
	guarded+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}')")
	rows=$(python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('select count(*) from processes').fetchone()[0])" "$db" 2>&1)
	rm -rf "$db" "$db"-* "$db".spool
done
med() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
{
	echo "| start | median s | runs |"
	echo "|---|---|---|"
	echo "| bare | $(med "${bare[@]}") | ${bare[*]} |"
	echo "| guarded | $(med "${guarded[@]}") | ${guarded[*]} (processes rows in the last: $rows) |"
} | tee "$RESULTS/torch-start.md"
