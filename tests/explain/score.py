#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Scores `p2pguard explain --json` on real lines pasted into public issue threads.

    score.py P2PGUARD CORPUS.jsonl [--heldout HELDOUT.jsonl] [--goal 0.90] [--verbose]

Each corpus line is {"expect", "source", "text"}: the rule a person who knows the thread would
give first, or "none" for a GPU error that is not about peer-to-peer work. A P2P line is right
when the expected rule comes first, partly right when it is listed lower, "none" when nothing is
listed and misleading when another rule comes first. A non-P2P line must get no P2P advice: no
rule may be listed for it, except a rule tagged "not-p2p" (a triage answer whose advice is not
about P2P). A line may also carry "why": the labeller's reading of the thread, which explains
the label and is not scored.

Exits 1 when the corpus misses the goal (P2P lines right at the top) or when any non-P2P line of
it gets P2P advice. The held-out set was gathered after the rules were written, from other
threads; it is printed for comparison and never tuned on, so it does not decide the exit status.
A held-out line may carry "seen": why it is not unseen (its thread or its text reached the corpus
or a rule while the set was being gathered); the held-out set is then also scored without those.
The same scoring checks tests/explain/variants.jsonl with --goal 1.0: lines this project wrote,
each with "variant" (what it varies) instead of "source", not lines pasted by users.
"""
import argparse
import json
import subprocess
import sys


def explain(binary, text):
    out = subprocess.run([binary, "explain", "--json", "--", text], capture_output=True,
                         text=True, check=False)
    if out.returncode not in (0, 1):
        raise SystemExit(f"p2pguard explain failed ({out.returncode}) on {text!r}: {out.stderr}")
    doc = json.loads(out.stdout)
    return [(m["id"], "not-p2p" in ((m.get("rule") or {}).get("tags") or []))
            for m in doc["matches"]]


def load(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def score(binary, rows, verbose, name):
    counts = {"right": 0, "partly": 0, "none": 0, "misleading": 0}
    p2p_total = 0
    other_total = 0
    other_clean = 0
    other_advised = []
    for row in rows:
        matches = explain(binary, row["text"])
        ids = [m[0] for m in matches]
        if row["expect"] == "none":
            other_total += 1
            advice = [m[0] for m in matches if not m[1]]
            if advice:
                other_advised.append((row, advice))
                verdict = "P2P ADVICE"
            else:
                other_clean += 1
                verdict = "ok"
        else:
            p2p_total += 1
            if ids and ids[0] == row["expect"]:
                verdict = "right"
            elif row["expect"] in ids:
                verdict = "partly"
            elif not ids:
                verdict = "none"
            else:
                verdict = "misleading"
            counts[verdict] += 1
        if verbose or verdict not in ("right", "ok"):
            got = ids[0] if ids else "-"
            print(f"  [{name}] {verdict:10} expect {row['expect']:48} got {got}")
            print(f"      {row['text'][:150]}")
    return counts, p2p_total, other_total, other_clean, other_advised


def pct(n, total):
    return f"{100.0 * n / total:5.1f}%" if total else "  n/a "


def table(title, result):
    counts, p2p_total, other_total, other_clean, advised = result
    print(f"\n{title}: {p2p_total + other_total} lines, {p2p_total} P2P, {other_total} not P2P "
          f"({pct(other_total, p2p_total + other_total).strip()})")
    print("| P2P lines | count | share |")
    print("| --- | ---: | ---: |")
    for key, label in (("right", "right at the top"), ("partly", "partly (listed lower)"),
                       ("none", "no rule"), ("misleading", "misleading (another rule first)")):
        print(f"| {label} | {counts[key]} | {pct(counts[key], p2p_total)} |")
    print("| **non-P2P lines** | | |")
    print(f"| no P2P advice | {other_clean} | {pct(other_clean, other_total)} |")
    print(f"| answered with P2P advice | {len(advised)} | {pct(len(advised), other_total)} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("corpus")
    ap.add_argument("--heldout")
    ap.add_argument("--goal", type=float, default=0.90)
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()

    main_result = score(args.binary, load(args.corpus), args.verbose, "corpus")
    held_result = unseen_result = None
    if args.heldout:
        held = load(args.heldout)
        held_result = score(args.binary, held, args.verbose, "held-out")
        # Lines marked "seen" (their thread, or their very text, reached the corpus or a rule
        # while the set was gathered) are scored again without them.
        unseen = [row for row in held if "seen" not in row]
        if len(unseen) < len(held):
            unseen_result = score(args.binary, unseen, False, "held-out, unseen")

    table(f"Scored set ({args.corpus})", main_result)
    if held_result:
        table("Held-out set (tests/explain/heldout.jsonl, gathered after the rules; not tuned on)",
              held_result)
    if unseen_result:
        table("Held-out set without its lines marked \"seen\"", unseen_result)

    counts, p2p_total, _, _, advised = main_result
    right = counts["right"] / p2p_total if p2p_total else 0.0
    failed = False
    if right < args.goal:
        print(f"\nFAIL: {100 * right:.1f}% of the scored set's P2P lines right at the top, "
              f"goal {100 * args.goal:.0f}%")
        failed = True
    if advised:
        print(f"\nFAIL: {len(advised)} non-P2P line(s) of the scored set answered with P2P advice")
        failed = True
    if not failed:
        print(f"\nok: {100 * right:.1f}% of the scored set's P2P lines right at the top "
              f"(goal {100 * args.goal:.0f}%), no non-P2P line given P2P advice")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
