/* Simulated driver: device and pinned memory, the address ranges of virtual memory management,
 * pointer attributes.
 *
 * Each device owns one reserved virtual range, and pinned host memory another, so the home of any
 * pointer follows from its address. A device's range is a shared mapping of a memfd of its own
 * (free until touched), so that another process can map the same memory: a legacy IPC handle
 * names the file and the offset. Reservations of virtual memory management (cuMemAddressReserve)
 * come from a third range, where cuMemMap places an allocation's own file. A page table per range
 * maps every page to its allocation record, so pointer queries are a range check and two atomic
 * loads: the guard asks on every generic copy. */
#include "sim.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#define PAGE_SHIFT SIM_PAGE_SHIFT
#define PAGE_SIZE  ((size_t)1 << PAGE_SHIFT)

/* Pinned host memory is rarely large; 64 GiB of address space costs nothing reserved. */
#define HOST_RANGE ((size_t)64 << 30)
/* Virtual memory management: address space only, reserved as needed. */
#define VA_RANGE ((size_t)64 << 30)

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
static int dev_fds[SIM_MAX_DEVICES]; /* the memfd behind each device's range; -1: private memory */
static struct region host_region;
static struct region va_region;
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

/* Replaces [p, p+n) with fresh private memory (prot as given). */
static bool remap_private(uintptr_t p, size_t n, int prot)
{
	return mmap((void *)p, n, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1,
		    0) != MAP_FAILED;
}

static bool map_file(uintptr_t p, size_t n, int fd, off_t offset)
{
	return mmap((void *)p, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED | MAP_NORESERVE,
		    fd, offset) != MAP_FAILED;
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

/* A device's memory as a file, so that other processes can map it; private memory if the system
 * has no memfd, or if the process may not have a file that large (RLIMIT_FSIZE, `ulimit -f`: the
 * ftruncate would be a SIGXFSZ, which the real driver never sends): legacy IPC handles are then
 * refused. */
static int back_with_file(uintptr_t base, size_t span, int ordinal)
{
	struct rlimit limit;
	if (getrlimit(RLIMIT_FSIZE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY &&
	    limit.rlim_cur < span)
		return -1;
	char name[48];
	snprintf(name, sizeof(name), "simcuda-device-%d", sim_cfg.phys[ordinal]);
	int fd = memfd_create(name, MFD_CLOEXEC);
	if (fd < 0)
		return -1;
	if (ftruncate(fd, (off_t)span) == 0 && map_file(base, span, fd, 0))
		return fd;
	close(fd);
	remap_private(base, span, PROT_READ | PROT_WRITE);
	return -1;
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
	for (int d = 0; d < sim_cfg.ndev; d++) {
		if (!region_init(&dev_regions[d], dev_base + (size_t)d * span, span))
			return false;
		dev_fds[d] = back_with_file(dev_base + (size_t)d * span, span, d);
	}
	void *h = reserve(HOST_RANGE);
	if (!h || !region_init(&host_region, (uintptr_t)h, HOST_RANGE)) {
		fprintf(stderr, "simcuda: cannot reserve pinned host address space\n");
		return false;
	}
	void *v =
	    mmap(NULL, VA_RANGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (v == MAP_FAILED || !region_init(&va_region, (uintptr_t)v, VA_RANGE)) {
		fprintf(stderr, "simcuda: cannot reserve virtual address space\n");
		return false;
	}
	__atomic_store_n(&ndev_mapped, sim_cfg.ndev, __ATOMIC_RELEASE);
	return true;
}

static struct region *region_get(int region)
{
	return region == SIM_REGION_HOST ? &host_region : &dev_regions[region];
}

static bool in_va(uintptr_t p)
{
	return __atomic_load_n(&ndev_mapped, __ATOMIC_ACQUIRE) && p - va_region.base < VA_RANGE;
}

static struct sim_alloc *page_alloc(struct region *r, uintptr_t p)
{
	return __atomic_load_n(&r->pages[(p - r->base) >> PAGE_SHIFT], __ATOMIC_ACQUIRE);
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
	if (p - va_region.base < VA_RANGE) {
		struct sim_alloc *a = page_alloc(&va_region, p);
		return a ? a->region : SIM_REGION_UNMAPPED;
	}
	return SIM_REGION_PAGEABLE;
}

struct sim_alloc *sim_mem_find(uintptr_t p)
{
	int reg = sim_mem_region_of(p);
	if (reg == SIM_REGION_PAGEABLE || reg == SIM_REGION_UNMAPPED)
		return NULL;
	struct region *r = in_va(p) ? &va_region : region_get(reg);
	struct sim_alloc *a = page_alloc(r, p);
	if (!a || p < a->base || p - a->base >= a->size)
		return NULL;
	return a;
}

/* A span of reserved virtual memory: every page mapped, on one device, and accessible (a mapping
 * starts with no access until cuMemSetAccess). Adjacent mappings of one reservation form one
 * span, as on the real driver. */
static CUresult check_va_span(uintptr_t p, size_t n, int *region)
{
	int reg = SIM_REGION_UNMAPPED;
	for (uintptr_t q = p; q < p + (n ? n : 1);) {
		if (q - va_region.base >= VA_RANGE)
			return CUDA_ERROR_INVALID_VALUE;
		struct sim_alloc *a = page_alloc(&va_region, q);
		if (!a || !__atomic_load_n(&a->access, __ATOMIC_ACQUIRE) ||
		    (reg != SIM_REGION_UNMAPPED && a->region != reg))
			return CUDA_ERROR_INVALID_VALUE;
		reg = a->region;
		q = a->base + a->size;
	}
	*region = reg;
	return CUDA_SUCCESS;
}

bool sim_va_accessible_from(uintptr_t p, size_t n, int dev)
{
	if (!in_va(p))
		return true;
	for (uintptr_t q = p; q < p + (n ? n : 1);) {
		struct sim_alloc *a = page_alloc(&va_region, q);
		if (!a || dev < 0 || dev >= 32 ||
		    !(__atomic_load_n(&a->access, __ATOMIC_ACQUIRE) & (1u << dev)))
			return false;
		q = a->base + a->size;
	}
	return true;
}

CUresult sim_check_ep(uintptr_t p, size_t n, enum sim_ep_req req, int *region)
{
	if (p == 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (in_va(p))
		return check_va_span(p, n, region);
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
		/* A get-handle that raced the record's last free may have left its descriptor. */
		int export_fd = atomic_exchange(&a->ipc_export_fd, 0);
		if (export_fd)
			close(export_fd - 1);
		a->live = true;
		a->pool = NULL;
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
	a->phys = NULL;
	a->ipc_dev = -1;
	/* A freed allocation's IPC handles stop opening (drv_ipc.c). */
	int export_fd = atomic_exchange(&a->ipc_export_fd, 0);
	if (export_fd)
		close(export_fd - 1);
	__atomic_store_n(&a->access, 0, __ATOMIC_RELEASE);
	a->next_free = free_recs;
	free_recs = a;
	pthread_mutex_unlock(&rec_mu);
}

/* The first free run of n pages whose start is a multiple of align pages. */
static bool take_pages(struct region *r, size_t n, size_t align, size_t *start)
{
	for (size_t i = 0; i < r->nfree; i++) {
		size_t s = (r->free[i].start + align - 1) / align * align;
		size_t skip = s - r->free[i].start;
		if (r->free[i].n < n + skip)
			continue;
		if (skip) {
			/* Keep the head as its own extent; the rest starts aligned. */
			if (r->nfree == r->capfree) {
				struct extent *f = realloc(r->free, 2 * r->capfree * sizeof(*f));
				if (!f)
					return false;
				r->free = f;
				r->capfree *= 2;
			}
			memmove(&r->free[i + 1], &r->free[i], (r->nfree - i) * sizeof(*r->free));
			r->nfree++;
			r->free[i].n = skip;
			i++;
			r->free[i].start = s;
			r->free[i].n -= skip;
		}
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

static void set_pages(struct region *r, uintptr_t base, size_t npages, struct sim_alloc *a)
{
	size_t start = (base - r->base) >> PAGE_SHIFT;
	for (size_t i = 0; i < npages; i++)
		__atomic_store_n(&r->pages[start + i], a, __ATOMIC_RELEASE);
}

/* Takes address space in region (unaccounted: a mapping of memory held elsewhere). */
static CUresult take_space(struct region *r, size_t size, size_t align_bytes, uintptr_t *out)
{
	size_t n = (size + PAGE_SIZE - 1) >> PAGE_SHIFT;
	size_t align = align_bytes > PAGE_SIZE ? align_bytes >> PAGE_SHIFT : 1;
	size_t start;
	pthread_mutex_lock(&r->mu);
	bool ok = take_pages(r, n, align, &start);
	pthread_mutex_unlock(&r->mu);
	if (!ok)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*out = r->base + (start << PAGE_SHIFT);
	return CUDA_SUCCESS;
}

static void give_space(struct region *r, uintptr_t base, size_t size)
{
	pthread_mutex_lock(&r->mu);
	give_pages(r, (base - r->base) >> PAGE_SHIFT, (size + PAGE_SIZE - 1) >> PAGE_SHIFT);
	pthread_mutex_unlock(&r->mu);
}

CUresult sim_mem_alloc(struct sim_ctx *ctx, int region, enum sim_alloc_kind kind, size_t size,
		       unsigned flags, uintptr_t *out)
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
	bool ok = take_pages(r, n, 1, &start);
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
	a->kind = kind;
	a->dev = ctx->dev;
	a->flags = flags;
	set_pages(r, a->base, n, a);
	*out = a->base;
	return CUDA_SUCCESS;
}

/* Zeroes a device range's pages (reuse starts from zeroed memory) and gives their memory back. */
static void zero_pages(int region, uintptr_t base, size_t bytes)
{
	if (region >= 0 && dev_fds[region] >= 0)
		fallocate(dev_fds[region], FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			  (off_t)(base - dev_regions[region].base), (off_t)bytes);
	else
		madvise((void *)base, bytes, MADV_DONTNEED);
}

static void release(struct sim_alloc *a)
{
	struct region *r = region_get(a->region);
	set_pages(r, a->base, a->npages, NULL);
	size_t bytes = a->npages << PAGE_SHIFT;
	if (a->kind == SIM_ALLOC_IPC) {
		/* Another process's memory was mapped here: the range gets its own file back. */
		map_file(a->base, bytes, dev_fds[a->region], (off_t)(a->base - r->base));
		sim_ipc_unmapped(a);
	} else {
		zero_pages(a->region, a->base, bytes);
	}
	pthread_mutex_lock(&r->mu);
	give_pages(r, (a->base - r->base) >> PAGE_SHIFT, a->npages);
	if (a->kind != SIM_ALLOC_IPC)
		r->used -= bytes;
	pthread_mutex_unlock(&r->mu);
	rec_put(a);
}

CUresult sim_mem_free(int want_region, uintptr_t p)
{
	struct sim_alloc *a = sim_mem_find(p);
	if (!a || a->base != p || a->kind == SIM_ALLOC_IPC || a->kind == SIM_ALLOC_VMM)
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

CUresult sim_mem_close_ipc(struct sim_alloc *a)
{
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
			if (a->live && a->ctx == ctx && a->base && a->kind != SIM_ALLOC_VMM) {
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

bool sim_mem_charge(int region, size_t bytes)
{
	struct region *r = region_get(region);
	pthread_mutex_lock(&r->mu);
	bool ok = r->used + bytes <= sim_cfg.dev_mem;
	if (ok)
		r->used += bytes;
	pthread_mutex_unlock(&r->mu);
	return ok;
}

void sim_mem_uncharge(int region, size_t bytes)
{
	struct region *r = region_get(region);
	pthread_mutex_lock(&r->mu);
	r->used -= bytes;
	pthread_mutex_unlock(&r->mu);
}

/* ---- legacy IPC: a device range's file, and other processes' memory mapped into ours ---- */

int sim_mem_device_file(int region, uintptr_t p, off_t *ret_offset)
{
	if (region < 0 || dev_fds[region] < 0)
		return -1;
	*ret_offset = (off_t)(p - dev_regions[region].base);
	return dev_fds[region];
}

CUresult sim_mem_map_ipc(struct sim_ctx *ctx, int region, int fd, off_t offset, size_t size,
			 struct sim_alloc **ret)
{
	if (dev_fds[region] < 0)
		return CUDA_ERROR_NOT_SUPPORTED;
	struct region *r = region_get(region);
	struct sim_alloc *a = rec_get();
	if (!a)
		return CUDA_ERROR_OUT_OF_MEMORY;
	uintptr_t base;
	CUresult res = take_space(r, size, PAGE_SIZE, &base);
	if (res != CUDA_SUCCESS) {
		rec_put(a);
		return res;
	}
	size_t n = (size + PAGE_SIZE - 1) >> PAGE_SHIFT;
	if (!map_file(base, n << PAGE_SHIFT, fd, offset)) {
		map_file(base, n << PAGE_SHIFT, dev_fds[region], (off_t)(base - r->base));
		give_space(r, base, size);
		rec_put(a);
		return CUDA_ERROR_MAP_FAILED;
	}
	a->base = base;
	a->size = size;
	a->npages = n;
	a->ctx = ctx;
	a->region = region;
	a->kind = SIM_ALLOC_IPC;
	a->dev = region;
	a->flags = 0;
	set_pages(r, base, n, a);
	*ret = a;
	return CUDA_SUCCESS;
}

/* ---- virtual memory management: reservations and mappings ---- */

struct reservation {
	uintptr_t base;
	size_t size;
	struct reservation *next;
};

static struct reservation *reservations; /* under va_region.mu */

CUresult sim_va_reserve(size_t size, size_t align, uintptr_t *out)
{
	uintptr_t base;
	struct reservation *res = malloc(sizeof(*res));
	if (!res)
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUresult r = take_space(&va_region, size, align, &base);
	if (r != CUDA_SUCCESS) {
		free(res);
		return r;
	}
	pthread_mutex_lock(&va_region.mu);
	*res = (struct reservation){base, size, reservations};
	reservations = res;
	pthread_mutex_unlock(&va_region.mu);
	*out = base;
	return CUDA_SUCCESS;
}

static bool range_unmapped(uintptr_t p, size_t size)
{
	for (uintptr_t q = p; q < p + size; q += PAGE_SIZE)
		if (page_alloc(&va_region, q))
			return false;
	return true;
}

CUresult sim_va_free(uintptr_t p, size_t size)
{
	pthread_mutex_lock(&va_region.mu);
	struct reservation **link = &reservations;
	while (*link && ((*link)->base != p || (*link)->size != size))
		link = &(*link)->next;
	struct reservation *res = *link;
	bool ok = res && range_unmapped(p, size);
	if (ok)
		*link = res->next;
	pthread_mutex_unlock(&va_region.mu);
	if (!ok)
		return CUDA_ERROR_INVALID_VALUE;
	free(res);
	give_space(&va_region, p, size);
	return CUDA_SUCCESS;
}

static bool reserved_locked(uintptr_t p, size_t size)
{
	for (struct reservation *res = reservations; res; res = res->next)
		if (p >= res->base && size <= res->size && p - res->base <= res->size - size)
			return true;
	return false;
}

CUresult sim_va_map(uintptr_t p, size_t size, struct sim_phys *phys, int fd, int region)
{
	if (!in_va(p) || size == 0 || (p | size) & (SIM_VMM_GRANULARITY - 1))
		return CUDA_ERROR_INVALID_VALUE;
	struct sim_alloc *a = rec_get();
	if (!a)
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUresult r = CUDA_SUCCESS;
	pthread_mutex_lock(&va_region.mu);
	if (!reserved_locked(p, size) || !range_unmapped(p, size))
		r = CUDA_ERROR_INVALID_VALUE;
	else if (!map_file(p, size, fd, 0)) {
		remap_private(p, size, PROT_NONE);
		r = CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (r == CUDA_SUCCESS) {
		a->base = p;
		a->size = size;
		a->npages = size >> PAGE_SHIFT;
		a->ctx = NULL;
		a->region = region;
		a->kind = SIM_ALLOC_VMM;
		a->dev = region;
		a->flags = 0;
		a->phys = phys;
		set_pages(&va_region, p, a->npages, a);
	}
	pthread_mutex_unlock(&va_region.mu);
	if (r != CUDA_SUCCESS)
		rec_put(a);
	return r;
}

/* Calls fn on every mapping inside [p, p+size), which must be mapped whole and nothing else;
 * false (and no call) otherwise. */
static bool each_mapping(uintptr_t p, size_t size, bool whole,
			 void (*fn)(struct sim_alloc *, void *), void *arg)
{
	if (!in_va(p) || size == 0 || size > VA_RANGE || p + size - va_region.base > VA_RANGE)
		return false;
	for (uintptr_t q = p; q < p + size;) {
		struct sim_alloc *a = page_alloc(&va_region, q);
		if (!a || (whole && (a->base != q || a->base + a->size > p + size)))
			return false;
		q = a->base + a->size;
	}
	for (uintptr_t q = p; fn && q < p + size;) {
		struct sim_alloc *a = page_alloc(&va_region, q);
		q = a->base + a->size;
		fn(a, arg);
	}
	return true;
}

static void unmap_one(struct sim_alloc *a, void *arg)
{
	(void)arg;
	set_pages(&va_region, a->base, a->npages, NULL);
	remap_private(a->base, a->size, PROT_NONE);
	sim_vmm_unmapped(a->phys);
	rec_put(a);
}

CUresult sim_va_unmap(uintptr_t p, size_t size)
{
	pthread_mutex_lock(&va_region.mu);
	bool ok = each_mapping(p, size, true, unmap_one, NULL);
	pthread_mutex_unlock(&va_region.mu);
	return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

struct access_change {
	unsigned grant, revoke; /* bits by ordinal */
	bool (*allowed)(int owner, unsigned grant);
	bool refused;
};

static void check_access(struct sim_alloc *a, void *arg)
{
	struct access_change *c = arg;
	if (!c->allowed(a->region, c->grant))
		c->refused = true;
}

static void apply_access(struct sim_alloc *a, void *arg)
{
	struct access_change *c = arg;
	unsigned v = __atomic_load_n(&a->access, __ATOMIC_ACQUIRE);
	__atomic_store_n(&a->access, (v | c->grant) & ~c->revoke, __ATOMIC_RELEASE);
}

CUresult sim_va_set_access(uintptr_t p, size_t size, unsigned grant, unsigned revoke,
			   bool (*allowed)(int owner, unsigned grant))
{
	struct access_change c = {grant, revoke, allowed, false};
	pthread_mutex_lock(&va_region.mu);
	bool mapped = each_mapping(p, size, false, check_access, &c);
	if (mapped && !c.refused)
		each_mapping(p, size, false, apply_access, &c);
	pthread_mutex_unlock(&va_region.mu);
	if (!mapped)
		return CUDA_ERROR_INVALID_VALUE;
	return c.refused ? CUDA_ERROR_INVALID_DEVICE : CUDA_SUCCESS;
}
