/* Conformance: pointer attributes through the runtime and, via driver entry points, the
 * driver: device memory names its device, pinned host memory is host memory, ordinary malloc
 * memory is unknown to the driver but no runtime error (CUDA >= 11). */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cudaTypedefs.h>

#include <stdint.h>
#include <stdlib.h>

#include "tap.h"

/* 2 MiB: a size no allocator rounds, so range sizes compare exactly. */
#define SIZE ((size_t)2 << 20)

static PFN_cuPointerGetAttribute_v4000 get_attr;
static PFN_cuMemGetAddressRange_v3020 get_range;

static void device_memory(int d)
{
	void *p = NULL;
	cudaSetDevice(d);
	if (!check_code(cudaMalloc(&p, SIZE), cudaSuccess, "cudaMalloc on device %d", d))
		return;
	struct cudaPointerAttributes a;
	check_code(cudaPointerGetAttributes(&a, p), cudaSuccess, "attributes of device %d memory",
		   d);
	check_code(a.type, cudaMemoryTypeDevice, "device %d memory is device memory", d);
	check_code(a.device, d, "device %d memory names device %d", d, d);
	check(a.devicePointer == p, "device pointer of device %d memory is itself", d);
	check(a.hostPointer == NULL, "device %d memory has no host pointer", d);
	char *inner = (char *)p + 12345;
	check_code(cudaPointerGetAttributes(&a, inner), cudaSuccess, "attributes inside it");
	check_code(a.device, d, "an inner pointer names device %d too", d);

	if (get_attr) {
		int ordinal = -1;
		unsigned int type = 0;
		CUdeviceptr start = 0;
		size_t size = 0;
		CUdeviceptr dp = (CUdeviceptr)(uintptr_t)inner;
		void *hp = (void *)1;
		check_code(get_attr(&hp, CU_POINTER_ATTRIBUTE_HOST_POINTER, dp),
			   CUDA_ERROR_INVALID_VALUE, "driver: device memory has no host pointer");
		check_code(get_attr(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, dp),
			   CUDA_SUCCESS, "cuPointerGetAttribute DEVICE_ORDINAL");
		check_code(ordinal, d, "driver: device ordinal %d", d);
		get_attr(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, dp);
		check_code((int)type, CU_MEMORYTYPE_DEVICE, "driver: memory type device");
		get_attr(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, dp);
		check(start == (CUdeviceptr)(uintptr_t)p, "driver: range start is the allocation");
		get_attr(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, dp);
		check(size == SIZE, "driver: range size is the allocation size");
	}
	if (get_range) {
		CUdeviceptr base = 0;
		size_t size = 0;
		check_code(get_range(&base, &size, (CUdeviceptr)(uintptr_t)inner), CUDA_SUCCESS,
			   "cuMemGetAddressRange");
		check(base == (CUdeviceptr)(uintptr_t)p && size == SIZE,
		      "cuMemGetAddressRange gives the allocation");
	}
	check_code(cudaFree(p), cudaSuccess, "cudaFree");
}

static void pinned_memory(int n)
{
	void *h = NULL;
	cudaSetDevice(0);
	if (!check_code(cudaMallocHost(&h, SIZE), cudaSuccess, "cudaMallocHost"))
		return;
	struct cudaPointerAttributes a;
	check_code(cudaPointerGetAttributes(&a, h), cudaSuccess, "attributes of pinned memory");
	check_code(a.type, cudaMemoryTypeHost, "pinned memory is host memory");
	check(a.hostPointer == h, "pinned memory: host pointer is itself");
	check(a.devicePointer != NULL, "pinned memory is mapped for the device");
	check_code(a.device, 0, "pinned memory names the device current at allocation");
	if (get_attr) {
		unsigned int type = 0;
		void *hp = NULL;
		CUdeviceptr dp = (CUdeviceptr)(uintptr_t)h;
		check_code(get_attr(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, dp), CUDA_SUCCESS,
			   "driver: attributes of pinned memory");
		check_code((int)type, CU_MEMORYTYPE_HOST, "driver: pinned memory is host memory");
		get_attr(&hp, CU_POINTER_ATTRIBUTE_HOST_POINTER, dp);
		check(hp == h, "driver: host pointer of pinned memory is itself");
	}
	cudaFreeHost(h);

	if (n < 2) {
		skip("pinned memory allocated with device 1 current: needs two devices");
		return;
	}
	cudaSetDevice(1);
	if (check_code(cudaHostAlloc(&h, SIZE, cudaHostAllocMapped), cudaSuccess,
		       "cudaHostAlloc(Mapped) with device 1 current")) {
		cudaPointerGetAttributes(&a, h);
		check_code(a.type, cudaMemoryTypeHost, "it is host memory");
		check_code(a.device, 1, "it names device 1");
		int ordinal = -1;
		if (get_attr)
			get_attr(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
				 (CUdeviceptr)(uintptr_t)h);
		check_code(ordinal, 1, "driver: its device ordinal is 1");
		cudaFreeHost(h);
	}
}

static void unknown_memory(void)
{
	char *m = malloc(4096);
	int on_stack = 0;
	struct cudaPointerAttributes a;
	check_code(cudaPointerGetAttributes(&a, m), cudaSuccess,
		   "attributes of malloc memory: no error");
	check_code(a.type, cudaMemoryTypeUnregistered, "malloc memory is unregistered");
	check_code(a.device, -2, "  with device -2");
	check(a.devicePointer == NULL, "  no device pointer");
	check(a.hostPointer == m, "  host pointer is itself");
	check_code(cudaPointerGetAttributes(&a, &on_stack), cudaSuccess,
		   "attributes of stack memory: no error");
	check_code(a.type, cudaMemoryTypeUnregistered, "stack memory is unregistered");
	check_code(cudaGetLastError(), cudaSuccess, "no last error after unregistered queries");
	if (get_attr) {
		int ordinal = 0;
		check_code(get_attr(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
				    (CUdeviceptr)(uintptr_t)m),
			   CUDA_ERROR_INVALID_VALUE, "driver: malloc memory is not a CUDA pointer");
	}
	free(m);
}

int main(void)
{
	int n = 0;
	check_code(cudaGetDeviceCount(&n), cudaSuccess, "cudaGetDeviceCount");
	if (!check(n >= 1, "at least one device (%d)", n))
		return tap_finish();
	enum cudaDriverEntryPointQueryResult st;
	cudaGetDriverEntryPointByVersion("cuPointerGetAttribute", (void **)&get_attr, 4000,
					 cudaEnableDefault, &st);
	check(get_attr != NULL, "entry point cuPointerGetAttribute");
	cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", (void **)&get_range, 3020,
					 cudaEnableDefault, &st);
	check(get_range != NULL, "entry point cuMemGetAddressRange");
	for (int d = 0; d < n; d++)
		device_memory(d);
	pinned_memory(n);
	unknown_memory();
	check_code(cudaGetLastError(), cudaSuccess, "no error left behind");
	return tap_finish();
}
