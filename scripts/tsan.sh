#!/usr/bin/env bash
# ThreadSanitizer pass over the recorder (rings, overflow aggregates), the drainer (import,
# recovery, fork), NCCL's profiler plugin and the staged engine: builds BUILD_DIR (default build-tsan) with
# -Db_sanitize=thread and runs their tests against the simulated CUDA (itself instrumented).
# Every report of every process, killed ones included, goes to a log file; the pass fails on any
# report or any failed test. The last line is "tsan: N tests passed, N failed, N reports".
#   scripts/tsan.sh [BUILD_DIR]
#
# Left out: the tests whose programs are Python interpreters (python, crash, exec, modes,
# review_fork_*). CPython with libtsan preloaded crashes by itself, guard or no guard (a thread
# calling fork through ctypes: SIGSEGV in the parent with only libtsan preloaded), so those runs
# say nothing about the guard. topo: `p2pguard topo` times copies from one thread, without the
# guard preloaded, and under TSan its instrumented simulated copies took 205 s of a CI run that
# must stay within 30 minutes; the recorder and drainer it writes through run in the other tests.
# tests/tsan/suppressions.txt holds no race. (cupti was left out while
# the guard read GPU times only while the process ran, which a 5-15x slowdown did not leave time
# for; they are read at exit now, and it runs.)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-tsan}
compiler=${CC:-gcc}

if [ ! -f "$build/build.ninja" ]; then
	CC=$compiler meson setup "$build" -Dwerror=true -Db_sanitize=thread -Db_lundef=false >/dev/null
fi
ninja -C "$build" >/dev/null

reports=$(mktemp -d /tmp/p2pguard-tsan.XXXXXX)
trap 'rm -rf "$reports"' EXIT
# handle_seg*: the guard's own crash handler is under test (as in the ASan pass); die_after_fork=0:
# a guarded child starts its own drainer thread after a fork from a threaded parent, by design.
export TSAN_OPTIONS="log_path=$reports/report second_deadlock_stack=1 handle_segv=0 handle_sigbus=0 handle_sigfpe=0 die_after_fork=0 suppressions=$PWD/tests/tsan/suppressions.txt${TSAN_OPTIONS:+ $TSAN_OPTIONS}"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# The soaks repeat one scenario; a few runs each under the 5-15x slowdown.
export P2PG_KILL_RUNS=${P2PG_KILL_RUNS:-20} P2PG_CRASH_RUNS=${P2PG_CRASH_RUNS:-20}
export P2PG_OVERLOAD_RUNS=${P2PG_OVERLOAD_RUNS:-3}

tests=(store settings gpu_match
	staged-exact staged-order staged-threads staged-threads-slow staged-context
	staged-budget-1m staged-budget-48k staged-budget-4k
	runtime driver errors threads fork multiprocess cli dlsym user_rules timing
	conformance summary exports
	sigkill overload crashsoak
	nccl-loading nccl-ops nccl-multirank nccl-chain nccl-summary nccl-stalls
	exit_timing devices cupti
	mapping_table range_index_fork store_mappings spool_fold mappings mapping_failures mapping_lookups ipc_owners_table
	crc32c file_limits locked_exit locked_exit_times replaced_db_times damaged_spool foreign_db builtin)
status=0
meson test -C "$build" --print-errorlogs --num-processes 2 --timeout-multiplier 4 "${tests[@]}" || status=$?

found=$(find "$reports" -type f | wc -l)
for f in "$reports"/*; do
	[ -f "$f" ] || continue
	echo "---- $f"
	cat "$f"
done
python3 - "$build/meson-logs/testlog.json" "$found" "$status" <<'PY'
import json, sys
results = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
passed = sum(1 for r in results if r["result"] == "OK")
print("tsan: %d tests passed, %d failed, %s reports" % (passed, len(results) - passed, sys.argv[2]))
PY
[ "$status" -eq 0 ] && [ "$found" -eq 0 ]
