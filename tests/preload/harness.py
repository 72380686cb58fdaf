"""Shared by the preload tests: run a real program under libp2pguard.so, then read the database.

By default programs run against the simulated CUDA in the build tree. With P2PG_REAL_CUDA=1 (as
scripts/gpu-check.sh sets it) they run against the machine's real driver and runtime instead.
"""
import atexit
import functools
import importlib
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

BUILD = os.environ["P2PG_BUILD_ROOT"]
SOURCE = os.environ["P2PG_SOURCE_ROOT"]
LIB = os.path.join(BUILD, "src/preload/libp2pguard.so")
CLI = os.path.join(BUILD, "src/cli/p2pguard")
SIM = os.path.join(BUILD, "tests/simcuda")
PROGRAMS = os.path.join(BUILD, "tests/programs")
REAL = os.environ.get("P2PG_REAL_CUDA") == "1"


def _sanitizer_runtimes(lib):
    """The ASan runtime, as a path for LD_PRELOAD, when lib links it (a -Db_sanitize build).

    The ASan runtime has to be the first object in a process: it refuses to start otherwise (or,
    with verify_asan_link_order=0, misses what was resolved before it). So in a sanitized build
    every process a test starts gets it first in LD_PRELOAD: the instrumented programs (already
    linked to it, so only the order changes), the guard's CLI, and Python, which is not
    instrumented and would load it only with the guard or with the simulated CUDA it opens through
    ctypes. libubsan need not come first; it is loaded with the guard.
    """
    try:
        dynamic = subprocess.run(["readelf", "-d", lib], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return []
    paths = []
    # libtsan (scripts/tsan.sh) has to come first in the same way.
    for soname in re.findall(r"\(NEEDED\)\s+Shared library: \[(lib[at]san\.so[^\]]*)\]", dynamic):
        try:
            path = subprocess.run(os.environ.get("CC", "gcc").split() + ["-print-file-name=" + soname],
                                  capture_output=True, text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            path = soname
        # -print-file-name echoes a name it cannot find; the loader then searches its own path.
        paths.append(path if os.path.isabs(path) else soname)
    return paths


SANITIZER_PRELOAD = _sanitizer_runtimes(LIB)
# ThreadSanitizer slows every instrumented thread 5 to 15 times, the simulated copy engine's included:
# a test of what finishes within a wall-clock budget can only check its accounting there.
THREAD_SANITIZER = any("libtsan" in os.path.basename(p) for p in SANITIZER_PRELOAD)
# Leak checking as the caller's ASAN_OPTIONS has it (ASan's default: on).
LEAK_CHECKS = (re.findall(r"detect_leaks=(\w+)", os.environ.get("ASAN_OPTIONS", "")) or ["1"])[-1] not in ("0", "false")

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
        # The simulated driver honours it as the real one does: a machine's own setting must not
        # hide simulated devices from the tests (a test sets it where it means to).
        env.pop("CUDA_VISIBLE_DEVICES", None)
    preloads = SANITIZER_PRELOAD + ([LIB] if preload else [])
    if SANITIZER_PRELOAD:
        # The guard's own crash handler is under test (a crash row, the signal re-raised, a
        # program's handler such as Python's faulthandler still run): ASan must not take fatal
        # signals over and turn a SIGSEGV into its report and exit status 1. Memory errors that
        # the instrumentation finds are still reported.
        # LeakSanitizer is off here and on in run() for the programs built with the sanitizer:
        # Python, which the preload tests also run, never frees its objects at exit.
        env["ASAN_OPTIONS"] = ":".join(filter(None, [env.get("ASAN_OPTIONS"),
                                                     "handle_segv=0:handle_sigbus=0:handle_sigfpe=0",
                                                     "detect_leaks=0"]))
    if preloads:
        env["LD_PRELOAD"] = ":".join(preloads)
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


@functools.lru_cache(maxsize=None)
def _instrumented(path):
    """Whether the program at path was built with the sanitizer (links its runtime)."""
    path = shutil.which(path) or path
    try:
        dynamic = subprocess.run(["readelf", "-d", path], capture_output=True, text=True).stdout
    except OSError:
        return False
    return any("[" + os.path.basename(r) in dynamic for r in SANITIZER_PRELOAD)


def run(args, db=None, preload=True, check=True, timeout=120, **extra):
    env = environment(db, preload, **extra)
    if SANITIZER_PRELOAD and LEAK_CHECKS and _instrumented(args[0]):
        env["ASAN_OPTIONS"] += ":detect_leaks=1"  # the guard's leaks show in the test programs
    proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=timeout)
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


_folders = []


@atexit.register
def _remove_folders():
    # P2PG_KEEP_TEMP=1 keeps the databases and spools for a look after a failure.
    if os.environ.get("P2PG_KEEP_TEMP") == "1":
        return
    for folder in _folders:
        shutil.rmtree(folder, ignore_errors=True)


def tempfolder():
    """A new folder under $TMPDIR, removed when the test exits (done() or an exception)."""
    folder = tempfile.mkdtemp(prefix="p2pg-test-")
    _folders.append(folder)
    return folder


@functools.lru_cache(maxsize=None)
def database_footprint():
    """Bytes a first guarded run leaves on disk (the database, its WAL and shared-memory files),
    which grows with the schema and what a database stores beside the records. Tests that mount a
    small file system for a full disk size it from this, not from a fixed number."""
    db = tempdb("footprint.db")
    run([program("rt_peer"), "basic"], db=db)
    return sum(os.path.getsize(db + suffix) for suffix in ("", "-wal", "-shm")
               if os.path.exists(db + suffix))


def tmpfs_size(times):
    """A tmpfs size option holding `times` first runs' files, in whole MiB."""
    return "size=%dm" % (times * database_footprint() // (1 << 20) + 1)


def tempdb(name="p2pguard.db"):
    return os.path.join(tempfolder(), name)


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


def copies_returned(counts, threads):
    """The calls each thread of `rt_peer copier COUNTS T` has seen return (it publishes them)."""
    with open(counts, "rb") as f:
        raw = f.read()
    return [int.from_bytes(raw[8 * k:8 * k + 8], "little", signed=True) for k in range(threads)]


def wait_for_copies(counts, threads, at_least=100, timeout=60):
    """Until every copier thread has seen `at_least` calls return: a fixed sleep is not enough time
    on a loaded machine or under the sanitizers."""
    deadline = time.monotonic() + timeout
    while min(copies_returned(counts, threads)) < at_least and time.monotonic() < deadline:
        time.sleep(0.01)


def cli(*args, **extra):
    """The p2pguard command, not preloaded, in the tests' environment."""
    env = environment(preload=False, **extra)
    return subprocess.run([CLI] + list(args), capture_output=True, text=True, env=env, timeout=120)


def use_system_python(*modules):
    """Runs the calling test again under /usr/bin/python3 when a module it needs (a Debian package:
    python3-selenium, python3-jsonschema, ...) is missing from the python3 that runs it (another
    python3, pyenv's say, may come first on PATH). Call it before importing those modules."""
    try:
        for name in modules:
            importlib.import_module(name)
    except ImportError:
        system = "/usr/bin/python3"
        if os.path.exists(system) and os.path.realpath(sys.executable) != os.path.realpath(system):
            os.execv(system, [system] + sys.argv)
        raise
