#!/usr/bin/env python3
"""A Python program calling the CUDA runtime through ctypes: peer copies, then a failing enable.

    py_peer.py [pydll|cdll] [thread]

pydll (the default): PyDLL keeps the GIL held during each call. cdll: ctypes.CDLL releases it around
every call, as PyTorch does around its CUDA work. thread: the work runs in a threading.Thread. The
guard records this script's line in every case (the interpreter's signal-safe traceback writer needs
no GIL).
"""
import ctypes
import sys
import threading

rt = (ctypes.CDLL if "cdll" in sys.argv[1:] else ctypes.PyDLL)("libcudart.so.13")
cudaMemcpyDeviceToDevice = 3


def check(err, what):
    if err != 0:
        sys.exit("%s failed: %d" % (what, err))


def allocate(device, size):
    check(rt.cudaSetDevice(device), "cudaSetDevice")
    ptr = ctypes.c_void_p()
    check(rt.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(size)), "cudaMalloc")
    return ptr


def copy_between_devices(dst, src, size):
    check(rt.cudaMemcpyPeer(dst, 1, src, 0, ctypes.c_size_t(size)), "cudaMemcpyPeer")
    check(rt.cudaMemcpy(dst, src, ctypes.c_size_t(size), cudaMemcpyDeviceToDevice), "cudaMemcpy")


def enable_own_device():
    check(rt.cudaSetDevice(0), "cudaSetDevice")
    return rt.cudaDeviceEnablePeerAccess(0, 0)  # the failing line


def main():
    count = ctypes.c_int()
    check(rt.cudaGetDeviceCount(ctypes.byref(count)), "cudaGetDeviceCount")
    if count.value < 2:
        sys.exit(77)
    a = allocate(0, 1 << 16)
    b = allocate(1, 1 << 16)
    copy_between_devices(b, a, 1 << 16)
    status = enable_own_device()
    rt.cudaGetLastError()
    print("EXPECT transfers=2 bytes=%d failures=1 status=%d" % (2 << 16, status))


def in_thread():
    worker = threading.Thread(target=main, name="peer-worker")
    worker.start()
    worker.join()


if __name__ == "__main__":
    if "thread" in sys.argv[1:]:
        in_thread()
    else:
        main()
