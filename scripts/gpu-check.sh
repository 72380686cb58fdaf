#!/usr/bin/env bash
# The proof on real GPUs, in one run (under 10 minutes on the two-H200 machine):
#   conformance with and without the guard, the preload tests against the real driver, nvcc
#   binaries (static and shared runtime), the guard's overhead per async peer copy, the staged
#   engine's bandwidth, the recorder's budgets, PyTorch (split model, every mode), torchrun DDP over
#   NCCL, JAX and CuPy, and topo. Prints one table; results go to $OUT, or,
#   when it is not set, to a new folder under /tmp (its path is the last line printed).
#
# Built elsewhere: the GPU machine has no SQLite headers and no libunwind. Prepare with
#   scripts/prepare-carry.sh        (here: copies the build and libunwind.so.8 into .carry/)
# then run on the GPU machine from the repository root:
#   bash scripts/gpu-check.sh
# It changes no GPU setting and keeps NVLink multicast off in every process it starts.
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
ROOT=$PWD
CARRY=$ROOT/.carry
BUILD=$CARRY/build
# Everything is written to a work folder; $OUT gets the summary, the benchmark tables and one
# archive of the rest (the device runner brings back only a few files).
RESULTS=${OUT:-$(mktemp -d /tmp/gpu-check-results.XXXXXX)}
OUT=$(mktemp -d /tmp/gpu-check.XXXXXX)
mkdir -p "$RESULTS"
LIB=$BUILD/src/preload/libp2pguard.so
CLI=$BUILD/src/cli/p2pguard
START=$(date +%s)
BUDGET=${BUDGET:-540}

CUDART_DIR=$(dirname "$(ls /usr/local/cuda/lib64/libcudart.so.13 2>/dev/null || python3 -c 'import nvidia.cu13, os; print(os.path.join(nvidia.cu13.__path__[0], "lib/libcudart.so.13"))' 2>/dev/null || echo /usr/local/cuda/lib64/x)")
REAL=1
if [ "${P2PG_GPU_CHECK_SIM:-}" = 1 ]; then
	# A dry run of this script on a machine without GPUs, against the simulated CUDA.
	CUDART_DIR=$ROOT/build/tests/simcuda
	REAL=0
fi
export LD_LIBRARY_PATH=$CARRY/lib:$CUDART_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export P2PG_BUILD_ROOT=$BUILD P2PG_SOURCE_ROOT=$ROOT P2PG_REAL_CUDA=$REAL PYTHONPATH=$ROOT/tests/preload

# Benchmarks run pinned to the same cores, so that where the scheduler puts a run does not decide it.
if [ "$(nproc)" -ge 6 ]; then PIN_DEFAULT=2-5; else PIN_DEFAULT=0-$(($(nproc) - 1)); fi
BENCH_CORES=${BENCH_CORES:-$PIN_DEFAULT}
ROWS=()
row() { ROWS+=("| $1 | $2 | $3 |"); echo "== $1: $2 ($3)"; }
left() { echo $((BUDGET - ($(date +%s) - START))); }
enough() { [ "$(left)" -gt "$1" ]; }
# SECTIONS="conformance preload overhead classify ab torch torch-overhead bench hops probe timing recorder
# ddp frameworks nvcc sigkill topo" runs only those (default: all, in this order); PRELOAD_TESTS narrows "preload".
med() { echo "$1" | tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
want() { [[ " ${SECTIONS:-all} " == *" all "* || " ${SECTIONS:-} " == *" $1 "* ]]; }
db() { python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); print(c.execute(sys.argv[2]).fetchone()[0])" "$@"; }

{
	nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
	nvidia-smi topo -m
	echo "clocksource: $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null)"
	python3 -c 'import torch; print("torch", torch.__version__, "gpus", torch.cuda.device_count())'
	echo "libcudart: $CUDART_DIR"
} >"$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"

# 1. Conformance: the same binaries the simulation is held to, bare and under the guard.
if want conformance; then
	conf_ok=0 conf_same=0 conf_n=0
	for p in "$BUILD"/tests/conformance/conformance_*; do
		n=$(basename "$p")
		conf_n=$((conf_n + 1))
		timeout 60 "$p" >"$OUT/$n.bare" 2>&1 && conf_ok=$((conf_ok + 1))
		P2PGUARD_DB=$OUT/conformance.db LD_PRELOAD=$LIB timeout 60 "$p" >"$OUT/$n.guarded" 2>&1
		# Measured times differ from run to run; everything else must be the same.
		cmp -s <(sed 's/[0-9][0-9.]*/N/g' "$OUT/$n.bare") <(sed 's/[0-9][0-9.]*/N/g' "$OUT/$n.guarded") && conf_same=$((conf_same + 1))
	done
	row "conformance, real CUDA" "$conf_ok/$conf_n programs pass; $conf_same/$conf_n identical under the guard" "$(cat "$OUT"/*.bare | grep -c '^ok') checks"
fi

# 2. The preload tests against the real driver and runtime.
# They need two devices: the test programs exit 77 (skipped) on one, which is not a failure.
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if want preload && [ "$REAL" = 1 ] && [ "$gpus" -lt 2 ]; then
	row "preload tests (real CUDA)" "not run" "they need two GPUs; this machine has $gpus"
elif want preload; then
	for t in ${PRELOAD_TESTS:-runtime driver errors python threads fork crash settings multiprocess cupti}; do
		timeout 120 python3 tests/preload/test_$t.py >"$OUT/preload-$t.log" 2>&1
		rc=$?
		row "preload test $t (real CUDA)" "$([ $rc = 0 ] && echo pass || echo FAIL)" "$(tail -1 "$OUT/preload-$t.log")"
	done
fi

# 4. Overhead per async peer copy (256 B, P2P on), across processes: scripts/overhead-ab.sh, each
# variant 9 runs interleaved with bare runs, compared overall and per speed of the VM (see there).
if want overhead; then
	DIR=$OUT/ov REPS=9 CORES=$BENCH_CORES BUILD=$BUILD \
		VARIANTS="bare;default;cupti:P2PGUARD_GPU_TIMING=cupti;off:P2PGUARD_GPU_TIMING=off;all:P2PGUARD_GPU_TIMING=all" \
		bash scripts/overhead-ab.sh >"$OUT/overhead.txt" 2>&1
	for k in default cupti off all; do
		row "cudaMemcpyPeerAsync 256 B enqueue, guard $k, per VM speed (fast / slow)" \
			"$(awk -F'|' -v k="$k" '$2 ~ "^ "k" $" && n++ {print $3 "/" $4}' "$OUT/overhead.txt")" \
			"runs, median ns, vs bare at that speed; overall: $(awk -F'|' -v k="$k" '$2 ~ "^ "k" $" && !n++ {print $4}' "$OUT/overhead.txt"); budget +1 us"
	done
	for k in default cupti off all; do
		row "rows of the $k runs" "$(awk -F'|' -v k="$k" '$2 ~ "^ "k" $" && !n++ {print $6}' "$OUT/overhead.txt")" "rows, with gpu_ns, records dropped (ring full)"
	done
	# A program whose copies come between kernels: with the default (sampled events) every copy gets
	# its GPU time.
	rm -f "$OUT/spaced.db"*
	P2PGUARD_DB=$OUT/spaced.db P2PGUARD_QUIET=1 LD_PRELOAD=$LIB "$BUILD/tests/programs/rt_peer" spaced 2000 100 >/dev/null 2>&1
	row "async peer copies 100 us apart, default timing" "$(db "$OUT/spaced.db" "select count(gpu_ns) || ' of ' || count(*) || ' timed, median gpu_ns ' || (select gpu_ns from transfers where gpu_ns is not null order by gpu_ns limit 1 offset (select count(gpu_ns)/2 from transfers) ) from transfers")" "rt_peer spaced 2000 100"
	rm -f "$OUT/spaced-cupti.db"*
	P2PGUARD_DB=$OUT/spaced-cupti.db P2PGUARD_GPU_TIMING=cupti LD_PRELOAD=$LIB "$BUILD/tests/programs/rt_peer" spaced 2000 100 >/dev/null 2>"$OUT/spaced-cupti.err"
	row "async peer copies 100 us apart, timing=cupti" "$(db "$OUT/spaced-cupti.db" "select count(gpu_ns) || ' of ' || count(*) || ' timed, median gpu_ns ' || (select gpu_ns from transfers where gpu_ns is not null order by gpu_ns limit 1 offset (select count(gpu_ns)/2 from transfers) ) from transfers")" "stderr: $(head -c 300 "$OUT/spaced-cupti.err" | tr '\n' ' ')"
fi

# 4b. What a copy that does not cross devices pays (budget: 0.2 us): same-device async copies.
if want classify; then
	local_bench() { taskset -c "$BENCH_CORES" "$BUILD/tests/programs/rt_peer" bench-local 20000 256 2>/dev/null | sed -n 's/.*ns_per_call=\([0-9.]*\).*/\1/p'; }
	LB=""
	LG=""
	LC=""
	for rep in 1 2 3 4 5 6 7 8 9; do
		LB+="$(local_bench) "
		LG+="$(P2PGUARD_DB=$OUT/local.db P2PGUARD_QUIET=1 LD_PRELOAD=$LIB local_bench) "
		LC+="$(P2PGUARD_DB=$OUT/local.db P2PGUARD_QUIET=1 P2PGUARD_GPU_TIMING=cupti LD_PRELOAD=$LIB local_bench) "
	done
	b=$(med "$LB")
	m=$(med "$LG")
	c=$(med "$LC")
	row "cudaMemcpyAsync 256 B within one GPU (not recorded)" "$(awk -v m="$m" -v b="$b" 'BEGIN {printf "%.3f us vs %.3f us bare: %+.3f us", m/1000, b/1000, (m-b)/1000}')" "median of 9 runs each, alternating; a run's figure is the median of its batches of 256; bare: $LB; guarded: $LG; budget +0.2 us"
	row "the same with timing=cupti (CUPTI traces every copy of the process)" "$(awk -v m="$c" -v b="$b" 'BEGIN {printf "%.3f us vs %.3f us bare: %+.3f us", m/1000, b/1000, (m-b)/1000}')" "guarded: $LC"
fi

# 4c. The same costs measured inside one process (drv_peer bench-ab): batches through the guard's
# function alternate with batches through libcuda's own, so machine drift cancels; without the guard
# the two are one function and the difference shows the method's noise. Three runs each.
if want ab; then
	ab() { taskset -c "$BENCH_CORES" "$BUILD/tests/programs/drv_peer" procaddr bench-ab 40000 256 "$@" 2>/dev/null | sed -n 's/.*diff_ns=\([-0-9.]*\).*/\1/p'; }
	declare -A AB=()
	for rep in 1 2 3; do
		for kind in local peer; do
			AB[$kind-bare]+="$(ab "$kind") "
			for t in off sampled all cupti; do
				[ "$kind" = local ] && [ "$t" != sampled ] && continue
				AB[$kind-$t]+="$(P2PGUARD_DB=$OUT/ab.db P2PGUARD_QUIET=1 P2PGUARD_GPU_TIMING=$t LD_PRELOAD=$LIB ab "$kind") "
			done
		done
		# The cupti mode's whole cost, CUPTI's tracing included: libcuda's own half runs untraced.
		AB[peer-whole]+="$(P2PGUARD_DB=$OUT/ab.db P2PGUARD_QUIET=1 P2PGUARD_GPU_TIMING=cupti LD_PRELOAD=$LIB ab peer untraced-own) "
	done
	row "guard's cost inside one process, cuMemcpyAsync 256 B within GPU 0" "$(med "${AB[local-sampled]}") ns (no guard, same method: $(med "${AB[local-bare]}") ns)" "median paired difference per call, 3 runs: ${AB[local-sampled]}; budget 200 ns"
	for t in off sampled all cupti; do
		row "guard's cost inside one process, cuMemcpyPeerAsync 256 B, timing=$t" "$(med "${AB[peer-$t]}") ns (no guard, same method: $(med "${AB[peer-bare]}") ns)" "median paired difference per call, 3 runs: ${AB[peer-$t]}; budget 1000 ns"
	done
	row "timing=cupti, whole cost inside one process (CUPTI tracing off for libcuda's own half), cuMemcpyPeerAsync 256 B" "$(med "${AB[peer-whole]}") ns" "median paired difference per call, 3 runs: ${AB[peer-whole]}; budget 1000 ns"
	# What the guard asks the driver for each generic copy, twice: the floor under the local row.
	PQ=""
	for rep in 1 2 3; do
		PQ+="$(taskset -c "$BENCH_CORES" "$BUILD/tests/programs/drv_peer" procaddr bench-pointer 200000 2>/dev/null | sed -n 's/.*ns_per_call=\([0-9.]*\).*/\1/p') "
	done
	row "the driver's cuPointerGetAttribute(DEVICE_ORDINAL), per call (libcuda's own)" "$(med "$PQ") ns" "median batch of 256, 3 runs: $PQ; a copy within one GPU asks it twice"
fi

# 5. PyTorch: a split model, 200 steps, bare and under every mode.
if want torch; then
	declare -A TL TS
	for mode in bare observe fallback staged cupti; do
		enough 50 || { row "torch split $mode" "SKIPPED (time)" ""; continue; }
		rm -f "$OUT/torch-$mode.db"*
		if [ "$mode" = bare ]; then
			timeout 120 python3 tests/gpu/torch_split.py >"$OUT/torch-$mode.log" 2>&1
		elif [ "$mode" = cupti ]; then
			# observe mode, every copy's GPU time from CUPTI
			P2PGUARD_DB=$OUT/torch-$mode.db P2PGUARD_GPU_TIMING=cupti LD_PRELOAD=$LIB timeout 120 python3 tests/gpu/torch_split.py >"$OUT/torch-$mode.log" 2>&1
		else
			P2PGUARD_DB=$OUT/torch-$mode.db P2PGUARD_MODE=$mode P2PGUARD_QUIET=1 LD_PRELOAD=$LIB timeout 120 python3 tests/gpu/torch_split.py >"$OUT/torch-$mode.log" 2>&1
		fi
		TL[$mode]=$(sed -n 's/.*digest=\(\S*\).*/\1/p' "$OUT/torch-$mode.log")
		TS[$mode]=$(sed -n 's/.*median_ms=\(\S*\).*/\1/p' "$OUT/torch-$mode.log")
		detail="step ${TS[$mode]} ms"
		if [ "$mode" != bare ]; then
			expected=$(sed -n 's/.*cross_copies=\([0-9]*\).*/\1/p' "$OUT/torch-$mode.log")
			per=$(sed -n 's/.*bytes_per_copy=\([0-9]*\).*/\1/p' "$OUT/torch-$mode.log")
			got=$(db "$OUT/torch-$mode.db" "select count(*) from transfers where bytes=$per")
			paths=$(db "$OUT/torch-$mode.db" "select group_concat(path||':'||n) from (select path, count(*) n from transfers group by 1)")
			over=$(awk -v m="${TS[$mode]:-0}" -v b="${TS[bare]:-1}" 'BEGIN {printf "%+.2f", (m/b-1)*100}')
			timed=$(db "$OUT/torch-$mode.db" "select count(gpu_ns) from transfers where bytes=$per")
			detail="$detail ($over% vs bare); $got/$expected tensor copies of $per B recorded, $timed with gpu_ns; paths $paths"
		fi
		row "torch split $mode" "$([ -n "${TL[$mode]}" ] && [ "${TL[$mode]}" = "${TL[bare]}" ] && echo "losses identical to bare (${TL[bare]})" || echo "LOSSES ${TL[$mode]:-none} vs ${TL[bare]:-none}")" "$detail"
	done
fi

# 5b. Observe mode's cost per PyTorch step: bare and observe alternate TORCH_REPS times (default 6),
# each process pinned to the same cores so that where the scheduler puts a run does not decide it;
# reported: the median of the run medians, and the median of the paired differences (each observe
# run against the bare run just before it), which cancels slow drift of the machine. Two sizes:
# the launch-bound default model (the guard's host cost weighs most there) and a GPU-bound one
# (BATCH=2048 WIDTH=4096), whose run-to-run spread is small enough to resolve 1%.
if want torch-overhead; then
	CORES=${TORCH_CORES:-$BENCH_CORES}
	for size in small:256:1024:300 gpu-bound:2048:4096:200; do
		IFS=: read -r label batch width steps <<<"$size"
		declare -A TOV=()
		PAIRS=""
		for rep in $(seq 1 "${TORCH_REPS:-6}"); do
			enough 40 || continue
			for mode in bare observe; do
				log=$OUT/torchov-$label-$mode-$rep.log
				if [ "$mode" = bare ]; then
					BATCH=$batch WIDTH=$width STEPS=$steps timeout 120 taskset -c "$CORES" python3 tests/gpu/torch_split.py >"$log" 2>&1
				else
					P2PGUARD_DB=$OUT/torchov.db P2PGUARD_QUIET=1 LD_PRELOAD=$LIB BATCH=$batch WIDTH=$width STEPS=$steps timeout 120 taskset -c "$CORES" python3 tests/gpu/torch_split.py >"$log" 2>&1
				fi
				TOV[$mode]+="$(sed -n 's/.*median_ms=\(\S*\).*/\1/p' "$log") "
			done
			b=$(sed -n 's/.*median_ms=\(\S*\).*/\1/p' "$OUT/torchov-$label-bare-$rep.log")
			o=$(sed -n 's/.*median_ms=\(\S*\).*/\1/p' "$OUT/torchov-$label-observe-$rep.log")
			[ -n "$b" ] && [ -n "$o" ] && PAIRS+="$(awk -v o="$o" -v b="$b" 'BEGIN {printf "%.3f", (o/b-1)*100}') "
		done
		mb=$(med "${TOV[bare]:-}")
		mo=$(med "${TOV[observe]:-}")
		row "torch split ($label, batch $batch, width $width), observe vs bare, interleaved" "$(awk -v o="${mo:-0}" -v b="${mb:-1}" -v p="$(med "$PAIRS")" 'BEGIN {printf "%+.2f%% (median of run medians %.4f vs %.4f ms); median paired difference %+.2f%%", (o/b-1)*100, o, b, p}')" "bare: ${TOV[bare]:-}; observe: ${TOV[observe]:-}; paired %: $PAIRS; cores $CORES"
	done
fi

# 8. Staged engine bandwidth beside the driver's own path, and the recorder's budgets.
if want bench && enough 80; then
	timeout 120 "$BUILD/tests/bench/bench_staged" --iters 3 --calls 2000 >"$OUT/bench-staged.txt" 2>&1
	row "bench_staged" "$([ $? = 0 ] && echo done || echo FAILED)" "table in bench-staged.txt"
fi
# 8a. Whether stream memory operations are a cheaper cross-device hop than events for staged copies.
if want hops && enough 40; then
	timeout 120 "$BUILD/tests/bench/bench_hops" >"$OUT/bench-hops.txt" 2>&1
	row "bench_hops (staged chain: event hops vs stream memory operations)" "$([ $? = 0 ] && echo done || echo FAILED)" "table in bench-hops.txt"
fi
# 8b. What each way of giving a copy its GPU time costs per call (the choice behind P2PGUARD_GPU_TIMING).
if want timing && enough 40; then
	cupti=$( (ls /usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13 /usr/local/cuda/lib64/libcupti.so.13 2>/dev/null; python3 -c 'import nvidia, glob, os; [print(f) for p in nvidia.__path__ for f in glob.glob(os.path.join(p, "*", "lib", "libcupti.so*"))]' 2>/dev/null) | head -1)
	timeout 120 "$BUILD/tests/bench/bench_timing" ${cupti:+--cupti "$cupti"} >"$OUT/bench-timing.txt" 2>&1
	row "bench_timing (events vs CUPTI per copy)" "$([ $? = 0 ] && echo done || echo FAILED)" "per copy vs bare: $(awk '$1 ~ /^(events2|events1|notiming2|cupti|cupti\+corr|cupti2|h2d:cupti|h2d:cupti2|launch:cupti|launch:cupti2)$/ && ($2 ~ /^[0-9.]+$/ || $2 == "unavailable:") && !seen[$1]++ {printf "%s %s ns; ", $1, $2 == "unavailable:" ? "unavailable" : $8}' "$OUT/bench-timing.txt")table in bench-timing.txt"
fi
if want probe && enough 20; then
	timeout 60 "$BUILD/tests/bench/bench_probe" --rounds 3 >"$OUT/bench-probe.txt" 2>&1
	row "health probe, 4 MiB x 2 per path (fallback mode's)" "$(awk '$1 ~ /^[0-9]+$/ {if (!first) first=$3; if ($3 > max) max=$3; v=v" "$4} END {printf "first %.1f ms, slowest %.1f ms", first, max}' "$OUT/bench-probe.txt")" "verdicts:$(awk '$1 ~ /^[0-9]+$/ {printf " %s", $4}' "$OUT/bench-probe.txt"); table in bench-probe.txt; budget 50 ms per pair"
fi
if want recorder && enough 40; then
	for part in record drain latency; do
		timeout 60 "$BUILD/tests/bench/bench_recorder" /tmp/p2pguard-bench-$part $part >>"$OUT/bench-recorder.txt" 2>&1
	done
	row "bench_recorder" "$(grep -c met "$OUT/bench-recorder.txt") met, $(grep -c MISSED "$OUT/bench-recorder.txt") missed" "table in bench-recorder.txt"
fi

# 6. torchrun DDP over NCCL, observe and staged.
if want ddp; then
	for mode in observe fallback staged; do
		enough 60 || { row "torchrun DDP $mode" "SKIPPED (time)" ""; continue; }
		rm -f "$OUT/ddp-$mode.db"*
		P2PGUARD_DB=$OUT/ddp-$mode.db P2PGUARD_MODE=$mode P2PGUARD_QUIET=1 LD_PRELOAD=$LIB NCCL_DEBUG=INFO timeout 150 \
			torchrun --standalone --nproc_per_node=2 tests/gpu/torch_ddp.py >"$OUT/ddp-$mode.log" 2>&1
		rc=$?
		# A rank that makes no peer call leaves no row (staged mode: NCCL_P2P_DISABLE=1, one GPU
		# per rank); the database is then never created.
		if [ -s "$OUT/ddp-$mode.db" ]; then
			ranks=$(db "$OUT/ddp-$mode.db" "select group_concat(rank) from (select rank from processes where rank is not null order by rank)")
		else
			ranks="none (no peer call made, nothing to record)"
		fi
		via=$(grep -o "via [A-Za-z/]*" "$OUT/ddp-$mode.log" | sort | uniq -c | tr -s ' ' | paste -sd, -)
		row "torchrun DDP $mode" "$([ $rc = 0 ] && echo trained || echo "FAILED rc=$rc")" "$(grep -h '^RANK 0' "$OUT/ddp-$mode.log" | cut -c1-80); ranks in db: $ranks; NCCL channels:$via"
	done
fi

# 7. JAX and CuPy.
if want frameworks; then
	for fw in jax cupy; do
		for mode in observe fallback staged; do
			enough 40 || { row "$fw $mode" "SKIPPED (time)" ""; continue; }
			rm -f "$OUT/$fw-$mode.db"*
			P2PGUARD_DB=$OUT/$fw-$mode.db P2PGUARD_MODE=$mode P2PGUARD_QUIET=1 LD_PRELOAD=$LIB timeout 90 python3 tests/gpu/${fw}_move.py >"$OUT/$fw-$mode.log" 2>&1
			row "$fw $mode, arrays between GPUs" "$(grep -E '^(JAX|CUPY)' "$OUT/$fw-$mode.log" || echo FAILED)" "rows: $(db "$OUT/$fw-$mode.db" "select group_concat(api||' '||bytes||' '||path, '; ') from transfers" 2>/dev/null)"
		done
	done
fi

# 3. nvcc binaries: default static runtime (driver calls through cuGetProcAddress only), and shared.
if want nvcc; then
	for rt in static shared; do
		enough 30 || { row "nvcc -cudart $rt" "SKIPPED (time)" ""; continue; }
		bin=$OUT/rt_peer_$rt
		nvcc -cudart "$rt" -o "$bin" tests/programs/rt_peer.c -lpthread >"$OUT/nvcc-$rt.log" 2>&1 || { row "nvcc -cudart $rt" "BUILD FAILED" "$(tail -1 "$OUT/nvcc-$rt.log")"; continue; }
		for mode in observe fallback staged; do
			db_=$OUT/nvcc-$rt-$mode.db
			rm -f "$db_"*
			out=$(P2PGUARD_DB=$db_ P2PGUARD_MODE=$mode P2PGUARD_QUIET=1 LD_PRELOAD=$LIB "$bin" basic 2>&1)
			rc=$?
			expected=$(echo "$out" | sed -n 's/.*transfers=\([0-9]*\).*/\1/p')
			bytes=$(echo "$out" | sed -n 's/.* bytes=\([0-9]*\).*/\1/p')
			got=$(db "$db_" "select count(*) from transfers")
			gotb=$(db "$db_" "select sum(bytes) from transfers")
			apis=$(db "$db_" "select group_concat(distinct api||':'||path) from transfers")
			row "nvcc -cudart $rt, basic, $mode" "$([ $rc = 0 ] && [ "$got" = "$expected" ] && [ "$gotb" = "$bytes" ] && echo "data checked, rows $got = calls $expected, bytes match" || echo "FAIL rc=$rc rows $got calls $expected bytes $gotb/$bytes")" "$apis"
		done
	done
fi

if want sigkill && enough 40; then
	P2PG_KILL_RUNS=10 timeout 120 python3 tests/preload/test_sigkill.py >"$OUT/preload-sigkill.log" 2>&1
	row "SIGKILL x10 (real CUDA)" "$([ $? = 0 ] && echo pass || echo FAIL)" "$(tail -2 "$OUT/preload-sigkill.log" | head -1 | cut -c1-90)"
fi

# 9. topo.
if want topo && enough 20; then
	timeout 60 "$CLI" topo --db "$OUT/topo.db" >"$OUT/topo.txt" 2>&1
	row "p2pguard topo" "exit $?" "$(grep -A3 'P2P matrix' "$OUT/topo.txt" | tail -2 | tr -s ' ' | paste -sd';' -)"
fi

{
	echo "# gpu-check $(date -u +%Y-%m-%dT%H:%MZ) on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l), $(($(date +%s) - START)) s"
	echo "| check | result | detail |"
	echo "|---|---|---|"
	printf '%s\n' "${ROWS[@]}"
} | tee "$OUT/summary.md"
cp "$OUT/summary.md" "$OUT"/bench-*.txt "$OUT/topo.txt" "$RESULTS/" 2>/dev/null
find "$OUT" -name '*.db*' -size +4M -delete
tar -C "$OUT" -czf "$RESULTS/gpu-check-logs.tar.gz" .
echo "gpu-check: results in $RESULTS"
