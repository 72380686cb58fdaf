"""Shared by the preload tests: run a real program under libp2pguard.so, then read the database.

By default programs run against the simulated CUDA in the build tree. With P2PG_REAL_CUDA=1 (as
scripts/gpu-check.sh sets it) they run against the machine's real driver and runtime instead.
"""
import os
import re
import sqlite3
import subprocess
import sys
import tempfile

BUILD = os.environ["P2PG_BUILD_ROOT"]
SOURCE = os.environ["P2PG_SOURCE_ROOT"]
LIB = os.path.join(BUILD, "src/preload/libp2pguard.so")
CLI = os.path.join(BUILD, "src/cli/p2pguard")
SIM = os.path.join(BUILD, "tests/simcuda")
PROGRAMS = os.path.join(BUILD, "tests/programs")
REAL = os.environ.get("P2PG_REAL_CUDA") == "1"

# Kept in every environment a test builds: NVLink multicast stays off on multi-GPU machines.
SAFE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}

failures = 0


def program(name):
    return os.path.join(PROGRAMS, name)


def environment(db=None, preload=True, **extra):
    env = dict(os.environ)
    env.update(SAFE_ENV)
    for key in list(env):
        if key.startswith("P2PGUARD_") or key.startswith("SIMCUDA_"):
            del env[key]
    if not REAL:
        env["LD_LIBRARY_PATH"] = SIM + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
        env.setdefault("SIMCUDA_DEVICES", "2")
    if preload:
        env["LD_PRELOAD"] = LIB
    else:
        env.pop("LD_PRELOAD", None)
    if db:
        env["P2PGUARD_DB"] = db
    env["P2PGUARD_QUIET"] = "1"
    for key, value in extra.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = str(value)
    return env


def run(args, db=None, preload=True, check=True, timeout=120, **extra):
    proc = subprocess.run(args, env=environment(db, preload, **extra), capture_output=True,
                          text=True, timeout=timeout)
    if check and proc.returncode != 0:
        sys.stderr.write(proc.stdout + proc.stderr)
        raise SystemExit("%s exited with %d" % (" ".join(args), proc.returncode))
    return proc


def expectations(stdout, prefix="EXPECT"):
    found = {}
    for line in stdout.splitlines():
        if line.startswith(prefix + " "):
            for key, value in re.findall(r"(\w+)=(\S+)", line):
                found[key] = int(value) if re.fullmatch(r"-?\d+", value) else value
    return found


def query(db, sql, *params):
    con = sqlite3.connect(db)
    try:
        return con.execute(sql, params).fetchall()
    finally:
        con.close()


def scalar(db, sql, *params):
    rows = query(db, sql, *params)
    return rows[0][0] if rows else None


def tempdb(name="p2pguard.db"):
    folder = tempfile.mkdtemp(prefix="p2pg-test-")
    return os.path.join(folder, name)


def check(condition, what):
    """One line per check, TAP style, so a failing run says exactly what broke."""
    global failures
    if condition:
        print("ok - " + what)
    else:
        failures += 1
        print("not ok - " + what)


def equal(actual, expected, what):
    check(actual == expected, "%s (%r == %r)" % (what, actual, expected))


def done():
    print("%d failed" % failures)
    sys.exit(1 if failures else 0)
