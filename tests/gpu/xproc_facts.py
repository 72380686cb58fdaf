#!/usr/bin/env python3
"""What the real driver says about cross-process memory, for the simulation to follow: what an
exported cuMem POSIX fd is (/proc/self/fd), which device a VMM mapping's pointer names, and the
exported allocation's handle types. One device is enough. ctypes on libcuda.so.1 only."""
import ctypes
import os

cu = ctypes.CDLL("libcuda.so.1")


class Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class Prop(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int), ("location", Location),
                ("win32HandleMetaData", ctypes.c_void_p), ("allocFlags", ctypes.c_ubyte * 8)]


class AccessDesc(ctypes.Structure):
    _fields_ = [("location", Location), ("flags", ctypes.c_int)]


u64 = ctypes.c_ulonglong
ctx = ctypes.c_void_p()
cu.cuInit(0)
cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0)
cu.cuCtxSetCurrent(ctx)
prop = Prop(type=1, requestedHandleTypes=1, location=Location(1, 0))
gran = ctypes.c_size_t()
cu.cuMemGetAllocationGranularity(ctypes.byref(gran), ctypes.byref(prop), 0)
h = u64()
print("cuMemCreate=%d granularity=%d" % (cu.cuMemCreate(ctypes.byref(h), gran, ctypes.byref(prop), u64(0)), gran.value))
fd = ctypes.c_int(-1)
print("cuMemExportToShareableHandle=%d" % cu.cuMemExportToShareableHandle(ctypes.byref(fd), h, 1, u64(0)))
print("exported fd target: %s" % os.readlink("/proc/self/fd/%d" % fd.value))
va = u64()
cu.cuMemAddressReserve(ctypes.byref(va), gran, ctypes.c_size_t(0), u64(0), u64(0))
cu.cuMemMap.argtypes = [u64, ctypes.c_size_t, ctypes.c_size_t, u64, u64]
print("cuMemMap=%d" % cu.cuMemMap(va, gran, 0, h, 0))
ordinal = ctypes.c_int(-7)
cu.cuPointerGetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_int, u64]
print("DEVICE_ORDINAL of a mapping without access: rc=%d ordinal=%d" %
      (cu.cuPointerGetAttribute(ctypes.byref(ordinal), 9, va), ordinal.value))
desc = AccessDesc(Location(1, 0), 3)
cu.cuMemSetAccess.argtypes = [u64, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t]
print("cuMemSetAccess=%d" % cu.cuMemSetAccess(va, gran, ctypes.byref(desc), 1))
print("DEVICE_ORDINAL of the mapping: rc=%d ordinal=%d" % (cu.cuPointerGetAttribute(ctypes.byref(ordinal), 9, va), ordinal.value))
imp = u64()
print("cuMemImportFromShareableHandle of its own export=%d" % cu.cuMemImportFromShareableHandle(ctypes.byref(imp), ctypes.c_void_p(fd.value), 1))
got = Prop()
print("cuMemGetAllocationPropertiesFromHandle(import)=%d location.id=%d handle types=%d" %
      (cu.cuMemGetAllocationPropertiesFromHandle(ctypes.byref(got), imp), got.location.id, got.requestedHandleTypes))
cu.cuMemUnmap.argtypes = [u64, ctypes.c_size_t]
cu.cuMemUnmap(va, gran)
cu.cuMemRelease(imp)
cu.cuMemRelease(h)
