"""Cross-process mappings made with calls the program looked up rather than linked: through the
runtime's cudaGetDriverEntryPoint (the deprecated lookup without a version, which programs built
before CUDA 12.5 call), and through cuGetProcAddress as a static runtime fills its table
(cuGetProcAddress_v2 found with dlsym) and as NCCL fills its own (cuGetProcAddress found with
cudaGetDriverEntryPoint, each call at the version that introduced it). tests/programs/xproc_peer
with XPROC_LOOKUP finds its IPC open and close and its cuMem export, import, map, access, unmap
and release that way on both sides. The guard must hand out its own functions at the ABI asked
for: every call is then a row (or a count) as when linked, and the program gets the same codes and
the same data as without the guard.

The simulated driver's lookups, like the real one's, hand out its own functions, which a preloaded
library of the same names does not replace: a lookup the guard did not wrap leaves no row."""
import os
import subprocess
from harness import *

MiB = 1 << 20


def ipc_pair(db, lookup, preload=True):
    """ipc-owner on device 0, ipc-open on device 1, both finding their calls with lookup; the
    lines both print, the handle left out (it names the process)."""
    env = environment(db, preload, XPROC_LOOKUP=lookup)
    owner = subprocess.Popen([program("xproc_peer"), "ipc-owner", "0"], env=env, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    line = owner.stdout.readline()
    opener = run([program("xproc_peer"), "ipc-open", "1", line.split()[1]], db=db, preload=preload,
                 XPROC_LOOKUP=lookup)
    owner.stdin.close()
    owner.wait()
    return line.split()[0] + "\n" + opener.stdout


def vmm_pair(db, lookup, preload=True):
    """vmm-owner on device 0, vmm-import on device 1, both finding their calls with lookup."""
    sock = os.path.join(tempfolder(), "s")
    owner = subprocess.Popen([program("xproc_peer"), "vmm-owner", "0", sock],
                             env=environment(db, preload, XPROC_LOOKUP=lookup), stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    said = []
    while not said or said[-1].strip() not in ("listening", ""):
        said.append(owner.stdout.readline())
    importer = run([program("xproc_peer"), "vmm-import", "1", sock], db=db, preload=preload,
                   XPROC_LOOKUP=lookup)
    owner.stdin.close()
    owner.wait()
    return "".join(said) + importer.stdout


def rows(db, process, event_filter=""):
    return query(db, "SELECT api, event, status, accessor_device, owner_device, is_peer, cross_process, bytes, "
                     "handle_type, flags, ended_by FROM peer_mappings WHERE process_id = ? " + event_filter +
                     " ORDER BY started_ns", process)


def process_of(db, event):
    return scalar(db, "SELECT process_id FROM peer_mappings WHERE event = ? AND status = 0", event)


# The ABI of cuIpcOpenMemHandle each lookup asks for: the runtime's own version (13.0) and a static
# runtime's 12.0 give the 11.0 one (_v2); NCCL's table asks at 4.1, the first.
LOOKUPS = [("entry-point", "cuIpcOpenMemHandle_v2"), ("procaddr", "cuIpcOpenMemHandle_v2"),
           ("procaddr-nccl", "cuIpcOpenMemHandle")]

for lookup, open_api in LOOKUPS:
    # ---- legacy IPC through the driver's calls ----
    db = tempdb()
    got = ipc_pair(db, lookup)
    equal(got, ipc_pair(None, lookup, preload=False), lookup + ": ipc: the same codes with and without the guard")
    check("cuIpcOpenMemHandle=0" in got and "data=1" in got and "cuIpcCloseMemHandle=0" in got,
          lookup + ": ipc: the looked-up open, copy and close worked (%s)" % got.split())
    importer = process_of(db, "import")
    equal(rows(db, importer),
          [(open_api, "import", 0, 1, 0, 1, 1, MiB, "ipc", 1, "cuIpcCloseMemHandle"),
           ("cuIpcCloseMemHandle", "end", 0, 1, 0, 1, 1, MiB, "ipc", 0, None)],
          lookup + ": ipc: the open (device 1 gains device 0's memory, lazy peer access) and its close are rows")
    equal(query(db, "SELECT api, src_device, dst_device, path FROM transfers WHERE process_id = ?", importer),
          [("cudaMemcpy", 0, 1, "p2p")], lookup + ": ipc: the copy out of the mapping is a peer copy")

    # ---- VMM: every cuMem call of both sides looked up ----
    db = tempdb()
    got = vmm_pair(db, lookup)
    equal(got, vmm_pair(None, lookup, preload=False), lookup + ": vmm: the same codes with and without the guard")
    codes = [line for line in got.split() if "=" in line and not line.startswith("data=")]
    check("data=1" in got and all(c.endswith("=0") for c in codes),
          lookup + ": vmm: every call succeeded and the data crossed (%s)" % got.split())
    owner, importer = process_of(db, "export"), process_of(db, "import")
    check(owner and importer and owner != importer, lookup + ": vmm: the owner's and the importer's rows are two processes")
    equal(rows(db, owner), [("cuMemExportToShareableHandle", "export", 0, None, 0, None, 0, 0, "posix_fd", 0, None)],
          lookup + ": vmm: the owner's looked-up export is a row")
    counts = dict(((a, d), c) for a, d, c in query(db, "SELECT api, device, calls FROM mapping_counts WHERE process_id = ?", owner))
    equal(counts, {("cuMemMap", 0): 1, ("cuMemSetAccess", 0): 1, ("cuMemUnmap", 0): 1, ("cuMemRelease", 0): 1},
          lookup + ": vmm: the owner's looked-up map, access, unmap and release of its own device are counted")
    equal(rows(db, importer), [
        ("cuMemImportFromShareableHandle", "import", 0, None, 0, None, 1, 0, "posix_fd", 0, "cuMemRelease"),
        ("cuMemMap", "map", 0, None, 0, None, 1, 2 * MiB, "posix_fd", 0, "cuMemUnmap"),
        ("cuMemSetAccess", "access", 0, 1, 0, 1, 1, 2 * MiB, "posix_fd", 3, "cuMemUnmap"),
        ("cuMemUnmap", "end", 0, 1, 0, 1, 1, 2 * MiB, "posix_fd", 0, None),
        ("cuMemRelease", "end", 0, None, 0, None, 1, 0, "posix_fd", 0, None)],
          lookup + ": vmm: the importer's looked-up import, map, access (device 1), unmap and release are rows, linked")
    equal(query(db, "SELECT api, src_device, dst_device, bytes, path FROM transfers WHERE process_id = ?", importer),
          [("cuMemcpyDtoD_v2", 0, 1, 2 * MiB, "p2p")], lookup + ": vmm: the copy out of the imported mapping is a peer copy")
    equal(scalar(db, "SELECT count(*) FROM failures"), 0, lookup + ": no failure")

done()
