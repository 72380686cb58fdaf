"""Guard modes against the simulated CUDA: staged (all pairs, chosen pairs), fallback (no P2P, P2P
that delivers wrong data), and observe with the same fault, which shows the guard is what keeps
the data right."""
import json
import os
import sys
import time
from harness import *

# The runtime through ctypes (PyDLL: the GIL stays held, as py_peer.py explains). Each script prints
# "RESULT key=value ..." lines for the test to read.
PRELUDE = r'''
import ctypes, sys
rt = ctypes.PyDLL("libcudart.so.13")
D2H, H2D = 2, 1
def ok(err, what):
    if err != 0:
        sys.exit("%s failed: %d" % (what, err))
def alloc(device, size):
    ok(rt.cudaSetDevice(device), "cudaSetDevice")
    p = ctypes.c_void_p()
    ok(rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(size)), "cudaMalloc")
    return p
def upload(device, p, data):
    ok(rt.cudaSetDevice(device), "cudaSetDevice")
    ok(rt.cudaMemcpy(p, data, ctypes.c_size_t(len(data)), H2D), "cudaMemcpy H2D")
def download(device, p, size):
    ok(rt.cudaSetDevice(device), "cudaSetDevice")
    buf = ctypes.create_string_buffer(size)
    ok(rt.cudaMemcpy(buf, p, ctypes.c_size_t(size), D2H), "cudaMemcpy D2H")
    return buf.raw
def pattern(size, seed):
    return bytes((seed + k * 131) & 255 for k in range(size))
def can_access(a, b):
    v = ctypes.c_int(-1)
    ok(rt.cudaDeviceCanAccessPeer(ctypes.byref(v), a, b), "cudaDeviceCanAccessPeer")
    return v.value
'''

# Copies between 0<->1 and 2<->3 (access enabled between 2 and 3), and 0->2; checks every byte.
PAIRS_SCRIPT = PRELUDE + r'''
SIZE = 65536
bufs = {d: alloc(d, SIZE) for d in range(4)}
print("RESULT can01=%d can23=%d" % (can_access(0, 1), can_access(2, 3)))
ok(rt.cudaSetDevice(2), "cudaSetDevice")
ok(rt.cudaDeviceEnablePeerAccess(3, 0), "cudaDeviceEnablePeerAccess(3)")
bad = 0
for n, (src, dst) in enumerate(((0, 1), (1, 0), (2, 3), (3, 2), (0, 2))):
    data = pattern(SIZE, 11 * n + 1)
    upload(src, bufs[src], data)
    ok(rt.cudaMemcpyPeer(bufs[dst], dst, bufs[src], src, ctypes.c_size_t(SIZE)), "cudaMemcpyPeer")
    bad += download(dst, bufs[dst], SIZE) != data
print("RESULT copies=5 bad=%d" % bad)
'''

# Fallback without P2P: an unsupported enable is absorbed; enabling one's own device is not.
ABSORB_SCRIPT = PRELUDE + r'''
ok(rt.cudaSetDevice(0), "cudaSetDevice")
unsupported = rt.cudaDeviceEnablePeerAccess(1, 0)
last = rt.cudaGetLastError()
own = rt.cudaDeviceEnablePeerAccess(0, 0)
own_last = rt.cudaGetLastError()
print("RESULT unsupported=%d last=%d own=%d own_last=%d" % (unsupported, last, own, own_last))
'''

# Enables peer access 0->1 as a program would, then moves a pattern with cudaMemcpyPeer.
CORRUPT_SCRIPT = PRELUDE + r'''
SIZE = 1 << 20
a, b = alloc(0, SIZE), alloc(1, SIZE)
data = pattern(SIZE, 5)
upload(0, a, data)
ok(rt.cudaSetDevice(0), "cudaSetDevice")
ok(rt.cudaDeviceEnablePeerAccess(1, 0), "cudaDeviceEnablePeerAccess")
ok(rt.cudaMemcpyPeer(b, 1, a, 0, ctypes.c_size_t(SIZE)), "cudaMemcpyPeer")
back = download(1, b, SIZE)
print("RESULT wrong_bytes=%d" % sum(x != y for x, y in zip(back, data)))
'''

# Fallback on a lying pair: enables and disables after the health probe found it broken, then 3D
# copies (which the guard does not stage: only the absence of a real mapping keeps them right).
REENABLE_SCRIPT = PRELUDE + r"""
class PitchedPtr(ctypes.Structure):
    _fields_ = [("ptr", ctypes.c_void_p), ("pitch", ctypes.c_size_t), ("xsize", ctypes.c_size_t),
                ("ysize", ctypes.c_size_t)]
class Pos(ctypes.Structure):
    _fields_ = [("x", ctypes.c_size_t), ("y", ctypes.c_size_t), ("z", ctypes.c_size_t)]
class Extent(ctypes.Structure):
    _fields_ = [("width", ctypes.c_size_t), ("height", ctypes.c_size_t), ("depth", ctypes.c_size_t)]
class Peer3D(ctypes.Structure):
    _fields_ = [("srcArray", ctypes.c_void_p), ("srcPos", Pos), ("srcPtr", PitchedPtr), ("srcDevice", ctypes.c_int),
                ("dstArray", ctypes.c_void_p), ("dstPos", Pos), ("dstPtr", PitchedPtr), ("dstDevice", ctypes.c_int),
                ("extent", Extent)]
SIZE = 1024 * 16
bufs = {0: alloc(0, SIZE), 1: alloc(1, SIZE)}
def copy3d(src, dst, seed):
    data = pattern(SIZE, seed)
    upload(src, bufs[src], data)
    p = Peer3D()
    p.srcPtr = PitchedPtr(bufs[src], 1024, 1024, 16)
    p.dstPtr = PitchedPtr(bufs[dst], 1024, 1024, 16)
    p.srcDevice, p.dstDevice = src, dst
    p.extent = Extent(1024, 16, 1)
    ok(rt.cudaMemcpy3DPeer(ctypes.byref(p)), "cudaMemcpy3DPeer")
    return download(dst, bufs[dst], SIZE) != data
def enable(device, peer):
    ok(rt.cudaSetDevice(device), "cudaSetDevice")
    return rt.cudaDeviceEnablePeerAccess(peer, 0)
def disable(device, peer):
    ok(rt.cudaSetDevice(device), "cudaSetDevice")
    return rt.cudaDeviceDisablePeerAccess(peer)
statuses = [enable(0, 1), enable(1, 0), enable(0, 1), disable(0, 1), enable(0, 1)]
bad = sum(copy3d(s, d, 7 * n + 3) for n, (s, d) in enumerate(((0, 1), (1, 0))))
print("RESULT statuses=%s bad3d=%d" % (",".join(map(str, statuses)), bad))
"""

NCCL_SCRIPT = 'import os; print(os.environ.get("NCCL_P2P_DISABLE"))'


def script(text, db, **extra):
    return run([sys.executable, "-c", text], db=db, **extra)


def result(proc):
    return expectations(proc.stdout, "RESULT")


def paths(db, where="1"):
    return {r[0]: r[1] for r in query(db, "SELECT path, count(*) FROM transfers WHERE %s GROUP BY 1" % where)}


# ---- staged, all pairs ----
db = tempdb()
proc = run([program("rt_peer"), "basic"], db=db, check=False, P2PGUARD_MODE="staged")
equal(proc.returncode, 0, "staged: rt_peer basic succeeds (its data check included)")
exp = expectations(proc.stdout)
equal(scalar(db, "SELECT count(*) FROM transfers"), exp.get("transfers"), "staged: a row per cross-device copy")
equal(paths(db, "api NOT LIKE 'cudaMemcpy3D%'"), {"staged": exp.get("transfers", 0) - 1},
      "staged: every linear cross-device copy is staged")
equal(paths(db, "api LIKE 'cudaMemcpy3D%'"), {"driver": 1}, "staged: the 3D copy stays with the driver")
equal(scalar(db, "SELECT count(*) FROM transfers WHERE status != 0"), 0, "staged: every copy succeeded")
rows = query(db, "SELECT api, action, result, status FROM peer_access WHERE api = 'cudaDeviceCanAccessPeer'")
check(len(rows) >= 1, "staged: can-access calls recorded (%d)" % len(rows))
equal({(r[1], r[2], r[3]) for r in rows}, {("reported", 0, 0)}, "staged: can-access answered 0, action reported")
equal(exp.get("p2p"), 0, "staged: the program was told there is no P2P")
equal(query(db, "SELECT mode FROM processes"), [("staged",)], "staged: the process row says staged")
equal(scalar(db, "SELECT count(*) FROM failures"), 0, "staged: no failures")
equal(scalar(db, "PRAGMA integrity_check"), "ok", "staged: database integrity")

proc = run([sys.executable, "-c", NCCL_SCRIPT], db=tempdb(), P2PGUARD_MODE="staged", NCCL_P2P_DISABLE=None)
equal(proc.stdout.strip(), "1", "staged: NCCL_P2P_DISABLE=1 is set for the program")
proc = run([sys.executable, "-c", NCCL_SCRIPT], db=tempdb(), P2PGUARD_MODE="staged", NCCL_P2P_DISABLE="0")
equal(proc.stdout.strip(), "0", "staged: the user's NCCL_P2P_DISABLE=0 is kept")
proc = run([sys.executable, "-c", NCCL_SCRIPT], db=tempdb(), P2PGUARD_MODE="observe", NCCL_P2P_DISABLE=None)
equal(proc.stdout.strip(), "None", "observe: NCCL_P2P_DISABLE is left unset")
proc = run([sys.executable, "-c", NCCL_SCRIPT], db=tempdb(), P2PGUARD_MODE="fallback", NCCL_P2P_DISABLE=None)
equal(proc.stdout.strip(), "None", "fallback: NCCL_P2P_DISABLE is left unset")

# ---- staged, pair 0-1 only, four devices ----
db = tempdb()
proc = script(PAIRS_SCRIPT, db, P2PGUARD_MODE="staged", P2PGUARD_PAIRS="0-1", SIMCUDA_DEVICES=4)
res = result(proc)
equal(res.get("bad"), 0, "pairs 0-1: every copy delivered the right bytes")
equal((res.get("can01"), res.get("can23")), (0, 1), "pairs 0-1: 0-1 reported without P2P, 2-3 with")
pairs = {(r[0], r[1]): r[2] for r in query(db, "SELECT src_device, dst_device, path FROM transfers "
                                               "WHERE api = 'cudaMemcpyPeer'")}
equal(pairs, {(0, 1): "staged", (1, 0): "staged", (2, 3): "p2p", (3, 2): "p2p", (0, 2): "driver"},
      "pairs 0-1: only 0<->1 staged, 2<->3 through P2P, 0->2 through the driver")
equal(scalar(db, "SELECT count(*) FROM transfers WHERE path = 'staged' AND NOT "
                 "((src_device = 0 AND dst_device = 1) OR (src_device = 1 AND dst_device = 0))"), 0,
      "pairs 0-1: no staged row outside 0<->1")
equal({tuple(r) for r in query(db, "SELECT device, peer_device, action, result FROM peer_access "
                                    "WHERE api = 'cudaDeviceCanAccessPeer'")},
      {(0, 1, "reported", 0), (2, 3, "passed", 1)}, "pairs 0-1: can-access rows")
equal(query(db, "SELECT device, peer_device, status, action FROM peer_access WHERE api = 'cudaDeviceEnablePeerAccess'"),
      [(2, 3, 0, "passed")], "pairs 0-1: the 2->3 enable is the driver's")

# ---- fallback without P2P ----
db = tempdb()
proc = run([program("rt_peer"), "basic"], db=db, check=False, P2PGUARD_MODE="fallback", SIMCUDA_P2P="none")
equal(proc.returncode, 0, "fallback/no P2P: rt_peer basic succeeds (its data check included)")
exp = expectations(proc.stdout)
equal(scalar(db, "SELECT count(*) FROM transfers"), exp.get("transfers"), "fallback/no P2P: a row per copy")
equal(paths(db, "api NOT LIKE 'cudaMemcpy3D%'"), {"staged": exp.get("transfers", 0) - 1},
      "fallback/no P2P: every linear cross-device copy is staged")
equal(query(db, "SELECT mode FROM processes"), [("fallback",)], "fallback/no P2P: the process row says fallback")

db = tempdb()
proc = script(ABSORB_SCRIPT, db, P2PGUARD_MODE="fallback", SIMCUDA_P2P="none")
res = result(proc)
equal(res.get("unsupported"), 0, "fallback: the unsupported enable returns success")
equal(res.get("last"), 0, "fallback: and cudaGetLastError says nothing after it")
equal(res.get("own"), 217, "fallback: enabling one's own device still fails (a programming error)")
equal(res.get("own_last"), 217, "fallback: and its sticky error stays")
rows = query(db, "SELECT peer_device, status, action, rule_id FROM failures WHERE api = 'cudaDeviceEnablePeerAccess' "
                 "ORDER BY thread_serial, seq")
equal(len(rows), 2, "fallback: a failure row for each failed enable")
if len(rows) == 2:
    equal(rows[0][:3], (1, 217, "absorbed"), "fallback: the unsupported enable's row: status 217, absorbed")
    check(rows[0][3], "fallback: the absorbed row names a rule (%s)" % rows[0][3])
    equal(rows[1][:3], (0, 217, "passed"), "fallback: the own-device enable's row: status 217, passed")
    equal(rows[1][3], "cuda/peer-access-to-own-device", "fallback: own device diagnosed as such")
equal(query(db, "SELECT peer_device, status, action FROM peer_access WHERE api = 'cudaDeviceEnablePeerAccess' "
                "ORDER BY thread_serial, seq"), [(1, 0, "absorbed"), (0, 217, "passed")],
      "fallback: peer_access rows show what the program got")

# ---- P2P that delivers wrong data ----
db = tempdb()
proc = script(CORRUPT_SCRIPT, db, P2PGUARD_MODE="observe", SIMCUDA_P2P_CORRUPT="0-1")
res = result(proc)
check(res.get("wrong_bytes", 0) > 0, "observe/corrupt: the fault is real, the copy delivers wrong bytes (%s)"
      % res.get("wrong_bytes"))
equal(query(db, "SELECT path FROM transfers WHERE api = 'cudaMemcpyPeer'"), [("p2p",)],
      "observe/corrupt: the copy went through P2P")

db = tempdb()
proc = script(CORRUPT_SCRIPT, db, P2PGUARD_MODE="fallback", SIMCUDA_P2P_CORRUPT="0-1")
equal(result(proc).get("wrong_bytes"), 0, "fallback/corrupt: the same script gets the right bytes")
equal(query(db, "SELECT path FROM transfers WHERE api = 'cudaMemcpyPeer'"), [("staged",)],
      "fallback/corrupt: its copy was staged")

db = tempdb()
proc = run([program("rt_peer"), "basic"], db=db, check=False, P2PGUARD_MODE="fallback", SIMCUDA_P2P_CORRUPT="0-1")
equal(proc.returncode, 0, "fallback/corrupt: rt_peer basic succeeds with the right data")
exp = expectations(proc.stdout)
equal(exp.get("p2p"), 1, "fallback/corrupt: the program itself believes it uses P2P")
rows = query(db, "SELECT device, peer_device, action, status FROM failures WHERE rule_id = 'p2p/copy-returns-wrong-data'")
equal(rows, [(0, 1, "staged", 0)], "fallback/corrupt: one finding, p2p/copy-returns-wrong-data, pair staged")
equal(paths(db, "api NOT LIKE 'cudaMemcpy3D%'"), {"staged": exp.get("transfers", 0) - 1},
      "fallback/corrupt: every linear cross-device copy is staged")
equal(scalar(db, "SELECT count(*) FROM transfers WHERE path = 'p2p'"), 0,
      "fallback/corrupt: nothing went through the lying P2P path")
equal(scalar(db, "SELECT count(*) FROM failures"), 1,
      "fallback/corrupt: the program's own disable is no failure (only the finding is)")

# ---- P2P whose copies never complete (IOMMU/ACS): the probe's deadline, then staging ----
db = tempdb()
t0 = time.monotonic()
proc = script(CORRUPT_SCRIPT, db, timeout=60, P2PGUARD_MODE="fallback", SIMCUDA_P2P_HANG="0-1",
              P2PGUARD_PROBE_TIMEOUT_MS="300")
took = time.monotonic() - t0
equal(result(proc).get("wrong_bytes"), 0, "fallback/hang: the program finishes with the right bytes")
check(took < 20, "fallback/hang: in bounded time (%.1f s; the probe's deadline is 0.3 s)" % took)
equal(query(db, "SELECT device, peer_device, action, status, rule_id FROM failures"),
      [(0, 1, "staged", 0, "p2p/copy-never-completes")],
      "fallback/hang: one finding, verdict hang, rule p2p/copy-never-completes, pair staged")
args, evidence = query(db, "SELECT args, evidence FROM failures")[0]
check("unfinished after" in args and "P2PGUARD_PROBE_TIMEOUT_MS=300" in args,
      "fallback/hang: the row's args say the probe copy did not finish (%s)" % args)
check(json.loads(evidence).get("p2p_probe") == "hang",
      "fallback/hang: the evidence holds p2p_probe = hang")
equal(query(db, "SELECT path FROM transfers WHERE api = 'cudaMemcpyPeer'"), [("staged",)],
      "fallback/hang: the program's copy of the pair was staged")

# The same statuses the driver gives a program on a sound pair, and the mapping never comes back.
db = tempdb()
sound = result(script(REENABLE_SCRIPT, tempdb(), P2PGUARD_MODE="observe"))
equal(sound.get("statuses"), "0,0,704,0,0", "sound pair, observe: what the driver answers")
res = result(script(REENABLE_SCRIPT, db, P2PGUARD_MODE="fallback", SIMCUDA_P2P_CORRUPT="0-1"))
equal(res.get("statuses"), sound.get("statuses"), "fallback/corrupt: enables and disables answered as the driver would")
equal(res.get("bad3d"), 0, "fallback/corrupt: 3D copies after a re-enable deliver the right bytes")
equal(scalar(db, "SELECT count(*) FROM transfers WHERE path = 'p2p'"), 0,
      "fallback/corrupt: no copy went through P2P after a re-enable")
equal(scalar(db, "SELECT count(*) FROM failures WHERE rule_id = 'p2p/copy-returns-wrong-data'"), 1,
      "fallback/corrupt: the pair is probed once")
equal(query(db, "SELECT status, rule_id FROM failures WHERE status != 0"), [(704, "cuda/peer-access-already-enabled")],
      "fallback/corrupt: the second enable is the one failure, as on a sound pair")
equal(scalar(db, "PRAGMA integrity_check"), "ok", "fallback/corrupt: database integrity")
done()
