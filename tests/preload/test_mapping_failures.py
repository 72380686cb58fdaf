"""Failed cross-process and VMM mapping calls: the caller gets exactly the code it gets without the
guard, and each failure has its peer_mappings row and a failures row with the C backtrace naming
the calling function, the evidence of the process, and the knowledge base's rule. Every case the
simulation produces: the measured ones (bad handles and descriptors, wrong arguments), the ones
of real machines (no P2P for a lazy peer enable or an access, 8 peers through mappings, a GPU
outside the process's view, another PID namespace, a fabric not ready)."""
import json
import os
import subprocess
from harness import *

CONF = os.path.join(BUILD, "tests/conformance")


def failures(db):
    return query(db, "SELECT api, status, rule_id, backtrace, evidence, advice, args FROM failures ORDER BY started_ns")


def first_frame(backtrace):
    return (backtrace or "").splitlines()[0] if backtrace else ""


def expect(db, label, api, status, rule, caller, facts={}):
    """The one failure of api with status: its rule, its first frame, its evidence."""
    got = [f for f in failures(db) if f[0] == api and f[1] == status]
    check(len(got) == 1, "%s: one failure row for %s %d (%d)" % (label, api, status, len(got)))
    if len(got) != 1:
        return None
    f = got[0]
    equal(f[2], rule, label + ": diagnosed as " + rule)
    check(caller in first_frame(f[3]), "%s: the backtrace starts in %s (%s)" % (label, caller, first_frame(f[3])))
    evidence = json.loads(f[4]) if f[4] else {}
    for key, value in facts.items():
        equal(evidence.get(key), value, "%s: evidence %s" % (label, key))
    check(f[5], label + ": advice")
    equal(scalar(db, "SELECT count(*) FROM peer_mappings WHERE api = ? AND status = ?", api, status), 1,
          label + ": and its peer_mappings row")
    return f


def ipc_pair(db, owner_devices, open_device, env={}, open_env={}, wrap=[], preload=True):
    """xproc_peer ipc-owner on owner_devices and ipc-open of all its handles on open_device; the
    opener's output."""
    owner = subprocess.Popen([program("xproc_peer"), "ipc-owner"] + [str(d) for d in owner_devices],
                             env=environment(db, preload, **env), stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    handles = [owner.stdout.readline().split()[1] for _ in owner_devices]
    opener = run(wrap + [program("xproc_peer"), "ipc-open", str(open_device)] + handles, db=db,
                 preload=preload, **dict(env, **open_env))
    owner.stdin.close()
    owner.wait()
    return opener.stdout


def vmm_pair(db, owner_device, import_device, env={}, import_env={}, preload=True):
    sock = os.path.join(tempfolder(), "s")
    owner = subprocess.Popen([program("xproc_peer"), "vmm-owner", str(owner_device), sock],
                             env=environment(db, preload, **env), stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    while owner.stdout.readline().strip() not in ("listening", ""):
        pass
    importer = run([program("xproc_peer"), "vmm-import", str(import_device), sock], db=db,
                   preload=preload, **dict(env, **import_env))
    owner.stdin.close()
    owner.wait()
    return importer.stdout


def same_codes(label, bare, guarded):
    equal(guarded, bare, label + ": the program sees the same codes with and without the guard")


# ---- the measured cases, from the conformance programs ----
db = tempdb()
run([os.path.join(CONF, "conformance_rt_ipc_legacy")], db=db)
rows = [f for f in failures(db) if f[0] == "cudaIpcGetMemHandle"]
equal([(f[1], f[2]) for f in rows], [(1, "ipc/get-handle-not-device-allocation")] * 2,
      "cudaIpcGetMemHandle of pinned and of cudaMallocAsync memory: two rows, one rule")
check(all("owner" in first_frame(f[3]) for f in rows), "  their backtraces start in owner()")
own = expect(db, "own handle", "cudaIpcOpenMemHandle", 201, "ipc/open-handle-of-own-process", "owner",
             {"pid_namespace_initial": True, "mapping_handle_type": "ipc"})
garbage = [f for f in failures(db) if f[0] == "cudaIpcOpenMemHandle" and f[1] == 1]
equal([f[2] for f in garbage], ["ipc/open-invalid-handle"] * 5,
      "garbage and all-zero handles, flags 0 and an undefined flag, a freed allocation's handle: ipc/open-invalid-handle")
check(all("importer" in first_frame(f[3]) for f in garbage), "  their backtraces start in importer()")
pairs = {r[0] for r in query(db, "SELECT pair FROM failure_report WHERE api = 'cudaIpcOpenMemHandle' AND status = 1")}
check(pairs and all(p.endswith("->?") for p in pairs),
      "  failure_report names their unknown owner '?', as report does (%s)" % sorted(pairs))
closes = [f for f in failures(db) if f[0] == "cudaIpcCloseMemHandle"]
equal([f[2] for f in closes], ["ipc/close-not-opened"] * 2, "closing memory no open returned, closing twice: ipc/close-not-opened")

db = tempdb()
run([os.path.join(CONF, "conformance_drv_ipc_vmm")], db=db)
expect(db, "mapped twice", "cuMemMap", 1, "ipc/map-range-not-free", "main")
expect(db, "device 77", "cuMemSetAccess", 1, "ipc/set-access-invalid-location", "main",
       {"device": 77, "ordinal_valid": False})
expect(db, "export without the handle type", "cuMemExportToShareableHandle", 1,
       "ipc/export-handle-type-not-requested", "main", {"allocation_handle_types": 0})
imports = [f for f in failures(db) if f[0] == "cuMemImportFromShareableHandle"]
equal([(f[1], f[2]) for f in imports], [(999, "ipc/import-not-an-export"), (999, "ipc/import-descriptor-closed")],
      "importing /dev/null, then a closed descriptor: 999 each, told apart by the evidence")
if len(imports) == 2:
    e = [json.loads(f[4]) for f in imports]
    equal((e[0].get("import_fd_open"), e[0].get("import_fd_target")), (True, "/dev/null"), "  the first names /dev/null")
    equal(e[1].get("import_fd_open"), False, "  the second was closed")
    check("fd=" in imports[0][6], "  args name the descriptor (%s)" % imports[0][6])

# ---- no P2P between the pair: the lazy peer enable and the access are refused ----
none = {"SIMCUDA_P2P": "none"}
db = tempdb()
out = ipc_pair(db, [0], 1, none)
same_codes("lazy enable without P2P", ipc_pair(tempdb(), [0], 1, none, preload=False), out)
check("cudaIpcOpenMemHandle=217" in out, "lazy enable without P2P: the open gives 217")
expect(db, "lazy enable without P2P", "cudaIpcOpenMemHandle", 217, "ipc/lazy-peer-enable-without-p2p", "open_handle",
       {"peers_unreachable": 1, "flags": 1, "device": 1})

db = tempdb()
out = vmm_pair(db, 0, 1, none)
same_codes("access without P2P", vmm_pair(tempdb(), 0, 1, none, preload=False), out)
check("cuMemSetAccess=101" in out, "access without P2P: cuMemSetAccess gives 101")
expect(db, "access without P2P", "cuMemSetAccess", 101, "ipc/set-access-peer-unreachable", "give_access",
       {"device": 1, "peer_device": 0, "can_access_peer": 0})

# ---- 8 peers reached through mappings ----
ten = {"SIMCUDA_DEVICES": "10"}
db = tempdb()
out = ipc_pair(db, list(range(9)), 9, ten)
same_codes("711", ipc_pair(tempdb(), list(range(9)), 9, ten, preload=False), out)
equal(out.count("cudaIpcOpenMemHandle=0"), 8, "711: eight peers' memory opens")
check("cudaIpcOpenMemHandle=711" in out, "711: the ninth peer's gives 711")
expect(db, "711", "cudaIpcOpenMemHandle", 711, "ipc/too-many-peers-through-mappings", "open_handle",
       {"mapped_peer_devices": 8})
equal(scalar(db, "SELECT count(DISTINCT owner_device) FROM peer_mappings WHERE event = 'import' AND status = 0"), 8,
      "711: the eight mappings are rows, one owner each")

# ---- the fabric not ready (injected: the simulation has no NVSwitch) ----
db = tempdb()
out = vmm_pair(db, 0, 1, import_env={"SIMCUDA_FAIL": "cuMemImportFromShareableHandle:802"})
check("cuMemImportFromShareableHandle=802" in out, "802: the import gives 802")
expect(db, "802", "cuMemImportFromShareableHandle", 802, "ipc/mapping-fabric-not-ready", "import_fd",
       {"mapping_handle_type": "posix_fd", "import_fd_open": True})

# ---- the owner's GPU outside the importer's view ----
db = tempdb()
hidden = {"CUDA_VISIBLE_DEVICES": "0"}
out = vmm_pair(db, 1, 0, import_env=hidden)
same_codes("import, GPU not visible", vmm_pair(tempdb(), 1, 0, import_env=hidden, preload=False), out)
check("cuMemImportFromShareableHandle=101" in out, "import, GPU not visible: 101")
expect(db, "import, GPU not visible", "cuMemImportFromShareableHandle", 101, "ipc/import-from-device-not-visible",
       "import_fd", {"cuda_visible_devices": "0", "device_count": 1})

db = tempdb()
out = ipc_pair(db, [1], 0, none, hidden)
check("cudaIpcOpenMemHandle=217" in out, "IPC open, GPU not visible and no P2P to it: 217")
expect(db, "IPC open outside the view", "cudaIpcOpenMemHandle", 217, "ipc/open-outside-device-view", "open_handle",
       {"cuda_visible_devices": "0", "peers_unreachable": 0})

# ---- another PID namespace (a container without --pid=host) ----
probe = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True)
if probe.returncode == 0:
    wrap = ["unshare", "--pid", "--fork", "--mount-proc"]
    db = tempdb()
    out = ipc_pair(db, [0], 1, wrap=wrap)
    same_codes("another PID namespace", ipc_pair(tempdb(), [0], 1, wrap=wrap, preload=False), out)
    check("cudaIpcOpenMemHandle=201" in out, "another PID namespace: the open gives 201")
    expect(db, "another PID namespace", "cudaIpcOpenMemHandle", 201, "ipc/open-between-containers", "open_handle",
           {"pid_namespace_initial": False, "container": True, "pid": 1})
    namespaces = query(db, "SELECT DISTINCT json_extract(evidence, '$.pid_namespace') FROM failures")
    check(len(namespaces) == 1 and namespaces[0][0] != scalar(db, "SELECT 'pid:[4026531836]'"),
          "another PID namespace: the evidence names it (%s)" % namespaces)
else:
    print("ok - # SKIP another PID namespace: unshare --pid is not permitted here (%s)" % probe.stderr.decode().strip())

# ---- staged mode: what to set instead, in the row ----
db = tempdb()
ipc_pair(db, [0], 1, dict(none, P2PGUARD_MODE="staged"))
advice = scalar(db, "SELECT advice FROM failures WHERE api = 'cudaIpcOpenMemHandle'")
check(advice and "does not stage cross-process mappings" in advice and "--disable-custom-all-reduce" in advice,
      "staged mode: the failure's advice says what staged mode cannot do and what to set instead")
equal(scalar(db, "SELECT json_extract(evidence, '$.mode') FROM failures"), "staged", "staged mode: the evidence names the mode")

# ---- pidfd_getfd: no CUDA call fails, explain knows the lines ----
for text, rule in (("RuntimeError: pidfd_getfd: Operation not permitted", "ipc/pidfd-getfd-not-permitted"),
                   ("RuntimeError: pidfd_getfd: Bad file descriptor", "ipc/pidfd-getfd-bad-descriptor")):
    out = cli("explain", text)
    equal(out.stdout.splitlines()[0] if out.stdout else "", rule, "explain %r" % text)

done()
