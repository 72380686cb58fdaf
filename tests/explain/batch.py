# SPDX-License-Identifier: MIT
"""Runs `p2pguard explain` on many texts through explain_batch (the command's own function, many
times in one process; explain_batch.c says why), and checks that it answers as the command does."""
import os
import random
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor

MODES = {"json": ["--json", "-"], "all": ["--all", "-"]}


def _run_chunk(batch, empty, chunk):
    data = b"".join(mode.encode() + b"\n" + text.encode("utf-8") + b"\0" for mode, text in chunk)
    out = subprocess.run([batch, empty], input=data, capture_output=True, timeout=1800, check=False)
    if out.returncode != 0:
        raise SystemExit(f"explain_batch failed ({out.returncode}): {out.stderr.decode(errors='replace')[-2000:]}")
    answers = out.stdout.split(b"\0")[:-1]
    if len(answers) != len(chunk):
        raise SystemExit(f"explain_batch answered {len(answers)} of {len(chunk)} texts")
    results = []
    for a in answers:
        status, _, body = a.partition(b"\n")
        results.append((int(status), body))
    return results


def explain_many(batch, cases, jobs=2):
    """cases: (mode, text) pairs, mode json, all, json-every or all-every (every: with
    P2PGUARD_RULES set to an empty folder, which makes explain read every built-in rule).
    Returns (exit status, output bytes) per case, in order."""
    if any("\0" in text for _, text in cases):
        raise ValueError("a text with a NUL byte cannot be a record")
    with tempfile.TemporaryDirectory() as empty:
        size = (len(cases) + jobs - 1) // jobs or 1
        chunks = [cases[k:k + size] for k in range(0, len(cases), size)]
        with ThreadPoolExecutor(jobs) as pool:
            parts = list(pool.map(lambda c: _run_chunk(batch, empty, c), chunks))
    return [r for part in parts for r in part]


def check_against_command(p2pguard, cases, results, count=40, seed=23):
    """The batch's answers are the command's: `count` of the cases, chosen at random, are run
    through the real command, one process each. Returns the cases whose answers differ."""
    picked = random.Random(seed).sample(range(len(cases)), min(count, len(cases)))
    differ = []
    with tempfile.TemporaryDirectory() as empty:
        for k in picked:
            mode, text = cases[k]
            env = dict(os.environ)
            env.pop("P2PGUARD_RULES", None)
            if mode.endswith("-every"):
                env["P2PGUARD_RULES"] = empty
            run = subprocess.run([p2pguard, "explain"] + MODES[mode.split("-")[0]],
                                 input=text.encode("utf-8"), capture_output=True, env=env,
                                 timeout=60)
            if (run.returncode, run.stdout) != results[k]:
                differ.append((mode, text))
    return differ
