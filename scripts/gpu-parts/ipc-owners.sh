#!/usr/bin/env bash
# TWO GPUs: whose memory a legacy CUDA IPC mapping is. The conformance program bare (the driver's
# own answer for an importer on device 1 of device 0's memory: the importer's device) and guarded,
# then the preload test of cross-process mappings against the real driver (tests/preload/
# test_mappings.py, P2PG_REAL_CUDA=1): the open's owner from the exporter's note of its handle, the
# importer's devices renumbered, an unguarded exporter, and the copy out of the mapping as a peer
# copy; then tests/preload/test_ipc_owners_table.py (a full table). The first test's one-device
# cases (SIMCUDA_DEVICES=1) do not apply on two real GPUs and are listed apart. Prints markdown.
# Env: BUILD (the carried build, default .carry/build), RESULTS (output folder).
set -uo pipefail
source "$(dirname "$0")/../gpu-part-env.sh" ipc-owners
CUDA_LIB=/usr/local/cuda/lib64
export LD_LIBRARY_PATH=$CUDA_LIB:$LD_LIBRARY_PATH
export P2PG_BUILD_ROOT=$BUILD P2PG_SOURCE_ROOT=$ROOT P2PG_REAL_CUDA=1 PYTHONPATH=$ROOT/tests/preload
if [ "${P2PG_GPU_CHECK_SIM:-}" = 1 ]; then
	BUILD=$ROOT/build LIB=$ROOT/build/src/preload/libp2pguard.so P2PG_BUILD_ROOT=$ROOT/build
	export LD_LIBRARY_PATH=$ROOT/build/tests/simcuda:$LD_LIBRARY_PATH P2PG_REAL_CUDA=0
fi
echo "GPUs: $(nvidia-smi -L 2>/dev/null | grep -c '^GPU')"
conf=$BUILD/tests/conformance/conformance_rt_ipc_legacy
timeout 60 "$conf" >"$RESULTS/legacy.bare" 2>&1
echo "conformance_rt_ipc_legacy bare: exit $?; $(grep -c '^ok' "$RESULTS/legacy.bare") ok, $(grep -c '^not ok' "$RESULTS/legacy.bare") not ok"
grep -E "names the|not ok" "$RESULTS/legacy.bare" | sed 's/^/    /'
db=$RESULTS/legacy.db
rm -rf "$db" "$db"-* "$db".spool
P2PGUARD_DB=$db LD_PRELOAD=$LIB timeout 60 "$conf" >"$RESULTS/legacy.guarded" 2>&1
echo "guarded: exit $?; $(grep -c '^ok' "$RESULTS/legacy.guarded") ok, $(grep -c '^not ok' "$RESULTS/legacy.guarded") not ok"
python3 - "$db" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
print("    rows of the successful opens (accessor, owner, is_peer):",
      c.execute("SELECT accessor_device, owner_device, is_peer FROM peer_mappings WHERE event = 'import' AND status = 0").fetchall())
print("    copies out of the mapping (src, dst, path):",
      c.execute("SELECT src_device, dst_device, path FROM transfers").fetchall())
PY
echo
echo "tests/preload/test_mappings.py against the real driver:"
timeout 200 python3 tests/preload/test_mappings.py >"$RESULTS/test_mappings.log" 2>&1
echo "exit $?; $(grep -c '^ok' "$RESULTS/test_mappings.log") ok, $(grep -c '^not ok' "$RESULTS/test_mappings.log") not ok"
echo "the legacy IPC owner's checks:"
grep -E "^(ok|not ok) - (legacy|renumbered|same device|unguarded owner|staged:|timed ipc)" "$RESULTS/test_mappings.log" | cut -c1-220 | sed 's/^/    /'
echo "every other not ok:"
grep -E "^not ok" "$RESULTS/test_mappings.log" | grep -vE " - (legacy|renumbered|same device|unguarded owner|staged:|timed ipc)" | cut -c1-220 | sed 's/^/    /'
echo
echo "tests/preload/test_ipc_owners_table.py against the real driver (a full table: slots of ended exporters taken, one of live ones said):"
timeout 120 python3 tests/preload/test_ipc_owners_table.py >"$RESULTS/test_ipc_owners_table.log" 2>&1
echo "exit $?; $(grep -c '^ok' "$RESULTS/test_ipc_owners_table.log") ok, $(grep -c '^not ok' "$RESULTS/test_ipc_owners_table.log") not ok"
grep -E "^(ok|not ok)" "$RESULTS/test_ipc_owners_table.log" | cut -c1-220 | sed 's/^/    /'
