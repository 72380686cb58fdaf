#!/usr/bin/env bash
# What the preload costs processes, bare vs LD_PRELOAD=libp2pguard.so, interleaved rounds
# (tests/bench/bench_spawn.c): a process that never touches CUDA (/bin/true, `python3 -c pass`)
# and a CUDA process's shortest life (tests/programs/cuda_start: cudaFree(0), exit).
#   scripts/bench-idle.sh [BUILD_DIR]         here: the simulated CUDA for the CUDA row
#   BUILD=.carry/build REAL_CUDA=1 bash scripts/bench-idle.sh   on the GPU machine: the real one
# ROUNDS (default 7), RUNS (processes a round, default 200; 20 for Python) and CUDA_RUNS (for the
# CUDA row, default 20) tune it.
# Prints one markdown table: medians over the rounds of the mean time a process, and of the
# per-round difference.
set -euo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
build=$(realpath "${BUILD:-${1:-build}}")
lib=$build/src/preload/libp2pguard.so
spawn=$build/tests/bench/bench_spawn
rounds=${ROUNDS:-7}
runs=${RUNS:-200}
[ -d .carry/lib ] && export LD_LIBRARY_PATH=$PWD/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
db_dir=$(mktemp -d /tmp/bench-idle.XXXXXX)
trap 'rm -rf "$db_dir"' EXIT
# Every guarded process writes its database here, not into the working directory.
common=(--env "P2PGUARD_DB=$db_dir/idle.db" --env P2PGUARD_QUIET=1)
python=${PYTHON:-python3}

row() { "$spawn" "$@" | tail -1; }
# The floor: what the dynamic linker charges any preload, with a library that does nothing.
empty=$build/tests/bench/libp2pg-empty-preload.so
echo "| command | processes | bare us | guarded us | difference us (median of rounds) | difference % | page faults a process, bare / guarded |"
echo "|---|---|---|---|---|---|---|"
row --rounds "$rounds" --runs "$runs" "${common[@]}" "$lib" -- /bin/true
# A process of a job is as a rule the child of another guarded one, and inherits the NCCL offer.
row --rounds "$rounds" --runs "$runs" "${common[@]}" \
	--env "NCCL_PROFILER_PLUGIN=$build/src/preload/libp2pguard-core.so" "$lib" -- /bin/true |
	sed 's/^| `\/bin\/true`/| `\/bin\/true`, a guarded process'"'"'s child (the NCCL offer inherited)/'
[ -f "$empty" ] && row --rounds "$rounds" --runs "$runs" "$empty" -- /bin/true |
	sed 's/^| `\/bin\/true`/| `\/bin\/true`, an empty preload (the floor)/'
row --rounds "$rounds" --runs "$runs" "${common[@]}" "$lib" -- /bin/sh -c :
row --rounds "$rounds" --runs "$(( runs / 10 ))" "${common[@]}" "$lib" -- "$python" -c pass
cuda_runs=${CUDA_RUNS:-20}
if [ "${REAL_CUDA:-0}" = 1 ]; then
	row --rounds "$rounds" --runs "$cuda_runs" "${common[@]}" "$lib" -- "$build/tests/programs/cuda_start"
else
	row --rounds "$rounds" --runs "$cuda_runs" "${common[@]}" \
		--env "LD_LIBRARY_PATH=$build/tests/simcuda" "$lib" -- "$build/tests/programs/cuda_start"
fi
# Python's sqlite3 module, not the sqlite3 tool, which the GPU machine lacks (it read as 0 rows).
rows=$("$python" -c 'import sqlite3, sys
print(sqlite3.connect(sys.argv[1]).execute("SELECT count(*) FROM processes").fetchone()[0])' \
	"$db_dir/idle.db" 2>/dev/null) || rows="unknown (the database could not be read)"
echo "database rows written by the CUDA row's guarded processes: $rows processes"
