#!/usr/bin/env bash
# The main job on an embedded default, on any machine (no GPU needed): build p2pguard, run a
# two-GPU program under the guard against the simulated CUDA — peer copies, then five failing peer
# calls — and show what was logged, the way a user reads it after a crash.
# On a GPU machine the same program runs against the real driver: see README.md.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
[ -f build/build.ninja ] || meson setup build >/dev/null
ninja -C build >/dev/null

export LD_LIBRARY_PATH=$PWD/build/tests/simcuda SIMCUDA_DEVICES=2
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
db=$(mktemp -d /tmp/p2pguard-demo.XXXXXX)/p2pguard.db
p2pguard=build/src/cli/p2pguard

# Bold commands on a terminal only: into a pipe or a file, plain text.
if [ -t 1 ]; then bold=$'\033[1m' plain=$'\033[0m'; else bold='' plain=''; fi
step() { printf '\n%s$ %s%s\n' "$bold" "$*" "$plain"; }
# The test program's own lines for the test suite (EXPECT ..., CASE ...) say nothing to a reader.
program_output() { grep -v -E '^(EXPECT|CASE) ' || true; }

step p2pguard run --db "$db" -- rt_peer basic
$p2pguard run --db "$db" -- build/tests/programs/rt_peer basic | program_output
step p2pguard run --db "$db" -- rt_peer errors
{ $p2pguard run --db "$db" -- build/tests/programs/rt_peer errors || true; } | program_output

step sqlite3 -box "$db" "SELECT api, src_device, dst_device, bytes, path, host_ns, gpu_ns FROM transfers"
sqlite3 -box "$db" "SELECT api, src_device, dst_device, bytes, path, host_ns, gpu_ns FROM transfers"
step sqlite3 -box "$db" "SELECT * FROM peer_bandwidth"
sqlite3 -box "$db" "SELECT * FROM peer_bandwidth"
step sqlite3 -box "$db" "SELECT api, status, pair, rule_id, c_where FROM failure_report"
sqlite3 -box "$db" "SELECT api, status, pair, rule_id, c_where FROM failure_report"
step sqlite3 "$db" "SELECT diagnosis, advice FROM failures WHERE status = 217"
sqlite3 -line "$db" "SELECT diagnosis, advice FROM failures WHERE status = 217"
step p2pguard explain "RuntimeError: CUDA error: peer access is not supported between these two devices"
$p2pguard explain "RuntimeError: CUDA error: peer access is not supported between these two devices" | sed -n '1,25p'
step p2pguard report --html "${db%.db}.html" "$db"
$p2pguard report --html "${db%.db}.html" "$db"
step p2pguard trace "$db" -o "${db%.db}.trace.json"
$p2pguard trace "$db" -o "${db%.db}.trace.json" && echo "open it in ui.perfetto.dev"
step p2pguard metrics "$db" "| head -12"
$p2pguard metrics "$db" | head -12 || true
printf '\nThe database is %s\n' "$db"
