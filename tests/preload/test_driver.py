"""Driver API reached through cuGetProcAddress only (as a static runtime does), and through dlsym."""
from harness import *

for how in ("procaddr", "dlsym"):
    db = tempdb()
    bare = run([program("drv_peer"), how, "basic"], preload=False)
    guarded = run([program("drv_peer"), how, "basic"], db=db)
    equal(guarded.stdout, bare.stdout, how + ": same output with and without the guard")
    exp = expectations(guarded.stdout)
    equal(scalar(db, "SELECT count(*) FROM transfers"), exp["transfers"], how + ": a row per cross-device copy")
    equal(scalar(db, "SELECT sum(bytes) FROM transfers"), exp["bytes"], how + ": bytes match")
    equal(scalar(db, "SELECT count(*) FROM peer_access"), exp["peer_access"], how + ": peer access calls")
    apis = {r[0] for r in query(db, "SELECT DISTINCT api FROM transfers")}
    equal(apis, {"cuMemcpyPeer", "cuMemcpyPeerAsync", "cuMemcpyPeerAsync_ptsz", "cuMemcpy", "cuMemcpyAsync",
                 "cuMemcpyDtoD_v2", "cuMemcpyDtoDAsync_v2_ptsz"}, how + ": ABI names, per-thread forms included")
    equal(scalar(db, "SELECT count(*) FROM transfers WHERE src_device = 0 AND dst_device = 1"), exp["transfers"],
          how + ": devices from contexts and pointers")

    # A context handle can come back for a new context on another device (the simulation always
    # hands a destroyed one's out again): the devices must follow the context, not the handle.
    db = tempdb()
    out = run([program("drv_peer"), how, "ctx-reuse"], db=db, P2PGUARD_GPU_TIMING="all").stdout
    equal(query(db, "SELECT src_device, dst_device, bytes, gpu_ns > 0 FROM transfers ORDER BY started_ns"),
          [(0, 1, 4096, 1), (0, 1, 1024, 1), (1, 0, 2048, 1), (1, 0, 512, 1)],
          how + ": a new context under a reused handle: its own device, its copies timed (%s)" % out.strip())

done()
