"""P2PGUARD_GPU_TIMING=cupti: every asynchronous peer copy gets its GPU time from CUPTI's activity
records, matched to its row by stream, order, size and devices; CUPTI starts when the program
initialises the driver, so a process that never uses CUDA never loads it, and by default
(sampled events) no process does; staged copies keep event timing; where CUPTI cannot be had, or a
profiler takes it over, the program runs on with one line on stderr and sampled events."""
from harness import *


def cupti_run(args, mode="observe", **extra):
    db = tempdb()
    env = dict(P2PGUARD_GPU_TIMING="cupti")
    env.update(extra)
    proc = run([program("rt_peer")] + list(args), db=db, P2PGUARD_MODE=mode, SIMCUDA_COPY_NS_PER_BYTE=20, **env)
    return db, proc


def loads_cupti(proc):
    """What the dynamic loader said it opened (LD_DEBUG=files)."""
    return any("libcupti" in l and "file=" in l for l in proc.stderr.splitlines())


# Back-to-back bursts from four threads on their own streams: every copy is timed. GPU times are
# read while the program lives: it goes on 1.5 s after the burst, for a drainer slowed by ASan.
db, proc = cupti_run(("threads", "4", "2000", "1500"), LD_DEBUG="files")
check(loads_cupti(proc), "a program that copies between devices gets CUPTI")
total = scalar(db, "SELECT count(*) FROM transfers")
equal(total, expectations(proc.stdout)["transfers"], "every copy has its row")
equal(scalar(db, "SELECT count(gpu_ns) FROM transfers"), total, "every async copy of a burst has its GPU time")
equal(scalar(db, "SELECT count(*) FROM transfers WHERE gpu_ns <= 0"), 0, "every GPU time is positive")
if not REAL:
    # The simulation runs a 256 B copy for at least 256 x 20 ns on its stream (by CLOCK_MONOTONIC;
    # CUPTI's times are CLOCK_REALTIME, which NTP may slew by a hair); CUPTI's record says so.
    equal(scalar(db, "SELECT count(*) FROM transfers WHERE gpu_ns BETWEEN bytes * 19 AND 10000000000"), total,
          "each GPU time is its own copy's duration, not a neighbour's")

# Copies far apart, on an idle stream: timed too.
db, proc = cupti_run(("spaced", "100", "200"))
equal(tuple(query(db, "SELECT count(*), count(gpu_ns) FROM transfers")[0]), (100, 100), "copies 200 us apart: all timed")

# Over P2P, as PyTorch copies: cudaMemcpyAsync on the legacy default stream, peer access enabled.
db, proc = cupti_run(("spaced", "100", "200", "p2p"))
equal(tuple(query(db, "SELECT count(*), count(gpu_ns) FROM transfers WHERE path = 'p2p'")[0]), (100, 100),
      "P2P copies on the default stream: all timed")
if not REAL:
    equal(scalar(db, "SELECT count(*) FROM transfers WHERE gpu_ns BETWEEN bytes * 19 AND 10000000000"), 100,
          "each with its copy's duration")

# Streams created and destroyed one after another (their handles come back for new streams): each
# copy is paired with its own record, by size (every copy here has its own).
db, proc = cupti_run(("streams", "60"))
equal(tuple(query(db, "SELECT count(*), count(gpu_ns) FROM transfers")[0]), (60, 60),
      "copies on short-lived streams: all timed")
if not REAL:
    equal(scalar(db, "SELECT count(*) FROM transfers WHERE gpu_ns BETWEEN bytes * 19 AND 10000000000"), 60,
          "each with its own copy's duration (sizes differ)")

# Staged copies are two copies through the host, which CUPTI does not record as peer copies: they
# keep event timing (sampled: the burst gets some).
db, proc = cupti_run(("threads", "2", "500", "500"), mode="staged")
equal(scalar(db, "SELECT count(*) FROM transfers WHERE path = 'staged'"), 1000, "staged copies recorded")
check(0 < scalar(db, "SELECT count(gpu_ns) FROM transfers") < 1000, "staged copies keep sampled event timing")

# A process that never initialises CUDA (a shell, a tool a job starts, with the guard preloaded
# all the same) never loads CUPTI.
proc = run(["sh", "-c", "true"], db=tempdb(), P2PGUARD_GPU_TIMING="cupti", LD_DEBUG="files")
check(not loads_cupti(proc), "no CUDA, no CUPTI")

# The program's first CUDA call is one the guard intercepts, inside which the runtime initialises
# the driver: CUPTI starts there all the same, and times every copy of the burst that follows.
db, proc = cupti_run(("peer-first", "2000"), LD_DEBUG="files")
check(loads_cupti(proc), "first call intercepted: CUPTI loaded")
equal(tuple(query(db, "SELECT count(*), count(gpu_ns) FROM transfers WHERE api = 'cudaMemcpyPeerAsync'")[0]),
      (2000, 2000), "first call intercepted: every copy of the burst timed")

# The default (sampled events) leaves CUPTI alone: events, one per 50 us of a burst.
db, proc = cupti_run(("threads", "2", "2000", "500"), P2PGUARD_GPU_TIMING=None, LD_DEBUG="files")
check(not loads_cupti(proc), "the default: no CUPTI")
check(0 < scalar(db, "SELECT count(gpu_ns) FROM transfers") < 4000, "the default: events for some of a burst")

# A profiler takes CUPTI over mid-run (its own activity callbacks), then stops and switches copy
# tracing off: the guard, hearing nothing for 10 s while rows wait, says so once and goes back to
# events; the profiler keeps every record it was given.
db, proc = cupti_run(("profiler", "100"), P2PGUARD_QUIET=None)
lines = [l for l in proc.stderr.splitlines() if "CUPTI has delivered nothing" in l]
equal(len(lines), 1, "one line when a profiler has taken CUPTI over")
check("timing events sampled instead" in lines[0] if lines else False, "it says what happens instead")
equal(scalar(db, "SELECT count(*) FROM transfers"), 850, "every copy recorded")
equal(scalar(db, "SELECT count(gpu_ns) FROM (SELECT gpu_ns FROM transfers ORDER BY id LIMIT 100)"), 100,
      "copies before the profiler: timed")
equal(scalar(db, "SELECT count(gpu_ns) FROM (SELECT gpu_ns FROM transfers ORDER BY id DESC LIMIT 50)"), 50,
      "copies after the guard went back to events: timed")
check(expectations(proc.stdout, "PROFILER").get("records", 0) >= 100,
      "the profiler received its records: %r" % expectations(proc.stdout, "PROFILER"))

# An empty copy leaves no record, and nothing else is copied for 12 s: that is not a profiler
# taking CUPTI over, and the copies after it are timed by CUPTI.
db, proc = cupti_run(("empty-idle", "2000"), P2PGUARD_QUIET=None)
check(not any("delivered nothing" in l for l in proc.stderr.splitlines()),
      "an empty copy and a quiet spell: CUPTI kept (%r)" % proc.stderr[-300:])
equal(scalar(db, "SELECT count(gpu_ns) FROM transfers WHERE bytes = 256"), 2000,
      "the copies after the quiet spell: all timed")

if not REAL:
    # CUPTI refuses: one line, the program runs on, events sampled.
    db, proc = cupti_run(("threads", "2", "300", "300"), SIMCUDA_CUPTI_FAIL=1, P2PGUARD_QUIET=None)
    lines = [l for l in proc.stderr.splitlines() if "GPU times of peer copies" in l]
    equal(len(lines), 1, "one line on stderr when CUPTI refuses")
    check("timing events sampled instead" in lines[0] if lines else False, "it says what happens instead: %r" % lines)
    equal(scalar(db, "SELECT count(*) FROM transfers"), 600, "the program ran on, recorded")
    check(0 < scalar(db, "SELECT count(gpu_ns) FROM transfers") < 600, "with sampled event timing")

    # A profiler injected into the driver owns CUPTI: the guard leaves it alone.
    db, proc = cupti_run(("threads", "1", "100", "300"), CUDA_INJECTION64_PATH="/opt/profiler/libinject.so",
                         P2PGUARD_QUIET=None)
    check(any("a profiler owns CUPTI" in l for l in proc.stderr.splitlines()), "a profiler's CUPTI is left alone")
    equal(scalar(db, "SELECT count(*) FROM transfers"), 100, "and the copies are recorded")
done()
