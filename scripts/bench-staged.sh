#!/usr/bin/env bash
# The staged engine beside the driver's own non-P2P path and P2P, as tables: bandwidth from 256 B to
# 1 GiB, both directions at once, and small-copy enqueue cost. On a GPU machine it uses the real
# driver; elsewhere pass --sim to run it (small sizes only) against the simulated CUDA.
#   scripts/bench-staged.sh [--sim] [bench_staged options...]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
[ -f "$build/build.ninja" ] || meson setup "$build" >/dev/null
ninja -C "$build" tests/bench/bench_staged tests/simcuda/libcuda.so.1 >/dev/null
if [ "${1:-}" = --sim ]; then
	shift
	export LD_LIBRARY_PATH=$PWD/$build/tests/simcuda SIMCUDA_DEVICES=2
	set -- --max-bytes 1M --iters 3 --calls 50 "$@"
fi
exec "$build/tests/bench/bench_staged" "$@"
