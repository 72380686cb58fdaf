#!/usr/bin/env bash
# Build from scratch into BUILD_DIR (default: build) with -Werror and run every test suite against
# the simulated CUDA. Extra arguments go to `meson setup`.
#   scripts/test.sh [BUILD_DIR] [MESON_OPTION...]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
shift || true

rm -rf "$build"
meson setup "$build" -Dwerror=true "$@" >/dev/null
ninja -C "$build"

# ASan must come first in the process; a preloaded guard under test is loaded after it.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:verify_asan_link_order=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

status=0
meson test -C "$build" --print-errorlogs --num-processes 2 || status=$?

# One closing line for the log, counted from meson's own results.
python3 - "$build/meson-logs/testlog.json" <<'PY'
import json, sys
results = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
passed = sum(1 for r in results if r["result"] in ("OK", "EXPECTEDFAIL"))
skipped = sum(1 for r in results if r["result"] == "SKIP")
failed = len(results) - passed - skipped
print("%d passed, %d failed, %d skipped" % (passed, failed, skipped))
PY
exit $status
