#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A one-line explain reads only the built-in rules the line can reach (src/diagnose/rules-gate.h);
this checks that it answers exactly as when it reads them all. P2PGUARD_RULES set to an empty
folder makes explain read every built-in rule, so each text is explained both ways and the
outputs compared byte for byte: every line of the explain sets (--json), and logs made of them
(--json and the text answer with --all), with their lines joined by the three ends of line.

    gate_check.py P2PGUARD EXPLAIN_BATCH SET.jsonl...

The texts run through explain_batch (the command's own function in one process, batch.py), and 40
of them, at random, through the command itself, whose answers must be the same.

P2PG_EXPLAIN_SAMPLE=N checks one text in N (the sanitizer pass; score.py says how they are chosen).
"""
import random
import sys

from batch import check_against_command, explain_many
from score import load, sample_every


def main():
    p2pguard, batch, sets = sys.argv[1], sys.argv[2], sys.argv[3:]
    texts = [row["text"] for name in sets for row in load(name)]
    rng = random.Random(23)
    logs = [rng.choice(["\n", "\r\n", "\n\n"]).join(rng.sample(texts, rng.randint(2, 40)))
            for _ in range(max(12, 120 // sample_every()))]
    # Python tracebacks: the frames above an exception rank the rules of its lines.
    frames = ["reductions.py\", line 181, in rebuild_cuda_tensor", "storage.py\", line 1434, in "
              "_new_shared_cuda", "custom_all_reduce.py\", line 130, in __init__",
              "distributed_c10d.py\", line 2806, in all_reduce", "cupy/cuda/device.pyx\", line 9, "
              "in cupy.cuda.device.Device.enable_peer_access"]
    logs += ["Traceback (most recent call last):\n" + "".join(
        f'  File "/x/{f}\n    code()\n' for f in rng.sample(frames, rng.randint(1, 3)))
        + "\n".join(rng.sample(texts, rng.randint(1, 3))) for _ in range(max(6, 60 // sample_every()))]
    cases = [("json", t) for t in texts if "\n" not in t.strip()]
    cases += [("json", t) for t in logs] + [("all", t) for t in logs]
    answers = explain_many(batch, cases + [(mode + "-every", t) for mode, t in cases])
    gated, every = answers[:len(cases)], answers[len(cases):]
    bad = [f"{mode}: {text[:120]!r}" for (mode, text), a, b in zip(cases, gated, every) if a != b]
    unlike = check_against_command(p2pguard, cases + [(m + "-every", t) for m, t in cases],
                                   answers)
    for mode, text in unlike[:10]:
        print(f"explain_batch and the command differ ({mode}): {text[:120]!r}")
    for d in bad[:10]:
        print("differs:", d)
    print(f"{len(cases)} texts explained with the gated and the whole rule set: "
          f"{len(bad)} answers differ; {len(unlike)} of 40 checked against the command differ")
    return 1 if bad or unlike else 0


if __name__ == "__main__":
    sys.exit(main())
