#!/usr/bin/env bash
# Build from scratch into BUILD_DIR (default: build) with -Werror and run every test suite against
# the simulated CUDA. Extra arguments go to `meson setup`.
#   scripts/test.sh [BUILD_DIR] [MESON_OPTION...]
# The last line printed is always the count, "N passed, N failed, N skipped" (a build that fails
# counts as one failure), and the exit status is non-zero if anything failed.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
build=${1:-build}
shift || true

rm -rf "$build"
if ! meson setup "$build" -Dwerror=true "$@" >/dev/null || ! ninja -C "$build"; then
	echo "scripts/test.sh: the build in $build failed" >&2
	echo "0 passed, 1 failed, 0 skipped"
	exit 1
fi

sanitize=$(meson introspect "$build" --buildoptions | python3 -c '
import json, sys
print(next((o["value"] for o in json.load(sys.stdin) if o["name"] == "b_sanitize"), "none"))') ||
	sanitize=none

export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if [ "$sanitize" != none ]; then
	# LeakSanitizer is on: the unit suites and the instrumented test programs must free what they
	# allocate. tests/preload/harness.py puts the ASan runtime first in LD_PRELOAD (the guard
	# links it) and turns leak checking off for the Python interpreters it runs.
	export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
	# The soaks repeat one scenario: 30 runs each under the sanitizers (the other pass keeps 200),
	# so that the instrumented pass stays within minutes on two cores.
	export P2PG_KILL_RUNS=${P2PG_KILL_RUNS:-30} P2PG_CRASH_RUNS=${P2PG_CRASH_RUNS:-30}
	# The explain suite runs the instrumented CLI once or more per line of its sets (about 2800
	# lines); one text in 25 keeps its code paths under the sanitizers within minutes, and the
	# other pass explains every line (tests/explain/score.py).
	export P2PG_EXPLAIN_SAMPLE=${P2PG_EXPLAIN_SAMPLE:-25}
	# simcuda_faults injects three faults into each of the guard's driver functions (about 400
	# guarded runs); one fault a function, in turn, keeps each function and each fault under the
	# sanitizers (tests/preload/test_simcuda_faults.py).
	export P2PG_FAULT_SPECS=${P2PG_FAULT_SPECS:-1}
fi

status=0
meson test -C "$build" --print-errorlogs --num-processes 2 || status=$?

# One closing line for the log, counted from meson's own results.
python3 - "$build/meson-logs/testlog.json" "$status" <<'PY'
import json, os, sys
log, status = sys.argv[1], int(sys.argv[2])
results = [json.loads(line) for line in open(log) if line.strip()] if os.path.exists(log) else []
passed = sum(1 for r in results if r["result"] in ("OK", "EXPECTEDFAIL"))
skipped = sum(1 for r in results if r["result"] == "SKIP")
failed = len(results) - passed - skipped
if status and not failed:
    failed = 1  # meson test itself failed (no log, or a failure it did not write)
print("%d passed, %d failed, %d skipped" % (passed, failed, skipped))
PY
exit $status
