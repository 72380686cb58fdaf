#!/usr/bin/env python3
"""What PyTorch does when a CUDA tensor goes to another process, with ctypes standing in for torch
(the simulated CUDA has no torch). Function names follow PyTorch's own.

    py_xproc.py tensor       torch.multiprocessing with the default allocator: the sender exports a
                             cudaMalloc block (cudaIpcGetMemHandle); the receiver, a spawned
                             process, opens it with cudaIpcMemLazyEnablePeerAccess, copies it into
                             its own device's memory and closes it. libcudart is opened with ctypes,
                             so every call is looked up with dlsym (as vLLM's custom all-reduce
                             does). The receiver also rebuilds one tensor from a damaged handle.
    py_xproc.py expandable   PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: the sender maps a
                             segment of 2 MiB pages with cuMemCreate/cuMemMap/cuMemSetAccess,
                             gives device 1 access (enablePeerAccess) and exports each page as a
                             POSIX fd; the receiver takes the descriptors with pidfd_open +
                             pidfd_getfd, imports, maps and reads them. The driver functions come
                             from cudaGetDriverEntryPointByVersion, as PyTorch's DriverAPI gets
                             them.
    py_xproc.py expandable entry-point
                             the same, the driver functions from cudaGetDriverEntryPoint (no
                             version: the runtime's own), with libcudart loaded RTLD_DEEPBIND: its
                             own lookups of the driver then reach glibc's dlsym, not the guard's,
                             so what it hands out is the guard's only if the guard's
                             cudaGetDriverEntryPoint made it so.

Prints "EXPECT key=value ..." lines for the test; exit status 0 when the data crossed right.
"""
import ctypes
import multiprocessing
import os
import sys

SIZE = 1 << 20
PAGE = 2 << 20
PAGES = 4
LAZY = 1
D2D, H2D, D2H = 3, 1, 2
POSIX_FD = 1


class IpcHandle(ctypes.Structure):
    """cudaIpcMemHandle_t: 64 bytes, passed by value."""
    _fields_ = [("reserved", ctypes.c_char * 64)]


def runtime(lookup="by-version"):
    # entry-point: the runtime's own driver table must not come from the guard's dlsym (above)
    mode = os.RTLD_DEEPBIND if lookup == "entry-point" else ctypes.DEFAULT_MODE
    rt = ctypes.CDLL("libcudart.so.13", mode=mode)
    rt.cudaIpcOpenMemHandle.argtypes = [ctypes.POINTER(ctypes.c_void_p), IpcHandle, ctypes.c_uint]
    return rt


def devices(rt):
    n = ctypes.c_int()
    rt.cudaGetDeviceCount(ctypes.byref(n))
    return n.value


def fill(n, seed):
    return bytes((k * 7 + seed) & 0xFF for k in range(n))


# ---- default allocator: legacy IPC ----

def share_cuda_(rt, ptr):
    handle = IpcHandle()
    status = rt.cudaIpcGetMemHandle(ctypes.byref(handle), ptr)
    return status, bytes(handle)


def rebuild_cuda_tensor(rt, handle, device):
    """Opens the sender's block on this process's device, as torch.multiprocessing.reductions."""
    rt.cudaSetDevice(device)
    ptr = ctypes.c_void_p()
    status = rt.cudaIpcOpenMemHandle(ctypes.byref(ptr), IpcHandle.from_buffer_copy(handle), LAZY)
    return status, ptr


def rebuild_bad_tensor(rt, handle):
    ptr = ctypes.c_void_p()
    damaged = IpcHandle.from_buffer_copy(bytes(64))
    return rt.cudaIpcOpenMemHandle(ctypes.byref(ptr), damaged, LAZY)  # the failing line


def tensor_receiver(handle, queue):
    rt = runtime()
    device = 1 if devices(rt) > 1 else 0
    status, mapped = rebuild_cuda_tensor(rt, handle, device)
    local = ctypes.c_void_p()
    rt.cudaMalloc(ctypes.byref(local), ctypes.c_size_t(SIZE))
    copied = rt.cudaMemcpy(local, mapped, ctypes.c_size_t(SIZE), D2D)
    host = ctypes.create_string_buffer(SIZE)
    rt.cudaMemcpy(host, local, ctypes.c_size_t(SIZE), D2H)
    bad = rebuild_bad_tensor(rt, handle)
    rt.cudaGetLastError()
    closed = rt.cudaIpcCloseMemHandle(mapped)
    queue.put((status, copied, host.raw == fill(SIZE, 5), bad, closed, device, os.getpid()))


def tensor():
    rt = runtime()
    rt.cudaSetDevice(0)
    block = ctypes.c_void_p()
    rt.cudaMalloc(ctypes.byref(block), ctypes.c_size_t(SIZE))
    rt.cudaMemcpy(block, fill(SIZE, 5), ctypes.c_size_t(SIZE), H2D)
    status, handle = share_cuda_(rt, block)
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    child = ctx.Process(target=tensor_receiver, args=(handle, queue))
    child.start()
    opened, copied, right, bad, closed, device, pid = queue.get(timeout=60)
    child.join()
    rt.cudaFree(block)
    print("EXPECT export=%d open=%d copy=%d data=%d bad=%d close=%d device=%d receiver=%d" %
          (status, opened, copied, right, bad, closed, device, pid))
    return 0 if right and child.exitcode == 0 else 1


# ---- expandable segments: cuMem pages exported as POSIX fds ----

class Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class AllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class Prop(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int), ("location", Location),
                ("win32HandleMetaData", ctypes.c_void_p), ("allocFlags", AllocFlags)]


class AccessDesc(ctypes.Structure):
    _fields_ = [("location", Location), ("flags", ctypes.c_int)]


u64, size_t, vp = ctypes.c_ulonglong, ctypes.c_size_t, ctypes.c_void_p
SIGNATURES = {
    "cuInit": (ctypes.c_uint,),
    "cuDevicePrimaryCtxRetain": (vp, ctypes.c_int),
    "cuCtxSetCurrent": (vp,),
    "cuMemAddressReserve": (vp, size_t, size_t, u64, u64),
    "cuMemAddressFree": (u64, size_t),
    "cuMemCreate": (vp, size_t, vp, u64),
    "cuMemMap": (u64, size_t, size_t, u64, u64),
    "cuMemUnmap": (u64, size_t),
    "cuMemSetAccess": (u64, size_t, vp, size_t),
    "cuMemRelease": (u64,),
    "cuMemExportToShareableHandle": (vp, u64, ctypes.c_int, u64),
    "cuMemImportFromShareableHandle": (vp, vp, ctypes.c_int),
    "cuMemcpyDtoH_v2": (vp, u64, size_t),
    "cuMemcpyHtoD_v2": (u64, vp, size_t),
}


def driver_api(rt, lookup="by-version"):
    """The driver functions through cudaGetDriverEntryPointByVersion, as c10's DriverAPI, or
    through cudaGetDriverEntryPoint."""
    api = {}
    for name, args in SIGNATURES.items():
        fn = ctypes.c_void_p()
        status = ctypes.c_int()
        base = name.replace("_v2", "").encode()
        if lookup == "entry-point":
            rt.cudaGetDriverEntryPoint(base, ctypes.byref(fn), ctypes.c_ulonglong(0), ctypes.byref(status))
        else:
            rt.cudaGetDriverEntryPointByVersion(base, ctypes.byref(fn), 12000, ctypes.c_ulonglong(0),
                                                ctypes.byref(status))
        api[name] = ctypes.CFUNCTYPE(ctypes.c_int, *args)(fn.value)
    return api


def use_device(drv, device):
    ctx = ctypes.c_void_p()
    drv["cuInit"](0)
    drv["cuDevicePrimaryCtxRetain"](ctypes.byref(ctx), device)
    drv["cuCtxSetCurrent"](ctx)


def set_access(drv, ptr, size, device):
    desc = AccessDesc(Location(1, device), 3)
    return drv["cuMemSetAccess"](ptr, size, ctypes.byref(desc), 1)


def pidfd_getfd(pid, fd):
    libc = ctypes.CDLL(None, use_errno=True)
    pidfd = os.pidfd_open(pid)
    try:
        got = libc.syscall(438, pidfd, fd, 0)
        return got if got >= 0 else -ctypes.get_errno()
    finally:
        os.close(pidfd)


def from_shared(pid, fds, conn, lookup):
    """ExpandableSegment::fromShared: take each page's descriptor from the sender, import, map."""
    rt = runtime(lookup)
    drv = driver_api(rt, lookup)
    device = 1 if devices(rt) > 1 else 0
    use_device(drv, device)
    mine = [pidfd_getfd(pid, fd) for fd in fds]
    path = "pidfd_getfd"
    if any(fd < 0 for fd in mine):
        # pidfd_getfd refused (Yama, no CAP_SYS_PTRACE): the same descriptors over the socket
        path = "scm_rights (pidfd_getfd: %s)" % os.strerror(-min(mine))
        conn.send("send")
        from multiprocessing.reduction import recv_handle
        mine = [recv_handle(conn) for _ in fds]
    base = u64()
    drv["cuMemAddressReserve"](ctypes.byref(base), PAGE * PAGES, 0, 0, 0)
    handles = []
    for k, fd in enumerate(mine):
        h = u64()
        status = drv["cuMemImportFromShareableHandle"](ctypes.byref(h), fd, POSIX_FD)
        os.close(fd)
        handles.append(h.value)
        drv["cuMemMap"](base.value + k * PAGE, PAGE, 0, h.value, 0)
    access = set_access(drv, base.value, PAGE * PAGES, device)
    host = ctypes.create_string_buffer(PAGE)
    drv["cuMemcpyDtoH_v2"](host, base.value + PAGE, PAGE)
    right = host.raw == fill(PAGE, 9)
    for k, h in enumerate(handles):
        drv["cuMemUnmap"](base.value + k * PAGE, PAGE)
        drv["cuMemRelease"](h)
    drv["cuMemAddressFree"](base.value, PAGE * PAGES)
    conn.send((status, access, right, device, path, os.getpid()))


def expandable():
    lookup = sys.argv[2] if len(sys.argv) > 2 else "by-version"
    rt = runtime(lookup)
    drv = driver_api(rt, lookup)
    use_device(drv, 0)
    two = devices(rt) > 1
    base = u64()
    drv["cuMemAddressReserve"](ctypes.byref(base), PAGE * PAGES, 0, 0, 0)
    prop = Prop(type=1, requestedHandleTypes=POSIX_FD, location=Location(1, 0))
    handles, fds = [], []
    for k in range(PAGES):
        h = u64()
        drv["cuMemCreate"](ctypes.byref(h), PAGE, ctypes.byref(prop), 0)
        drv["cuMemMap"](base.value + k * PAGE, PAGE, 0, h.value, 0)
        handles.append(h.value)
    set_access(drv, base.value, PAGE * PAGES, 0)
    if two:
        set_access(drv, base.value, PAGE * PAGES, 1)  # enablePeerAccess(1) on the segment
    drv["cuMemcpyHtoD_v2"](base.value + PAGE, fill(PAGE, 9), PAGE)
    for h in handles:
        fd = ctypes.c_int()
        exported = drv["cuMemExportToShareableHandle"](ctypes.byref(fd), h, POSIX_FD, 0)
        fds.append(fd.value)
    ctx = multiprocessing.get_context("spawn")
    parent, child_end = ctx.Pipe()
    child = ctx.Process(target=from_shared, args=(os.getpid(), fds, child_end, lookup))
    child.start()
    reply = parent.recv()
    if reply == "send":
        from multiprocessing.reduction import send_handle
        for fd in fds:
            send_handle(parent, fd, child.pid)
        reply = parent.recv()
    child.join()
    status, access, right, device, path, pid = reply
    for k, h in enumerate(handles):
        drv["cuMemUnmap"](base.value + k * PAGE, PAGE)
        drv["cuMemRelease"](h)
        os.close(fds[k])
    drv["cuMemAddressFree"](base.value, PAGE * PAGES)
    print("EXPECT export=%d import=%d access=%d data=%d device=%d peer_access=%d receiver=%d" %
          (exported, status, access, right, device, int(two), pid))
    print("descriptors: " + path)
    return 0 if right and child.exitcode == 0 else 1


# ---- the ABI versions of cuIpcOpenMemHandle through the driver's own lookup ----

def abi():
    """cuGetProcAddress_v2 asked for cuIpcOpenMemHandle at CUDA 10.0 (the 4.1 ABI, exported under
    the plain name) and at 11.0 (cuIpcOpenMemHandle_v2), as a static runtime resolves its table;
    each opened with a damaged handle."""
    cu = ctypes.CDLL("libcuda.so.1")
    cu.cuInit(0)
    ctx = ctypes.c_void_p()
    cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0)
    cu.cuCtxSetCurrent(ctx)
    codes = []
    for version in (10000, 11000):
        fn = ctypes.c_void_p()
        found = ctypes.c_int()
        cu.cuGetProcAddress_v2(b"cuIpcOpenMemHandle", ctypes.byref(fn), version, u64(0), ctypes.byref(found))
        open_fn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(u64), IpcHandle, ctypes.c_uint)(fn.value)
        ptr = u64()
        codes.append(open_fn(ctypes.byref(ptr), IpcHandle.from_buffer_copy(b"\x5a" * 64), LAZY))
    print("EXPECT v1=%d v2=%d" % tuple(codes))
    return 0


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "expandable"
    sys.exit({"tensor": tensor, "abi": abi}.get(mode, expandable)())
