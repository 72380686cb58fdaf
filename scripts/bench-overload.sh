#!/usr/bin/env bash
# Overload as a table (simulated CUDA, no GPU): T threads copying 256 B peer copies in a tight loop
# (`rt_peer flood`), SECONDS seconds, then SIGKILL and `p2pguard recover`; at 1, 4 and 16 threads.
#   scripts/bench-overload.sh [BUILD_DIR] [SECONDS] [REPEATS]
# Columns: calls that returned; rows in transfers; calls folded into transfer_overflow; records
# dropped (processes.records_dropped); lost = calls - rows - folded (0, or 1 per thread for a call
# the kill cut between being recorded and being counted by the program); ns/call = CPU time the
# run had (SECONDS x min(T, CPUs)) per call, with the guard and without it, and the difference.
# The guard's figure includes its drainer, which competes with the copiers for the same CPUs.
# Each thread count runs REPEATS (default 3) times with the guard and without it, interleaved; the
# row shown is the guarded run of median cost, and "unguarded" the median of the bare runs.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
seconds=${2:-3}
repeats=${3:-3}
[ -f "$build/build.ninja" ] || meson setup "$build" >/dev/null
ninja -C "$build" src/preload/libp2pguard.so src/cli/p2pguard tests/programs/rt_peer >/dev/null
dir=$(mktemp -d /tmp/p2pguard-overload.XXXXXX)
trap 'rm -rf "$dir"' EXIT
python3 - "$build" "$seconds" "$dir" "$repeats" <<'PY'
import os, sqlite3, statistics, subprocess, sys, time

build, seconds, tmp, repeats = sys.argv[1], float(sys.argv[2]), sys.argv[3], int(sys.argv[4])
lib = os.path.abspath(os.path.join(build, "src/preload/libp2pguard.so"))
cli = os.path.join(build, "src/cli/p2pguard")
prog = os.path.join(build, "tests/programs/rt_peer")
sim = os.path.abspath(os.path.join(build, "tests/simcuda"))
cpus = os.cpu_count() or 1


def env(db=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith(("P2PGUARD_", "SIMCUDA_", "LD_PRELOAD"))}
    e["LD_LIBRARY_PATH"] = sim
    e["SIMCUDA_DEVICES"] = "2"
    if db:
        e["LD_PRELOAD"] = lib
        e["P2PGUARD_DB"] = db
        e["P2PGUARD_QUIET"] = "1"
    return e


def flood(threads, db=None):
    counts = os.path.join(tmp, "counts")
    p = subprocess.Popen([prog, "flood", counts, str(threads)], env=env(db), stdout=subprocess.PIPE, text=True)
    p.stdout.readline()  # READY
    time.sleep(seconds)
    p.kill()
    p.wait()
    raw = open(counts, "rb").read()
    return sum(int.from_bytes(raw[8 * k:8 * k + 8], "little", signed=True) for k in range(threads))


print("%-7s %10s %10s %10s %8s %5s %11s %11s %9s" % ("threads", "calls", "rows", "folded", "dropped", "lost",
                                                   "ns/call", "unguarded", "+ns/call"))
def guarded(threads, n):
    db = os.path.join(tmp, "t%d-%d.db" % (threads, n))
    calls = flood(threads, db)
    subprocess.run([cli, "recover", db], env=env(), check=True, capture_output=True)
    c = sqlite3.connect(db)
    rows = c.execute("SELECT count(*) FROM transfers").fetchone()[0]
    folded = c.execute("SELECT coalesce(sum(count), 0) FROM transfer_overflow").fetchone()[0]
    dropped = c.execute("SELECT coalesce(sum(records_dropped), 0) FROM processes").fetchone()[0]
    c.close()
    os.remove(db)
    return calls, rows, folded, dropped


for threads in (1, 4, 16):
    budget = seconds * min(threads, cpus) * 1e9
    bare, runs = [], []
    for n in range(repeats):
        bare.append(budget / flood(threads))
        runs.append(guarded(threads, n))
    runs.sort(key=lambda r: r[0], reverse=True)
    calls, rows, folded, dropped = runs[len(runs) // 2]
    ns, ns_plain = budget / calls, statistics.median(bare)
    print("%-7d %10d %10d %10d %8d %5d %11.0f %11.0f %9.0f" % (threads, calls, rows, folded, dropped,
                                                            calls - rows - folded, ns, ns_plain, ns - ns_plain))
print("(%g s per run, %d runs each, %d CPUs, 256 B cudaMemcpyPeerAsync against the simulated CUDA)"
      % (seconds, repeats, cpus))
PY
