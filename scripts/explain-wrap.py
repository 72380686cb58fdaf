#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""How `p2pguard explain` answers a line that a terminal of some width cut in two: every line of
the explain sets (corpus, variants, held-out) longer than WIDTH and at most twice as long is cut
once at WIDTH and piped in, and its top answer compared with the uncut line's. Prints one table
row per width.

    scripts/explain-wrap.py [P2PGUARD] [WIDTH...]     (defaults: build/src/cli/p2pguard, 75 90 97 110)
"""
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "explain"))
from score import load  # noqa: E402

SETS = ["corpus.jsonl", "variants.jsonl", "heldout.jsonl"]


def top(binary, text):
    out = subprocess.run([binary, "explain", "--json", "-"], input=text, capture_output=True,
                         text=True, check=False).stdout
    matches = json.loads(out)["matches"]
    return matches[0]["id"] if matches else None


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else "build/src/cli/p2pguard"
    widths = [int(w) for w in sys.argv[2:]] or [75, 90, 97, 110]
    texts = [row["text"] for name in SETS
             for row in load(os.path.join(ROOT, "tests", "explain", name)) if "\n" not in row["text"]]
    print("| width | lines cut in two | top answer differs | of them: nothing answered |")
    print("|---:|---:|---:|---:|")
    with ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        for width in widths:
            cut = [t for t in texts if width < len(t) <= 2 * width]
            plain = list(pool.map(lambda t: top(binary, t), cut))
            wrapped = list(pool.map(lambda t: top(binary, t[:width] + "\n" + t[width:] + "\n"), cut))
            differ = [(a, b) for a, b in zip(plain, wrapped) if a != b]
            print(f"| {width} | {len(cut)} | {len(differ)} | {sum(b is None for _, b in differ)} |")


if __name__ == "__main__":
    main()
