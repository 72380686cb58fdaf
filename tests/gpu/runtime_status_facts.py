#!/usr/bin/env python3
"""The statuses the real CUDA runtime returns in the cases the triage rules tell apart, checked
rather than taken from threads: a memory pool's owner losing or narrowing its own access
(cuda/mempool-access-change-on-owner-device, cuda/invalid-device-ordinal-triage), IPC handles of
memory that cannot be exported (cuda/invalid-argument-triage), device ordinals that do not exist,
device flags set on a device whose context is active (cuda/set-on-active-process-triage), a
child forked after its parent set CUDA up (cuda/invalid-resource-handle-triage), and the export
kinds a device answers for memory pools against what creating and exporting such a pool really
does without an IMEX channel (rmm/async-pool-export-handle-type-unsupported). One device is
enough. ctypes on libcudart.so.13 only.

    python3 runtime_status_facts.py     prints one "| case | status | name |" line per case
"""
import ctypes
import glob
import json
import os
import subprocess
import sys


def load_runtime():
    for path in (["libcudart.so.13"] + glob.glob("/usr/local/cuda*/lib64/libcudart.so.13")):
        try:
            return ctypes.CDLL(path)
        except OSError:
            pass
    sys.exit("libcudart.so.13 not found")


rt = load_runtime()
rt.cudaGetErrorName.restype = ctypes.c_char_p
ptr = ctypes.c_void_p
rows = []


def call(case, fn, *args):
    if not hasattr(rt, fn):  # the simulated runtime has no memory pools
        rows.append((case, -1, f"{fn} is not in this runtime"))
        return -1
    rc = getattr(rt, fn)(*args)
    rows.append((case, rc, rt.cudaGetErrorName(rc).decode()))
    rt.cudaGetLastError()  # a failure is kept for cudaGetLastError; the next case starts clean
    return rc


class PoolProps(ctypes.Structure):
    """cudaMemPoolProps of CUDA 13 (driver_types.h)."""
    _fields_ = [("allocType", ctypes.c_int), ("handleTypes", ctypes.c_int),
                ("locationType", ctypes.c_int), ("locationId", ctypes.c_int),
                ("win32SecurityAttributes", ctypes.c_void_p), ("maxSize", ctypes.c_size_t),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 54)]


POOL_KINDS = {"posix-fd": ("POSIX file descriptor", 0x1), "fabric": ("fabric", 0x8)}


def pool_case(key, export):
    """In this process (a child of main's): creates a pool whose allocations export as the kind,
    allocates from it, exports it when asked, frees the allocation; prints its rows as JSON."""
    kind, handle_type = POOL_KINDS[key]
    rt.cudaSetDevice(0)
    props = PoolProps(allocType=1, handleTypes=handle_type, locationType=1, locationId=0)
    pool = ptr()
    if call(f"cudaMemPoolCreate, handleTypes {kind}", "cudaMemPoolCreate", ctypes.byref(pool),
            ctypes.byref(props)) == 0:
        mem = ptr()
        call(f"cudaMallocFromPoolAsync from the {kind} pool", "cudaMallocFromPoolAsync",
             ctypes.byref(mem), ctypes.c_size_t(2 << 20), pool, ptr())
        rt.cudaDeviceSynchronize()
        if export:
            handle = (ctypes.c_char * 64)()
            call(f"cudaMemPoolExportToShareableHandle of the {kind} pool",
                 "cudaMemPoolExportToShareableHandle", handle, pool, handle_type, 0)
        after = "after its export" if export else "not exported"
        print(json.dumps(rows), flush=True)  # the rows so far, should the free below crash
        call(f"cudaFreeAsync of the {kind} pool's allocation, {after}", "cudaFreeAsync", mem, ptr())
        call(f"cudaDeviceSynchronize after that free ({kind}, {after})", "cudaDeviceSynchronize")
        rt.cudaMemPoolDestroy(pool)
    print(json.dumps(rows), flush=True)


def pool_cases():
    """Each pool case in a process of its own: one of them may kill its process in the driver."""
    for key in POOL_KINDS:
        for export in (False, True):
            args = [sys.executable, os.path.abspath(__file__), "--pool", key] + (["--export"] if export else [])
            child = subprocess.run(args, capture_output=True, text=True)
            lines = [l for l in child.stdout.splitlines() if l.startswith("[")]
            got = json.loads(lines[-1]) if lines else []
            rows.extend(tuple(r) for r in got)
            if child.returncode != 0:
                what = f"signal {-child.returncode}" if child.returncode < 0 else f"exit {child.returncode}"
                rows.append((f"  the process ({POOL_KINDS[key][0]} pool, "
                             + ("exported" if export else "not exported") + ") ended", child.returncode,
                             f"{what} after the rows above"))


class Access(ctypes.Structure):
    """cudaMemAccessDesc: a location (type, id) and the access flags."""
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int), ("flags", ctypes.c_int)]


class AllocationProp(ctypes.Structure):
    """CUmemAllocationProp of CUDA 13 (cuda.h)."""
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int),
                ("locationType", ctypes.c_int), ("locationId", ctypes.c_int),
                ("win32HandleMetaData", ctypes.c_void_p), ("compressionType", ctypes.c_ubyte),
                ("gpuDirectRDMACapable", ctypes.c_ubyte), ("usage", ctypes.c_ushort),
                ("reserved", ctypes.c_ubyte * 4)]


def vmm_allocation(size):
    """cuMemCreate + cuMemAddressReserve + cuMemMap + cuMemSetAccess on device 0, as PyTorch's
    expandable segments and NVSHMEM's heap allocate; the mapped address, or None."""
    try:
        cu = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    if not hasattr(cu, "cuMemCreate"):
        return None
    prop = AllocationProp(type=1, requestedHandleTypes=1, locationType=1, locationId=0)
    gran = ctypes.c_size_t()
    if cu.cuMemGetAllocationGranularity(ctypes.byref(gran), ctypes.byref(prop), 0) != 0:
        return None
    size = (size + gran.value - 1) // gran.value * gran.value
    handle, addr = ctypes.c_ulonglong(), ctypes.c_ulonglong()
    if (cu.cuMemCreate(ctypes.byref(handle), ctypes.c_size_t(size), ctypes.byref(prop),
                       ctypes.c_ulonglong(0)) != 0 or
            cu.cuMemAddressReserve(ctypes.byref(addr), ctypes.c_size_t(size), ctypes.c_size_t(0),
                                   ctypes.c_ulonglong(0), ctypes.c_ulonglong(0)) != 0 or
            cu.cuMemMap(addr, ctypes.c_size_t(size), ctypes.c_size_t(0), handle,
                        ctypes.c_ulonglong(0)) != 0):
        return None
    desc = Access(1, 0, 3)  # CU_MEM_LOCATION_TYPE_DEVICE 0, read-write
    if cu.cuMemSetAccess(addr, ctypes.c_size_t(size), ctypes.byref(desc), ctypes.c_size_t(1)):
        return None
    return addr.value


def ipc_of_other_memory_kinds(handle):
    """Legacy CUDA IPC exports only cudaMalloc memory (the runtime's documentation): what it
    returns for the device memory that other allocators hand out (MPICH, Open MPI and UCX send
    such buffers through cudaIpcGetMemHandle; mpi/mpich-gpu-ipc-handle-create-non-legacy-ipc-
    memory, ipc/get-handle-not-device-allocation)."""
    pooled = ptr()
    if call("cudaMallocAsync from the default pool", "cudaMallocAsync", ctypes.byref(pooled),
            ctypes.c_size_t(1 << 20), None) == 0:
        rt.cudaStreamSynchronize(None)
        call("cudaIpcGetMemHandle of a cudaMallocAsync allocation", "cudaIpcGetMemHandle",
             handle, pooled)
    managed = ptr()
    if call("cudaMallocManaged", "cudaMallocManaged", ctypes.byref(managed),
            ctypes.c_size_t(1 << 20), 1) == 0:
        call("cudaIpcGetMemHandle of a cudaMallocManaged allocation", "cudaIpcGetMemHandle",
             handle, managed)
    mapped = vmm_allocation(1 << 21)
    if mapped is None:
        rows.append(("cuMemCreate + cuMemMap of 2 MiB", -1, "not made (no driver API here)"))
    else:
        call("cudaIpcGetMemHandle of cuMemCreate + cuMemMap memory", "cudaIpcGetMemHandle",
             handle, ptr(mapped))


def main():
    rt.cudaSetDevice(0)
    buf = ptr()
    rt.cudaMalloc(ctypes.byref(buf), ctypes.c_size_t(1 << 20))
    pool = ptr()
    if hasattr(rt, "cudaDeviceGetDefaultMemPool"):
        rt.cudaDeviceGetDefaultMemPool(ctypes.byref(pool), 0)
    for flags, what in ((0, "none"), (1, "read-only"), (3, "read-write")):
        desc = Access(1, 0, flags)  # cudaMemLocationTypeDevice, device 0
        call(f"cudaMemPoolSetAccess, the owner device's own access set to {what}",
             "cudaMemPoolSetAccess", pool, ctypes.byref(desc), ctypes.c_size_t(1))

    handle = (ctypes.c_char * 64)()
    host = ptr()
    rt.cudaMallocHost(ctypes.byref(host), ctypes.c_size_t(1 << 20))
    call("cudaIpcGetMemHandle of pinned host memory", "cudaIpcGetMemHandle", handle, host)
    call("cudaIpcGetMemHandle of a pointer 4 KiB into a cudaMalloc buffer",
         "cudaIpcGetMemHandle", handle, ptr(buf.value + 4096))
    ipc_of_other_memory_kinds(handle)
    count = ctypes.c_int()
    rt.cudaGetDeviceCount(ctypes.byref(count))
    call(f"cudaSetDevice({count.value}), one past the last device", "cudaSetDevice", count.value)
    call("cudaSetDevice(-1)", "cudaSetDevice", -1)
    rt.cudaSetDevice(0)
    call("cudaSetDeviceFlags(cudaDeviceMapHost) with device 0's context active",
         "cudaSetDeviceFlags", 8)

    kinds = ctypes.c_int()
    rc = rt.cudaDeviceGetAttribute(ctypes.byref(kinds), 119, 0)  # MemoryPoolSupportedHandleTypes
    rows.append(("cudaDevAttrMemoryPoolSupportedHandleTypes of device 0; IMEX channel folder "
                 + ("present" if os.path.isdir("/dev/nvidia-caps-imex-channels") else "absent"),
                 rc, f"answer {kinds.value}"))
    pool_cases()

    stream = ptr()
    rt.cudaStreamCreate(ctypes.byref(stream))
    sys.stdout.flush()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        child = ptr()
        call("after fork, in the child: cudaMalloc", "cudaMalloc", ctypes.byref(child),
             ctypes.c_size_t(4096))
        call("after fork, in the child: cudaStreamSynchronize of the parent's stream",
             "cudaStreamSynchronize", stream)
        call("after fork, in the child: cudaStreamCreate", "cudaStreamCreate",
             ctypes.byref(child))
        os.write(write_end, json.dumps(rows[-3:]).encode())
        os._exit(0)
    os.close(write_end)
    got = b""
    while chunk := os.read(read_end, 4096):
        got += chunk
    os.waitpid(pid, 0)
    rows.extend(json.loads(got) if got else [("after fork: the child said nothing", -1, "?")])

    for case, rc, name in rows:
        print(f"| {case} | {rc} | {name} |")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--pool":
        pool_case(sys.argv[2], "--export" in sys.argv)
    else:
        main()
