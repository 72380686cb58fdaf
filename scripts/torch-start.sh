#!/usr/bin/env bash
# A PyTorch process's start (import torch, first CUDA tensor, synchronise), bare and guarded,
# RUNS (default 5) interleaved: a markdown table of the medians in seconds, on stdout.
#   BUILD=.carry/build bash scripts/torch-start.sh
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
lib=$(realpath "${BUILD:-.carry/build}")/src/preload/libp2pguard.so
start_cmd=(python3 -c 'import torch; torch.zeros(1, device="cuda"); torch.cuda.synchronize()')
seconds() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", b - a}'; }
bare=() guarded=() rows=
for _ in $(seq 1 "${RUNS:-5}"); do
	t0=$EPOCHREALTIME; "${start_cmd[@]}" 2>/dev/null; t1=$EPOCHREALTIME
	bare+=("$(seconds "$t0" "$t1")")
	db=$(mktemp -u /tmp/torch-start.XXXXXX.db)
	t0=$EPOCHREALTIME; P2PGUARD_DB=$db LD_PRELOAD=$lib "${start_cmd[@]}" 2>/dev/null; t1=$EPOCHREALTIME
	guarded+=("$(seconds "$t0" "$t1")")
	rows=$(python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('select count(*) from processes').fetchone()[0])" "$db" 2>&1)
	rm -rf "$db" "$db"-* "$db".spool
done
med() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "| start | median s | runs |"
echo "|---|---|---|"
echo "| bare | $(med "${bare[@]}") | ${bare[*]} |"
echo "| guarded | $(med "${guarded[@]}") | ${guarded[*]} (processes rows in the last: $rows) |"
