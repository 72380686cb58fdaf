#!/usr/bin/env bash
# The outputs on a real GPU machine (one H100 is enough), in under a minute:
#   1. topo's NVML facts against nvidia-smi's own: each GPU's UUID, PCI bus id, CPU and NUMA
#      affinity (`nvidia-smi topo -m`'s columns), and the link codes where there are pairs;
#   2. the trace lines up with a PyTorch profiler (Kineto) trace of the same run: a failing peer
#      call (cudaDeviceEnablePeerAccess of a device to itself: 217) made inside a record_function
#      range; its instant in `p2pguard trace` must fall inside that range in Kineto's trace, both
#      on Kineto's base (baseTimeNanoseconds);
#   3. report, report --html, metrics and trace of that run's database, each exit 0.
# Env: BUILD (the carried build folder, default .carry/build), RESULTS (where raw files go).
# Prints a markdown summary on stdout.
set -uo pipefail
source "$(dirname "$0")/../gpu-part-env.sh" outputs
mkdir -p "$RESULTS"
P2PGUARD=$BUILD/src/cli/p2pguard
status=0

echo "## outputs on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) ($(date -u +%FT%TZ))"
echo
echo "### 1. topo's NVML facts against nvidia-smi"
nvidia-smi topo -m > "$RESULTS/nvidia-smi-topo.txt" 2>&1
nvidia-smi --query-gpu=index,uuid,pci.bus_id --format=csv,noheader > "$RESULTS/nvidia-smi-gpus.csv" 2>&1
timeout 120 "$P2PGUARD" topo --json --no-record --bytes $((16 << 20)) > "$RESULTS/topo.json" 2> "$RESULTS/topo.stderr"
echo "topo exit $? (0: no pair in trouble; a single GPU has no pair)"
python3 - "$RESULTS" <<'EOF' || status=1
import json, re, sys
res = sys.argv[1]
topo = json.load(open(res + "/topo.json"))
smi = [l.split(", ") for l in open(res + "/nvidia-smi-gpus.csv").read().strip().splitlines()]
lines = open(res + "/nvidia-smi-topo.txt").read().splitlines()
head = next(l for l in lines if "CPU Affinity" in l)
cols = re.split(r"\t+|\s{2,}", head.strip())
rows = {}
for l in lines:
    m = re.match(r"^(GPU\d+)\s+(.*)$", l.strip())
    if m:
        rows[m.group(1)] = re.split(r"\t+|\s{2,}", l.strip())[1:]
print("| GPU | what | p2pguard topo | nvidia-smi | same |")
print("|---|---|---|---|---|")
bad = 0
for d in topo["devices"]:
    k = d["index"]
    uuid = next((u for i, u, b in smi if b.lower().endswith(d["pci_bus_id"].lower()[-12:])), None)
    row = rows.get("GPU%d" % (d["nvidia_smi_index"] if d["nvidia_smi_index"] is not None else k), [])
    want = dict(zip(cols, row[len(row) - len(cols):] if len(row) >= len(cols) else []))
    facts = [("UUID", d["uuid"], uuid), ("CPU Affinity", d["cpu_affinity"], want.get("CPU Affinity")),
             ("NUMA Affinity", str(d["numa_node"]), want.get("NUMA Affinity"))]
    for what, ours, theirs in facts:
        same = ours == theirs
        bad += not same
        print("| %d | %s | %s | %s | %s |" % (k, what, ours, theirs, "yes" if same else "NO"))
for p in topo["pairs"]:
    theirs = rows.get("GPU%d" % p["src"], [None] * 64)[p["dst"]]
    same = p["link"]["type"] == theirs
    bad += not same
    print("| %d->%d | link | %s | %s | %s |" % (p["src"], p["dst"], p["link"]["type"], theirs, "yes" if same else "NO"))
print("\nNVML available to topo: %s" % topo["nvml"])
sys.exit(1 if bad else 0)
EOF

echo
echo "### 2. the trace against a PyTorch profiler trace of the same run"
if ! python3 -c "import torch" 2>/dev/null; then
	echo "not run: no PyTorch here"
else
	db=$RESULTS/kineto.db
	rm -rf "$db" "$db".spool
	cat > "$RESULTS/kineto_peer.py" <<'EOF'
import ctypes, json, sys, time
import torch
from torch.profiler import profile, record_function, ProfilerActivity
torch.zeros(1, device="cuda")
torch.cuda.synchronize()
guard = ctypes.CDLL(None)  # the preloaded guard's cudaDeviceEnablePeerAccess, as a program gets it
with profile(activities=[ProfilerActivity.CPU]) as prof:
    time.sleep(0.01)
    with record_function("enable_peer_to_itself"):
        rc = guard.cudaDeviceEnablePeerAccess(0, 0)
    time.sleep(0.01)
prof.export_chrome_trace(sys.argv[1])
print("cudaDeviceEnablePeerAccess(0, 0) on device 0 ->", rc)
EOF
	timeout 120 "$P2PGUARD" run --quiet --db "$db" -- python3 "$RESULTS/kineto_peer.py" "$RESULTS/kineto.json" \
		> "$RESULTS/kineto.stdout" 2>&1
	echo "guarded PyTorch run exit $?: $(tail -1 "$RESULTS/kineto.stdout")"
	"$P2PGUARD" trace "$db" -o "$RESULTS/p2pguard.trace.json" 2> "$RESULTS/trace.stderr"
	python3 - "$RESULTS" <<'EOF' || status=1
import json, sys
res = sys.argv[1]
k = json.load(open(res + "/kineto.json"))
o = json.load(open(res + "/p2pguard.trace.json"))
rng = [e for e in k["traceEvents"] if e.get("name") == "enable_peer_to_itself" and e.get("ph") == "X"]
fail = [e for e in o["traceEvents"] if e.get("ph") == "i" and e.get("cat") == "failure"]
kb, ob = k.get("baseTimeNanoseconds"), o.get("baseTimeNanoseconds")
print("| fact | value |")
print("|---|---|")
print("| Kineto baseTimeNanoseconds | %s |" % kb)
print("| p2pguard baseTimeNanoseconds | %s |" % ob)
ok = bool(rng and fail)
if ok:
    r, f = rng[0], fail[0]
    # Both on the Unix clock in ns: Kineto's without a base wrote absolute microseconds.
    r0 = r["ts"] * 1000 + (kb or 0)
    r1 = r0 + r["dur"] * 1000
    t = f["ts"] * 1000 + (ob or 0)
    inside = r0 - 50e3 <= t <= r1 + 50e3
    print("| record_function range (Unix ns) | %.0f .. %.0f (%.1f us) |" % (r0, r1, r["dur"]))
    print("| p2pguard failure instant (Unix ns) | %.0f (%s) |" % (t, f["name"]))
    print("| same base, instant inside the range (50 us slack) | %s, %s |" % (kb == ob, inside))
    ok = inside
else:
    print("| found | record_function range: %d, failure instants: %d |" % (len(rng), len(fail)))
sys.exit(0 if ok else 1)
EOF
fi

echo
echo "### 3. every output of that database"
for args in "report" "report --json" "report --html $RESULTS/report.html" "metrics" "trace -o $RESULTS/t.json"; do
	# shellcheck disable=SC2086
	"$P2PGUARD" $args "$RESULTS/kineto.db" > "$RESULTS/out.txt" 2> "$RESULTS/err.txt"
	rc=$?
	echo "- \`p2pguard $args\`: exit $rc$( [ -s "$RESULTS/err.txt" ] && echo ", stderr: $(head -c 200 "$RESULTS/err.txt")")"
	[ "$rc" = 0 ] || status=1
done
"$P2PGUARD" report "$RESULTS/kineto.db" > "$RESULTS/report.txt" 2>&1
exit $status
