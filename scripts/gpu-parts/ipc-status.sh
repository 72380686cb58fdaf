#!/usr/bin/env bash
# The statuses the real driver gives in the cross-process failures the knowledge base explains
# (tests/gpu/ipc_status_facts.py: a fabric-handle cuMemCreate without an IMEX channel, a fabric
# import nobody exported, IPC opens of a live, a freed, a random and the process's own handle),
# then the same program under the guard: each failure's row and the rule the guard chose for it,
# and `p2pguard explain` on the driver's own name for each status. Prints markdown.
# Env: BUILD (the carried build, default .carry/build), RESULTS (output folder).
set -uo pipefail
source "$(dirname "$0")/../gpu-part-env.sh" ipc-status
if [ "${P2PG_GPU_CHECK_SIM:-}" = 1 ]; then
	BUILD=$ROOT/build LIB=$ROOT/build/src/preload/libp2pguard.so
	export LD_LIBRARY_PATH=$ROOT/build/tests/simcuda:$LD_LIBRARY_PATH SIMCUDA_DEVICES=1
fi
echo "| case | status | driver's name |"
echo "|---|---|---|"
python3 tests/gpu/ipc_status_facts.py | tee "$RESULTS/bare.txt"
db=$RESULTS/guarded.db
rm -rf "$db" "$db"-* "$db".spool
P2PGUARD_DB=$db LD_PRELOAD=$LIB python3 tests/gpu/ipc_status_facts.py >"$RESULTS/guarded.txt" 2>&1
echo
if cmp -s "$RESULTS/bare.txt" "$RESULTS/guarded.txt"; then
	echo "Under the guard: the same statuses (identical output)."
else
	echo "Under the guard the output DIFFERS:"
	diff "$RESULTS/bare.txt" "$RESULTS/guarded.txt" | sed 's/^/    /'
fi
echo
echo "The guard's failure rows (failure_report) and the rule it chose:"
echo
echo "| api | status | error_name | rule_id |"
echo "|---|---|---|---|"
python3 - "$db" <<'PY'
import sqlite3, sys
con = sqlite3.connect(sys.argv[1])
for api, status, name, rule in con.execute(
        "SELECT api, status, error_name, coalesce(rule_id, '-') FROM failure_report"):
    print(f"| {api} | {status} | {name} | {rule} |")
PY
echo
echo "\`p2pguard explain\` on each failing call and the driver's name for its status:"
echo
echo "| line | first rule |"
echo "|---|---|"
awk -F' [|] ' '$2 != 0 && $3 ~ /^CUDA_ERROR/ {print $1 "|" $3}' "$RESULTS/bare.txt" |
	sed 's/^| //' | while IFS='|' read -r case status; do
		call=${case%%,*}
		call=${call%% in *}
		line="$call failed: $status"
		first=$("$BUILD/src/cli/p2pguard" explain --json -- "$line" |
			python3 -c 'import json,sys; m=json.load(sys.stdin)["matches"]; print(m[0]["id"] if m else "-")')
		echo "| \`$line\` | $first |"
	done
