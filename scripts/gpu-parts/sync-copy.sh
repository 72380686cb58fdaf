#!/usr/bin/env bash
# Whether a "synchronous" device-to-device copy waits for the copy on a real GPU (a few seconds):
# tests/programs/sync_copy_time.c, built by nvcc, bare; then under the guard with
# P2PGUARD_TEST=local-copies (copies within the one GPU recorded as peer copies), so that the rows'
# host_ns and gpu_ns can be set beside the events' GPU time. Prints a markdown table.
# Env: BUILD (the carried build, default .carry/build), RESULTS (output folder).
set -uo pipefail
source "$(dirname "$0")/../gpu-part-env.sh" sync-copy
W=$RESULTS/sync-copy
mkdir -p "$W"
export LD_LIBRARY_PATH=$ROOT/.carry/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=/usr/local/cuda/bin:$PATH
if [ "${P2PG_GPU_CHECK_SIM:-}" = 1 ]; then
	BUILD=$ROOT/build LIB=$ROOT/build/src/preload/libp2pguard.so
	export LD_LIBRARY_PATH=$ROOT/build/tests/simcuda:$LD_LIBRARY_PATH SIMCUDA_DEVICES=1
	cp "$BUILD/tests/programs/sync_copy_time" "$W/sync_copy_time"
elif ! nvcc -O2 -o "$W/sync_copy_time" tests/programs/sync_copy_time.c >"$W/nvcc.log" 2>&1; then
	echo "nvcc failed: $(tail -3 "$W/nvcc.log")"
	exit 1
fi
echo "| call | bytes | host us (median of 9) | GPU us, events | host's wait after the call us |"
echo "|---|---|---|---|---|"
"$W/sync_copy_time" >"$W/bare.txt" 2>&1
awk '{printf "| %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5}' "$W/bare.txt"
db=$W/guarded.db
rm -rf "$db" "$db"-* "$db".spool
P2PGUARD_DB=$db P2PGUARD_TEST=local-copies P2PGUARD_GPU_TIMING=all LD_PRELOAD=$LIB \
	timeout 120 "$W/sync_copy_time" >"$W/guarded.txt" 2>&1
echo
echo "Under the guard (P2PGUARD_TEST=local-copies, P2PGUARD_GPU_TIMING=all): the program's own figures, then the rows"
echo
echo "| call | bytes | host us | GPU us, events | wait us |"
echo "|---|---|---|---|---|"
awk '{printf "| %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5}' "$W/guarded.txt"
echo
python3 - "$db" <<'PY'
import sqlite3, statistics, sys
c = sqlite3.connect(sys.argv[1])
print("| api | bytes | rows | host_ns median us | gpu_ns median us | rows with gpu_ns |")
print("|---|---|---|---|---|---|")
for api, b in c.execute("SELECT DISTINCT api, bytes FROM transfers ORDER BY api, bytes"):
    rows = c.execute("SELECT host_ns, gpu_ns FROM transfers WHERE api = ? AND bytes = ?", (api, b)).fetchall()
    h = statistics.median(r[0] for r in rows) / 1e3
    g = [r[1] for r in rows if r[1]]
    print("| %s | %d | %d | %.1f | %s | %d |" % (api, b, len(rows), h,
          "%.1f" % (statistics.median(g) / 1e3) if g else "-", len(g)))
PY
