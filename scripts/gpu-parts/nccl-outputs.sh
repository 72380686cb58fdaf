#!/usr/bin/env bash
# NCCL's traffic in every output, on ONE real GPU (issue 24's "per device pair in peer_bandwidth,
# report, trace, metrics and the HTML"), about a minute: torch.distributed's NCCL backend at world
# size 1 under the guard (tests/gpu/nccl_torch.py: an all-reduce, which NCCL runs as a local copy
# and reports no event for, and a self send/recv, which NCCL's plugin sees), then on that real
# database:
#   - nccl_pair_bandwidth: the self pair GPU 0 -> GPU 0 (p2p), its operations, bytes and GPU GB/s;
#     peer_bandwidth keeps to copies (no NCCL row in it);
#   - report: the "NCCL traffic per device pair" lines; report --json's nccl.pair_bandwidth equals
#     the view; report --html has the NCCL section and its matrix cell;
#   - trace: a slice per finished operation on an "NCCL comm" track, with gpu_ns in its args;
#   - metrics: p2pguard_nccl_ops_total sums to nccl_totals, promtool check metrics (if installed).
# Env: BUILD (the carried build, .carry/build), RESULTS (output folder). Prints a markdown table;
# the database and every output in $RESULTS/nccl-outputs.
set -uo pipefail
source "$(dirname "$0")/../gpu-part-env.sh" nccl-outputs
CLI=$BUILD/src/cli/p2pguard
W=$RESULTS/nccl-outputs
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

DB=$W/torch.db
rm -rf "$DB" "$DB"-* "$DB".spool "$W"/store
P2PGUARD_DB=$DB LD_PRELOAD=$LIB timeout 150 python3 tests/gpu/nccl_torch.py check "$W/store" \
	>"$W/torch.out" 2>"$W/torch.err"
row "torch world size 1 under the guard" "exit $?" "$(tail -1 "$W/torch.out" | cut -c1-200)"
row "nccl_ops (done)" "$(q "$DB" "select count(*) from nccl_ops where state = 'done'")" \
	"$(q "$DB" "select func||' x'||count(*)||' gpu-timed '||sum(gpu_ns > 0) from nccl_ops group by func")"
row "nccl_pair_bandwidth" "$(q "$DB" "select count(*) from nccl_pair_bandwidth")" \
	"$(q "$DB" "select src_host||' GPU '||src_gpu||' -> GPU '||dst_gpu||' '||kind||': ops '||ops||', bytes '||bytes||', timed '||gpu_timed||', p50 '||coalesce(p50_gbps, '-')||' GB/s' from nccl_pair_bandwidth")"
row "peer_bandwidth without NCCL" "$(q "$DB" "select count(*) from peer_bandwidth where path not in ('p2p', 'driver', 'staged')")" \
	"rows whose path is not a copy's (0 expected); copies: $(q "$DB" "select count(*) from peer_bandwidth")"

"$CLI" report "$DB" >"$W/report.txt" 2>"$W/report.err"
row "report: NCCL traffic per device pair" \
	"$(grep -c '^NCCL traffic per device pair' "$W/report.txt") section" \
	"$(sed -n '/^NCCL traffic per device pair/,/^$/p' "$W/report.txt" | grep -E '^  [0-9?]' | tr -s ' ' | tr '\n' ';' | cut -c1-200)"
"$CLI" report --json "$DB" >"$W/report.json" 2>>"$W/report.err"
row "report --json: nccl.pair_bandwidth is the view" "$(python3 - "$W/report.json" "$DB" <<'PY'
import json, sqlite3, sys
try:
    rep = json.load(open(sys.argv[1]))["nccl"]["pair_bandwidth"]
    got = sorted((p["src_gpu"], p["dst_gpu"], p["kind"], p["ops"], p["bytes"], p["gpu_timed"], p["p50_gbps"]) for p in rep)
    view = sorted(sqlite3.connect(sys.argv[2]).execute(
        "SELECT src_gpu, dst_gpu, kind, ops, bytes, gpu_timed, p50_gbps FROM nccl_pair_bandwidth").fetchall())
    print("yes (%d pairs)" % len(got) if got == view and got else "NO: %s vs %s" % (got, view))
except Exception as e:
    print("NO (%s)" % e)
PY
)" "report --json"
"$CLI" report --html "$W/report.html" "$DB" >/dev/null 2>>"$W/report.err"
row "report --html: NCCL section and matrix" \
	"$(grep -c 'id="sec-nccl"' "$W/report.html") section, $(grep -o '<td data-src=' "$W/report.html" | wc -l) cells" \
	"$(grep -o 'data-p50="[0-9.]*" data-kind="[a-z0-9]*"' "$W/report.html" | head -2 | tr '\n' ' ')"
"$CLI" trace "$DB" -o "$W/trace.json" 2>"$W/trace.err"
row "trace: NCCL slices" "$(python3 - "$W/trace.json" "$DB" <<'PY'
import json, sqlite3, sys
try:
    ev = json.load(open(sys.argv[1]))["traceEvents"]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    s = [e for e in ev if e["ph"] == "X" and e.get("cat") == "nccl"]
    done = sqlite3.connect(sys.argv[2]).execute("SELECT count(*) FROM nccl_ops WHERE state = 'done'").fetchone()[0]
    ok = len(s) == done and all(names[(e["pid"], e["tid"])].startswith("NCCL comm") for e in s)
    print("%s: %d slices for %d operations, gpu_ns in %d; e.g. %s" % ("yes" if ok and s else "NO", len(s), done,
          sum("gpu_ns" in e["args"] for e in s), s and json.dumps(s[0]["args"])[:120]))
except Exception as e:
    print("NO (%s)" % e)
PY
)" "p2pguard trace"
"$CLI" metrics "$DB" >"$W/metrics.prom" 2>"$W/metrics.err"
pt="promtool not installed"
command -v promtool >/dev/null && pt="promtool: $(promtool check metrics <"$W/metrics.prom" 2>&1 | head -3 | tr '\n' ' ')" && [ "$pt" = "promtool: " ] && pt="promtool: clean"
row "metrics: p2pguard_nccl_ops_total" \
	"$(awk '/^p2pguard_nccl_ops_total\{/ {s += $NF} END {print s + 0}' "$W/metrics.prom") (nccl_totals: $(q "$DB" "select coalesce(sum(ops), 0) from nccl_totals"))" \
	"$pt; $(grep -m1 '^p2pguard_nccl_gpu_seconds_total{' "$W/metrics.prom" | cut -c1-200)"

{
	echo "| NCCL's traffic in the outputs (one GPU) | result | detail |"
	echo "|---|---|---|"
	printf '%s\n' "${ROWS[@]}"
} | tee "$RESULTS/nccl-outputs-summary.md"
