#!/usr/bin/env python3
"""What a guarded process's database costs: size on disk and the process's wall time, for a fresh
database per run, on the simulated CUDA (no GPU needed) or, with --cuda-lib, the real one.

    scripts/bench-db-footprint.py [BUILD ...] [--runs N] [--cuda-lib DIR] [--torch]

Each BUILD (default: build) is a meson build folder of this tree (another commit's build to
compare; it needs src/preload/ and tests/programs/rt_peer). Programs: `rt_peer basic` (no
failure) and `rt_peer errors` (five failed peer calls); with --torch also a PyTorch process's start
(import torch, one CUDA tensor, synchronise). The builds' runs are interleaved. Prints one table
row per build and program: median and best wall time of N runs, database bytes (after the process
ends, WAL checkpointed), rows of `rules`.
"""
import argparse
import os
import sqlite3
import statistics
import subprocess
import tempfile
import time


TORCH_START = ["python3", "-c",
               "import torch; torch.zeros(1, device='cuda'); torch.cuda.synchronize()"]


def run_once(build, program, folder, cuda_lib):
    db = os.path.join(folder, "p.db")
    env = dict(os.environ)
    for key in list(env):
        if key.startswith("P2PGUARD_") or key.startswith("SIMCUDA_"):
            del env[key]
    env.update(LD_PRELOAD=os.path.join(build, "src/preload/libp2pguard.so"), P2PGUARD_DB=db,
               P2PGUARD_QUIET="1", NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1",
               NVSHMEM_DISABLE_NVLS="1")
    if program[0] == "rt_peer":
        program = [os.path.join(build, "tests/programs/rt_peer")] + program[1:]
        lib = cuda_lib or os.path.join(build, "tests/simcuda")
        env["LD_LIBRARY_PATH"] = lib + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
        if not cuda_lib:
            env["SIMCUDA_DEVICES"] = "2"
    start = time.monotonic()
    subprocess.run(program, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=True)
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
    ap.add_argument("--cuda-lib", help="folder of the real libcudart/libcuda for rt_peer")
    ap.add_argument("--torch", action="store_true", help="also a PyTorch process's start")
    a = ap.parse_args()
    programs = [["rt_peer", "basic"], ["rt_peer", "errors"]] + ([TORCH_START] if a.torch else [])
    results = {}
    for _ in range(a.runs):
        for program in programs:
            for build in a.builds:
                with tempfile.TemporaryDirectory(prefix="p2pg-footprint-") as folder:
                    w, s, r = run_once(build, program, folder, a.cuda_lib)
                got = results.setdefault((build, " ".join(program[:2]) if program[0] == "rt_peer"
                                          else "torch start"), ([], set(), set()))
                got[0].append(w * 1e3)
                got[1].add(s)
                got[2].add(r)
    print("| build | program | wall median (ms) | wall best (ms) | database (KiB) | rules rows |")
    print("|---|---|---|---|---|---|")
    for (build, name), (walls, sizes, rules) in results.items():
        print("| %s | %s | %.1f | %.1f | %s | %s |" % (
            build, name, statistics.median(walls), min(walls),
            "/".join("%.0f" % (s / 1024) for s in sorted(sizes)),
            "/".join(str(r) for r in sorted(rules))))


if __name__ == "__main__":
    main()
