#!/usr/bin/env python3
"""What a guarded process's database costs: size on disk and the process's wall time, for a fresh
database per run, on the simulated CUDA (no GPU needed).

    scripts/bench-db-footprint.py [BUILD ...] [--runs N]

Each BUILD (default: build) is a meson build folder of this tree (another commit's build to
compare). Two programs: `rt_peer basic` (no failure) and `rt_peer errors` (five failed peer calls).
Prints one table row per build and program: median and best wall time of N runs, database bytes
(after the process ends, WAL checkpointed), rows of `rules`.
"""
import argparse
import os
import sqlite3
import statistics
import subprocess
import tempfile
import time


def run_once(build, args, folder):
    db = os.path.join(folder, "p.db")
    env = dict(os.environ)
    for key in list(env):
        if key.startswith("P2PGUARD_") or key.startswith("SIMCUDA_"):
            del env[key]
    env.update(LD_LIBRARY_PATH=os.path.join(build, "tests/simcuda"), SIMCUDA_DEVICES="2",
               LD_PRELOAD=os.path.join(build, "src/preload/libp2pguard.so"), P2PGUARD_DB=db,
               P2PGUARD_QUIET="1")
    start = time.monotonic()
    subprocess.run([os.path.join(build, "tests/programs/rt_peer")] + args, env=env,
                   stdout=subprocess.DEVNULL, check=True)
    wall = time.monotonic() - start
    con = sqlite3.connect(db)
    rules = con.execute("SELECT count(*) FROM rules").fetchone()[0]
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    size = os.path.getsize(db)
    return wall, size, rules


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("builds", nargs="*", default=["build"])
    ap.add_argument("--runs", type=int, default=20)
    a = ap.parse_args()
    print("| build | program | wall median (ms) | wall best (ms) | database (KiB) | rules rows |")
    print("|---|---|---|---|---|---|")
    for build in a.builds:
        for args in (["basic"], ["errors"]):
            walls, sizes, rules = [], set(), set()
            for _ in range(a.runs):
                with tempfile.TemporaryDirectory(prefix="p2pg-footprint-") as folder:
                    w, s, r = run_once(build, args, folder)
                walls.append(w * 1e3)
                sizes.add(s)
                rules.add(r)
            print("| %s | rt_peer %s | %.1f | %.1f | %s | %s |" % (
                build, " ".join(args), statistics.median(walls), min(walls),
                "/".join("%.0f" % (s / 1024) for s in sorted(sizes)),
                "/".join(str(r) for r in sorted(rules))))


if __name__ == "__main__":
    main()
