"""Shared by the NCCL tests: the simulated NCCL (simnccl) under the guard, and its database."""
import json
import os
import subprocess
import sys

from harness import *  # noqa: F401,F403 (the preload tests' harness)
from harness import BUILD, LIB, environment

SIMNCCL = os.path.join(BUILD, "tests/nccl/simnccl")
PLUGINS = os.path.join(BUILD, "tests/nccl")


def sim_env(db=None, preload=True, **extra):
    env = environment(db=db, preload=preload, **extra)
    # The user's own plugins (libnccl-profiler-count.so) are found by name, as NCCL finds them.
    env["LD_LIBRARY_PATH"] = PLUGINS + ":" + env.get("LD_LIBRARY_PATH", "")
    return env


def sim(args, db=None, preload=True, check=True, timeout=120, **extra):
    """Runs simnccl ARGS to its end; returns the CompletedProcess."""
    env = sim_env(db, preload, **extra)
    proc = subprocess.run([SIMNCCL] + [str(a) for a in args], env=env, capture_output=True,
                          text=True, timeout=timeout)
    if check and proc.returncode != 0:
        sys.stderr.write(proc.stdout + proc.stderr)
        raise SystemExit("simnccl %s exited with %d" % (" ".join(map(str, args)), proc.returncode))
    return proc


def sim_start(args, db=None, preload=True, **extra):
    """Starts simnccl ARGS (a scenario that waits, such as stuck); returns the Popen."""
    env = sim_env(db, preload, **extra)
    return subprocess.Popen([SIMNCCL] + [str(a) for a in args], env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def loaded_line(stderr):
    for line in stderr.splitlines():
        if line.startswith("simnccl: loaded"):
            return line
    return None


def counts(path):
    """The JSON lines the test plugin wrote, one per communicator."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def nccl_job(db, stall=True, copies=True):
    """A small job's database with every kind of NCCL row, written by the guard under the
    simulated NCCL: four ranks in four processes running `mixed` on one communicator (ring sends
    and receives with the next and the previous rank beside all-reduces, broadcasts, reduce-
    scatters and all-gathers in groups: point-to-point pairs); two ranks of a two-rank
    communicator all-reducing (collective pairs), the second in P2PGUARD_RECORD=summary (its
    operations in summary buckets); with stall, two ranks of a third communicator stuck in an
    all-reduce until the drainer writes their nccl_stalls rows, then killed and recovered (their
    operations unreported); with copies, rt_peer's copies beside them. Each process has its
    rank in RANK."""
    import signal
    import time
    procs = []
    for rank in range(4):
        procs.append(sim_start(["--rank", rank, "--nranks", 4, "--comm", "00000000000a11a1", "--device", rank,
                                "mixed", 3], db=db, SIMCUDA_DEVICES=4, RANK=rank))
    for rank in range(2):
        procs.append(sim_start(["--rank", rank, "--nranks", 2, "--comm", "00000000000b22b2", "--device", rank,
                                "allreduce", 5, 1 << 19], db=db, SIMCUDA_DEVICES=4, RANK=rank,
                               P2PGUARD_RECORD="summary" if rank == 1 else None))
    for p in procs:
        out, err = p.communicate(timeout=120)
        if p.returncode != 0:
            raise SystemExit("simnccl exited with %d: %s" % (p.returncode, err))
    if stall:
        # Both ranks are started before either is waited for, and given 3 s before their stall
        # row: a rank's row says what its peer was doing when it was written, and a peer still
        # starting (a slow machine, the sanitizers) is "elsewhere".
        stuck = [sim_start(["--rank", rank, "--nranks", 2, "--comm", "00000000000c33c3", "--device", rank + 2,
                            "stuck", "AllReduce", 4], db=db, SIMCUDA_DEVICES=4, RANK=rank + 2,
                           P2PGUARD_STALL_S=3)
                 for rank in range(2)]
        for p in stuck:
            if p.stdout.readline().strip() != "ready":
                raise SystemExit("simnccl stuck did not start")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if len(query(db, "SELECT 1 FROM nccl_stalls WHERE comm_hash = '00000000000c33c3'")) >= 2:
                    break
            except Exception:
                pass  # the table may not exist yet
            time.sleep(0.1)
        for p in stuck:
            p.send_signal(signal.SIGKILL)
            p.communicate(timeout=30)
        cli("recover", db)
    if copies:
        run([program("rt_peer"), "basic"], db=db, RANK=0)
