/* Simulated driver: the memory API (allocation, pinned host memory, pointer attributes) over the
 * address ranges of drv_mem.c. */
#include "sim.h"

#include <stdint.h>

SIM_API CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
	SIM_FAULT();
	struct sim_ctx *ctx;
	CUresult r = sim_ctx_current(&ctx);
	if (r != CUDA_SUCCESS)
		return r;
	if (!dptr)
		return CUDA_ERROR_INVALID_VALUE;
	r = sim_capture_forbids_unsafe();
	if (r != CUDA_SUCCESS)
		return r;
	uintptr_t p;
	r = sim_mem_alloc(ctx, ctx->dev, SIM_ALLOC_PLAIN, bytesize, 0, &p);
	if (r == CUDA_SUCCESS)
		*dptr = (CUdeviceptr)p;
	return r;
}

SIM_API CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
				    size_t Height, unsigned int ElementSizeBytes)
{
	SIM_FAULT();
	if (!pPitch || WidthInBytes == 0 || Height == 0 ||
	    (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
		return CUDA_ERROR_INVALID_VALUE;
	size_t pitch = (WidthInBytes + 511) & ~(size_t)511;
	CUresult r = cuMemAlloc_v2(dptr, pitch * Height);
	if (r == CUDA_SUCCESS)
		*pPitch = pitch;
	return r;
}

SIM_API CUresult cuMemFree_v2(CUdeviceptr dptr)
{
	SIM_FAULT();
	CUresult r = sim_ready();
	if (r != CUDA_SUCCESS)
		return r;
	if (dptr == 0)
		return CUDA_SUCCESS; /* measured */
	if (sim_mem_region_of(dptr) < 0)
		return CUDA_ERROR_INVALID_VALUE;
	r = sim_capture_forbids_unsafe();
	if (r != CUDA_SUCCESS)
		return r;
	return sim_mem_free(0, dptr);
}

SIM_API CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
	SIM_FAULT();
	struct sim_ctx *ctx;
	CUresult r = sim_ctx_current(&ctx);
	if (r != CUDA_SUCCESS)
		return r;
	if (!pp || (Flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
					CU_MEMHOSTALLOC_WRITECOMBINED)))
		return CUDA_ERROR_INVALID_VALUE;
	if (bytesize == 0) {
		*pp = NULL; /* measured: zero bytes succeed */
		return CUDA_SUCCESS;
	}
	r = sim_capture_forbids_unsafe();
	if (r != CUDA_SUCCESS)
		return r;
	uintptr_t p;
	r = sim_mem_alloc(ctx, SIM_REGION_HOST, SIM_ALLOC_HOST, bytesize, Flags, &p);
	if (r == CUDA_SUCCESS)
		*pp = (void *)p;
	return r;
}

SIM_API CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
	SIM_FAULT();
	return cuMemHostAlloc(pp, bytesize, 0);
}

SIM_API CUresult cuMemFreeHost(void *p)
{
	SIM_FAULT();
	CUresult r = sim_ready();
	if (r != CUDA_SUCCESS)
		return r;
	r = sim_capture_forbids_unsafe();
	if (r != CUDA_SUCCESS)
		return r;
	return sim_mem_free(SIM_REGION_HOST, (uintptr_t)p);
}

SIM_API CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
	SIM_FAULT();
	CUresult r = sim_ready();
	if (r != CUDA_SUCCESS)
		return r;
	struct sim_alloc *a = sim_mem_find((uintptr_t)p);
	if (!pdptr || Flags != 0 || !a || a->region != SIM_REGION_HOST)
		return CUDA_ERROR_INVALID_VALUE;
	*pdptr = (CUdeviceptr)(uintptr_t)p;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuMemHostGetFlags(unsigned int *pFlags, void *p)
{
	SIM_FAULT();
	CUresult r = sim_ready();
	if (r != CUDA_SUCCESS)
		return r;
	struct sim_alloc *a = sim_mem_find((uintptr_t)p);
	if (!pFlags || !a || a->region != SIM_REGION_HOST)
		return CUDA_ERROR_INVALID_VALUE;
	*pFlags = a->flags;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuMemGetInfo_v2(size_t *free, size_t *total)
{
	SIM_FAULT();
	struct sim_ctx *ctx;
	CUresult r = sim_ctx_current(&ctx);
	if (r != CUDA_SUCCESS)
		return r;
	if (!free || !total)
		return CUDA_ERROR_INVALID_VALUE;
	*total = sim_cfg.dev_mem;
	*free = sim_cfg.dev_mem - sim_mem_used(ctx->dev);
	return CUDA_SUCCESS;
}

SIM_API CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
	SIM_FAULT();
	CUresult r = sim_ready();
	if (r != CUDA_SUCCESS)
		return r;
	struct sim_alloc *a = sim_mem_find((uintptr_t)dptr);
	if (!a)
		return CUDA_ERROR_NOT_FOUND;
	if (pbase)
		*pbase = (CUdeviceptr)a->base;
	if (psize)
		*psize = a->size;
	return CUDA_SUCCESS;
}

/* Fills one attribute; unknown memory gets the "default NULL values" of cuPointerGetAttributes
 * and CUDA_ERROR_INVALID_VALUE, which cuPointerGetAttribute passes on. */
static CUresult one_attribute(CUpointer_attribute attr, void *data, uintptr_t p,
			      struct sim_alloc *a)
{
	switch (attr) {
	case CU_POINTER_ATTRIBUTE_CONTEXT:
		*(CUcontext *)data = a ? (CUcontext)a->ctx : NULL;
		break;
	case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
		*(unsigned int *)data = !a			       ? 0
					: a->region == SIM_REGION_HOST ? CU_MEMORYTYPE_HOST
								       : CU_MEMORYTYPE_DEVICE;
		break;
	case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
		*(CUdeviceptr *)data = a ? (CUdeviceptr)p : 0;
		break;
	case CU_POINTER_ATTRIBUTE_HOST_POINTER:
		if (a && a->region != SIM_REGION_HOST) {
			*(void **)data = NULL;
			return CUDA_ERROR_INVALID_VALUE; /* device memory has no host address */
		}
		*(void **)data = a ? (void *)p : NULL;
		break;
	case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
		*(int *)data = a && a->kind == SIM_ALLOC_PLAIN;
		break;
	case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
	case CU_POINTER_ATTRIBUTE_IS_MANAGED:
	case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
	case CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE:
		*(int *)data = 0;
		break;
	case CU_POINTER_ATTRIBUTE_MAPPED:
		*(int *)data = a != NULL;
		break;
	case CU_POINTER_ATTRIBUTE_BUFFER_ID:
	case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
		*(unsigned long long *)data = a ? a->id : 0;
		break;
	case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
		/* A legacy IPC mapping of another device's memory is named by the device of the
		 * context it is mapped into, not by the device the memory is on (measured on two
		 * H200s, 2026-11-29: an importer on device 1 got 1 for device 0's memory). */
		*(int *)data = !a ? -2 : a->ipc_dev >= 0 && a->ctx ? a->ctx->dev : a->dev;
		break;
	case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
	case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
		*(CUdeviceptr *)data = a ? (CUdeviceptr)a->base : 0;
		break;
	case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
		*(size_t *)data = a ? a->size : 0;
		break;
	case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
		*(size_t *)data = a ? a->npages << SIM_PAGE_SHIFT : 0;
		break;
	case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
		*(unsigned long long *)data =
		    a && a->kind == SIM_ALLOC_VMM ? sim_vmm_handle_types(a->phys) : 0;
		break;
	case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
		*(unsigned int *)data = a ? CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE : 0;
		break;
	case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
		*(void **)data = NULL;
		break;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
	return a ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIM_API CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
	SIM_FAULT();
	CUresult r = sim_ready();
	if (r != CUDA_SUCCESS)
		return r;
	if (!data)
		return CUDA_ERROR_INVALID_VALUE;
	struct sim_alloc *a = sim_mem_find((uintptr_t)ptr);
	if (!a)
		return CUDA_ERROR_INVALID_VALUE;
	return one_attribute(attribute, data, (uintptr_t)ptr, a);
}

SIM_API CUresult cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute *attributes,
					void **data, CUdeviceptr ptr)
{
	SIM_FAULT();
	CUresult r = sim_ready();
	if (r != CUDA_SUCCESS)
		return r;
	if (numAttributes == 0 || !attributes || !data)
		return CUDA_ERROR_INVALID_VALUE;
	struct sim_alloc *a = sim_mem_find((uintptr_t)ptr);
	for (unsigned i = 0; i < numAttributes; i++) {
		if (!data[i])
			return CUDA_ERROR_INVALID_VALUE;
		r = one_attribute(attributes[i], data[i], (uintptr_t)ptr, a);
		/* Device memory has no host pointer: the list form reports NULL, not an error. */
		if (r != CUDA_SUCCESS &&
		    (attributes[i] < CU_POINTER_ATTRIBUTE_CONTEXT ||
		     attributes[i] > CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE))
			return r;
	}
	return CUDA_SUCCESS;
}
