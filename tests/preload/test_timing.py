"""GPU time of asynchronous copies: events around the copy on its own stream, read by the drainer
once the copy is done. `all` times every copy an event pair is free for, `sampled` about one in
P2PGUARD_GPU_TIMING_EVERY, `off` none; staged copies are timed the same way."""
from harness import *


def timed(mode, timing, every=None):
    db = tempdb()
    extra = {"P2PGUARD_MODE": mode, "P2PGUARD_GPU_TIMING": timing, "SIMCUDA_COPY_NS_PER_BYTE": 20}
    if every:
        extra["P2PGUARD_GPU_TIMING_EVERY"] = every
    run([program("rt_peer"), "threads", "2", "3000"], db=db, **extra)
    total = scalar(db, "SELECT count(*) FROM transfers")
    with_gpu = scalar(db, "SELECT count(gpu_ns) FROM transfers")
    bad = scalar(db, "SELECT count(*) FROM transfers WHERE gpu_ns <= 0")
    return total, with_gpu, bad


total, with_gpu, bad = timed("observe", "all")
check(with_gpu >= total // 2, "all: most async copies carry their GPU time (%d of %d)" % (with_gpu, total))
equal(bad, 0, "all: every GPU time is positive")
total, with_gpu, bad = timed("observe", "sampled", 16)
check(0 < with_gpu <= total // 8, "sampled 1/16: a sample of the copies is timed (%d of %d)" % (with_gpu, total))
total, with_gpu, bad = timed("observe", "off")
equal(with_gpu, 0, "off: no async copy is timed")
total, with_gpu, bad = timed("staged", "all")
check(with_gpu >= total // 2, "staged copies are timed too (%d of %d)" % (with_gpu, total))
done()
