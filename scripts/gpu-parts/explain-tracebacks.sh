#!/usr/bin/env bash
# Real PyTorch failures of CUDA tensors shared between processes, pasted into `p2pguard explain -`
# whole (the traceback with its frames, as users paste it): what PyTorch prints, and what explain
# answers for the whole paste and for the exception's line alone. One GPU is enough.
set -uo pipefail
cd "$(dirname "$0")/../.."
P2PGUARD=${BUILD:-.carry/build}/src/cli/p2pguard
out=${RESULTS:-$(mktemp -d)}
mkdir -p "$out"

cat >"$out/cases.py" <<'EOF'
# Each case runs in a fresh interpreter and fails the way users report it, or says it did not.
import os, sys, time
import torch
import torch.multiprocessing as mp


def producer_exits(q):
    t = torch.ones(1 << 20, device="cuda")
    q.put(t)
    q.close()
    q.join_thread()  # the handle is on its way: then gone, its memory with it
    os._exit(0)


def case_producer_gone():
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=producer_exits, args=(q,))
    p.start()
    p.join()
    time.sleep(0.5)
    t = q.get(timeout=30)
    print("consumer got", float(t.sum()))


def consumer(q, done):
    t = q.get(timeout=60)
    print("consumer got", float(t.sum()))
    done.set()


def case_expandable():
    ctx = mp.get_context("spawn")
    q, done = ctx.Queue(), ctx.Event()
    p = ctx.Process(target=consumer, args=(q, done))
    p.start()
    t = torch.ones(1 << 20, device="cuda")
    q.put(t)
    done.wait(60)
    p.join(60)
    sys.exit(p.exitcode or 0)


if __name__ == "__main__":
    {"producer-gone": case_producer_gone, "expandable": case_expandable}[sys.argv[1]]()
EOF

echo "| case | exit | PyTorch's last line | explain, whole paste | explain, last line alone |"
echo "|---|---|---|---|---|"
run_case() {
	local name=$1
	shift
	env "$@" timeout 120 python3 "$out/cases.py" "$name" >"$out/$name.stdout" 2>"$out/$name.stderr"
	local rc=$?
	local last
	last=$(grep -E '^[A-Za-z_][A-Za-z0-9_.]*(Error|Exception)[A-Za-z]*: ' "$out/$name.stderr" | tail -1 | cut -c1-160)
	local whole alone
	whole=$("$P2PGUARD" explain --json - <"$out/$name.stderr" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(" ".join(m["id"] for m in d["matches"][:2]) or "-", "cause line", d.get("cause"))')
	alone=$([ -n "$last" ] && "$P2PGUARD" explain --json -- "$last" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(" ".join(m["id"] for m in d["matches"][:2]) or "-")')
	"$P2PGUARD" explain - <"$out/$name.stderr" >"$out/$name.explain.txt"
	echo "| $name $* | $rc | \`${last:-none}\` | $whole | ${alone:--} |"
}
run_case producer-gone
run_case expandable PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
echo
for f in "$out"/*.stderr; do
	echo "### $(basename "$f")"
	echo '```'
	tail -25 "$f"
	echo '```'
done
