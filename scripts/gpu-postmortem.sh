#!/usr/bin/env bash
# The post-mortem proof on ONE real GPU (issue 12), in one run of a few minutes:
#   - a ctypes.CDLL script (GIL released) whose failing peer call's row names its Python line;
#   - PyTorch training on one GPU: unharmed (losses identical to bare), its processes row there
#     although it made no peer call; a failing ctypes call made from a thread that released the
#     GIL inside the loop, whose row names the line; a segfault mid-training whose crash row (both
#     stacks) is in the database at once, without `p2pguard recover`;
#   - the outputs (report, report --json/--html, trace, metrics) on those databases.
# Prepare here with scripts/prepare-carry.sh, then on the GPU machine: bash scripts/gpu-postmortem.sh
# Results: a table on stdout and $OUT/postmortem-summary.md; logs and databases in $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
ROOT=$PWD
BUILD=${BUILD:-$ROOT/.carry/build}
LIB=$BUILD/src/preload/libp2pguard.so
CLI=$BUILD/src/cli/p2pguard
RESULTS=${OUT:-$(mktemp -d /tmp/gpu-postmortem.XXXXXX)}
W=$RESULTS/work
mkdir -p "$W"
CUDART_DIR=$(dirname "$(ls /usr/local/cuda/lib64/libcudart.so.13 2>/dev/null || echo /usr/local/cuda/lib64/x)")
if [ "${P2PG_GPU_CHECK_SIM:-}" = 1 ]; then CUDART_DIR=$ROOT/build/tests/simcuda; BUILD=$ROOT/build; LIB=$BUILD/src/preload/libp2pguard.so; CLI=$BUILD/src/cli/p2pguard; fi
export LD_LIBRARY_PATH=$ROOT/.carry/lib:$CUDART_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
ROWS=()
row() { ROWS+=("| $1 | $2 | $3 |"); echo "== $1: $2 ($3)"; }
q() { python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); r=c.execute(sys.argv[2]).fetchone(); print('' if r is None or r[0] is None else r[0])" "$@" 2>&1; }
guard() { local db=$1; shift; rm -f "$db" "$db"-*; P2PGUARD_DB=$db LD_PRELOAD=$LIB "$@"; }

{
	nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader 2>&1
	python3 --version
	python3 -c 'import ctypes; print("_Py_DumpTraceback exported:", hasattr(ctypes.pythonapi, "_Py_DumpTraceback"), "PyGILState_GetThisThreadState:", hasattr(ctypes.pythonapi, "PyGILState_GetThisThreadState"))'
	python3 -c 'import torch; print("torch", torch.__version__, "gpus", torch.cuda.device_count())' 2>&1
} >"$RESULTS/machine.txt"
cat "$RESULTS/machine.txt"

# 1. ctypes.CDLL: the GIL is released around the call.
out=$(guard "$W/cdll.db" timeout 60 python3 tests/gpu/ctypes_cdll.py 2>"$W/cdll.err")
line=$(sed -n 's/.*FAIL_LINE=\([0-9]*\).*/\1/p' <<<"$out")
got=$(q "$W/cdll.db" "select python_stack from failures where api like 'cudaDeviceEnablePeerAccess%' limit 1")
row "ctypes.CDLL failing enable: python_stack" "$(grep -q "ctypes_cdll.py:$line in enable_own_device" <<<"$got" && echo "names line $line" || echo "MISSING (line $line)")" "$(head -2 <<<"$got" | tr '\n' ';') status=$(q "$W/cdll.db" "select status||' '||coalesce(rule_id,'') from failures limit 1")"

# 2. PyTorch on one GPU, bare and guarded: identical losses; a processes row without peer calls.
timeout 300 python3 tests/gpu/torch_postmortem.py plain >"$W/plain-bare.log" 2>&1
guard "$W/plain.db" timeout 300 python3 tests/gpu/torch_postmortem.py plain >"$W/plain.log" 2>&1
b=$(sed -n 's/.*digest=\(\S*\).*/\1/p' "$W/plain-bare.log"); g=$(sed -n 's/.*digest=\(\S*\).*/\1/p' "$W/plain.log")
row "PyTorch one GPU, losses under the guard" "$([ -n "$b" ] && [ "$b" = "$g" ] && echo "identical ($b)" || echo "DIFFER bare=$b guarded=$g")" "torch_postmortem.py plain"
row "PyTorch one GPU, processes rows" "$(q "$W/plain.db" "select count(*) from processes")" "peer calls: $(q "$W/plain.db" "select count(*) from peer_access") transfers: $(q "$W/plain.db" "select count(*) from transfers")"
"$CLI" report "$W/plain.db" >"$W/plain-report.txt" 2>&1
row "report on it" "$(grep -i 'process' "$W/plain-report.txt" | head -2 | tr '\n' ';')" "p2pguard report"

# 3. A failing call from a thread that released the GIL, inside the training loop.
guard "$W/gil.db" timeout 300 python3 tests/gpu/torch_postmortem.py gil >"$W/gil.log" 2>&1
line=$(sed -n 's/.*FAIL_LINE=\([0-9]*\).*/\1/p' "$W/gil.log")
got=$(q "$W/gil.db" "select python_stack from failures limit 1")
row "PyTorch loop, ctypes call from a thread (GIL released): python_stack" "$(grep -q "torch_postmortem.py:$line in enable_own_device" <<<"$got" && echo "names line $line" || echo "MISSING (line $line)")" "$(head -3 <<<"$got" | tr '\n' ';') $(grep enable_status "$W/gil.log")"
row "its C backtrace" "$(q "$W/gil.db" "select substr(backtrace,1,160) from failures limit 1" | head -2 | tr '\n' ';')" "failures.backtrace"

# 4. A segfault mid-training: the crash row at once (no recover).
guard "$W/segv.db" timeout 300 python3 tests/gpu/torch_postmortem.py segv >"$W/segv.log" 2>&1
rc=$?
line=$(sed -n 's/.*SEGV_LINE=\([0-9]*\).*/\1/p' "$W/segv.log")
crow=$(q "$W/segv.db" "select count(*) from crashes")
cpy=$(q "$W/segv.db" "select python_stack from crashes limit 1")
row "PyTorch segfault: crash rows without recover" "${crow:-none} (exit $rc)" "signal $(q "$W/segv.db" "select signal from crashes limit 1"); spools left: $(ls "$W"/segv.db.spool* 2>/dev/null | wc -l)"
row "its python_stack" "$(grep -q "torch_postmortem.py:$line in crash" <<<"$cpy" && echo "names line $line" || echo "MISSING (line $line)")" "$(head -2 <<<"$cpy" | tr '\n' ';')"
row "its C backtrace" "$(q "$W/segv.db" "select substr(backtrace,1,200) from crashes limit 1" | head -3 | tr '\n' ';')" "crashes.backtrace"

# 5. The outputs on those databases.
for db in gil segv; do
	"$CLI" report --json "$W/$db.db" >"$W/$db-report.json" 2>"$W/$db-report.err"; r1=$?
	"$CLI" report --html "$W/$db.html" "$W/$db.db" >/dev/null 2>>"$W/$db-report.err"; r2=$?
	"$CLI" trace "$W/$db.db" -o "$W/$db-trace.json" 2>>"$W/$db-report.err"; r3=$?
	"$CLI" metrics "$W/$db.db" >"$W/$db.prom" 2>>"$W/$db-report.err"; r4=$?
	ok=$(python3 -c 'import json,sys; json.load(open(sys.argv[1])); json.load(open(sys.argv[2])); print("json ok")' "$W/$db-report.json" "$W/$db-trace.json" 2>&1 | tail -1)
	row "outputs on the $db database" "exit report-json $r1, html $r2, trace $r3, metrics $r4; $ok" "$(head -c 200 "$W/$db-report.err" | tr '\n' ';')"
done

{
	echo "| check | result | detail |"
	echo "|---|---|---|"
	printf '%s\n' "${ROWS[@]}"
} | tee "$RESULTS/postmortem-summary.md"
tar czf "$RESULTS/postmortem-logs.tar.gz" -C "$RESULTS" work 2>/dev/null && rm -rf "$W"
