"""Cross-process mappings through the real database: the conformance programs that share memory
between two processes (legacy IPC through the runtime; VMM through the driver, the descriptor
passed over a Unix socket) run under the guard, unchanged, and leave a peer_mappings row for every
export, open, import, map and access, each linked to the close, unmap or release that ended it;
the copy from the mapped memory into the importer's own device is a peer copy like any other, and an
asynchronous one gets its GPU time. A process's own memory on its own device is only counted. In
staged mode that copy is staged out of an IPC mapping; out of an imported VMM one it is left to the
program's own copy (only the importer's device may touch that mapping: the staged engine's read on
the owner's device fails, on two H200s and on the simulated driver alike)."""
import os
import re
import subprocess
from harness import *

CONF = os.path.join(BUILD, "tests/conformance")
LEGACY = os.path.join(CONF, "conformance_rt_ipc_legacy")
VMM = os.path.join(CONF, "conformance_drv_ipc_vmm")
MiB = 1 << 20
strip = lambda text: re.sub(r"[0-9][0-9.]*", "N", text)


def guarded(program, db, **env):
    bare = run([program], preload=False, **env)
    proc = run([program], db=db, **env)
    check(strip(proc.stdout) == strip(bare.stdout), os.path.basename(program) + ": the same %d check lines with and without the guard" % bare.stdout.count("\n"))
    check("# PASS" in proc.stdout, os.path.basename(program) + ": its checks pass under the guard")
    return proc


def rows(db, where, *params):
    return query(db, "SELECT api, event, status, accessor_device, owner_device, is_peer, cross_process, bytes, "
                     "handle_type, flags, mapping_id, ended_ns IS NOT NULL, ended_by, address IS NOT NULL "
                     "FROM peer_mappings WHERE " + where + " ORDER BY started_ns", *params)


def processes(db):
    """owner and importer process ids: the owner exported."""
    owner = scalar(db, "SELECT process_id FROM peer_mappings WHERE event = 'export' AND status = 0")
    importer = scalar(db, "SELECT process_id FROM peer_mappings WHERE event = 'import' AND status = 0")
    return owner, importer


# ---- legacy IPC, owner on device 0, importer on device 1 ----
db = tempdb()
guarded(LEGACY, db)
owner, importer = processes(db)
check(owner and importer and owner != importer, "legacy: the owner's and the importer's rows are two processes (%s, %s)" % (owner, importer))
export = rows(db, "process_id = ? AND event = 'export' AND status = 0", owner)
equal(export, [("cudaIpcGetMemHandle", "export", 0, None, 0, None, 0, MiB, "ipc", 0, None, 0, None, 1)],
      "legacy: the owner's cudaIpcGetMemHandle row (device 0, 1 MiB, ipc)")
opened = rows(db, "process_id = ? AND event = 'import' AND status = 0", importer)
equal(len(opened), 2, "legacy: the importer's two opens of the handle")
for r in opened:
    equal(r[:10], ("cudaIpcOpenMemHandle", "import", 0, 1, 0, 1, 1, MiB, "ipc", 1),
          "legacy: open row: device 1 gains device 0's memory, a peer mapping across processes, lazy peer access")
    equal(r[11:13], (1, "cudaIpcCloseMemHandle"), "legacy: the open is ended by cudaIpcCloseMemHandle")
equal(opened[0][10], opened[1][10], "legacy: both opens are one mapping (the driver's reference count)")
ends = query(db, "SELECT event, mapping_id FROM peer_mappings WHERE process_id = ? AND api = 'cudaIpcCloseMemHandle' AND status = 0 ORDER BY started_ns", importer)
equal(ends, [("unref", opened[0][10]), ("end", opened[0][10])], "legacy: the first close drops a reference, the second ends the mapping")
lived = scalar(db, "SELECT ended_ns - started_ns FROM peer_mappings WHERE process_id = ? AND event = 'import' AND status = 0", importer)
check(lived and lived > 0, "legacy: ended_ns is after started_ns (%s ns)" % lived)
copy = query(db, "SELECT api, src_device, dst_device, bytes, path, status FROM transfers WHERE process_id = ?", importer)
equal(copy, [("cudaMemcpy", 0, 1, MiB, "p2p", 0)], "legacy: the copy out of the mapping into device 1 is a peer copy over P2P")
equal(scalar(db, "SELECT count(*) FROM mapping_counts"), 0, "legacy: nothing counted (no process mapped its own memory)")
failed = query(db, "SELECT api, status FROM peer_mappings WHERE status != 0 ORDER BY process_id != ?, started_ns", owner)
equal(failed, [("cudaIpcGetMemHandle", 1), ("cudaIpcGetMemHandle", 1), ("cudaIpcOpenMemHandle", 201),
               ("cudaIpcCloseMemHandle", 1), ("cudaIpcOpenMemHandle", 1), ("cudaIpcOpenMemHandle", 1),
               ("cudaIpcOpenMemHandle", 1), ("cudaIpcOpenMemHandle", 1),
               ("cudaIpcCloseMemHandle", 1), ("cudaIpcOpenMemHandle", 1)],
      "legacy: every failed call has its row (garbage, all-zero, flags 0, an undefined flag; the last: the handle of a freed allocation)")
equal(scalar(db, "SELECT count(*) FROM failures"), len(failed), "legacy: and its failures row")
view = query(db, "SELECT pair, is_peer, lived_ms IS NOT NULL, ended_by FROM mapping_report WHERE api = 'cudaIpcOpenMemHandle' AND status = 0")
equal(view[0], ("0->1", 1, 1, "cudaIpcCloseMemHandle"), "mapping_report: the pair, and how long it lived")

report = cli("report", db)
words = " ".join(report.stdout.split())  # the report wraps its lines at 100 columns
check("cross-process mappings: " in report.stdout and
      "cudaIpcOpenMemHandle import 0->1 peer cross-process ipc x2 2.0 MiB, ended by cudaIpcCloseMemHandle" in words,
      "report: the mappings section names the open, its pair and its close")
import json
mapped = json.loads(cli("report", "--json", db).stdout).get("mappings") or {}
opens = [g for g in mapped.get("groups", []) if g["api"] == "cudaIpcOpenMemHandle" and g["status"] == 0]
equal([(g["owner_device"], g["accessor_device"], g["is_peer"], g["calls"], g["live"]) for g in opens], [(0, 1, 1, 2, 0)],
      "report --json: mappings.groups has the opens, none live at the end")

# ---- VMM, the descriptor over a Unix socket ----
db = tempdb()
guarded(VMM, db)
owner, importer = processes(db)
check(owner and importer and owner != importer, "vmm: two processes")
got = rows(db, "process_id = ? AND status = 0", importer)
ids = {r[1]: r[10] for r in got}
equal([r[:10] for r in got], [
    ("cuMemImportFromShareableHandle", "import", 0, None, 0, None, 1, 0, "posix_fd", 0),
    ("cuMemMap", "map", 0, None, 0, None, 1, 2 * MiB, "posix_fd", 0),
    ("cuMemSetAccess", "access", 0, 1, 0, 1, 1, 2 * MiB, "posix_fd", 3),
    ("cuMemUnmap", "end", 0, 1, 0, 1, 1, 2 * MiB, "posix_fd", 0),
    ("cuMemRelease", "end", 0, None, 0, None, 1, 0, "posix_fd", 0)],
      "vmm: the importer's rows: import, map, device 1's access (a peer mapping), unmap, release")
equal([r[11:13] for r in got[:3]], [(1, "cuMemRelease"), (1, "cuMemUnmap"), (1, "cuMemUnmap")],
      "vmm: the import is ended by its release, the map and the access by the unmap")
equal(got[1][10], got[2][10], "vmm: map and access are one mapping")
equal(got[3][10], got[1][10], "vmm: the unmap carries the mapping's id")
equal(got[4][10], got[0][10], "vmm: the release carries the import's id")
equal(rows(db, "process_id = ? AND status = 0", owner)[0][:9],
      ("cuMemExportToShareableHandle", "export", 0, None, 0, None, 0, 0, "posix_fd"), "vmm: the owner's export row")
counts = dict(((a, d), c) for a, d, c in query(db, "SELECT api, device, calls FROM mapping_counts WHERE process_id = ?", owner))
equal(counts, {("cuMemMap", 0): 1, ("cuMemSetAccess", 0): 1, ("cuMemUnmap", 0): 1, ("cuMemRelease", 0): 2},
      "vmm: the owner's own mappings of device 0 are counted, not rowed")
equal(scalar(db, "SELECT count(*) FROM peer_mappings WHERE process_id = ? AND status = 0 AND event != 'export'", owner), 0,
      "vmm: the owner has no other row")
copy = query(db, "SELECT api, src_device, dst_device, bytes, path FROM transfers WHERE process_id = ?", importer)
equal(copy, [("cuMemcpyDtoD_v2", 0, 1, 2 * MiB, "p2p")], "vmm: the copy out of the imported mapping is a peer copy over P2P")
report = cli("report", db).stdout
check("own memory on its own device, counted:" in report and "cuMemMap device 0 x1 2.0 MiB" in report,
      "report: the owner's counted own-device calls")
counted = json.loads(cli("report", "--json", db).stdout)["mappings"]["counts"]
equal(sorted((c["api"], c["calls"]) for c in counted),
      [("cuMemMap", 1), ("cuMemRelease", 2), ("cuMemSetAccess", 1), ("cuMemUnmap", 1)], "report --json: mappings.counts")

# ---- one device: the importer maps the owner's memory on the same device ----
db = tempdb()
guarded(LEGACY, db, SIMCUDA_DEVICES=1)
owner, importer = processes(db)
equal(query(db, "SELECT accessor_device, owner_device, is_peer, cross_process FROM peer_mappings WHERE process_id = ? AND event = 'import' AND status = 0 LIMIT 1", importer),
      [(0, 0, 0, 1)], "one device: the open crosses a process, not a device")
equal(scalar(db, "SELECT count(*) FROM transfers"), 0, "one device: the copy out of the mapping stays on device 0 (no transfer row)")
db = tempdb()
guarded(VMM, db, SIMCUDA_DEVICES=1)
owner, importer = processes(db)
equal(query(db, "SELECT accessor_device, owner_device, is_peer, cross_process FROM peer_mappings WHERE process_id = ? AND event = 'access' AND status = 0", importer),
      [(0, 0, 0, 1)], "one device: access to another process's memory of the same device is still a row")

# ---- staged mode: the copy through the mapping is staged, the data stays right ----
# (xproc_peer: the conformance program expects the P2P answers that staged mode changes on purpose)


def ipc_pair(db, owner_devices, open_device, owner_env={}, open_env={}, wrap=[], owner_guarded=True,
             owner_said=None):
    """xproc_peer ipc-owner on owner_devices, ipc-open of all its handles on open_device; the
    owner's stderr lines go to owner_said when it is a list."""
    env = environment(db, preload=owner_guarded, **owner_env)
    owner = subprocess.Popen([program("xproc_peer"), "ipc-owner"] + [str(d) for d in owner_devices], env=env,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE if owner_said is not None else None, text=True)
    handles = [owner.stdout.readline().split()[1] for _ in owner_devices]
    opener = run(wrap + [program("xproc_peer"), "ipc-open", str(open_device)] + handles, db=db, **open_env)
    owner.stdin.close()
    err = owner.stderr.read() if owner_said is not None else ""
    owner.wait()
    if owner_said is not None:
        owner_said.extend(l for l in err.splitlines() if l.strip())
    return opener


def vmm_pair(db, owner_device, import_device, owner_env={}, import_env={}):
    """xproc_peer vmm-owner on owner_device, vmm-import of its descriptor on import_device."""
    sock = os.path.join(tempfolder(), "s")
    owner = subprocess.Popen([program("xproc_peer"), "vmm-owner", str(owner_device), sock],
                             env=environment(db, **owner_env), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    while owner.stdout.readline().strip() not in ("listening", ""):
        pass
    importer = run([program("xproc_peer"), "vmm-import", str(import_device), sock], db=db, **import_env)
    owner.stdin.close()
    owner.wait()
    return importer


# ---- whose memory a legacy IPC mapping is ----
# The driver names an opened mapping by the importer's device (measured on two H200s), so the
# importer learns the owner from the exporter's note of its handle (src/guard/ipc_owners.h), by the
# GPU's UUID: right also where the importer numbers the GPUs otherwise.
def open_rows(db):
    return query(db, "SELECT accessor_device, owner_device, is_peer FROM peer_mappings "
                     "WHERE event = 'import' AND status = 0")


db = tempdb()
opener = ipc_pair(db, [0], 0, open_env={"CUDA_VISIBLE_DEVICES": "1,0"})
check("data=1" in opener.stdout, "renumbered: the importer reads the owner's data (%s)" % opener.stdout.split())
equal(open_rows(db), [(0, 1, 1)],
      "renumbered (importer's CUDA_VISIBLE_DEVICES=1,0): its device 0 gains its device 1's memory, a peer mapping")
equal(query(db, "SELECT src_device, dst_device, path FROM transfers"), [(1, 0, "p2p")],
      "renumbered: the copy out of the mapping is a peer copy from its device 1")

db = tempdb()
opener = ipc_pair(db, [1], 1)
equal(open_rows(db), [(1, 1, 0)], "same device: device 1's memory opened on device 1, not a peer mapping")
equal(query(db, "SELECT count(*) FROM transfers")[0][0], 0, "same device: the copy out of it is no peer copy")

db = tempdb()
opener = ipc_pair(db, [0], 1, owner_guarded=False)
check("data=1" in opener.stdout, "unguarded owner: the importer reads the owner's data (%s)" % opener.stdout.split())
equal(open_rows(db), [(1, None, None)],
      "unguarded owner: the open names no owner (the driver cannot tell; nobody noted the handle)")
equal(query(db, "SELECT count(*) FROM transfers")[0][0], 0,
      "unguarded owner: the copy out of a mapping of unknown memory is not taken for a peer copy")

# The table cannot be made (a folder where its file goes): the exporter says so once and runs on,
# its export is a row, the importer names no owner.
db = tempdb()
os.makedirs(db + ".spool/ipc-owners.v2")
said = []
opener = ipc_pair(db, [0], 1, owner_said=said)
check("data=1" in opener.stdout, "no table: the importer reads the owner's data (%s)" % opener.stdout.split())
check(len(said) == 1 and "table of IPC handles' GPUs" in said[0],
      "no table: one line from the exporter (%s)" % said)
equal(scalar(db, "SELECT count(*) FROM peer_mappings WHERE event = 'export' AND status = 0"), 1,
      "no table: the export is a row")
equal(open_rows(db), [(1, None, None)], "no table: the open names no owner")

db = tempdb()
opener = ipc_pair(db, [0], 1, {"P2PGUARD_MODE": "staged"}, {"P2PGUARD_MODE": "staged"})
check("data=1" in opener.stdout, "staged: the importer's copy out of the mapping is right (%s)" % opener.stdout.split())
equal(query(db, "SELECT src_device, dst_device, path, status FROM transfers"),
      [(0, 1, "staged", 0)], "staged: the copy out of the peer mapping is staged")
equal(scalar(db, "SELECT count(*) FROM peer_mappings WHERE event = 'import' AND status = 0"), 1,
      "staged: the mapping itself is made and recorded (staged mode cannot stage a mapping)")

# VMM: device 0's memory imported, mapped and made accessible to device 1 in another process; the
# copy out of it into device 1's own memory cannot go through the guard's engine, which would read
# the mapping on device 0 (not granted: CUDA_ERROR_INVALID_VALUE, and the copy was lost, before):
# the program's copy runs as it called it.
db = tempdb()
staged = {"P2PGUARD_MODE": "staged"}
importer = vmm_pair(db, 0, 1, staged, staged)
check("cuMemcpyDtoD=0" in importer.stdout and "data=1" in importer.stdout,
      "staged vmm: the importer's copy out of the imported mapping succeeds and is right (%s)" % importer.stdout.split())
equal(query(db, "SELECT api, src_device, dst_device, bytes, path, status FROM transfers"),
      [("cuMemcpyDtoD_v2", 0, 1, 2 * MiB, "p2p", 0)],
      "staged vmm: the copy out of the imported mapping is the program's own, over the mapping (the engine "
      "cannot read it on device 0)")
equal(query(db, "SELECT api, accessor_device, owner_device, is_peer FROM peer_mappings WHERE event = 'access' AND status = 0"),
      [("cuMemSetAccess", 1, 0, 1)], "staged vmm: device 1's access to the mapping is still made and recorded")
equal(scalar(db, "SELECT count(*) FROM failures"), 0, "staged vmm: no failure")

# ---- an asynchronous copy through a mapping gets its GPU time ----
# P2PGUARD_GPU_TIMING=all: every asynchronous copy is timed with events on its own stream, read by
# the drainer or by the exit's pass once the program has synchronised.
timed = {"P2PGUARD_GPU_TIMING": "all", "XPROC_COPY": "async"}
db = tempdb()
opener = ipc_pair(db, [0], 1, open_env=timed)
check("cudaMemcpyAsync=0" in opener.stdout and "data=1" in opener.stdout,
      "timed ipc: the async copy out of the mapping is right (%s)" % opener.stdout.split())
equal(query(db, "SELECT api, src_device, dst_device, bytes, path, status, gpu_ns > 0 FROM transfers"),
      [("cudaMemcpyAsync", 0, 1, MiB, "p2p", 0, 1)], "timed ipc: the async copy out of the IPC mapping is a peer copy with a GPU time")
db = tempdb()
importer = vmm_pair(db, 0, 1, import_env=timed)
check("cuMemcpyDtoDAsync=0" in importer.stdout and "data=1" in importer.stdout,
      "timed vmm: the async copy out of the imported mapping is right (%s)" % importer.stdout.split())
equal(query(db, "SELECT api, src_device, dst_device, bytes, path, status, gpu_ns > 0 FROM transfers"),
      [("cuMemcpyDtoDAsync_v2", 0, 1, 2 * MiB, "p2p", 0, 1)],
      "timed vmm: the async copy out of the imported mapping is a peer copy with a GPU time")

# ---- the owner killed before it frees: the rows of both processes are there ----
db = tempdb()
env = environment(db)
owner_proc = subprocess.Popen([program("xproc_peer"), "ipc-owner", "0"], env=env, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
handle = owner_proc.stdout.readline().split()[1]
opener = run([program("xproc_peer"), "ipc-open", "1", handle], db=db)
check("data=1" in opener.stdout, "xproc_peer: the importer reads the owner's data (%s)" % opener.stdout.split())
owner_proc.kill()
owner_proc.wait()
cli("recover", db)
equal(scalar(db, "SELECT count(*) FROM peer_mappings WHERE api = 'cudaIpcGetMemHandle' AND status = 0"), 1,
      "a killed owner's export row is recovered from its spool")
equal(query(db, "SELECT ended_by FROM peer_mappings WHERE api = 'cudaIpcOpenMemHandle' AND status = 0"),
      [("cudaIpcCloseMemHandle",)], "the importer's open is ended by its close")

done()
