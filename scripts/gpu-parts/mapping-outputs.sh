#!/usr/bin/env bash
# Cross-process mappings per device pair in every output, on ONE real GPU, about half a minute:
# tests/programs/xproc_peer under the guard, each side a process of its own rank (legacy IPC: rank 0
# owns two buffers, rank 1 opens both, copies, closes; VMM: rank 2 exports a POSIX-fd cuMem
# allocation, rank 3 imports, maps, is given access, copies, unmaps, releases; rank 5 opens rank 4's
# IPC buffer and never closes it: XPROC_KEEP=1), all on GPU 0, so that every pair is GPU 0 -> GPU 0
# across processes (the two-GPU pairs are issue 27's run). Then on that real database:
#   - mapping_pairs: the pair, its opened, closed, live, failed, ranks and exporters;
#   - report: the pair table's line; report --json's mappings.pairs equals the view;
#   - report --html: the Mappings section, its matrix cell's counts;
#   - trace: a slice per mapping on a "mappings" track, the live one named so;
#   - metrics: p2pguard_peer_mappings_total and _live against the view, promtool (if installed).
# Env: BUILD (the carried build, .carry/build), RESULTS (output folder). Prints a markdown table;
# the database and every output in $RESULTS/mapping-outputs.
set -uo pipefail
source "$(dirname "$0")/../gpu-part-env.sh" mapping-outputs
CLI=$BUILD/src/cli/p2pguard
XPROC=$BUILD/tests/programs/xproc_peer
W=$RESULTS/mapping-outputs
mkdir -p "$W"
ROWS=()
row() { ROWS+=("| $1 | $2 | $3 |"); echo "== $1: $2 ($3)" >&2; }
q() { python3 -c "
import sqlite3, sys
try:
    r = sqlite3.connect(sys.argv[1]).execute(sys.argv[2]).fetchall()
    print('; '.join(' '.join('' if v is None else str(v) for v in x) for x in r).replace('|', '/'))
except Exception as e:
    print('(%s)' % str(e).splitlines()[0])
" "$@"; }

DB=$W/mappings.db
rm -rf "$DB" "$DB"-* "$DB".spool
# ipc OWNER_RANK OPEN_RANK [KEEP]: an owner of two buffers on GPU 0, an opener of both on GPU 0
ipc() {
	local fifo=$W/owner.in
	rm -f "$fifo" && mkfifo "$fifo"
	RANK=$1 P2PGUARD_DB=$DB LD_PRELOAD=$LIB timeout 60 "$XPROC" ipc-owner 0 0 <"$fifo" >"$W/owner$1.out" 2>&1 &
	local owner=$!
	exec 7>"$fifo"
	for _ in $(seq 50); do [ "$(wc -l <"$W/owner$1.out")" -ge 2 ] && break; sleep 0.2; done
	RANK=$2 XPROC_KEEP=${3:-0} P2PGUARD_DB=$DB LD_PRELOAD=$LIB timeout 60 "$XPROC" ipc-open 0 \
		$(awk '{print $2}' "$W/owner$1.out") >"$W/open$2.out" 2>&1
	local rc=$?
	exec 7>&-
	wait "$owner"
	echo "$rc"
}
vmm() {
	local fifo=$W/vmm.in sock=$W/vmm.sock
	rm -f "$fifo" "$sock" && mkfifo "$fifo"
	RANK=$1 P2PGUARD_DB=$DB LD_PRELOAD=$LIB timeout 60 "$XPROC" vmm-owner 0 "$sock" <"$fifo" >"$W/vmm$1.out" 2>&1 &
	local owner=$!
	exec 7>"$fifo"
	for _ in $(seq 50); do grep -q listening "$W/vmm$1.out" && break; sleep 0.2; done
	RANK=$2 P2PGUARD_DB=$DB LD_PRELOAD=$LIB timeout 60 "$XPROC" vmm-import 0 "$sock" >"$W/import$2.out" 2>&1
	local rc=$?
	exec 7>&-
	wait "$owner"
	echo "$rc"
}
row "legacy IPC, rank 0 -> rank 1" "exit $(ipc 0 1)" "$(tr '\n' ' ' <"$W/open1.out" | cut -c1-160)"
row "VMM, rank 2 -> rank 3" "exit $(vmm 2 3)" "$(tr '\n' ' ' <"$W/import3.out" | cut -c1-160)"
row "legacy IPC kept open, rank 4 -> rank 5" "exit $(ipc 4 5 1)" "$(tr '\n' ' ' <"$W/open5.out" | cut -c1-160)"
row "mapping_pairs" "$(q "$DB" "select count(*) from mapping_pairs")" \
	"$(q "$DB" "select owner_gpu||'->'||accessor_gpu||': opened '||opened||', closed '||closed||', live '||live||', failed '||failed||', ranks '||coalesce(ranks,'')||', exported by '||coalesce(exported_by_ranks,'')||', '||handle_types from mapping_pairs")"

"$CLI" report "$DB" >"$W/report.txt" 2>"$W/report.err"
row "report: the pair table" "$(grep -c '^  pair ' "$W/report.txt") tables" \
	"$(sed -n '/^cross-process mappings/,/^  per process/p' "$W/report.txt" | grep -E '^  [0-9?]+->' | tr -s ' ' | tr '\n' ';' | cut -c1-200)"
"$CLI" report --json "$DB" >"$W/report.json" 2>>"$W/report.err"
row "report --json: mappings.pairs is the view" "$(python3 - "$W/report.json" "$DB" <<'PY'
import json, sqlite3, sys
try:
    rep = json.load(open(sys.argv[1]))["mappings"]["pairs"]
    got = sorted((p["owner_gpu"], p["accessor_gpu"], p["opened"], p["closed"], p["live"], p["bytes"], p["failed"]) for p in rep)
    view = sorted(sqlite3.connect(sys.argv[2]).execute(
        "SELECT owner_gpu, accessor_gpu, opened, closed, live, bytes, failed FROM mapping_pairs").fetchall())
    print("yes (%d pairs)" % len(got) if got == view and got else "NO: %s vs %s" % (got, view))
except Exception as e:
    print("NO (%s)" % e)
PY
)" "report --json"
"$CLI" report --html "$W/report.html" "$DB" >/dev/null 2>>"$W/report.err"
row "report --html: Mappings section and matrix" \
	"$(grep -c 'id="sec-mappings"' "$W/report.html") section, $(grep -o '<td class="map-[a-z]*" data-owner=' "$W/report.html" | wc -l) cells" \
	"$(grep -o 'data-opened="[0-9]*" data-closed="[0-9]*" data-live="[0-9]*" data-failed="[0-9]*"' "$W/report.html" | head -2 | tr '\n' ' ')"
"$CLI" trace "$DB" -o "$W/trace.json" 2>"$W/trace.err"
row "trace: mapping slices" "$(python3 - "$W/trace.json" <<'PY'
import json, sys
try:
    ev = json.load(open(sys.argv[1]))["traceEvents"]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    s = [e for e in ev if e["ph"] == "X" and e.get("cat") == "mapping"]
    ok = s and all(names[(e["pid"], e["tid"])].startswith("mappings") for e in s)
    print("%s: %d slices, %d live; e.g. %s" % ("yes" if ok else "NO", len(s), sum(e["name"].endswith("(live)") for e in s),
          s and s[0]["name"]))
except Exception as e:
    print("NO (%s)" % e)
PY
)" "p2pguard trace"
"$CLI" metrics "$DB" >"$W/metrics.prom" 2>"$W/metrics.err"
pt="promtool not installed"
command -v promtool >/dev/null && pt="promtool: $(promtool check metrics <"$W/metrics.prom" 2>&1 | head -3 | tr '\n' ' ')" && [ "$pt" = "promtool: " ] && pt="promtool: clean"
row "metrics: p2pguard_peer_mappings_total, _live" \
	"$(awk '/^p2pguard_peer_mappings_total\{/ {s += $NF} END {print s + 0}' "$W/metrics.prom"), $(awk '/^p2pguard_peer_mappings_live\{/ {s += $NF} END {print s + 0}' "$W/metrics.prom") (view: $(q "$DB" "select sum(opened)||', '||sum(live) from mapping_pairs"))" \
	"$pt; $(grep -m1 '^p2pguard_peer_mappings_total{' "$W/metrics.prom" | cut -c1-200)"

{
	echo "| Cross-process mappings in the outputs (one GPU) | result | detail |"
	echo "|---|---|---|"
	printf '%s\n' "${ROWS[@]}"
} | tee "$RESULTS/mapping-outputs-summary.md"
