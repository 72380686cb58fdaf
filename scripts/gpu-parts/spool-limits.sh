#!/usr/bin/env bash
# Issue 22 item 1 and issue 25 item 3 on the real driver and the GPU machine's own CPU:
#   1. bench_recorder: a record's cost with its CRC32C (SSE4.2 instruction, and the table path);
#   2. a real CUDA process (the driver through ctypes: cuInit, 200 cuDeviceCanAccessPeer) under
#      `ulimit -f` 100 MiB, 2 MiB and 64 KiB: exit status 0 each time (no SIGXFSZ), the rows or the
#      drops, the lines said, the spool's size;
#   3. a SIGKILLed real process's spool: the device count its header holds (the real one), and
#      `p2pguard recover` imports it with no record refused (records_invalid 0).
# Env: BUILD (the carried build, .carry/build), RESULTS (output folder). Prints markdown tables.
set -uo pipefail
source "$(dirname "$0")/../gpu-part-env.sh" spool-limits
mkdir -p "$RESULTS"
CLI=$BUILD/src/cli/p2pguard
W=$RESULTS/work
mkdir -p "$W"
q() {
	python3 -c "
import sqlite3, sys
try:
    r = sqlite3.connect(sys.argv[1]).execute(sys.argv[2]).fetchone()
    print('' if r is None or r[0] is None else r[0])
except sqlite3.Error as e:
    print('(%s)' % e)" "$@" 2>&1
}

echo "## 1. a record's cost on this CPU ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'))"
bench=$W/bench
mkdir -p "$bench"
for k in 1 2 3; do
	timeout 120 "$BUILD/tests/bench/bench_recorder" "$bench" record 2>&1 | tee -a "$RESULTS/bench-recorder.txt" | grep -v '^|---\|^| what' | sed "s/^/run $k /"
done
rm -rf "$bench"

cat >"$W/peer.py" <<'PY'
import ctypes, sys
cu = ctypes.CDLL("libcuda.so.1")
assert cu.cuInit(0) == 0
v = ctypes.c_int()
for _ in range(int(sys.argv[1])):
    cu.cuDeviceCanAccessPeer(ctypes.byref(v), 0, 0)
if len(sys.argv) > 2:
    import os, time
    print("READY", flush=True)
    time.sleep(60)
PY

echo
echo "## 2. a real CUDA process under ulimit -f"
echo "| ulimit -f | exit status | peer_access rows | records_dropped | lines said | spool left |"
echo "|---|---|---|---|---|---|"
for kib in 102400 2048 64; do
	db=$W/limit-$kib.db
	rm -rf "$db" "$db"-* "$db".spool
	( ulimit -f "$kib"; P2PGUARD_DB=$db LD_PRELOAD=$LIB timeout 120 python3 "$W/peer.py" 200 ) \
		>"$W/limit-$kib.out" 2>"$W/limit-$kib.err"
	status=$?
	lines=$(grep -c '^p2pguard:' "$W/limit-$kib.err")
	left=$(ls "$db".spool 2>/dev/null | wc -l)
	echo "| $kib KiB | $status | $(q "$db" 'select count(*) from peer_access') | $(q "$db" 'select records_dropped from processes') | $lines $(head -c 160 "$W/limit-$kib.err" | tr '\n|' ' /') | $left |"
done

echo
echo "## 3. a SIGKILLed real process's spool"
db=$W/killed.db
rm -rf "$db" "$db"-* "$db".spool
python3 - "$db" "$LIB" "$W/peer.py" <<'PY' >"$W/killed.out" 2>&1
import os, signal, sqlite3, subprocess, sys
db, lib, script = sys.argv[1:4]
hold = sqlite3.connect(db, isolation_level=None)
hold.execute("BEGIN IMMEDIATE")
env = dict(os.environ, P2PGUARD_DB=db, LD_PRELOAD=lib)
p = subprocess.Popen([sys.executable, script, "500", "wait"], env=env, stdout=subprocess.PIPE, text=True)
p.stdout.readline()
p.send_signal(signal.SIGKILL)
p.wait()
hold.execute("ROLLBACK")
PY
spool=$(ls "$db".spool/*.spool6 2>/dev/null | head -1)
# The header's device_count (include/p2pguard/spool.h: offsetof 2308).
devices=$(python3 -c "import struct,sys; f=open(sys.argv[1],'rb'); f.seek(2308); print(struct.unpack('<i', f.read(4))[0])" "$spool" 2>&1)
size=$(stat -c '%s bytes, %b blocks of %B' "$spool" 2>&1)
rec=$("$CLI" recover "$db" 2>&1 | tr '\n' ' ')
echo "| what | value |"
echo "|---|---|"
echo "| nvidia-smi's GPUs | $(nvidia-smi -L 2>/dev/null | wc -l) |"
echo "| device count in the spool's header | $devices |"
echo "| spool file | $size |"
echo "| recover | $rec |"
echo "| peer_access rows | $(q "$db" 'select count(*) from peer_access') (500 calls) |"
echo "| records_invalid | $(q "$db" 'select records_invalid from processes') |"
