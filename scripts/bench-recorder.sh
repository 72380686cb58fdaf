#!/usr/bin/env bash
# The recorder's budgets as a table (no GPU involved): per-call recording cost at 1, 8 and 32
# threads, drain rate into SQLite, disk use of RECORD=all vs summary, and row visibility latency.
#   scripts/bench-recorder.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
[ -f "$build/build.ninja" ] || meson setup "$build" >/dev/null
ninja -C "$build" tests/bench/bench_recorder >/dev/null
dir=$(mktemp -d /tmp/p2pguard-bench.XXXXXX)
trap 'rm -rf "$dir"' EXIT
"$build/tests/bench/bench_recorder" "$dir"
