"""PyTorch-shaped cross-process sharing, ctypes standing in for torch (tests/programs/py_xproc.py):
a CUDA tensor handed to a spawned process with the default allocator (legacy IPC, libcudart opened
with ctypes so that every call is found with dlsym) and with expandable segments (cuMem pages
exported as POSIX fds, taken with pidfd_getfd, the driver functions from
cudaGetDriverEntryPointByVersion, or from cudaGetDriverEntryPoint). Under the guard the program sees the same results, the mappings
are rows, the segment's own pages are counted, and a failure names its Python line."""
import os
import sys
from harness import *

script = os.path.join(SOURCE, "tests/programs/py_xproc.py")
MiB = 1 << 20


def same_results(mode, db, *args, **env):
    bare = expectations(run([sys.executable, script, mode] + list(args), preload=False, **env).stdout)
    proc = run([sys.executable, script, mode] + list(args), db=db, **env)
    mode = " ".join([mode] + list(args))
    got = expectations(proc.stdout)
    got.pop("receiver", None)
    bare.pop("receiver", None)
    equal(got, bare, mode + ": the same results with and without the guard")
    equal(got.get("data"), 1, mode + ": the data crossed right")
    return proc


# ---- the default allocator: legacy IPC ----
db = tempdb()
same_results("tensor", db)
sender = scalar(db, "SELECT process_id FROM peer_mappings WHERE event = 'export'")
receiver = scalar(db, "SELECT process_id FROM peer_mappings WHERE event = 'import' AND status = 0")
check(sender and receiver and sender != receiver, "tensor: the sender's and the spawned receiver's rows")
equal(query(db, "SELECT api, owner_device, bytes FROM peer_mappings WHERE process_id = ?", sender),
      [("cudaIpcGetMemHandle", 0, MiB)], "tensor: the sender's share_cuda_ is one export row")
equal(query(db, "SELECT api, event, status, accessor_device, owner_device, is_peer, cross_process, ended_by "
                "FROM peer_mappings WHERE process_id = ? ORDER BY started_ns", receiver),
      [("cudaIpcOpenMemHandle", "import", 0, 1, 0, 1, 1, "cudaIpcCloseMemHandle"),
       ("cudaIpcOpenMemHandle", "import", 1, 1, None, None, 1, None),
       ("cudaIpcCloseMemHandle", "end", 0, 1, 0, 1, 1, None)],
      "tensor: the receiver's open (device 1 gets device 0's memory), the damaged one, the close")
equal(query(db, "SELECT src_device, dst_device, path FROM transfers WHERE process_id = ?", receiver),
      [(0, 1, "p2p")], "tensor: the copy out of the shared tensor is a peer copy")
stack = scalar(db, "SELECT python_stack FROM failures") or ""
line = [n for n, l in enumerate(open(script), 1) if "# the failing line" in l][0]
check(stack.splitlines()[0].endswith("py_xproc.py:%d in rebuild_bad_tensor" % line) if stack else False,
      "tensor: the failure's Python stack starts at the failing line (%s)" % (stack.splitlines()[:1]))
check("in tensor_receiver" in stack, "tensor: and goes up through the receiver")
equal(scalar(db, "SELECT rule_id FROM failures"), "ipc/open-invalid-handle", "tensor: the damaged handle's rule")

# ---- expandable segments: pages exported as POSIX fds ----
db = tempdb()
proc = same_results("expandable", db)
how = [l for l in proc.stdout.splitlines() if l.startswith("descriptors:")]
print("# the receiver took the descriptors with " + (how[0].split(":", 1)[1].strip() if how else "?"))
sender = scalar(db, "SELECT process_id FROM peer_mappings WHERE event = 'export'")
receiver = scalar(db, "SELECT process_id FROM peer_mappings WHERE event = 'import'")
counts = dict(((a, d), (c, b)) for a, d, c, b in query(db, "SELECT api, device, calls, bytes FROM mapping_counts WHERE process_id = ?", sender))
equal(counts.get(("cuMemMap", 0)), (4, 8 * MiB), "expandable: the segment's 4 pages mapped on device 0 are counted, not rowed")
equal(counts.get(("cuMemSetAccess", 0)), (1, 8 * MiB), "expandable: device 0's access to them is counted")
equal(query(db, "SELECT api, accessor_device, owner_device, is_peer, cross_process, bytes, ended_by FROM peer_mappings "
                "WHERE process_id = ? AND event = 'access'", sender),
      [("cuMemSetAccess", 1, 0, 1, 0, 8 * MiB, "cuMemUnmap")],
      "expandable: enablePeerAccess(1) on the segment is a peer row, ended by the first unmap")
equal(scalar(db, "SELECT count(*) FROM peer_mappings WHERE process_id = ? AND event = 'export' AND handle_type = 'posix_fd'", sender), 4,
      "expandable: each page's export is a row")
got = query(db, "SELECT event, count(*), min(owner_device), max(cross_process) FROM peer_mappings WHERE process_id = ? AND status = 0 GROUP BY event ORDER BY event", receiver)
equal(got, [("access", 1, 0, 1), ("end", 8, 0, 1), ("import", 4, 0, 1), ("map", 4, 0, 1)],
      "expandable: the receiver's 4 imports, 4 maps, its access and the 8 ends are rows")
equal(scalar(db, "SELECT count(*) FROM peer_mappings WHERE process_id = ? AND event IN ('import', 'map') AND ended_ns IS NULL", receiver), 0,
      "expandable: every import and map is linked to its end")
equal(scalar(db, "SELECT count(*) FROM mapping_counts WHERE process_id = ?", receiver), 0, "expandable: the receiver counts nothing")

# ---- expandable segments, the driver functions from cudaGetDriverEntryPoint ----
# libcudart loaded RTLD_DEEPBIND: its own lookups of the driver reach glibc's dlsym, not the
# guard's, so the functions it hands out are the guard's only through the guard's
# cudaGetDriverEntryPoint (the preload's start included: the process's first cuInit is one of them).
if SANITIZER_PRELOAD:
    print("# entry-point: skipped, the sanitizer's runtime refuses libraries loaded RTLD_DEEPBIND")
else:
    db = tempdb()
    same_results("expandable", db, "entry-point")
    sender = scalar(db, "SELECT process_id FROM peer_mappings WHERE event = 'export'")
    receiver = scalar(db, "SELECT process_id FROM peer_mappings WHERE event = 'import'")
    check(sender and receiver and sender != receiver, "entry-point: the sender's and the receiver's rows")
    counts = dict(((a, d), c) for a, d, c in query(db, "SELECT api, device, calls FROM mapping_counts WHERE process_id = ?", sender))
    equal(counts, {("cuMemMap", 0): 4, ("cuMemSetAccess", 0): 1, ("cuMemUnmap", 0): 3, ("cuMemRelease", 0): 4},
          "entry-point: the sender's own pages mapped, accessed, unmapped and released are counted")
    got = query(db, "SELECT api, event, count(*), min(owner_device), max(accessor_device) FROM peer_mappings "
                    "WHERE process_id = ? AND status = 0 GROUP BY api, event ORDER BY api, event", sender)
    equal(got, [("cuMemExportToShareableHandle", "export", 4, 0, None), ("cuMemSetAccess", "access", 1, 0, 1),
                ("cuMemUnmap", "end", 1, 0, 1)],
          "entry-point: the sender's exports, device 1's access to the segment and the unmap that ends it are rows")
    got = query(db, "SELECT api, event, count(*), min(owner_device), max(accessor_device) FROM peer_mappings "
                    "WHERE process_id = ? AND status = 0 GROUP BY api, event ORDER BY api, event", receiver)
    equal(got, [("cuMemImportFromShareableHandle", "import", 4, 0, None), ("cuMemMap", "map", 4, 0, None),
                ("cuMemRelease", "end", 4, 0, None), ("cuMemSetAccess", "access", 1, 0, 1), ("cuMemUnmap", "end", 4, 0, 1)],
          "entry-point: the receiver's imports, maps, its access (device 1), unmaps and releases are rows")
    equal(scalar(db, "SELECT count(*) FROM peer_mappings WHERE process_id = ? AND event IN ('import', 'map') AND ended_ns IS NULL", receiver), 0,
          "entry-point: every import and map is linked to its end")

# ---- both ABIs of cuIpcOpenMemHandle, through cuGetProcAddress ----
db = tempdb()
proc = run([sys.executable, script, "abi"], db=db)
bare = expectations(run([sys.executable, script, "abi"], preload=False).stdout)
equal(expectations(proc.stdout), bare, "abi: the same codes with and without the guard")
equal(query(db, "SELECT api, status, rule_id FROM failures ORDER BY started_ns"),
      [("cuIpcOpenMemHandle", 1, "ipc/open-invalid-handle"), ("cuIpcOpenMemHandle_v2", 1, "ipc/open-invalid-handle")],
      "abi: cuGetProcAddress hands out the guard for the CUDA 4.1 ABI (cuIpcOpenMemHandle) and the 11.0 one (_v2)")

# ---- one device: nothing crosses a device, only the processes ----
db = tempdb()
same_results("expandable", db, SIMCUDA_DEVICES=1)
equal(scalar(db, "SELECT count(*) FROM peer_mappings WHERE is_peer = 1"), 0, "one device: no peer row")
equal(scalar(db, "SELECT count(*) FROM peer_mappings WHERE cross_process = 1 AND event = 'import'"), 4,
      "one device: the imports still cross a process")
done()
