/* Simulated driver: virtual memory management (cuMemCreate, cuMemMap, cuMemSetAccess, ...), its
 * export to a POSIX file descriptor and the import of one, and the stream-ordered allocations
 * (cuMemAllocAsync) whose memory legacy IPC refuses.
 *
 * An allocation is a memfd of its own: cuMemMap maps the file into a reserved range (drv_mem.c),
 * an export is a duplicate of the descriptor, and an import in another process maps the same
 * file, so both see the same bytes. The file ends in a page that says what it is (device, size,
 * handle types); a descriptor without that page is not an export. Codes measured on an H100
 * (FACTS.md): exporting a handle type the allocation was not created with 1, mapping an already
 * mapped range 1, cuMemSetAccess naming device 77 1, importing a descriptor that is not an export
 * (/dev/null) or is closed 999. Assumed, not measured: importing memory of a device the process
 * does not see gives 101 (as reported for containers that each see one GPU, NVIDIA/nccl#1647), and
 * granting access to a device that cannot reach the owner over P2P gives 101 too. Fabric handles
 * are not simulated: asking for one gives CUDA_ERROR_NOT_SUPPORTED, as on a system without IMEX. */
#include "sim.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define PHYS_MAGIC   0x53594850u
#define EXPORT_MAGIC "SIMCUMEM"
#define HEADER_SIZE  4096 /* the page after the memory */

struct sim_phys {
	uint32_t magic;
	bool live;
	bool imported;
	int region; /* the owner's ordinal in this process */
	int phys;   /* its physical index */
	size_t size;
	unsigned long long handle_types;
	int fd;
	int refs; /* the handle's references: create or import 1, each retain 1 */
	int maps; /* live cuMemMap mappings of it */
	struct sim_phys *next_all;
};

struct export_header {
	char magic[8];
	int32_t phys;
	int32_t pid;
	uint64_t size;
	uint64_t handle_types;
};

static pthread_mutex_t phys_mu = PTHREAD_MUTEX_INITIALIZER;
static struct sim_phys *all_phys; /* records are reused, never freed: a stale handle stays safe */

static struct sim_phys *phys_new(void)
{
	pthread_mutex_lock(&phys_mu);
	struct sim_phys *p = all_phys;
	while (p && p->live)
		p = p->next_all;
	if (!p && (p = calloc(1, sizeof(*p))) != NULL) {
		p->next_all = all_phys;
		all_phys = p;
	}
	if (p) {
		struct sim_phys *next = p->next_all;
		*p = (struct sim_phys){.magic = PHYS_MAGIC, .live = true, .refs = 1, .fd = -1};
		p->next_all = next;
	}
	pthread_mutex_unlock(&phys_mu);
	return p;
}

/* The record behind a handle, if it is one of ours and live. phys_mu held. */
static struct sim_phys *phys_locked(CUmemGenericAllocationHandle h)
{
	for (struct sim_phys *p = all_phys; p; p = p->next_all)
		if ((uintptr_t)p == (uintptr_t)h && p->magic == PHYS_MAGIC && p->live)
			return p;
	return NULL;
}

/* Frees the memory once neither a handle nor a mapping holds it. phys_mu held. */
static void phys_maybe_free(struct sim_phys *p)
{
	if (p->refs > 0 || p->maps > 0)
		return;
	close(p->fd);
	p->fd = -1;
	if (!p->imported)
		sim_mem_uncharge(p->region, p->size);
	p->live = false;
}

void sim_vmm_unmapped(struct sim_phys *p)
{
	pthread_mutex_lock(&phys_mu);
	p->maps--;
	phys_maybe_free(p);
	pthread_mutex_unlock(&phys_mu);
}

unsigned long long sim_vmm_handle_types(const struct sim_phys *p)
{
	return p ? p->handle_types : 0;
}

static CUresult check_prop(const CUmemAllocationProp *prop)
{
	if (!prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED)
		return CUDA_ERROR_INVALID_VALUE;
	if (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
		return CUDA_ERROR_NOT_SUPPORTED; /* host allocations are not simulated */
	if (prop->location.id < 0 || prop->location.id >= sim_cfg.ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
					       CUmemAllocationGranularity_flags option)
{
	SIM_FAULT();
	CUresult r = sim_ready();
	if (r != CUDA_SUCCESS)
		return r;
	if (!granularity || (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
			     option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = check_prop(prop)) != CUDA_SUCCESS)
		return r;
	*granularity = SIM_VMM_GRANULARITY;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
			     const CUmemAllocationProp *prop, unsigned long long flags)
{
	SIM_FAULT();
	CUresult r = sim_ready();
	if (r != CUDA_SUCCESS)
		return r;
	if (!handle || flags != 0 || size == 0 || size % SIM_VMM_GRANULARITY)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = check_prop(prop)) != CUDA_SUCCESS)
		return r;
	unsigned long long types = (unsigned long long)prop->requestedHandleTypes;
	if (types & CU_MEM_HANDLE_TYPE_FABRIC)
		return CUDA_ERROR_NOT_SUPPORTED;
	if (types & ~(unsigned long long)CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
		return CUDA_ERROR_INVALID_VALUE;
	int region = prop->location.id;
	if (!sim_mem_charge(region, size))
		return CUDA_ERROR_OUT_OF_MEMORY;
	int fd = memfd_create("simcuda-vmm", MFD_CLOEXEC);
	struct export_header h = {
	    .phys = sim_cfg.phys[region],
	    .pid = getpid(),
	    .size = size,
	    .handle_types = types,
	};
	memcpy(h.magic, EXPORT_MAGIC, sizeof(h.magic));
	struct sim_phys *p = NULL;
	if (fd < 0 || ftruncate(fd, (off_t)(size + HEADER_SIZE)) < 0 ||
	    pwrite(fd, &h, sizeof(h), (off_t)size) != (ssize_t)sizeof(h) || !(p = phys_new())) {
		if (fd >= 0)
			close(fd);
		sim_mem_uncharge(region, size);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	p->region = region;
	p->phys = sim_cfg.phys[region];
	p->size = size;
	p->handle_types = types;
	p->fd = fd;
	*handle = (CUmemGenericAllocationHandle)(uintptr_t)p;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
	SIM_FAULT();
	CUresult r = sim_ready();
	if (r != CUDA_SUCCESS)
		return r;
	pthread_mutex_lock(&phys_mu);
	struct sim_phys *p = phys_locked(handle);
	if (p) {
		p->refs--;
		phys_maybe_free(p);
	}
	pthread_mutex_unlock(&phys_mu);
	return p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIM_API CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
	SIM_FAULT();
	CUresult r = sim_ready();
	if (r != CUDA_SUCCESS)
		return r;
	struct sim_alloc *a = sim_mem_find((uintptr_t)addr);
	if (!handle || !a || a->kind != SIM_ALLOC_VMM)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&phys_mu);
	struct sim_phys *p = a->phys;
	bool ok = p && p->live;
	if (ok)
		p->refs++;
	pthread_mutex_unlock(&phys_mu);
	if (!ok)
		return CUDA_ERROR_INVALID_VALUE;
	*handle = (CUmemGenericAllocationHandle)(uintptr_t)p;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
							CUmemGenericAllocationHandle handle)
{
	SIM_FAULT();
	CUresult r = sim_ready();
	if (r != CUDA_SUCCESS)
		return r;
	if (!prop)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&phys_mu);
	struct sim_phys *p = phys_locked(handle);
	if (p) {
		memset(prop, 0, sizeof(*prop));
		prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
		prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
		prop->location.id = p->region;
		prop->requestedHandleTypes = (CUmemAllocationHandleType)p->handle_types;
	}
	pthread_mutex_unlock(&phys_mu);
	return p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIM_API CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
				     CUdeviceptr addr, unsigned long long flags)
{
	SIM_FAULT();
	(void)addr; /* a hint the driver may ignore */
	CUresult r = sim_ready();
	if (r != CUDA_SUCCESS)
		return r;
	if (!ptr || size == 0 || size % SIM_VMM_GRANULARITY || flags != 0 ||
	    (alignment & (alignment - 1)))
		return CUDA_ERROR_INVALID_VALUE;
	uintptr_t p;
	r = sim_va_reserve(size, alignment > SIM_VMM_GRANULARITY ? alignment : SIM_VMM_GRANULARITY,
			   &p);
	if (r == CUDA_SUCCESS)
		*ptr = (CUdeviceptr)p;
	return r;
}

SIM_API CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
	SIM_FAULT();
	CUresult r = sim_ready();
	if (r != CUDA_SUCCESS)
		return r;
	return sim_va_free((uintptr_t)ptr, size);
}

SIM_API CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
			  CUmemGenericAllocationHandle handle, unsigned long long flags)
{
	SIM_FAULT();
	CUresult r = sim_ready();
	if (r != CUDA_SUCCESS)
		return r;
	if (offset != 0 || flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&phys_mu);
	struct sim_phys *p = phys_locked(handle);
	bool ok = p && size <= p->size;
	int fd = ok ? p->fd : -1, region = ok ? p->region : -1;
	if (ok)
		p->maps++; /* held across the mapping: a racing release must not free it */
	pthread_mutex_unlock(&phys_mu);
	if (!ok)
		return CUDA_ERROR_INVALID_VALUE;
	r = sim_va_map((uintptr_t)ptr, size, p, fd, region);
	if (r != CUDA_SUCCESS)
		sim_vmm_unmapped(p);
	return r;
}

SIM_API CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
	SIM_FAULT();
	CUresult r = sim_ready();
	if (r != CUDA_SUCCESS)
		return r;
	return sim_va_unmap((uintptr_t)ptr, size);
}

/* Every device granted access must reach the owner's memory: its own, or over P2P. */
static bool reachable(int owner, unsigned grant)
{
	for (int d = 0; d < sim_cfg.ndev; d++)
		if ((grant >> d & 1) && d != owner && !sim_cfg.p2p[d][owner])
			return false;
	return true;
}

SIM_API CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
				size_t count)
{
	SIM_FAULT();
	CUresult r = sim_ready();
	if (r != CUDA_SUCCESS)
		return r;
	if (!desc || count == 0)
		return CUDA_ERROR_INVALID_VALUE;
	unsigned grant = 0, revoke = 0;
	for (size_t k = 0; k < count; k++) {
		const CUmemAccessDesc *d = &desc[k];
		if (d->location.type != CU_MEM_LOCATION_TYPE_DEVICE || d->location.id < 0 ||
		    d->location.id >= sim_cfg.ndev)
			return CUDA_ERROR_INVALID_VALUE;
		switch (d->flags) {
		case CU_MEM_ACCESS_FLAGS_PROT_NONE:
			revoke |= 1u << d->location.id;
			break;
		case CU_MEM_ACCESS_FLAGS_PROT_READ:
		case CU_MEM_ACCESS_FLAGS_PROT_READWRITE:
			grant |= 1u << d->location.id;
			break;
		default:
			return CUDA_ERROR_INVALID_VALUE;
		}
	}
	return sim_va_set_access((uintptr_t)ptr, size, grant, revoke, reachable);
}

SIM_API CUresult cuMemExportToShareableHandle(void *shareableHandle,
					      CUmemGenericAllocationHandle handle,
					      CUmemAllocationHandleType handleType,
					      unsigned long long flags)
{
	SIM_FAULT();
	CUresult r = sim_ready();
	if (r != CUDA_SUCCESS)
		return r;
	if (!shareableHandle || flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&phys_mu);
	struct sim_phys *p = phys_locked(handle);
	int fd = -1;
	if (p && handleType == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR &&
	    (p->handle_types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
		fd = fcntl(p->fd, F_DUPFD_CLOEXEC, 0);
	pthread_mutex_unlock(&phys_mu);
	if (!p || handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR ||
	    !(p->handle_types & handleType))
		return CUDA_ERROR_INVALID_VALUE;
	if (fd < 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*(int *)shareableHandle = fd;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle,
						void *osHandle,
						CUmemAllocationHandleType shHandleType)
{
	SIM_FAULT();
	CUresult r = sim_ready();
	if (r != CUDA_SUCCESS)
		return r;
	if (!handle)
		return CUDA_ERROR_INVALID_VALUE;
	if (shHandleType == CU_MEM_HANDLE_TYPE_FABRIC)
		return CUDA_ERROR_NOT_SUPPORTED;
	if (shHandleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
		return CUDA_ERROR_INVALID_VALUE;
	int fd = (int)(intptr_t)osHandle;
	struct stat st;
	struct export_header h;
	if (fstat(fd, &st) < 0 || st.st_size < HEADER_SIZE ||
	    pread(fd, &h, sizeof(h), st.st_size - HEADER_SIZE) != (ssize_t)sizeof(h) ||
	    memcmp(h.magic, EXPORT_MAGIC, sizeof(h.magic)) != 0 ||
	    h.size != (uint64_t)st.st_size - HEADER_SIZE)
		return CUDA_ERROR_UNKNOWN;
	int owner = sim_ordinal_of(h.phys);
	if (owner < 0)
		return CUDA_ERROR_INVALID_DEVICE;
	struct sim_phys *p = phys_new();
	int own = p ? fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;
	if (own < 0) {
		if (p)
			cuMemRelease((CUmemGenericAllocationHandle)(uintptr_t)p);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	p->imported = true;
	p->region = owner;
	p->phys = h.phys;
	p->size = h.size;
	p->handle_types = h.handle_types;
	p->fd = own;
	*handle = (CUmemGenericAllocationHandle)(uintptr_t)p;
	return CUDA_SUCCESS;
}

/* ---- stream-ordered allocation: enough for legacy IPC to refuse its memory ---- */

static CUresult alloc_async(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
	(void)hStream; /* allocated at once: any later use on the stream finds it there */
	struct sim_ctx *ctx;
	CUresult r = sim_ctx_current(&ctx);
	if (r != CUDA_SUCCESS)
		return r;
	if (!dptr)
		return CUDA_ERROR_INVALID_VALUE;
	uintptr_t p;
	r = sim_mem_alloc(ctx, ctx->dev, SIM_ALLOC_ASYNC, bytesize, 0, &p);
	if (r == CUDA_SUCCESS)
		*dptr = (CUdeviceptr)p;
	return r;
}

static CUresult free_async(CUdeviceptr dptr, CUstream hStream)
{
	(void)hStream; /* freed once the context's work is done (sim_mem_free waits for it) */
	CUresult r = sim_ready();
	if (r != CUDA_SUCCESS)
		return r;
	struct sim_alloc *a = sim_mem_find((uintptr_t)dptr);
	/* A pointer imported from another process's pool is freed like its own: the mapping ends.
	 */
	if (a && a->kind == SIM_ALLOC_IPC && a->pool && a->base == (uintptr_t)dptr)
		return sim_mem_close_ipc(a);
	if (!a || a->kind != SIM_ALLOC_ASYNC || a->base != (uintptr_t)dptr)
		return CUDA_ERROR_INVALID_VALUE;
	return sim_mem_free(0, (uintptr_t)dptr);
}

SIM_API CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
	SIM_FAULT();
	return alloc_async(dptr, bytesize, hStream);
}

SIM_API CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
	SIM_FAULT();
	return alloc_async(dptr, bytesize, hStream);
}

SIM_API CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
	SIM_FAULT();
	return free_async(dptr, hStream);
}

SIM_API CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
	SIM_FAULT();
	return free_async(dptr, hStream);
}
