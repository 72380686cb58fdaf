"""A job's cross-process mappings written by the guard on the simulated CUDA, for the outputs'
tests (test_mapping_outputs.py, test_html.py, test_trace_view.py). Each side of a mapping is a
process of its own (tests/programs/xproc_peer) with a rank of its own, and NVML's index known
(tests/diagnosis/fakenvml), so that the database has what a real job's has:

  ranks 0 -> 1   legacy IPC: rank 0 owns two buffers on GPU 0, rank 1 opens both on GPU 1, copies
                 out of one, closes both
  ranks 2 -> 3   VMM: rank 2 exports GPU 0's memory, rank 3 imports, maps and is given access on
                 its device 0 with CUDA_VISIBLE_DEVICES=1,0: physical GPU 1, the same pair 0 -> 1
                 numbered otherwise
  ranks 4 -> 5   legacy IPC of GPU 1's memory opened on GPU 0 and never closed (live at the end)
  ranks 6 -> 7   VMM of GPU 1's memory imported on GPU 0 and never unmapped or released (live)
  rank 8         an IPC open of a handle that is not one: a failed call, its owner unknown
"""
import os
import subprocess

from harness import *  # noqa: F401,F403

FAKE_NVML = os.environ["P2PG_FAKE_NVML_DIR"]


def _env(rank, **extra):
    extra.setdefault("LD_LIBRARY_PATH", FAKE_NVML + ":" + SIM)
    return dict(RANK=rank, **extra)


def ipc_pair(db, owner_rank, owner_device, open_rank, open_device, buffers=1, **open_env):
    """xproc_peer ipc-owner with `buffers` buffers on owner_device, ipc-open of them all."""
    owner = subprocess.Popen([program("xproc_peer"), "ipc-owner"] + [str(owner_device)] * buffers,
                             env=environment(db, **_env(owner_rank)), stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    handles = [owner.stdout.readline().split()[1] for _ in range(buffers)]
    opener = run([program("xproc_peer"), "ipc-open", str(open_device)] + handles, db=db,
                 **_env(open_rank, **open_env))
    owner.stdin.close()
    owner.wait()
    return opener.stdout


def vmm_pair(db, owner_rank, owner_device, import_rank, import_device, **import_env):
    """xproc_peer vmm-owner on owner_device, vmm-import on import_device."""
    sock = os.path.join(tempfolder(), "s")
    owner = subprocess.Popen([program("xproc_peer"), "vmm-owner", str(owner_device), sock],
                             env=environment(db, **_env(owner_rank)), stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    while owner.stdout.readline().strip() not in ("listening", ""):
        pass
    importer = run([program("xproc_peer"), "vmm-import", str(import_device), sock], db=db,
                   **_env(import_rank, **import_env))
    owner.stdin.close()
    owner.wait()
    return importer.stdout


def mapping_job(db, first_rank=0):
    """The job above, its ranks from first_rank on."""
    r = first_rank
    out = ipc_pair(db, r, 0, r + 1, 1, buffers=2)
    check("data=1" in out, "mapping job: rank %d reads rank %d's memory over IPC (%s)" % (r + 1, r, out.split()))
    out = vmm_pair(db, r + 2, 0, r + 3, 0, CUDA_VISIBLE_DEVICES="1,0")
    check("data=1" in out, "mapping job: rank %d reads rank %d's memory over VMM (%s)" % (r + 3, r + 2, out.split()))
    ipc_pair(db, r + 4, 1, r + 5, 0, XPROC_KEEP="1")
    vmm_pair(db, r + 6, 1, r + 7, 0, XPROC_KEEP="1")
    out = run([program("xproc_peer"), "ipc-open", "1", "not-a-handle"], db=db, **_env(r + 8)).stdout
    check("cudaIpcOpenMemHandle=1" in out, "mapping job: a handle that is not one is refused (%s)" % out.split())
