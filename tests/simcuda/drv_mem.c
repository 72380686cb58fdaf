/* Simulated driver: device and pinned memory, pointer attributes.
 *
 * Each device owns one reserved virtual range (MAP_NORESERVE: free until touched), and pinned
 * host memory another, so the home of any pointer follows from its address. A page table per
 * range maps every page to its allocation record, so pointer queries are a range check and two
 * atomic loads: the guard asks on every generic copy. */
#include "sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define PAGE_SHIFT 12
#define PAGE_SIZE  ((size_t)1 << PAGE_SHIFT)

/* Pinned host memory is rarely large; 64 GiB of address space costs nothing reserved. */
#define HOST_RANGE ((size_t)64 << 30)

struct extent {
	size_t start, n;
};

struct region {
	uintptr_t base;
	size_t bytes;
	size_t npages;
	struct sim_alloc **pages;
	pthread_mutex_t mu;
	struct extent *free;
	size_t nfree, capfree;
	size_t used;
};

static struct region dev_regions[SIM_MAX_DEVICES];
static struct region host_region;
static uintptr_t dev_base; /* all device ranges, back to back */
static size_t dev_span;	   /* bytes of one device range */
static int ndev_mapped;

static pthread_mutex_t rec_mu = PTHREAD_MUTEX_INITIALIZER;
static struct sim_alloc *all_recs;
static unsigned long long next_alloc_id = 1;

static void *reserve(size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

static bool region_init(struct region *r, uintptr_t base, size_t bytes)
{
	r->base = base;
	r->bytes = bytes;
	r->npages = bytes >> PAGE_SHIFT;
	r->pages = reserve(r->npages * sizeof(*r->pages));
	r->free = malloc(sizeof(*r->free) * 16);
	if (!r->pages || !r->free)
		return false;
	r->capfree = 16;
	/* The first page stays unused so that no allocation sits at the very start of a range. */
	r->free[0] = (struct extent){1, r->npages - 1};
	r->nfree = 1;
	pthread_mutex_init(&r->mu, NULL);
	return true;
}

bool sim_mem_setup(void)
{
	size_t span = (sim_cfg.dev_mem + PAGE_SIZE - 1) & ~(PAGE_SIZE - 1);
	void *p = reserve(span * (size_t)sim_cfg.ndev);
	while (!p && span > ((size_t)256 << 20)) {
		span /= 2;
		p = reserve(span * (size_t)sim_cfg.ndev);
	}
	if (!p) {
		fprintf(stderr, "simcuda: cannot reserve device address space\n");
		return false;
	}
	if (span != sim_cfg.dev_mem) {
		fprintf(stderr, "simcuda: device memory reduced to %zu MiB (address space)\n",
			span >> 20);
		sim_cfg.dev_mem = span;
	}
	dev_base = (uintptr_t)p;
	dev_span = span;
	for (int d = 0; d < sim_cfg.ndev; d++)
		if (!region_init(&dev_regions[d], dev_base + (size_t)d * span, span))
			return false;
	void *h = reserve(HOST_RANGE);
	if (!h || !region_init(&host_region, (uintptr_t)h, HOST_RANGE)) {
		fprintf(stderr, "simcuda: cannot reserve pinned host address space\n");
		return false;
	}
	__atomic_store_n(&ndev_mapped, sim_cfg.ndev, __ATOMIC_RELEASE);
	return true;
}

static struct region *region_get(int region)
{
	return region == SIM_REGION_HOST ? &host_region : &dev_regions[region];
}

int sim_mem_region_of(uintptr_t p)
{
	int n = __atomic_load_n(&ndev_mapped, __ATOMIC_ACQUIRE);
	if (n == 0)
		return SIM_REGION_PAGEABLE;
	if (p - dev_base < dev_span * (size_t)n)
		return (int)((p - dev_base) / dev_span);
	if (p - host_region.base < host_region.bytes)
		return SIM_REGION_HOST;
	return SIM_REGION_PAGEABLE;
}

struct sim_alloc *sim_mem_find(uintptr_t p)
{
	int reg = sim_mem_region_of(p);
	if (reg == SIM_REGION_PAGEABLE)
		return NULL;
	struct region *r = region_get(reg);
	struct sim_alloc *a =
	    __atomic_load_n(&r->pages[(p - r->base) >> PAGE_SHIFT], __ATOMIC_ACQUIRE);
	if (!a || p < a->base || p - a->base >= a->size)
		return NULL;
	return a;
}

CUresult sim_check_ep(uintptr_t p, size_t n, enum sim_ep_req req, int *region)
{
	if (p == 0)
		return CUDA_ERROR_INVALID_VALUE;
	int reg = sim_mem_region_of(p);
	if (reg == SIM_REGION_PAGEABLE) {
		if (req == SIM_EP_DEVICE)
			return CUDA_ERROR_INVALID_VALUE;
		*region = reg;
		return CUDA_SUCCESS;
	}
	struct sim_alloc *a = sim_mem_find(p);
	if (!a || n > a->size - (p - a->base))
		return CUDA_ERROR_INVALID_VALUE;
	*region = reg;
	return CUDA_SUCCESS;
}

static struct sim_alloc *free_recs; /* records not in use, linked through next_free */

static struct sim_alloc *rec_get(void)
{
	pthread_mutex_lock(&rec_mu);
	struct sim_alloc *a = free_recs;
	if (a) {
		free_recs = a->next_free;
	} else {
		a = calloc(1, sizeof(*a));
		if (a) {
			a->next_all = all_recs;
			all_recs = a;
		}
	}
	if (a) {
		a->live = true;
		a->id = next_alloc_id++;
	}
	pthread_mutex_unlock(&rec_mu);
	return a;
}

/* Records are recycled, never freed: a racing lock-free lookup may still read one. */
static void rec_put(struct sim_alloc *a)
{
	pthread_mutex_lock(&rec_mu);
	a->live = false;
	a->base = 0;
	a->ctx = NULL;
	a->next_free = free_recs;
	free_recs = a;
	pthread_mutex_unlock(&rec_mu);
}

static bool take_pages(struct region *r, size_t n, size_t *start)
{
	for (size_t i = 0; i < r->nfree; i++) {
		if (r->free[i].n < n)
			continue;
		*start = r->free[i].start;
		r->free[i].start += n;
		r->free[i].n -= n;
		if (r->free[i].n == 0) {
			memmove(&r->free[i], &r->free[i + 1],
				(r->nfree - i - 1) * sizeof(*r->free));
			r->nfree--;
		}
		return true;
	}
	return false;
}

static void give_pages(struct region *r, size_t start, size_t n)
{
	size_t i = 0;
	while (i < r->nfree && r->free[i].start < start)
		i++;
	bool merge_prev = i > 0 && r->free[i - 1].start + r->free[i - 1].n == start;
	bool merge_next = i < r->nfree && start + n == r->free[i].start;
	if (merge_prev && merge_next) {
		r->free[i - 1].n += n + r->free[i].n;
		memmove(&r->free[i], &r->free[i + 1], (r->nfree - i - 1) * sizeof(*r->free));
		r->nfree--;
	} else if (merge_prev) {
		r->free[i - 1].n += n;
	} else if (merge_next) {
		r->free[i].start = start;
		r->free[i].n += n;
	} else {
		if (r->nfree == r->capfree) {
			struct extent *f = realloc(r->free, 2 * r->capfree * sizeof(*f));
			if (!f)
				return; /* the pages are lost to the simulation; nothing breaks */
			r->free = f;
			r->capfree *= 2;
		}
		memmove(&r->free[i + 1], &r->free[i], (r->nfree - i) * sizeof(*r->free));
		r->free[i] = (struct extent){start, n};
		r->nfree++;
	}
}

CUresult sim_mem_alloc(struct sim_ctx *ctx, int region, size_t size, unsigned flags, uintptr_t *out)
{
	if (size == 0)
		return CUDA_ERROR_INVALID_VALUE;
	struct region *r = region_get(region);
	if (size > r->bytes)
		return CUDA_ERROR_OUT_OF_MEMORY;
	size_t n = (size + PAGE_SIZE - 1) >> PAGE_SHIFT;
	struct sim_alloc *a = rec_get();
	if (!a)
		return CUDA_ERROR_OUT_OF_MEMORY;
	size_t start;
	pthread_mutex_lock(&r->mu);
	bool ok = take_pages(r, n, &start);
	if (ok)
		r->used += n << PAGE_SHIFT;
	pthread_mutex_unlock(&r->mu);
	if (!ok) {
		rec_put(a);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	a->base = r->base + (start << PAGE_SHIFT);
	a->size = size;
	a->npages = n;
	a->ctx = ctx;
	a->region = region;
	a->dev = ctx->dev;
	a->flags = flags;
	for (size_t i = 0; i < n; i++)
		__atomic_store_n(&r->pages[start + i], a, __ATOMIC_RELEASE);
	*out = a->base;
	return CUDA_SUCCESS;
}

static void release(struct sim_alloc *a)
{
	struct region *r = region_get(a->region);
	size_t start = (a->base - r->base) >> PAGE_SHIFT;
	for (size_t i = 0; i < a->npages; i++)
		__atomic_store_n(&r->pages[start + i], NULL, __ATOMIC_RELEASE);
	/* Give the memory back and make reuse start from zeroed pages. */
	madvise((void *)a->base, a->npages << PAGE_SHIFT, MADV_DONTNEED);
	pthread_mutex_lock(&r->mu);
	give_pages(r, start, a->npages);
	r->used -= a->npages << PAGE_SHIFT;
	pthread_mutex_unlock(&r->mu);
	rec_put(a);
}

CUresult sim_mem_free(int want_region, uintptr_t p)
{
	struct sim_alloc *a = sim_mem_find(p);
	if (!a || a->base != p)
		return CUDA_ERROR_INVALID_VALUE;
	if ((want_region == SIM_REGION_HOST) != (a->region == SIM_REGION_HOST))
		return CUDA_ERROR_INVALID_VALUE;
	/* Work still queued may read or write this memory: the real cuMemFree synchronises too. */
	pthread_mutex_lock(&sim_mu);
	if (a->ctx)
		sim_ctx_sync_locked(a->ctx);
	pthread_mutex_unlock(&sim_mu);
	release(a);
	return CUDA_SUCCESS;
}

size_t sim_released_device_bytes, sim_released_host_bytes;

void sim_mem_free_ctx(struct sim_ctx *ctx)
{
	for (;;) {
		struct sim_alloc *victim = NULL;
		pthread_mutex_lock(&rec_mu);
		for (struct sim_alloc *a = all_recs; a; a = a->next_all)
			if (a->live && a->ctx == ctx && a->base) {
				victim = a;
				break;
			}
		pthread_mutex_unlock(&rec_mu);
		if (!victim)
			return;
		/* Never freed by the program: still a leak to SIMCUDA_REPORT_LEAKS, whose line
		 * comes after the runtime's exit handler released the primary contexts. */
		__atomic_add_fetch(victim->region == SIM_REGION_HOST ? &sim_released_host_bytes
								     : &sim_released_device_bytes,
				   victim->npages << PAGE_SHIFT, __ATOMIC_RELAXED);
		release(victim);
	}
}

size_t sim_mem_used(int region)
{
	struct region *r = region_get(region);
	pthread_mutex_lock(&r->mu);
	size_t u = r->used;
	pthread_mutex_unlock(&r->mu);
	return u;
}

/* ---- API ---- */

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
	r = sim_mem_alloc(ctx, ctx->dev, bytesize, 0, &p);
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
	r = sim_mem_alloc(ctx, SIM_REGION_HOST, bytesize, Flags, &p);
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
	case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
	case CU_POINTER_ATTRIBUTE_IS_MANAGED:
	case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
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
		*(int *)data = a ? a->dev : -2;
		break;
	case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
	case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
		*(CUdeviceptr *)data = a ? (CUdeviceptr)a->base : 0;
		break;
	case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
		*(size_t *)data = a ? a->size : 0;
		break;
	case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
		*(size_t *)data = a ? a->npages << PAGE_SHIFT : 0;
		break;
	case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
		*(unsigned long long *)data = 0;
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
