#!/usr/bin/env bash
# The knowledge base's evidence and explain cost on a real machine (issue 23), in well under a
# minute, changing nothing:
#   - the PCIe evidence (src/diagnose/evidence_pcie.c) read from the real sysfs by
#     tests/bench/bench_pcie: for every pair of NVIDIA GPUs (or, with one GPU, the GPU and each
#     other PCI function), the facts the guard would store and the CPU cost of one gather;
#   - each bridge those facts describe, compared with what `lspci -vvv` prints as ACSCtl for it
#     (the proof that the ACS capability is found and decoded in real configuration space);
#   - explain's cost per line over the corpus on this CPU (tests/bench/bench_rules).
# Env: BUILD (the carried build, default .carry/build), RESULTS (output folder).
# Prints a markdown summary on stdout; raw outputs in $RESULTS.
set -uo pipefail
source "$(dirname "$0")/../gpu-part-env.sh" kb-pcie
mkdir -p "$RESULTS"

{
	echo "uid $(id -u)"
	nvidia-smi --query-gpu=index,name,pci.bus_id --format=csv,noheader 2>&1
	command -v lspci || echo "lspci: absent"
} >"$RESULTS/machine.txt" 2>&1

echo "## PCIe evidence on this machine"
echo
echo "uid $(id -u) (sysfs shows a bridge's ACS register to root only); GPUs:"
nvidia-smi --query-gpu=index,name,pci.bus_id --format=csv,noheader 2>&1 | sed 's/^/    /'
echo
timeout 60 "$BUILD/tests/bench/bench_pcie" --repeats 100 >"$RESULTS/bench-pcie.md" 2>&1
echo "bench_pcie exit $?"
cat "$RESULTS/bench-pcie.md"
echo

# Every bridge named in a pcie_acs_ctl fact, with what the guard read, against lspci.
python3 - "$RESULTS/bench-pcie.md" >"$RESULTS/acs-compare.md" <<'PY'
import json, re, shutil, subprocess, sys
names = ["SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl", "DirectTrans"]
seen = {}
for line in open(sys.argv[1]):
    m = re.search(r"`(\{.*\})`", line)
    if not m:
        continue
    ctl = json.loads(m.group(1)).get("pcie_acs_ctl", "")
    for part in ctl.split("; "):
        bits = part.split()
        if bits and re.fullmatch(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]", bits[0]):
            seen.setdefault(bits[0], " ".join(bits[1:]))
print("| bridge | p2pguard read | lspci -vvv ACSCtl | agree |")
print("|---|---|---|---|")
agree = total = 0
for bdf, ours in sorted(seen.items()):
    if not shutil.which("lspci"):
        print("| %s | %s | lspci absent | not compared |" % (bdf, ours))
        continue
    out = subprocess.run(["lspci", "-vvv", "-s", bdf], capture_output=True, text=True).stdout
    m = re.search(r"ACSCtl:\s*(.*)", out)
    theirs = m.group(1).strip() if m else "(no ACSCtl line)"
    if ours == "unreadable":
        verdict = "not compared (unreadable)"
    else:
        on = [n for n in names if re.search(r"\b%s\+" % n, theirs)]
        expect = "no-ACS" if not m else ("off" if not on else " ".join(n + "+" for n in on))
        total += 1
        agree += expect == ours
        verdict = "yes" if expect == ours else "NO (lspci says %s)" % expect
    print("| %s | %s | %s | %s |" % (bdf, ours, theirs, verdict))
print()
print("%d of %d bridges read agree with lspci" % (agree, total))
PY
echo "## ACS control: the guard's reading against lspci"
echo
cat "$RESULTS/acs-compare.md"
echo

echo "## explain, per line, on this CPU"
echo
timeout 120 "$BUILD/tests/bench/bench_rules" 50 "$ROOT/tests/explain/corpus.jsonl" >"$RESULTS/bench-rules.md" 2>&1
echo "bench_rules exit $?"
cat "$RESULTS/bench-rules.md"
