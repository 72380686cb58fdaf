#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A one-line explain reads only the built-in rules the line can reach (src/diagnose/rules-gate.h);
this checks that it answers exactly as when it reads them all. P2PGUARD_RULES set to an empty
folder makes explain read every built-in rule, so each text is explained both ways and the
outputs compared byte for byte: every line of the explain sets (--json), and logs made of them
(--json and the text answer with --all), with their lines joined by the three ends of line.

    gate_check.py P2PGUARD SET.jsonl...
"""
import os
import random
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

from score import load


def main():
    p2pguard, sets = sys.argv[1], sys.argv[2:]
    texts = [row["text"] for name in sets for row in load(name)]
    rng = random.Random(23)
    logs = [rng.choice(["\n", "\r\n", "\n\n"]).join(rng.sample(texts, rng.randint(2, 40)))
            for _ in range(120)]
    # Python tracebacks: the frames above an exception rank the rules of its lines.
    frames = ["reductions.py\", line 181, in rebuild_cuda_tensor", "storage.py\", line 1434, in "
              "_new_shared_cuda", "custom_all_reduce.py\", line 130, in __init__",
              "distributed_c10d.py\", line 2806, in all_reduce", "cupy/cuda/device.pyx\", line 9, "
              "in cupy.cuda.device.Device.enable_peer_access"]
    logs += ["Traceback (most recent call last):\n" + "".join(
        f'  File "/x/{f}\n    code()\n' for f in rng.sample(frames, rng.randint(1, 3)))
        + "\n".join(rng.sample(texts, rng.randint(1, 3))) for _ in range(60)]
    with tempfile.TemporaryDirectory() as empty:
        every_rule = dict(os.environ, P2PGUARD_RULES=empty)
        gated = dict(os.environ)
        gated.pop("P2PGUARD_RULES", None)

        def differs(case):
            args, text = case
            runs = [subprocess.run([p2pguard, "explain"] + args, input=text.encode(),
                                   capture_output=True, env=env, timeout=60)
                    for env in (gated, every_rule)]
            if (runs[0].returncode, runs[0].stdout) == (runs[1].returncode, runs[1].stdout):
                return None
            return f"{' '.join(args)}: {text[:120]!r}"

        cases = [(["--json", "-"], t) for t in texts if "\n" not in t.strip()]
        cases += [(["--json", "-"], t) for t in logs] + [(["--all", "-"], t) for t in logs]
        with ThreadPoolExecutor(4) as pool:
            bad = [d for d in pool.map(differs, cases) if d]
    for d in bad[:10]:
        print("differs:", d)
    print(f"{len(cases)} texts explained with the gated and the whole rule set: "
          f"{len(bad)} answers differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
