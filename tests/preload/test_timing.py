"""GPU time of asynchronous copies: events around the copy on its own stream, read by the drainer
once the copy is done. `all` times every copy an event pair is free for; `sampled` times every copy of
1 MiB or more and a thread's small copy when the thread timed none for P2PGUARD_GPU_TIMING_INTERVAL_US
(so copies that come further apart are all timed, and a burst gets one per interval); `off` none;
staged copies are timed the same way."""
from harness import *


# The copier lingers a second after its copies, as a program goes on after them: GPU times are read
# only while the process lives (no CUDA call at exit), and a loaded CI machine may need that long
# for the drainer's first pass.
def timed(mode, timing, interval=None, args=("threads", "2", "3000", "1000"), gaps=None):
    db = tempdb()
    extra = {"P2PGUARD_MODE": mode, "P2PGUARD_GPU_TIMING": timing, "SIMCUDA_COPY_NS_PER_BYTE": 20}
    if interval is not None:
        extra["P2PGUARD_GPU_TIMING_INTERVAL_US"] = interval
    run([program("rt_peer")] + list(args), db=db, **extra)
    total = scalar(db, "SELECT count(*) FROM transfers")
    with_gpu = scalar(db, "SELECT count(gpu_ns) FROM transfers")
    bad = scalar(db, "SELECT count(*) FROM transfers WHERE gpu_ns <= 0")
    if gaps is not None:
        # The gaps between a thread's consecutive timed copies.
        gaps.extend(row[0] for row in query(
            db, "SELECT started_ns - lag(started_ns) OVER (PARTITION BY thread_id ORDER BY started_ns) "
                "AS gap FROM transfers WHERE gpu_ns IS NOT NULL") if row[0] is not None)
    return total, with_gpu, bad


# `all` times a copy when its context has a free event pair (4096 a context, given back as the
# drainer reads them): 2 x 1500 copies fit in the pool whatever the drainer's pace, so a loaded
# machine (the sanitizer pass) cannot turn a slow drainer into untimed copies here.
ALL = ("threads", "2", "1500", "1000")
total, with_gpu, bad = timed("observe", "all", None, ALL)
check(with_gpu >= total * 95 // 100, "all: the async copies carry their GPU time (%d of %d)" % (with_gpu, total))
equal(bad, 0, "all: every GPU time is positive")
# Back-to-back copies of 256 B from two threads (a third of a second a thread here, longer under the
# sanitizers), sampled once a millisecond: a thread times a copy only when it timed none for 1 ms,
# so only part of the burst is timed, and a thread's timed copies are 1 ms apart or more (half of it
# allowed for the two clock readings, which are not taken at the same point of a call).
gaps = []
total, with_gpu, bad = timed("observe", "sampled", 1000, gaps=gaps)
check(0 < with_gpu < total, "sampled, a burst: part of it is timed (%d of %d)" % (with_gpu, total))
check(gaps and min(gaps) >= 500000,
      "sampled, a burst: a thread's timed copies come one per interval (closest %.1f us apart)"
      % (min(gaps) / 1000 if gaps else -1))
total, with_gpu, bad = timed("observe", "sampled", 60000000)
check(0 < with_gpu <= 2, "sampled, 60 s interval: each of the 2 threads times its first copy only (%d of %d)" % (with_gpu, total))
total, with_gpu, bad = timed("observe", "sampled", None, ("spaced", "100", "200"))
equal((total, with_gpu, bad), (100, 100, 0), "sampled, copies 200 us apart: every one is timed")
total, with_gpu, bad = timed("observe", "off")
equal(with_gpu, 0, "off: no async copy is timed")
total, with_gpu, bad = timed("staged", "all", None, ALL)
check(with_gpu >= total * 95 // 100, "staged copies are timed too (%d of %d)" % (with_gpu, total))
done()
