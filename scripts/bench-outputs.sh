#!/usr/bin/env bash
# The outputs on a cluster job's database: seconds and peak memory of `report`, `report --html`,
# `trace` and `metrics` on 1 M transfer rows of 8 GPUs and 100 processes, with a quarter as many
# NCCL operations of the same 100 ranks and their cross-process mappings (NCCL's cuMem imports per
# peer and channel, PyTorch's IPC opens) beside (the goal: at most 2 s and 200 MB each). The database is
# made by scripts/make-bigdb.py, its failure and crash texts taken from a database the guard wrote
# on the simulated CUDA (rt_peer errors, rt_peer crash).
#
#   scripts/bench-outputs.sh [BUILD] [ROWS] [RUNS]     (defaults: build 1000000 3)
#
# Prints a markdown table: the median wall-clock seconds of RUNS runs and the largest peak resident
# memory (/usr/bin/time -v), each command's output written to a file (trace, HTML) or /dev/null.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
rows=${2:-1000000}
runs=${3:-3}
p2pguard=$build/src/cli/p2pguard
[ -x "$p2pguard" ] || { echo "build first: ninja -C $build" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (Debian package time)" >&2; exit 2; }
work=$(mktemp -d /tmp/p2pguard-bench-outputs.XXXXXX)
trap 'rm -rf "$work"' EXIT

export LD_LIBRARY_PATH=$PWD/$build/tests/simcuda SIMCUDA_DEVICES=2 P2PGUARD_QUIET=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
"$p2pguard" run --quiet --db "$work/seed.db" -- "$build/tests/programs/rt_peer" errors >/dev/null 2>&1 || true
"$p2pguard" run --quiet --db "$work/seed.db" -- "$build/tests/programs/rt_peer" crash >/dev/null 2>&1 || true
unset LD_LIBRARY_PATH
made=$(python3 scripts/make-bigdb.py "$work/job.db" --rows "$rows" --gpus 8 --processes 100 \
	--seed-db "$work/seed.db")
nccl=$(echo "$made" | grep -oE '[0-9]+ NCCL operations' || echo "no NCCL operations")
mapped=$(echo "$made" | grep -oE '[0-9]+ mapping rows' || echo "no mapping rows")
size=$(du -m "$work/job.db" | cut -f1)

measure() { # name, command...: "seconds kb" of each run, one per line
	local name=$1
	shift
	for _ in $(seq "$runs"); do
		/usr/bin/time -f "%e %M" -o "$work/time" "$@" >/dev/null 2>"$work/stderr" ||
			{ cat "$work/stderr" >&2; exit 1; }
		cat "$work/time"
	done | sort -n | awk -v name="$name" -v runs="$runs" '
		{ s[NR] = $1; if ($2 > kb) kb = $2 }
		END { m = s[int((runs + 1) / 2)]; mb = kb / 1024;
		      printf "| `%s` | %.2f | %.0f | %s |\n", name, m, mb, (m <= 2 && mb <= 200) ? "yes" : "NO" }'
}

echo "Database: $rows transfer rows, $nccl and $mapped, 8 GPUs, 100 processes on 13 hosts, ${size} MB ($(date -u +%F))"
echo "Median of $runs runs; peak resident memory is the largest of them."
echo
echo "| command | seconds | peak MB | within 2 s and 200 MB |"
echo "| --- | --- | --- | --- |"
measure "report" "$p2pguard" report "$work/job.db"
measure "report --json" "$p2pguard" report --json "$work/job.db"
measure "report --html" "$p2pguard" report --html "$work/job.html" "$work/job.db"
measure "trace" "$p2pguard" trace "$work/job.db" -o "$work/job.trace.json"
measure "metrics" "$p2pguard" metrics "$work/job.db"
echo
echo "Output sizes: HTML $(du -m "$work/job.html" | cut -f1) MB, trace $(du -m "$work/job.trace.json" | cut -f1) MB"
