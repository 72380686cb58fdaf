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
    return subprocess.Popen([SIMNCCL] + [str(a) for a in args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


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
