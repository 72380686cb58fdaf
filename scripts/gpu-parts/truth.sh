#!/usr/bin/env bash
# Issue 25's checks on ONE real GPU (an H100; a few tens of seconds):
#   1. The exit order. A program issues 50 asynchronous 1 MiB copies, synchronises and returns from
#      main, built by nvcc twice: with its default static runtime and with -cudart shared. On one
#      GPU there is no peer copy, so P2PGUARD_TEST=local-copies makes the guard record and time
#      copies within the device exactly as it would peer copies (same event pool, same CUPTI
#      matching, same exit pass); P2PGUARD_TEST=exit-report prints what the exit pass resolved.
#      Expected: 50 of 50 gpu_ns in `all` (events) and `cupti` modes, for both runtimes. Then the
#      same with the exit pass registered when the guard starts, before the runtime's own exit
#      handler (P2PGUARD_TEST=exit-early, the order of the previous release): what the runtime's
#      teardown leaves of the events (the exit report names the driver's error). And a crash
#      (SIGSEGV) right after the synchronise: the copies keep their gpu_ns.
#   2. The devices table against nvidia-smi (index, UUID, PCI bus id, name), bare and with
#      CUDA_VISIBLE_DEVICES set to the GPU's index and to its UUID (one GPU: the ordinal cannot
#      differ from the index here; the renumbering itself is tested on the simulation).
#   3. A database the guard cannot write through the exit: locked by another connection from
#      before the program starts, and a folder in its place (no drainer at all). The records wait
#      in the spool; the exit's last pass (the drainer's, or the exit handler's) writes the copies'
#      GPU times into them there, from the real driver's events, and `p2pguard recover` makes rows
#      with them once the lock is gone. Expected: 50 of 50 gpu_ns after recover, both runtimes.
# Not here: Python 3.13/3.14 stacks (the GPU machine has Python 3.12 only, which uses its exported
# traceback writer; the debug-offsets walk is tested on the build machine's 3.13.0).
# Env: BUILD (the carried build, default .carry/build), RESULTS (output folder).
set -uo pipefail
source "$(dirname "$0")/../gpu-part-env.sh" truth
W=$RESULTS/truth
mkdir -p "$W"
CUDA_LIB=/usr/local/cuda/lib64
# A dry run of this script's own logic on the simulated CUDA (no GPU): P2PG_GPU_CHECK_SIM=1 uses
# the build here and its exit_copies (built against the simulated runtime) for both runtimes.
SIM=${P2PG_GPU_CHECK_SIM:-}
if [ "$SIM" = 1 ]; then
	BUILD=$ROOT/build LIB=$ROOT/build/src/preload/libp2pguard.so CUDA_LIB=$ROOT/build/tests/simcuda
	export SIMCUDA_DEVICES=1
fi
export LD_LIBRARY_PATH=$ROOT/.carry/lib:$CUDA_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=/usr/local/cuda/bin:$PATH
ROWS=()
row() { ROWS+=("| $1 | $2 | $3 |"); echo "== $1: $2 ($3)" >&2; }
q() { python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); r=c.execute(sys.argv[2]).fetchone(); print('' if r is None or r[0] is None else r[0])" "$@" 2>&1; }
guard() { local db=$1; shift; rm -rf "$db" "$db"-* "$db".spool; P2PGUARD_DB=$db LD_PRELOAD=$LIB timeout 60 "$@"; }

{
	nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader 2>&1
	nvcc --version 2>&1 | tail -1
	python3 --version
} >"$RESULTS/truth-machine.txt"
cat "$RESULTS/truth-machine.txt" >&2

# ---- 1. the exit order ----
bins=()
if [ "$SIM" = 1 ]; then
	cp "$BUILD/tests/programs/exit_copies" "$W/exit_copies_static"
	cp "$BUILD/tests/programs/exit_copies" "$W/exit_copies_shared"
	bins=(static shared)
elif nvcc -O2 -o "$W/exit_copies_static" tests/programs/exit_copies.c >"$W/nvcc-static.log" 2>&1; then
	bins+=(static)
else
	row "nvcc, static runtime" "BUILD FAILED" "$(tail -2 "$W/nvcc-static.log" | tr '\n' ';')"
fi
if [ "$SIM" = 1 ]; then
	:
elif nvcc -O2 -cudart shared -o "$W/exit_copies_shared" tests/programs/exit_copies.c >"$W/nvcc-shared.log" 2>&1; then
	bins+=(shared)
else
	row "nvcc, -cudart shared" "BUILD FAILED" "$(tail -2 "$W/nvcc-shared.log" | tr '\n' ';')"
fi

for b in "${bins[@]}"; do
	bin=$W/exit_copies_$b
	for timing in all cupti; do
		for order in late early; do
			hooks=local-copies,exit-report
			[ "$order" = early ] && hooks=$hooks,exit-early
			db=$W/exit-$b-$timing-$order.db
			P2PGUARD_TEST=$hooks P2PGUARD_GPU_TIMING=$timing guard "$db" "$bin" local 50 \
				>"$db.out" 2>"$db.err"
			rc=$?
			got=$(q "$db" "select count(*) || ' rows, ' || count(gpu_ns) || ' with gpu_ns' from transfers")
			what="exit pass registered after the runtime's (this release)"
			[ "$order" = early ] && what="exit pass registered before the runtime's (exit-early, the old order)"
			row "$b cudart, $timing: 50 copies, synchronise, return from main; $what" \
				"$got (exit $rc)" "$(grep -h 'test: exit' "$db.err" | sed 's/^p2pguard: test: exit: //' | tr '\n' ';')"
		done
	done
	db=$W/crash-$b.db
	P2PGUARD_TEST=local-copies P2PGUARD_GPU_TIMING=all guard "$db" "$bin" crash 50 local >"$db.out" 2>"$db.err"
	rc=$?
	row "$b cudart, all: 50 copies, synchronise, SIGSEGV" \
		"$(q "$db" "select count(*) || ' rows, ' || count(gpu_ns) || ' with gpu_ns' from transfers")" \
		"exit $rc; crash rows $(q "$db" "select count(*) from crashes")"
	db=$W/nosync-$b.db
	t0=$EPOCHREALTIME
	P2PGUARD_TEST=local-copies,exit-report P2PGUARD_GPU_TIMING=all guard "$db" "$bin" nosync 50 local >"$db.out" 2>"$db.err"
	rc=$?
	t1=$EPOCHREALTIME
	row "$b cudart, all: 50 copies, no synchronise, return" \
		"$(q "$db" "select count(*) || ' rows, ' || count(gpu_ns) || ' with gpu_ns' from transfers")" \
		"exit $rc in $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}') s; $(grep -h 'test: exit' "$db.err" | sed 's/^p2pguard: test: exit: //' | tr '\n' ';')"
done

# ---- 3. a database locked through the exit, and one the guard cannot use ----
CLI=$BUILD/src/cli/p2pguard
for b in "${bins[@]}"; do
	bin=$W/exit_copies_$b
	for timing in all sampled; do
		db=$W/locked-$b-$timing.db
		guard "$db" "$bin" local 0 >/dev/null 2>&1 # the database, with its schema
		python3 -c "import sqlite3,sys,time; c=sqlite3.connect(sys.argv[1], isolation_level=None); c.execute('BEGIN IMMEDIATE'); open(sys.argv[2], 'w').close(); time.sleep(60)" "$db" "$db.held" &
		holder=$!
		for _ in $(seq 100); do [ -e "$db.held" ] && break; sleep 0.05; done
		P2PGUARD_DB=$db P2PGUARD_TEST=local-copies,exit-report P2PGUARD_GPU_TIMING=$timing \
			LD_PRELOAD=$LIB timeout 60 "$bin" local 50 >"$db.out" 2>"$db.err"
		rc=$?
		during=$(q "$db" "select count(*) from transfers")
		kill "$holder" 2>/dev/null
		wait "$holder" 2>/dev/null
		"$CLI" recover "$db" >"$db.recover" 2>&1
		row "$b cudart, $timing: 50 copies with the database locked through the exit, then recover" \
			"$(q "$db" "select count(*) || ' rows, ' || count(gpu_ns) || ' with gpu_ns' from transfers")" \
			"exit $rc; rows while locked $during; $(grep -h 'test: exit' "$db.err" | sed 's/^p2pguard: test: exit: //' | tr '\n' ';')"
	done
	db=$W/folder-$b.db
	rm -rf "$db" "$db".spool
	mkdir "$db"
	P2PGUARD_DB=$db P2PGUARD_TEST=local-copies,exit-report P2PGUARD_GPU_TIMING=all \
		LD_PRELOAD=$LIB timeout 60 "$bin" local 50 >"$db.out" 2>"$db.err"
	rc=$?
	rmdir "$db"
	"$CLI" recover "$db" >"$db.recover" 2>&1
	row "$b cudart, all: 50 copies, a folder in place of the database (no drainer), then recover" \
		"$(q "$db" "select count(*) || ' rows, ' || count(gpu_ns) || ' with gpu_ns' from transfers")" \
		"exit $rc; $(grep -h 'test: exit' "$db.err" | sed 's/^p2pguard: test: exit: //' | tr '\n' ';')"
done

# ---- 2. devices against nvidia-smi ----
if [ "$SIM" = 1 ]; then
	echo "0, GPU-53696d43-5544-412d-6465-766963652d00, 00000000:10:00.0, SimCUDA H200 sim #0" >"$W/nvidia-smi.csv"
	export LD_LIBRARY_PATH=$ROOT/build/tests/diagnosis/fakenvml:$LD_LIBRARY_PATH
else
	nvidia-smi --query-gpu=index,uuid,pci.bus_id,name --format=csv,noheader >"$W/nvidia-smi.csv" 2>&1
fi
smi=$(head -1 "$W/nvidia-smi.csv" | sed 's/, /,/g')
uuid=$(cut -d, -f2 <<<"$smi")
bin=$W/exit_copies_${bins[0]:-shared}
for visible in unset 0 "$uuid"; do
	db=$W/devices-$([ "$visible" = unset ] && echo unset || echo "${visible:0:8}").db
	if [ "$visible" = unset ]; then
		guard "$db" "$bin" local 1 >"$db.out" 2>"$db.err"
	else
		CUDA_VISIBLE_DEVICES=$visible guard "$db" "$bin" local 1 >"$db.out" 2>"$db.err"
	fi
	mine=$(q "$db" "select physical_index || ',' || uuid || ',' || pci_bus_id || ',' || name from devices where ordinal = 0")
	row "devices row, CUDA_VISIBLE_DEVICES=$visible" \
		"$([ -n "$mine" ] && [ "$mine" = "$smi" ] && echo "equals nvidia-smi" || echo "DIFFERS")" \
		"guard: $mine; nvidia-smi: $smi; rows $(q "$db" "select count(*) from devices")"
done

{
	echo "| check | result | detail |"
	echo "|---|---|---|"
	printf '%s\n' "${ROWS[@]}"
} | tee "$RESULTS/truth-summary.md"
