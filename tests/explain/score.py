#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Scores `p2pguard explain --json` on real lines pasted into public issue threads.

    score.py P2PGUARD CORPUS.jsonl [--heldout HELDOUT.jsonl] [--goal 0.90] [--verbose]
             [--baseline RIGHT.txt [--write-baseline]]

Each corpus line is {"expect", "source", "text"}: the rule a person who knows the thread would
give first, or "none" for a GPU error that is not about peer-to-peer work. A P2P line is right
when the expected rule comes first, partly right when it is listed lower, "none" when nothing is
listed and misleading when another rule comes first. A non-P2P line must get no P2P advice: no
rule may be listed for it, except a rule tagged "not-p2p" (a triage answer whose advice is not
about P2P). A line may also carry "why": the labeller's reading of the thread, which explains
the label and is not scored.

A line whose text names nothing of its cause (a bare "an illegal memory access was encountered",
where the fault was noticed, not what caused it) expects the triage answer of its failure, as the
NCCL "unhandled cuda error" lines always have: the same bare text comes from P2P and from
single-GPU threads, and the triage says how to tell them apart. Such a line keeps the cause its
thread showed in "thread_cause"; the score is also printed against those causes ("strict"), which
no answer to the text alone can reach.
"relabelled" says why a line's label changed after it was gathered (a reviewed relabelling).
The lines of held-out rounds 17 on carry "bare" instead (true: the gatherer read the text as
naming nothing of its cause), also once they join the corpus: their label is the thread's cause,
and for a bare one a triage answer (tags "triage" and "not-p2p") first counts as right, in the
triage row, while the strict row needs the label.

Exits 1 when any non-P2P line of the corpus gets P2P advice, and when the corpus misses the goal
(P2P lines right at the top) unless a baseline is given. With --baseline the goal is reported, and
the corpus fails on regressions instead: every P2P line the baseline file names (one key per line,
see line_key) must still be right at the top. The corpus gains lines no rule answers yet (each
held-out round joins it once scored), so its score may sit below the goal while every answer it
had holds; --write-baseline rewrites the file with the lines right now (after a change that makes
more of them right, or a reviewed relabelling). The held-out set was gathered after the rules were written, from other
threads; it is printed for comparison and never tuned on, so it does not decide the exit status.
A held-out line may carry "seen": why it is not unseen (its thread or its text reached the corpus
or a rule while the set was being gathered); the held-out set is then also scored without those.
The same scoring checks tests/explain/variants.jsonl with --goal 1.0: lines this project wrote,
each with "variant" (what it varies) instead of "source", not lines pasted by users.

P2PG_EXPLAIN_SAMPLE=N (set by scripts/test.sh in the sanitizer pass, where each explain runs about
ten times slower) keeps one line in N of every set, chosen by the hash of its text so that every
run takes the same lines: the instrumented pass looks for memory and undefined-behaviour errors,
which need explain's code paths, not every line; the uninstrumented pass scores them all. A sampled
run checks the baseline lines and the non-P2P lines it kept and reports the share without judging
the goal, except a goal of 100%, which every kept line must meet.
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys


# Answers computed ahead by explain_batch (--batch), by text; empty: each line runs the command.
ANSWERS = {}


def explain(binary, text):
    if text in ANSWERS:
        status, stdout = ANSWERS[text]
        if status not in (0, 1):
            raise SystemExit(f"p2pguard explain failed ({status}) on {text!r}")
        return matches_of(json.loads(stdout))
    out = subprocess.run([binary, "explain", "--json", "--", text], capture_output=True,
                         text=True, check=False)
    if out.returncode not in (0, 1):
        raise SystemExit(f"p2pguard explain failed ({out.returncode}) on {text!r}: {out.stderr}")
    return matches_of(json.loads(out.stdout))


def answer_ahead(binary, batch, rows):
    """Explains every single-line text of rows in one explain_batch process per core (the
    command's own code: batch.py), and checks 40 of them, at random, through the command itself."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from batch import check_against_command, explain_many
    texts = sorted({row["text"] for row in rows if "\n" not in row["text"]})
    cases = [("json", text) for text in texts]
    results = explain_many(batch, cases)
    differ = check_against_command(binary, cases, results)
    if differ:
        raise SystemExit(f"explain_batch and the command answer differently: {differ[:3]}")
    for text, result in zip(texts, results):
        ANSWERS[text] = result


def matches_of(doc):
    matches = []
    for m in doc["matches"]:
        tags = (m.get("rule") or {}).get("tags") or []
        matches.append((m["id"], "not-p2p" in tags, "triage" in tags and "not-p2p" in tags))
    return matches


def line_key(row):
    """A corpus line's name in the baseline: its text and its label, hashed."""
    return hashlib.sha256((row["text"] + "\0" + row["expect"]).encode("utf-8")).hexdigest()[:16]


def sample_every():
    """N of P2PG_EXPLAIN_SAMPLE (1: every line)."""
    try:
        return max(1, int(os.environ.get("P2PG_EXPLAIN_SAMPLE", "1")))
    except ValueError:
        return 1


def sampled(text):
    """True when the sanitizer pass's sample keeps this text."""
    every = sample_every()
    return every == 1 or int(hashlib.sha256(text.encode("utf-8")).hexdigest()[:8], 16) % every == 0


def load(path):
    with open(path, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [row for row in rows if sampled(row["text"])]


def score(binary, rows, verbose, name):
    counts = {"right": 0, "partly": 0, "none": 0, "misleading": 0, "triage": 0, "strict": 0}
    right_keys = set()
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
            # A line the gatherer marked "bare" (it names nothing of its cause) is right with a
            # triage answer first, as the lines with "thread_cause" are.
            bare_triage = row.get("bare") is True and bool(matches) and matches[0][2]
            if ids and (ids[0] == row["expect"] or bare_triage):
                verdict = "right"
                right_keys.add(line_key(row))
                if "thread_cause" in row or (bare_triage and ids[0] != row["expect"]):
                    counts["triage"] += 1
            elif row["expect"] in ids:
                verdict = "partly"
            elif not ids:
                verdict = "none"
            else:
                verdict = "misleading"
            counts[verdict] += 1
            if ids and ids[0] == row.get("thread_cause", row["expect"]):
                counts["strict"] += 1
        if verbose or verdict not in ("right", "ok"):
            got = ids[0] if ids else "-"
            print(f"  [{name}] {verdict:10} expect {row['expect']:48} got {got}")
            print(f"      {row['text'][:150]}")
    return counts, p2p_total, other_total, other_clean, other_advised, right_keys


def pct(n, total):
    return f"{100.0 * n / total:5.1f}%" if total else "  n/a "


def table(title, result):
    counts, p2p_total, other_total, other_clean, advised, _ = result
    print(f"\n{title}: {p2p_total + other_total} lines, {p2p_total} P2P, {other_total} not P2P "
          f"({pct(other_total, p2p_total + other_total).strip()})")
    print("| P2P lines | count | share |")
    print("| --- | ---: | ---: |")
    for key, label in (("right", "right at the top"), ("partly", "partly (listed lower)"),
                       ("none", "no rule"), ("misleading", "misleading (another rule first)")):
        print(f"| {label} | {counts[key]} | {pct(counts[key], p2p_total)} |")
    print(f"| (of those right: the triage of a line that names no cause) | {counts['triage']} | "
          f"{pct(counts['triage'], p2p_total)} |")
    print(f"| strict: right against the thread's cause | {counts['strict']} | "
          f"{pct(counts['strict'], p2p_total)} |")
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
    ap.add_argument("--baseline")
    ap.add_argument("--write-baseline", action="store_true")
    ap.add_argument("--batch", help="explain_batch: answer every line ahead in one process")
    args = ap.parse_args()
    if args.write_baseline and sample_every() > 1:
        raise SystemExit("score.py: --write-baseline needs every line (unset P2PG_EXPLAIN_SAMPLE)")

    if sample_every() > 1:
        print(f"P2PG_EXPLAIN_SAMPLE={sample_every()}: one line in {sample_every()} of each set "
              f"(the sanitizer pass); the shares below are of that sample")
    if args.batch:
        answer_ahead(args.binary, args.batch,
                     load(args.corpus) + (load(args.heldout) if args.heldout else []))
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

    counts, p2p_total, _, _, advised, right_keys = main_result
    right = counts["right"] / p2p_total if p2p_total else 0.0
    failed = False
    goal = f"{100 * right:.1f}% of the scored set's P2P lines right at the top, goal {100 * args.goal:.0f}%"
    if sample_every() > 1:
        goal += f" (a sample of one line in {sample_every()}; the goal is judged on every line)"
    if args.baseline and args.write_baseline:
        with open(args.baseline, "w", encoding="utf-8") as f:
            f.write("".join(k + "\n" for k in sorted(right_keys)))
        print(f"\nwrote {len(right_keys)} lines right at the top to {args.baseline}")
    if args.baseline:
        with open(args.baseline, encoding="utf-8") as f:
            expected = {line.strip() for line in f if line.strip()}
        corpus_keys = {line_key(row) for row in load(args.corpus) if row["expect"] != "none"}
        if sample_every() > 1:
            expected &= corpus_keys  # a line the sample left out is checked by the full pass
        lost = expected - right_keys
        gone = expected - corpus_keys
        if gone:
            print(f"\nFAIL: {len(gone)} line(s) of the baseline are not in the corpus (removed or "
                  f"relabelled: write the baseline again after a reviewed change)")
            failed = True
        if lost - gone:
            print(f"\nFAIL: {len(lost - gone)} P2P line(s) the baseline has right at the top are not "
                  f"any more (run with --verbose to see them)")
            if args.verbose:
                for row in load(args.corpus):
                    if line_key(row) in lost - gone:
                        print(f"  lost: expect {row['expect']}: {row['text'][:150]}")
            failed = True
        gained = right_keys - expected
        print(f"\n{'goal met' if right >= args.goal else 'goal NOT met'}: {goal}; "
              f"{len(expected & right_keys)} of the baseline's {len(expected)} still right"
              + (f", {len(gained)} more right than the baseline (--write-baseline to keep them)"
                 if gained else ""))
    elif right < args.goal and (sample_every() == 1 or args.goal >= 1.0):
        print(f"\nFAIL: {goal}")
        failed = True
    if advised:
        print(f"\nFAIL: {len(advised)} non-P2P line(s) of the scored set answered with P2P advice")
        failed = True
    if not failed:
        print(f"\nok: {goal}" + (" (reported; the baseline guards the answers)" if args.baseline else "")
              + ", no non-P2P line given P2P advice")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
