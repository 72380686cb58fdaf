#!/usr/bin/env bash
# Cross-process mappings on one GPU (issue 21), in under four minutes on an H100:
#   1. the conformance programs that share memory between two processes (legacy IPC through the
#      runtime; VMM with the fd over a Unix socket; a stream-ordered pool and a pointer from it),
#      bare and under the guard: same checks, and the
#      peer_mappings rows they leave (owner and accessor are the one device);
#   2. what the real driver says about an exported fd and a VMM mapping (tests/gpu/xproc_facts.py);
#   3. torch.multiprocessing CUDA tensor sharing, default allocator and expandable segments, bare
#      and guarded: the same results, and the rows;
#   4. torch.distributed with NCCL at world size 1: the same all-reduce result, start-up and step
#      time bare and guarded, medians of 5 interleaved runs, and what NCCL mapped (counted);
#   5. the guard's cost per mapping call against libcuda's own function (bench_mappings).
# Env: BUILD (the carried build, default .carry/build), RESULTS (a folder for the raw files).
# Prints markdown on stdout.
set -uo pipefail
source "$(dirname "$0")/../gpu-part-env.sh" xproc
mkdir -p "$RESULTS"
CUDART_DIR=$(dirname "$(ls /usr/local/cuda/lib64/libcudart.so.13 2>/dev/null || python3 -c 'import nvidia.cu13, os; print(os.path.join(nvidia.cu13.__path__[0], "lib/libcudart.so.13"))' 2>/dev/null || echo /usr/local/cuda/lib64/x)")
if [ "${P2PG_GPU_CHECK_SIM:-}" = 1 ]; then
	# A dry run on a machine without GPUs, against the simulated CUDA.
	CUDART_DIR=$ROOT/build/tests/simcuda
fi
export LD_LIBRARY_PATH=$ROOT/.carry/lib:$CUDART_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
TORCH=1
python3 -c 'import torch' 2>/dev/null || TORCH=0
START=$(date +%s)
elapsed() { echo $(($(date +%s) - START)); }
med() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
field() { sed -n "s/.*$1=\([^ ]*\).*/\1/p" "$2" | head -1; }
rows() {
	python3 - "$1" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
try:
    groups = c.execute("SELECT p.pid, m.api, m.event, m.status, m.owner_device, m.accessor_device, m.is_peer, "
                       "m.cross_process, m.handle_type, count(*), sum(m.ended_ns IS NOT NULL) FROM peer_mappings m "
                       "JOIN processes p ON p.id = m.process_id GROUP BY 1, 2, 3, 4, 5, 6, 9 ORDER BY min(m.started_ns)").fetchall()
    counts = c.execute("SELECT p.pid, c.api, c.device, c.calls, c.bytes FROM mapping_counts c JOIN processes p "
                       "ON p.id = c.process_id ORDER BY 1, 2").fetchall()
    rules = c.execute("SELECT api, status, rule_id, count(*) FROM failures GROUP BY 1, 2, 3").fetchall()
except sqlite3.Error as e:
    print("(no rows: %s)" % e)
    sys.exit(0)
print("| pid | call | event | status | owner | accessor | peer | cross-process | handle | rows | ended |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for g in groups:
    print("| " + " | ".join("" if v is None else str(v) for v in g) + " |")
if counts:
    print("\ncounted (own memory, own device): " + "; ".join("pid %d %s dev %d x%d (%d B)" % r for r in counts))
if rules:
    print("\nfailures: " + "; ".join("%s %d -> %s x%d" % r for r in rules))
PY
}

echo "### Cross-process mappings (issue 21), one GPU"
echo
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader 2>&1 | sed 's/^/    /'
python3 -c 'import torch; print("    torch", torch.__version__, "nccl", ".".join(map(str, torch.cuda.nccl.version())))' 2>&1 | tail -1

# ---- 1. conformance ----
echo
echo "#### 1. Conformance programs, bare and guarded"
echo
echo "| program | bare | guarded | identical |"
echo "|---|---|---|---|"
for n in conformance_rt_ipc_legacy conformance_drv_ipc_vmm conformance_rt_pool_ipc; do
	p=$BUILD/tests/conformance/$n
	timeout 60 "$p" >"$RESULTS/$n.bare" 2>&1
	b=$?
	P2PGUARD_DB=$RESULTS/conformance.db LD_PRELOAD=$LIB timeout 60 "$p" >"$RESULTS/$n.guarded" 2>&1
	g=$?
	same=no
	cmp -s <(sed 's/[0-9][0-9.]*/N/g' "$RESULTS/$n.bare") <(sed 's/[0-9][0-9.]*/N/g' "$RESULTS/$n.guarded") && same=yes
	echo "| $n | exit $b, $(grep -c '^ok' "$RESULTS/$n.bare") ok, $(grep -c '^not ok' "$RESULTS/$n.bare") not ok | exit $g, $(grep -c '^ok' "$RESULTS/$n.guarded") ok | $same |"
done
grep -h '^not ok' "$RESULTS"/conformance_*.bare | sed 's/^/    bare: /'
echo
rows "$RESULTS/conformance.db"

# ---- 2. the real driver's answers ----
echo
echo "#### 2. The real driver on an exported fd and a VMM mapping"
echo
timeout 30 python3 tests/gpu/xproc_facts.py 2>&1 | tee "$RESULTS/xproc_facts.txt" | sed 's/^/    /'

# ---- 3. torch.multiprocessing ----
echo
echo "#### 3. torch.multiprocessing CUDA tensor sharing"
echo
if [ "$TORCH" = 1 ]; then
echo "| allocator | bare | guarded | same |"
echo "|---|---|---|---|"
for conf in "" "expandable_segments:True"; do
	name=${conf:-default}
	tag=${conf:+expandable}
	tag=${tag:-default}
	PYTORCH_CUDA_ALLOC_CONF=$conf timeout 90 python3 tests/gpu/torch_ipc_share.py >"$RESULTS/share-$tag.bare" 2>&1
	P2PGUARD_DB=$RESULTS/share-$tag.db PYTORCH_CUDA_ALLOC_CONF=$conf LD_PRELOAD=$LIB timeout 90 \
		python3 tests/gpu/torch_ipc_share.py >"$RESULTS/share-$tag.guarded" 2>&1
	b=$(grep -h '^RESULT' "$RESULTS/share-$tag.bare")
	g=$(grep -h '^RESULT' "$RESULTS/share-$tag.guarded")
	echo "| $name | ${b:-$(tail -1 "$RESULTS/share-$tag.bare")} | ${g:-$(tail -1 "$RESULTS/share-$tag.guarded")} | $([ -n "$b" ] && [ "$b" = "$g" ] && echo yes || echo no) |"
done
for tag in default expandable; do
	echo
	echo "rows, $tag allocator:"
	echo
	rows "$RESULTS/share-$tag.db"
done
else
	echo "not run: PyTorch is not installed"
fi

# ---- 4. NCCL at world size 1 ----
echo
echo "#### 4. torch.distributed, NCCL, world size 1 (5 runs each, interleaved)"
echo
if [ "$TORCH" = 1 ]; then
bs=() gs=() bstep=() gstep=() bwall=() gwall=() bval="" gval=""
for k in 1 2 3 4 5; do
	t0=$EPOCHREALTIME
	timeout 90 python3 tests/gpu/torch_nccl_ws1.py >"$RESULTS/nccl-bare-$k.txt" 2>&1
	t1=$EPOCHREALTIME
	bwall+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}')")
	t0=$EPOCHREALTIME
	P2PGUARD_DB=$RESULTS/nccl.db LD_PRELOAD=$LIB timeout 90 python3 tests/gpu/torch_nccl_ws1.py >"$RESULTS/nccl-guarded-$k.txt" 2>&1
	t1=$EPOCHREALTIME
	gwall+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}')")
	bs+=("$(field start_s "$RESULTS/nccl-bare-$k.txt")") gs+=("$(field start_s "$RESULTS/nccl-guarded-$k.txt")")
	bstep+=("$(field step_ms "$RESULTS/nccl-bare-$k.txt")") gstep+=("$(field step_ms "$RESULTS/nccl-guarded-$k.txt")")
	bval+="$(field value "$RESULTS/nccl-bare-$k.txt") " gval+="$(field value "$RESULTS/nccl-guarded-$k.txt") "
	[ "$(elapsed)" -gt 170 ] && break
done
echo "| | bare (median) | guarded (median) | runs bare | runs guarded |"
echo "|---|---|---|---|---|"
echo "| process wall time, s | $(med "${bwall[@]}") | $(med "${gwall[@]}") | ${bwall[*]} | ${gwall[*]} |"
echo "| init_process_group to first all-reduce, s | $(med "${bs[@]}") | $(med "${gs[@]}") | ${bs[*]} | ${gs[*]} |"
echo "| all-reduce of 64 MiB, ms | $(med "${bstep[@]}") | $(med "${gstep[@]}") | ${bstep[*]} | ${gstep[*]} |"
echo "| all-reduce result | $bval | $gval | | |"
echo
rows "$RESULTS/nccl.db"
else
	echo "not run: PyTorch is not installed"
fi

# ---- 5. the guard's cost per call ----
echo
echo "#### 5. The guard's cost per mapping call (bench_mappings, real driver)"
echo
if [ "$(elapsed)" -lt 200 ]; then
	P2PGUARD_DB=$RESULTS/bench.db LD_PRELOAD=$LIB timeout 60 "$BUILD/tests/bench/bench_mappings" --calls 100 --runs 15 2>&1 |
		tee "$RESULTS/bench_mappings.txt"
else
	echo "not run: $(elapsed) s used"
fi
echo
echo "(xproc.sh: $(elapsed) s)"
