/* Conformance, cross-process: a stream-ordered memory pool shared through the runtime, as
 * PyTorch's and RMM's cudaMallocAsync pools are. The owner (device 0) creates a pool whose memory
 * may be exported as a POSIX file descriptor, allocates from it, fills the allocation and exports
 * the pool and the pointer; the descriptor and the pointer's export data cross to the importer, a
 * second process (on device 1 when there are two, else on device 0), over a Unix socket. The
 * importer imports the pool and the pointer, gives its device access, reads, writes and frees its
 * import; the owner sees the writes. A pool asked for fabric handles is created, and its export is
 * refused with cudaErrorNotPermitted where no IMEX channel exists (measured on an H200,
 * tests/gpu/runtime_status_facts.py); its memory is not allocated here, since freeing an
 * allocation of such a pool after the refused export crashed that process inside the driver. */
#include <cuda_runtime_api.h>

#include <stdint.h>
#include <string.h>

#include "tap.h"
#include "xproc.h"

#define SIZE (1u << 20)

static void pool_props(struct cudaMemPoolProps *p, int dev, enum cudaMemAllocationHandleType types)
{
	memset(p, 0, sizeof(*p));
	p->allocType = cudaMemAllocationTypePinned;
	p->handleTypes = types;
	p->location.type = cudaMemLocationTypeDevice;
	p->location.id = dev;
}

static int owner(int sock)
{
	check_code(cudaSetDevice(0), cudaSuccess, "[owner] cudaSetDevice 0");
	struct cudaMemPoolProps props;
	cudaMemPool_t pool = NULL, fabric = NULL;
	pool_props(&props, 0, cudaMemHandleTypeFabric);
	if (check_code(cudaMemPoolCreate(&fabric, &props), cudaSuccess,
		       "[owner] cudaMemPoolCreate (fabric handles requested)")) {
		int64_t unused[8];
		check_code(
		    cudaMemPoolExportToShareableHandle(unused, fabric, cudaMemHandleTypeFabric, 0),
		    cudaErrorNotPermitted,
		    "[owner] exporting a fabric pool without an IMEX channel");
		cudaGetLastError();
	}
	pool_props(&props, 0, cudaMemHandleTypePosixFileDescriptor);
	if (!check_code(cudaMemPoolCreate(&pool, &props), cudaSuccess,
			"[owner] cudaMemPoolCreate (POSIX fd requested)"))
		return 1;
	void *ptr = NULL;
	check_code(cudaMallocFromPoolAsync(&ptr, SIZE, pool, 0), cudaSuccess,
		   "[owner] cudaMallocFromPoolAsync");
	unsigned char *host = malloc(SIZE);
	xproc_fill(host, SIZE, 7);
	check_code(cudaMemcpy(ptr, host, SIZE, cudaMemcpyHostToDevice), cudaSuccess,
		   "[owner] fill");
	int fd = -1;
	check_code(
	    cudaMemPoolExportToShareableHandle(&fd, pool, cudaMemHandleTypePosixFileDescriptor, 0),
	    cudaSuccess, "[owner] cudaMemPoolExportToShareableHandle (POSIX fd)");
	struct cudaMemPoolPtrExportData data;
	memset(&data, 0, sizeof(data));
	check_code(cudaMemPoolExportPointer(&data, ptr), cudaSuccess,
		   "[owner] cudaMemPoolExportPointer");
	xproc_send(sock, &data, sizeof(data), fd);
	close(fd);

	char word[16] = {0};
	xproc_recv(sock, word, sizeof(word), NULL);
	if (strcmp(word, "skipped") == 0) {
		skip("[owner] the importer's device cannot reach the pool");
	} else if (check(strcmp(word, "written") == 0,
			 "[owner] the importer wrote through its import")) {
		memset(host, 0, SIZE);
		cudaMemcpy(host, ptr, SIZE, cudaMemcpyDeviceToHost);
		check(xproc_matches(host, SIZE, 17),
		      "[owner] its memory holds what the importer wrote");
	}
	xproc_say(sock, "done");
	check(xproc_hear(sock, "closed"), "[owner] the importer freed its import");
	check_code(cudaFreeAsync(ptr, 0), cudaSuccess, "[owner] cudaFreeAsync");
	check_code(cudaStreamSynchronize(0), cudaSuccess, "[owner] the free is done");
	check_code(cudaMemPoolDestroy(pool), cudaSuccess, "[owner] cudaMemPoolDestroy");
	free(host);
	return 0;
}

static int importer(int sock)
{
	struct cudaMemPoolPtrExportData data;
	int fd = -1;
	/* Nothing printed before the owner is done printing. */
	if (!check(xproc_recv(sock, &data, sizeof(data), &fd) == 0 && fd >= 0,
		   "[importer] received the descriptor and the pointer's export data"))
		return 1;
	int n = 0;
	cudaGetDeviceCount(&n);
	int dev = n > 1 ? 1 : 0;
	check_code(cudaSetDevice(dev), cudaSuccess, "[importer] cudaSetDevice");
	cudaMemPool_t pool = NULL;
	if (!check_code(cudaMemPoolImportFromShareableHandle(
			    &pool, (void *)(uintptr_t)fd, cudaMemHandleTypePosixFileDescriptor, 0),
			cudaSuccess, "[importer] cudaMemPoolImportFromShareableHandle"))
		return 1;
	close(fd);
	if (dev != 0) {
		int can = 0;
		cudaDeviceCanAccessPeer(&can, dev, 0);
		struct cudaMemAccessDesc d = {
		    .location = {.type = cudaMemLocationTypeDevice, .id = dev},
		    .flags = cudaMemAccessFlagsProtReadWrite};
		cudaError_t e = cudaMemPoolSetAccess(pool, &d, 1);
		if (!can) {
			/* Assumed (two-GPU proof pending), as for cuMemSetAccess. */
			check_code(
			    e, cudaErrorInvalidDevice,
			    "[importer] cudaMemPoolSetAccess for a device without P2P to the "
			    "owner");
			cudaGetLastError();
			xproc_say(sock, "skipped");
			xproc_hear(sock, "done");
			xproc_say(sock, "closed");
			return tap_failed ? 1 : 0;
		}
		check_code(e, cudaSuccess, "[importer] cudaMemPoolSetAccess for its device");
	}
	void *ptr = NULL;
	if (!check_code(cudaMemPoolImportPointer(&ptr, pool, &data), cudaSuccess,
			"[importer] cudaMemPoolImportPointer"))
		return 1;
	unsigned char *host = malloc(SIZE);
	check_code(cudaMemcpy(host, ptr, SIZE, cudaMemcpyDeviceToHost), cudaSuccess,
		   "[importer] read through the import");
	check(xproc_matches(host, SIZE, 7), "[importer] it holds the owner's data");
	xproc_fill(host, SIZE, 17);
	check_code(cudaMemcpy(ptr, host, SIZE, cudaMemcpyHostToDevice), cudaSuccess,
		   "[importer] write through the import");
	cudaDeviceSynchronize();
	xproc_say(sock, "written");
	xproc_hear(sock, "done");
	check_code(cudaFreeAsync(ptr, 0), cudaSuccess, "[importer] cudaFreeAsync of the import");
	check_code(cudaStreamSynchronize(0), cudaSuccess, "[importer] the free is done");
	xproc_say(sock, "closed");
	free(host);
	return tap_failed ? 1 : 0;
}

int main(int argc, char **argv)
{
	return xproc_main(argc, argv, owner, importer);
}
