/* Simulated driver: stream-ordered memory pools (cuMemPoolCreate, cuMemAllocFromPoolAsync) and
 * their sharing between processes: a pool exported as a POSIX file descriptor and imported in
 * another process, a pointer's export data and its import there, and cuMemPoolSetAccess.
 *
 * A pool's allocations are cuMemAllocAsync memory of its device (drv_vmm.c), so they live in the
 * device's range, a memfd (drv_mem.c). The exported descriptor is a duplicate of that file, which
 * the importer recognises by its name; a pointer's export data names the file's physical device,
 * the allocation's offset and size, and the importer maps that part of the file as legacy IPC
 * does. Measured on an H200 without an IMEX channel (tests/gpu/runtime_status_facts.py): a pool
 * asked for fabric handles is created and allocates, and only its export fails, with
 * CUDA_ERROR_NOT_PERMITTED; a POSIX-fd pool exports. Assumed, not measured: exporting a handle
 * type the pool was not created with, a pointer that is not a shareable pool's, or bad flags give
 * CUDA_ERROR_INVALID_VALUE; importing a descriptor that is not a pool's export gives
 * CUDA_ERROR_INVALID_VALUE; a pool of a device the process does not see,
 * CUDA_ERROR_INVALID_DEVICE; allocating from an imported pool, CUDA_ERROR_NOT_SUPPORTED. */
#include "sim.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define POOL_MAGIC 0x4c4f4f50u
#define PTR_MAGIC  "SIMPOOL1"

struct sim_pool {
	uint32_t magic;
	bool live;
	bool imported;
	int region; /* the pool's device, as this process numbers it */
	int phys;
	unsigned long long handle_types;
	int fd; /* imported: the exporter's device file */
	CUmemAccessDesc access[SIM_MAX_DEVICES];
	struct sim_pool *next_all;
};

struct ptr_export {
	char magic[8];
	int32_t phys;
	int32_t pad;
	uint64_t offset, size;
	uint8_t rest[32];
};
_Static_assert(sizeof(struct ptr_export) == sizeof(CUmemPoolPtrExportData),
	       "a pointer's export data is 64 bytes");

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static struct sim_pool *all_pools; /* reused, never freed: a stale handle stays safe */

static struct sim_pool *pool_new(void)
{
	pthread_mutex_lock(&pool_mu);
	struct sim_pool *p = all_pools;
	while (p && p->live)
		p = p->next_all;
	if (!p && (p = calloc(1, sizeof(*p))) != NULL) {
		p->next_all = all_pools;
		all_pools = p;
	}
	if (p) {
		struct sim_pool *next = p->next_all;
		memset(p, 0, sizeof(*p));
		p->next_all = next;
		p->magic = POOL_MAGIC;
		p->live = true;
		p->fd = -1;
	}
	pthread_mutex_unlock(&pool_mu);
	return p;
}

static struct sim_pool *pool_of(CUmemoryPool pool)
{
	pthread_mutex_lock(&pool_mu);
	struct sim_pool *found = NULL;
	for (struct sim_pool *p = all_pools; p; p = p->next_all)
		if ((CUmemoryPool)p == pool && p->live && p->magic == POOL_MAGIC)
			found = p;
	pthread_mutex_unlock(&pool_mu);
	return found;
}

static const unsigned long long known_types =
    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR | CU_MEM_HANDLE_TYPE_FABRIC;

SIM_API CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props)
{
	SIM_FAULT();
	CUresult r = sim_ready();
	if (r != CUDA_SUCCESS)
		return r;
	if (!pool || !props || props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
	    props->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
	    (props->handleTypes & ~known_types))
		return CUDA_ERROR_INVALID_VALUE;
	if (props->location.id < 0 || props->location.id >= sim_cfg.ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	struct sim_pool *p = pool_new();
	if (!p)
		return CUDA_ERROR_OUT_OF_MEMORY;
	p->region = props->location.id;
	p->phys = sim_cfg.phys[p->region];
	p->handle_types = props->handleTypes;
	*pool = (CUmemoryPool)p;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
	SIM_FAULT();
	struct sim_pool *p = pool_of(pool);
	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&pool_mu);
	if (p->fd >= 0)
		close(p->fd);
	p->live = false;
	pthread_mutex_unlock(&pool_mu);
	return CUDA_SUCCESS;
}

static CUresult alloc_from_pool(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
				CUstream hStream)
{
	(void)hStream; /* allocated at once, as cuMemAllocAsync is here */
	struct sim_pool *p = pool_of(pool);
	if (!dptr || !p)
		return CUDA_ERROR_INVALID_VALUE;
	if (p->imported)
		return CUDA_ERROR_NOT_SUPPORTED;
	struct sim_ctx *ctx;
	CUresult r = sim_ctx_current(&ctx);
	if (r != CUDA_SUCCESS)
		return r;
	uintptr_t a = 0;
	r = sim_mem_alloc(ctx, p->region, SIM_ALLOC_ASYNC, bytesize, 0, &a);
	if (r != CUDA_SUCCESS)
		return r;
	struct sim_alloc *rec = sim_mem_find(a);
	if (rec)
		rec->pool = p;
	*dptr = (CUdeviceptr)a;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
					 CUstream hStream)
{
	SIM_FAULT();
	return alloc_from_pool(dptr, bytesize, pool, hStream);
}

SIM_API CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
					      CUstream hStream)
{
	SIM_FAULT();
	return alloc_from_pool(dptr, bytesize, pool, hStream);
}

SIM_API CUresult cuMemPoolExportToShareableHandle(void *handle_out, CUmemoryPool pool,
						  CUmemAllocationHandleType handleType,
						  unsigned long long flags)
{
	SIM_FAULT();
	CUresult r = sim_ready();
	if (r != CUDA_SUCCESS)
		return r;
	struct sim_pool *p = pool_of(pool);
	if (!handle_out || !p || flags != 0 || p->imported || !(p->handle_types & handleType))
		return CUDA_ERROR_INVALID_VALUE;
	if (handleType == CU_MEM_HANDLE_TYPE_FABRIC)
		return CUDA_ERROR_NOT_PERMITTED; /* no IMEX channel, as on the measured H200 */
	if (handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
		return CUDA_ERROR_INVALID_VALUE;
	off_t offset;
	int file = sim_mem_device_file(p->region, 0, &offset);
	int fd = file >= 0 ? fcntl(file, F_DUPFD_CLOEXEC, 0) : -1;
	if (fd < 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*(int *)handle_out = fd;
	return CUDA_SUCCESS;
}

/* The physical device whose range a descriptor is, from the memfd's name (-1: not one). */
static int device_file_phys(int fd)
{
	char link[64], target[128];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, target, sizeof(target) - 1);
	if (n <= 0)
		return -1;
	target[n] = '\0';
	int phys = -1;
	if (sscanf(target, "/memfd:simcuda-device-%d", &phys) != 1)
		return -1;
	return phys;
}

SIM_API CUresult cuMemPoolImportFromShareableHandle(CUmemoryPool *pool_out, void *handle,
						    CUmemAllocationHandleType handleType,
						    unsigned long long flags)
{
	SIM_FAULT();
	CUresult r = sim_ready();
	if (r != CUDA_SUCCESS)
		return r;
	if (!pool_out || flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (handleType == CU_MEM_HANDLE_TYPE_FABRIC)
		return CUDA_ERROR_NOT_PERMITTED;
	if (handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
		return CUDA_ERROR_INVALID_VALUE;
	int phys = device_file_phys((int)(intptr_t)handle);
	if (phys < 0)
		return CUDA_ERROR_INVALID_VALUE;
	int owner = sim_ordinal_of(phys);
	if (owner < 0)
		return CUDA_ERROR_INVALID_DEVICE;
	struct sim_pool *p = pool_new();
	int own = p ? fcntl((int)(intptr_t)handle, F_DUPFD_CLOEXEC, 0) : -1;
	if (own < 0) {
		if (p)
			p->live = false;
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	p->imported = true;
	p->region = owner;
	p->phys = phys;
	p->handle_types = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	p->fd = own;
	*pool_out = (CUmemoryPool)p;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuMemPoolExportPointer(CUmemPoolPtrExportData *shareData_out, CUdeviceptr ptr)
{
	SIM_FAULT();
	CUresult r = sim_ready();
	if (r != CUDA_SUCCESS)
		return r;
	struct sim_alloc *a = shareData_out ? sim_mem_find((uintptr_t)ptr) : NULL;
	struct sim_pool *p = a && a->kind == SIM_ALLOC_ASYNC ? a->pool : NULL;
	if (!p || !p->live || p->handle_types == CU_MEM_HANDLE_TYPE_NONE ||
	    a->base != (uintptr_t)ptr)
		return CUDA_ERROR_INVALID_VALUE;
	off_t offset;
	if (sim_mem_device_file(a->region, a->base, &offset) < 0)
		return CUDA_ERROR_NOT_SUPPORTED;
	struct ptr_export e = {.phys = p->phys, .offset = (uint64_t)offset, .size = a->size};
	memcpy(e.magic, PTR_MAGIC, sizeof(e.magic));
	memcpy(shareData_out, &e, sizeof(e));
	return CUDA_SUCCESS;
}

SIM_API CUresult cuMemPoolImportPointer(CUdeviceptr *ptr_out, CUmemoryPool pool,
					CUmemPoolPtrExportData *shareData)
{
	SIM_FAULT();
	struct sim_ctx *ctx;
	CUresult r = sim_ctx_current(&ctx);
	if (r != CUDA_SUCCESS)
		return r;
	struct sim_pool *p = pool_of(pool);
	struct ptr_export e;
	if (!ptr_out || !p || !p->imported || !shareData)
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(&e, shareData, sizeof(e));
	if (memcmp(e.magic, PTR_MAGIC, sizeof(e.magic)) != 0 || e.phys != p->phys || !e.size)
		return CUDA_ERROR_INVALID_VALUE;
	struct sim_alloc *a = NULL;
	r = sim_mem_map_ipc(ctx, ctx->dev, p->fd, (off_t)e.offset, (size_t)e.size, &a);
	if (r != CUDA_SUCCESS)
		return r;
	a->pool = p;
	*ptr_out = (CUdeviceptr)a->base;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc *map, size_t count)
{
	SIM_FAULT();
	CUresult r = sim_ready();
	if (r != CUDA_SUCCESS)
		return r;
	struct sim_pool *p = pool_of(pool);
	if (!p || (!map && count))
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t k = 0; k < count; k++) {
		int dev = map[k].location.id;
		if (map[k].location.type != CU_MEM_LOCATION_TYPE_DEVICE || dev < 0 ||
		    dev >= sim_cfg.ndev)
			return CUDA_ERROR_INVALID_VALUE;
		/* Assumed, as for cuMemSetAccess: a device that cannot reach the pool's over P2P.
		 */
		if (dev != p->region && map[k].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE &&
		    !sim_cfg.p2p[dev][p->region])
			return CUDA_ERROR_INVALID_DEVICE;
	}
	pthread_mutex_lock(&pool_mu);
	for (size_t k = 0; k < count; k++)
		p->access[map[k].location.id] = map[k];
	pthread_mutex_unlock(&pool_mu);
	return CUDA_SUCCESS;
}
