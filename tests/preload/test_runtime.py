"""A program linked with the shared runtime: every peer call is a row, nothing else is, and the
program behaves exactly as without the guard."""
from harness import *

for name in ("rt_peer", "rt_peer_ptds"):
    db = tempdb()
    bare = run([program(name), "basic"], preload=False)
    guarded = run([program(name), "basic"], db=db)
    equal(guarded.stdout, bare.stdout, name + ": same output with and without the guard")
    equal(guarded.stderr, "", name + ": nothing on stderr")
    exp = expectations(guarded.stdout)
    equal(scalar(db, "SELECT count(*) FROM transfers"), exp["transfers"], name + ": a row per cross-device copy")
    equal(scalar(db, "SELECT sum(bytes) FROM transfers"), exp["bytes"], name + ": bytes match the calls")
    equal(scalar(db, "SELECT count(*) FROM peer_access"), exp["peer_access"], name + ": a row per peer access call")
    equal(scalar(db, "SELECT count(*) FROM failures"), 0, name + ": no failures")
    equal(scalar(db, "SELECT count(*) FROM transfers WHERE status != 0"), 0, name + ": every copy succeeded")
    rows = query(db, "SELECT pid, mode, guard_version FROM processes")
    equal(len(rows), 1, name + ": one process row")
    equal(rows[0][1], "observe", name + ": mode observe")
    apis = {r[0] for r in query(db, "SELECT DISTINCT api FROM transfers")}
    if name == "rt_peer":
        equal(apis, {"cudaMemcpyPeer", "cudaMemcpyPeerAsync", "cudaMemcpyAsync", "cudaMemcpy", "cudaMemcpy3DPeer"},
              name + ": runtime APIs as called")
    else:
        equal(apis, {"cudaMemcpyPeer", "cudaMemcpyPeerAsync", "cudaMemcpyAsync_ptsz", "cudaMemcpy_ptds",
                     "cudaMemcpy3DPeer_ptds"}, name + ": per-thread-stream forms as called")
    if exp["p2p"]:
        first = query(db, "SELECT path FROM transfers ORDER BY id LIMIT 1")[0][0]
        last = query(db, "SELECT path FROM transfers ORDER BY id DESC LIMIT 1")[0][0]
        equal(first, "p2p", name + ": path p2p while peer access is enabled")
        equal(last, "driver", name + ": path driver after it is disabled")
    equal(scalar(db, "SELECT count(*) FROM transfers WHERE src_device = dst_device"), 0,
          name + ": same-device copies are not recorded")
    equal(scalar(db, "SELECT count(*) FROM transfers WHERE host_ns IS NULL OR host_ns <= 0"), 0,
          name + ": every transfer has its host time")
    # A synchronous copy between device memory returns before the copy ends (on an H200 a 1 GiB
    # cudaMemcpyPeer returned after 16 us of its 519): its GPU time comes from timing events like
    # an asynchronous copy's, never from the call's duration.
    sync = "api IN ('cudaMemcpyPeer', 'cudaMemcpy', 'cudaMemcpy_ptds', 'cudaMemcpyPeer_ptds')"
    check(scalar(db, "SELECT count(*) FROM transfers WHERE %s AND gpu_ns > 0" % sync) > 0,
          name + ": synchronous copies are GPU-timed (sampled)")
    equal(scalar(db, "SELECT count(*) FROM transfers WHERE %s AND gpu_ns = host_ns" % sync), 0,
          name + ": no synchronous copy takes its call's duration as its GPU time")
    equal(scalar(db, "PRAGMA integrity_check"), "ok", name + ": database integrity")
    for timing, timed in (("off", 0), ("all", exp["transfers"])):
        db = tempdb()
        run([program(name), "basic"], db=db, P2PGUARD_GPU_TIMING=timing)
        equal(scalar(db, "SELECT count(*) FROM transfers WHERE %s AND gpu_ns > 0" % sync),
              scalar(db, "SELECT count(*) FROM transfers WHERE %s" % sync) if timed else 0,
              name + ": P2PGUARD_GPU_TIMING=%s: synchronous copies %s" % (timing, "all GPU-timed" if timed else "untimed"))

done()
