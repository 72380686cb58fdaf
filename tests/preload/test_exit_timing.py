"""A short-lived program keeps every GPU time: its asynchronous copies' times are resolved on the
way out, before the CUDA runtime's exit handler destroys the contexts (and their events), and a
crash takes what has completed. The simulated runtime tears down at exit as the real one does (an
atexit handler, registered when it initialises, releases its primary contexts), so the order is
under test here: the same program with the guard's exit pass registered before the runtime's
(P2PGUARD_TEST=exit-early) finds the events destroyed. The exit never waits for a copy."""
import re
import signal
import time

from harness import *

EXIT_COPIES = program("exit_copies")


def copies(mode, timing, n=50, check_rc=True, **extra):
    db = tempdb()
    start = time.monotonic()
    extra.setdefault("P2PGUARD_TEST", "exit-report")
    proc = run([EXIT_COPIES, mode, str(n)], db=db, check=check_rc, P2PGUARD_GPU_TIMING=timing,
               **extra)
    took = time.monotonic() - start
    rows = query(db, "SELECT count(*), count(gpu_ns), count(CASE WHEN gpu_ns > 0 THEN 1 END) "
                     "FROM transfers")[0]
    return db, proc, took, rows


def exit_report(proc):
    """The exit pass's counts: pending, resolved, still running, unreadable (-1 each if unprinted)."""
    m = re.search(r"pending (\d+), resolved (\d+), still running (\d+), unreadable (\d+)", proc.stderr)
    return tuple(map(int, m.groups())) if m else (-1, -1, -1, -1)


for timing in ("all", "cupti"):
    # 50 copies of 1 MiB, synchronised, then main returns: every one has its GPU time.
    db, proc, took, rows = copies("peer", timing)
    equal(rows, (50, 50, 50), "%s: 50 async copies, synchronised, return from main: 50 of 50 "
          "with their GPU time" % timing)
    equal(scalar(db, "SELECT recovered FROM processes"), 0,
          "%s: the process's rows were all imported at its exit (no recovery)" % timing)
    check("pending" in proc.stderr and "unreadable 0" in proc.stderr,
          "%s: the exit pass read them all (%s)" % (timing, proc.stderr.strip()))
    # The same leaving through exit() from inside a function.
    db, proc, took, rows = copies("exit", timing)
    equal(rows, (50, 50, 50), "%s: the same program leaving through exit(0): 50 of 50" % timing)
    # Copies that never had time to finish: rows complete, no GPU time invented, no wait.
    db, proc, took, rows = copies("nosync", timing, SIMCUDA_COPY_NS_PER_BYTE=2)
    equal(rows[0], 50, "%s: no synchronise before returning: every row is there" % timing)
    check(took < 10, "%s: ... and the exit did not wait for the GPU (%.1f s)" % (timing, took))

# Copies still running when main returns without synchronising, done well within the exit's 100 ms
# (50 x 1 MiB at 0.2 ns a byte: 10 ms on the simulated copy engine): the exit asks their events
# again until they answer, so every one keeps its GPU time, where the first ask alone lost those
# still running.
db, proc, took, rows = copies("nosync", "all", SIMCUDA_COPY_NS_PER_BYTE=0.2, P2PGUARD_TEST="exit-report")
pending, resolved, running, unreadable = exit_report(proc)
check(pending >= 0, "the exit pass reported what it found (%s)" % proc.stderr.strip())
if not THREAD_SANITIZER:
    equal(rows, (50, 50, 50), "copies still running at exit, finishing within 100 ms: 50 of 50 with "
          "their GPU time (%s)" % proc.stderr.strip())
    equal(running, 0, "... and none left running when the exit pass ended (%s)" % proc.stderr.strip())
else:
    # Under TSan the same copies may outlast the exit's budget: every row is there, and each copy
    # has a GPU time exactly when the pass (or the drainer before it) saw it finish.
    equal(rows[0], 50, "TSan: copies still running at exit: every row is there")
    check(resolved + running + unreadable == pending and rows[1] == rows[2] == 50 - running - unreadable,
          "TSan: the exit pass's account adds up: %d of 50 timed, %d left running (%s)"
          % (rows[1], running, proc.stderr.strip()))

# Registered before the runtime's, the same pass finds the primary contexts gone: this is what the
# simulated runtime's teardown does to events, and why the order matters. (What the drainer read
# while the program still ran keeps its time; every event still waiting at exit is lost.)
# A drainer that happens to read every event before the exit leaves the pass nothing to lose: run
# again (a few times at most) until something is pending at exit.
for attempt in range(5):
    db, proc, took, rows = copies("peer", "all", P2PGUARD_TEST="exit-report,exit-early")
    pending, resolved, running, unreadable = exit_report(proc)
    if pending != 0:
        break
check(pending > 0 and resolved == 0 and unreadable == pending and rows[1] == 50 - pending,
      "exit pass registered before the runtime's (exit-early): every time still pending at exit "
      "(%d) is lost to the teardown; %d of 50 were read while the program ran" % (pending, rows[1]))
check("CUDA_ERROR_CONTEXT_IS_DESTROYED" in proc.stderr,
      "exit-early: the events of the destroyed contexts answer CONTEXT_IS_DESTROYED (%s)"
      % proc.stderr.strip())

# A copy that never completes (its stream is stuck) does not hold the exit up.
db, proc, took, rows = copies("hang", "all", n=20, SIMCUDA_P2P_HANG="0-1")
equal((rows[0], rows[1]), (20, 0), "a stuck P2P copy at exit: 20 rows, no GPU time")
check(took < 10 and "still running 20" in proc.stderr,
      "a stuck P2P copy at exit: the exit pass asked and went on (%.1f s; %s)"
      % (took, proc.stderr.strip()))

# A crash right after the copies finished: the copies keep their GPU times.
for timing in ("all", "cupti"):
    db, proc, took, rows = copies("crash", timing, check_rc=False)
    equal(proc.returncode, -signal.SIGSEGV, "%s: the program died of its SIGSEGV" % timing)
    equal(scalar(db, "SELECT count(*) FROM crashes"), 1, "%s: the crash row is there" % timing)
    equal(rows, (50, 50, 50), "%s: a crash after 50 synchronised copies: 50 of 50 keep their GPU time"
          % timing)

# The hook scripts/gpu-parts/truth.sh uses on one GPU: copies within one device are recorded and
# timed as peer copies would be, CUPTI's records of them included. Without it they are not copies
# the guard records.
for timing in ("all", "cupti"):
    db, proc, took, rows = copies("local", timing, SIMCUDA_DEVICES="1",
                                  P2PGUARD_TEST="local-copies,exit-report")
    equal(rows, (50, 50, 50), "%s, one device, P2PGUARD_TEST=local-copies: 50 of 50 with their GPU time"
          % timing)
db, proc, took, rows = copies("local", "all", SIMCUDA_DEVICES="1")
equal(rows[0], 0, "without the hook a copy within one device is no transfer of the guard's")
db, proc, took, rows = copies("peer", "all", P2PGUARD_TEST="exit-report,sideways")
lines = proc.stderr.splitlines()
check(len([l for l in lines if "P2PGUARD_TEST=" in l and "sideways" in l]) == 1 and rows == (50, 50, 50),
      "an unknown P2PGUARD_TEST word: one line naming it, the known ones kept (%s)" % proc.stderr.strip())

done()
