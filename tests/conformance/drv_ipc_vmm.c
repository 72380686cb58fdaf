/* Conformance, cross-process: virtual memory management through the driver API. The owner (device
 * 0) creates an allocation that may be exported as a POSIX file descriptor, maps it and exports
 * it; the descriptor crosses to the importer, a second process (on device 1 when there are two,
 * else on device 0), over a Unix socket (SCM_RIGHTS), as NCCL's proxy and PyTorch pass it. The
 * importer imports, maps and grants its device access, reads, copies into its own memory and
 * writes; the owner sees the writes. Each call is also made with bad arguments: codes measured on
 * an H100 (FACTS.md). */
#include <cuda.h>

#include <stdint.h>
#include <string.h>

#include "tap.h"
#include "xproc.h"

static void access_desc(CUmemAccessDesc *d, int dev)
{
	memset(d, 0, sizeof(*d));
	d->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	d->location.id = dev;
	d->flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
}

static CUcontext use_device(int ordinal)
{
	CUdevice dev;
	CUcontext ctx = NULL;
	cuDeviceGet(&dev, ordinal);
	check_code(cuDevicePrimaryCtxRetain(&ctx, dev), CUDA_SUCCESS,
		   "primary context of device %d", ordinal);
	cuCtxSetCurrent(ctx);
	return ctx;
}

static void prop_on(CUmemAllocationProp *prop, int dev, CUmemAllocationHandleType types)
{
	memset(prop, 0, sizeof(*prop));
	prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop->location.id = dev;
	prop->requestedHandleTypes = types;
}

static int owner(int sock)
{
	check_code(cuInit(0), CUDA_SUCCESS, "[owner] cuInit");
	use_device(0);
	CUmemAllocationProp prop;
	prop_on(&prop, 0, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
	size_t size = 0;
	check_code(cuMemGetAllocationGranularity(&size, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
		   CUDA_SUCCESS, "[owner] cuMemGetAllocationGranularity");
	CUmemGenericAllocationHandle h = 0, plain = 0;
	CUdeviceptr va = 0;
	CUmemAccessDesc d;
	if (!check_code(cuMemCreate(&h, size, &prop, 0), CUDA_SUCCESS,
			"[owner] cuMemCreate (POSIX fd requested)"))
		return 1;
	check_code(cuMemAddressReserve(&va, size, 0, 0, 0), CUDA_SUCCESS,
		   "[owner] cuMemAddressReserve");
	check_code(cuMemMap(va, size, 0, h, 0), CUDA_SUCCESS, "[owner] cuMemMap");
	access_desc(&d, 0);
	check_code(cuMemSetAccess(va, size, &d, 1), CUDA_SUCCESS,
		   "[owner] cuMemSetAccess device 0");
	unsigned char *host = malloc(size);
	xproc_fill(host, size, 5);
	check_code(cuMemcpyHtoD(va, host, size), CUDA_SUCCESS, "[owner] fill");

	check_code(cuMemMap(va, size, 0, h, 0), CUDA_ERROR_INVALID_VALUE,
		   "[owner] cuMemMap of a range already mapped");
	access_desc(&d, 77);
	check_code(cuMemSetAccess(va, size, &d, 1), CUDA_ERROR_INVALID_VALUE,
		   "[owner] cuMemSetAccess naming device 77");
	int fd = -1, nofd = -1;
	prop_on(&prop, 0, CU_MEM_HANDLE_TYPE_NONE);
	if (check_code(cuMemCreate(&plain, size, &prop, 0), CUDA_SUCCESS,
		       "[owner] cuMemCreate (no handle type)")) {
		check_code(cuMemExportToShareableHandle(
			       &nofd, plain, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
			   CUDA_ERROR_INVALID_VALUE,
			   "[owner] exporting a handle type it was not created with");
		cuMemRelease(plain);
	}
	check_code(
	    cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
	    CUDA_SUCCESS, "[owner] cuMemExportToShareableHandle (POSIX fd)");
	uint64_t sz = size;
	xproc_send(sock, &sz, sizeof(sz), fd);
	close(fd);

	char word[16] = {0};
	xproc_recv(sock, word, sizeof(word), NULL);
	if (strcmp(word, "skipped") == 0) {
		skip("[owner] the importer could not reach the memory");
	} else if (check(strcmp(word, "written") == 0,
			 "[owner] the importer wrote through its mapping")) {
		memset(host, 0, size);
		cuMemcpyDtoH(host, va, size);
		check(xproc_matches(host, size, 13),
		      "[owner] its memory holds what the importer wrote");
	}
	xproc_say(sock, "done");
	check(xproc_hear(sock, "closed"), "[owner] the importer unmapped and released it");
	check_code(cuMemUnmap(va, size), CUDA_SUCCESS, "[owner] cuMemUnmap");
	check_code(cuMemRelease(h), CUDA_SUCCESS, "[owner] cuMemRelease");
	check_code(cuMemAddressFree(va, size), CUDA_SUCCESS, "[owner] cuMemAddressFree");
	free(host);
	return 0;
}

static int importer(int sock)
{
	uint64_t size = 0;
	int fd = -1;
	/* Nothing printed before the owner is done printing. */
	if (!check(xproc_recv(sock, &size, sizeof(size), &fd) == 0 && fd >= 0,
		   "[importer] received the descriptor"))
		return 1;
	check_code(cuInit(0), CUDA_SUCCESS, "[importer] cuInit");
	int n = 0;
	cuDeviceGetCount(&n);
	int dev = n > 1 ? 1 : 0;
	use_device(dev);

	CUmemGenericAllocationHandle h = 0, bad = 0;
	int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	check_code(cuMemImportFromShareableHandle(&bad, (void *)(uintptr_t)null_fd,
						  CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
		   CUDA_ERROR_UNKNOWN, "[importer] importing a descriptor that is not an export");
	/* A closed number that no other thread of the process can be given in the meantime: open()
	 * and its relatives take the lowest free number, so a high one stays closed (a low one was
	 * once reused by the guard's own thread opening its database, and the import then read a
	 * file that was not an export). */
	int closed_fd = fcntl(null_fd, F_DUPFD_CLOEXEC, 200);
	if (closed_fd < 0)
		closed_fd = null_fd;
	else
		close(closed_fd);
	close(null_fd);
	check_code(cuMemImportFromShareableHandle(&bad, (void *)(uintptr_t)closed_fd,
						  CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
		   CUDA_ERROR_UNKNOWN, "[importer] importing a closed descriptor");
	if (!check_code(cuMemImportFromShareableHandle(&h, (void *)(uintptr_t)fd,
						       CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
			CUDA_SUCCESS, "[importer] cuMemImportFromShareableHandle"))
		return 1;
	close(fd); /* the import holds the memory, as NCCL relies on */
	CUmemAllocationProp prop;
	check_code(cuMemGetAllocationPropertiesFromHandle(&prop, h), CUDA_SUCCESS,
		   "[importer] properties of the imported handle");
	check_code(prop.location.id, 0, "[importer] the memory is the owner's device 0");

	CUdeviceptr va = 0;
	CUmemAccessDesc d;
	check_code(cuMemAddressReserve(&va, size, 0, 0, 0), CUDA_SUCCESS,
		   "[importer] cuMemAddressReserve");
	check_code(cuMemMap(va, size, 0, h, 0), CUDA_SUCCESS, "[importer] cuMemMap");
	int can = 1;
	if (dev != 0)
		cuDeviceCanAccessPeer(&can, dev, 0);
	access_desc(&d, dev);
	CUresult r = cuMemSetAccess(va, size, &d, 1);
	unsigned char *host = malloc(size);
	if (!can) {
		/* Assumed (two-GPU proof pending): access to a device without P2P is refused. */
		check_code(r, CUDA_ERROR_INVALID_DEVICE,
			   "[importer] cuMemSetAccess for a device without P2P to the owner");
		xproc_say(sock, "skipped");
	} else {
		check_code(r, CUDA_SUCCESS, "[importer] cuMemSetAccess for its device");
		int ordinal = -1;
		check_code(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, va),
			   CUDA_SUCCESS, "[importer] DEVICE_ORDINAL of the mapping");
		check_code(ordinal, 0, "[importer] the mapping names the owner's device 0");
		check_code(cuMemcpyDtoH(host, va, size), CUDA_SUCCESS,
			   "[importer] read through the mapping");
		check(xproc_matches(host, size, 5), "[importer] it holds the owner's data");
		CUdeviceptr local = 0;
		if (check_code(cuMemAlloc(&local, size), CUDA_SUCCESS,
			       "[importer] cuMemAlloc on its device")) {
			check_code(cuMemcpyDtoD(local, va, size), CUDA_SUCCESS,
				   "[importer] copy from the mapping into its own device memory");
			memset(host, 0, size);
			cuMemcpyDtoH(host, local, size);
			check(xproc_matches(host, size, 5), "[importer] the copy is right");
			cuMemFree(local);
		}
		xproc_fill(host, size, 13);
		check_code(cuMemcpyHtoD(va, host, size), CUDA_SUCCESS,
			   "[importer] write through the mapping");
		cuCtxSynchronize();
		xproc_say(sock, "written");
	}
	xproc_hear(sock, "done");
	check_code(cuMemUnmap(va, size), CUDA_SUCCESS, "[importer] cuMemUnmap");
	check_code(cuMemRelease(h), CUDA_SUCCESS, "[importer] cuMemRelease");
	check_code(cuMemAddressFree(va, size), CUDA_SUCCESS, "[importer] cuMemAddressFree");
	xproc_say(sock, "closed");
	free(host);
	return tap_failed ? 1 : 0;
}

int main(int argc, char **argv)
{
	return xproc_main(argc, argv, owner, importer);
}
