/* Simulated driver: legacy CUDA IPC (cuIpcGetMemHandle, cuIpcOpenMemHandle, cuIpcCloseMemHandle).
 *
 * A device's range is a shared mapping of a memfd (drv_mem.c), so a handle names the exporting
 * process, that file's descriptor number there and the allocation's offset in it. The importer
 * opens the file through /proc/PID/fd, which, like the real driver's handle, works only while the
 * exporter lives and only for a process that can see it: another PID namespace (a container
 * without --pid=host) finds another process or none. The codes are the real driver's where they
 * were measured on an H100 (FACTS.md): a garbage or all-zero handle 1, a handle opened in the
 * process that made it 201, a pointer that is not cuMemAlloc memory (pinned host, a memory
 * pool's) 1, closing a pointer no IPC open returned 1; on an H200 (tests/gpu/ipc_status_facts.py)
 * a handle whose allocation the exporter freed 1. An exported allocation holds a memfd named after
 * it, closed when it is freed, and its descriptor travels in the handle: the importer finds it
 * through /proc/PID/fd or not. Assumed, not measured: an exporter that
 * cannot be found gives 201 as well (what users report across PID namespaces), and a lazy peer
 * enable towards a device the pair cannot reach gives 217, past the 8 peer slots 711. */
#include "sim.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define IPC_MAGIC "SIMIPC01"

struct ipc_handle {
	char magic[8];
	int32_t pid;
	int32_t fd;	     /* the exporter's file of its device range */
	int32_t phys;	     /* the physical device */
	int32_t export_fd;   /* the exporter's descriptor that lives as long as the allocation */
	uint64_t start_time; /* the exporter's start, /proc/PID/stat field 22 */
	uint64_t offset, size;
	uint64_t alloc_id;
	uint64_t pad;
};
_Static_assert(sizeof(struct ipc_handle) == CU_IPC_HANDLE_SIZE, "an IPC handle is 64 bytes");

/* What this process opened: the same handle opened again in the same context shares the mapping
 * (the driver counts references). */
struct opened {
	int32_t pid;
	uint64_t start_time, alloc_id;
	struct sim_ctx *ctx;
	struct sim_alloc *a;
	int refs;
	struct opened *next;
};

static pthread_mutex_t ipc_mu = PTHREAD_MUTEX_INITIALIZER;
static struct opened *opened_list;

/* A process's start time in clock ticks after boot (field 22 of /proc/PID/stat); 0 unknown. */
static uint64_t start_time_of(pid_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* The command name may hold spaces and parentheses: count fields after its last ')'. */
	char *p = strrchr(buf, ')');
	if (!p)
		return 0;
	unsigned long long v = 0;
	char *save = NULL;
	int field = 2;
	for (char *tok = strtok_r(p + 1, " ", &save); tok; tok = strtok_r(NULL, " ", &save))
		if (++field == 22) {
			v = strtoull(tok, NULL, 10);
			break;
		}
	return v;
}

SIM_API CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
	SIM_FAULT();
	CUresult r = sim_ready();
	if (r != CUDA_SUCCESS)
		return r;
	struct sim_alloc *a = sim_mem_find((uintptr_t)dptr);
	if (!pHandle || !a || a->kind != SIM_ALLOC_PLAIN)
		return CUDA_ERROR_INVALID_VALUE;
	off_t offset;
	int fd = sim_mem_device_file(a->region, a->base, &offset);
	if (fd < 0)
		return CUDA_ERROR_NOT_SUPPORTED;
	int export_fd = atomic_load(&a->ipc_export_fd) - 1;
	if (export_fd < 0) {
		char name[48];
		snprintf(name, sizeof(name), "simipc-%llu", a->id);
		int made = memfd_create(name, MFD_CLOEXEC);
		if (made < 0)
			return CUDA_ERROR_OUT_OF_MEMORY;
		int none = 0;
		if (atomic_compare_exchange_strong(&a->ipc_export_fd, &none, made + 1)) {
			export_fd = made;
		} else {
			close(made);
			export_fd = none - 1;
		}
	}
	static uint64_t own_start;
	if (!__atomic_load_n(&own_start, __ATOMIC_RELAXED))
		__atomic_store_n(&own_start, start_time_of(getpid()), __ATOMIC_RELAXED);
	struct ipc_handle h = {
	    .pid = getpid(),
	    .fd = fd,
	    .phys = sim_cfg.phys[a->region],
	    .export_fd = export_fd,
	    .start_time = __atomic_load_n(&own_start, __ATOMIC_RELAXED),
	    .offset = (uint64_t)offset,
	    .size = a->size,
	    .alloc_id = a->id,
	};
	memcpy(h.magic, IPC_MAGIC, sizeof(h.magic));
	memcpy(pHandle->reserved, &h, sizeof(h));
	return CUDA_SUCCESS;
}

/* Whether the exporter still holds the allocation the handle names: its memfd, named after the
 * allocation, is still open there. */
static bool export_alive(const struct ipc_handle *h)
{
	char path[64], target[128], want[64];
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)h->pid, (int)h->export_fd);
	ssize_t n = readlink(path, target, sizeof(target) - 1);
	if (n <= 0)
		return false;
	target[n] = '\0';
	int w = snprintf(want, sizeof(want), "/memfd:simipc-%llu", (unsigned long long)h->alloc_id);
	return strncmp(target, want, (size_t)w) == 0 && (target[w] == '\0' || target[w] == ' ');
}

static struct opened *find_opened(const struct ipc_handle *h, struct sim_ctx *ctx)
{
	for (struct opened *o = opened_list; o; o = o->next)
		if (o->pid == h->pid && o->start_time == h->start_time &&
		    o->alloc_id == h->alloc_id && o->ctx == ctx)
			return o;
	return NULL;
}

static CUresult open_handle(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int flags)
{
	struct sim_ctx *ctx;
	CUresult r = sim_ctx_current(&ctx);
	if (r != CUDA_SUCCESS)
		return r;
	struct ipc_handle h;
	memcpy(&h, handle.reserved, sizeof(h));
	/* The flag is required, as documented: the 580 driver refuses 0 as it refuses an undefined
	 * bit (tests/gpu/ipc_status_facts.py on an H200, 2026-12-01). */
	if (!pdptr || flags != CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS ||
	    memcmp(h.magic, IPC_MAGIC, sizeof(h.magic)) != 0 || h.size == 0 || h.phys < 0 ||
	    h.phys >= sim_cfg.nphys)
		return CUDA_ERROR_INVALID_VALUE;
	if (h.pid == getpid())
		return CUDA_ERROR_INVALID_CONTEXT;
	if (start_time_of(h.pid) != h.start_time)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (!export_alive(&h))
		return CUDA_ERROR_INVALID_VALUE;

	pthread_mutex_lock(&ipc_mu);
	struct opened *o = find_opened(&h, ctx);
	if (o) {
		o->refs++;
		*pdptr = (CUdeviceptr)o->a->base;
	}
	pthread_mutex_unlock(&ipc_mu);
	if (o)
		return CUDA_SUCCESS;

	/* Memory of a device this process does not see is placed in the range of the device that
	 * maps it (its pointer then names that device: not measured on a real driver). */
	int owner = sim_ordinal_of(h.phys);
	int region = owner >= 0 ? owner : ctx->dev;
	if (owner < 0 && h.phys != sim_cfg.phys[ctx->dev] &&
	    !sim_cfg.p2p_phys[sim_cfg.phys[ctx->dev]][h.phys])
		return CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
	if (owner >= 0 && (r = sim_ctx_ipc_peer_get(ctx, owner)) != CUDA_SUCCESS)
		return r;

	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)h.pid, (int)h.fd);
	int fd = open(path, O_RDWR | O_CLOEXEC);
	struct sim_alloc *a = NULL;
	r = fd < 0 ? CUDA_ERROR_INVALID_CONTEXT
		   : sim_mem_map_ipc(ctx, region, fd, (off_t)h.offset, h.size, &a);
	if (fd >= 0)
		close(fd);
	o = r == CUDA_SUCCESS ? calloc(1, sizeof(*o)) : NULL;
	if (r == CUDA_SUCCESS && !o) {
		sim_mem_close_ipc(a);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (r != CUDA_SUCCESS) {
		if (owner >= 0)
			sim_ctx_ipc_peer_put(ctx, owner);
		return r;
	}
	a->ipc_dev = owner >= 0 ? owner : -1;
	*o = (struct opened){h.pid, h.start_time, h.alloc_id, ctx, a, 1, NULL};
	pthread_mutex_lock(&ipc_mu);
	o->next = opened_list;
	opened_list = o;
	pthread_mutex_unlock(&ipc_mu);
	*pdptr = (CUdeviceptr)a->base;
	return CUDA_SUCCESS;
}

/* The CUDA 4.1 ABI and the CUDA 11.0 one: the same semantics here. */
SIM_API CUresult cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags)
{
	SIM_FAULT();
	return open_handle(pdptr, handle, Flags);
}

SIM_API CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle,
				       unsigned int Flags)
{
	SIM_FAULT();
	return open_handle(pdptr, handle, Flags);
}

/* drv_mem.c's release of an IPC mapping (its close, or its context's teardown). */
void sim_ipc_unmapped(struct sim_alloc *a)
{
	pthread_mutex_lock(&ipc_mu);
	for (struct opened **link = &opened_list; *link; link = &(*link)->next)
		if ((*link)->a == a) {
			struct opened *o = *link;
			*link = o->next;
			free(o);
			break;
		}
	pthread_mutex_unlock(&ipc_mu);
	if (a->ipc_dev >= 0 && a->ctx)
		sim_ctx_ipc_peer_put(a->ctx, a->ipc_dev);
}

SIM_API CUresult cuIpcCloseMemHandle(CUdeviceptr dptr)
{
	SIM_FAULT();
	CUresult r = sim_ready();
	if (r != CUDA_SUCCESS)
		return r;
	struct sim_alloc *a = sim_mem_find((uintptr_t)dptr);
	if (!a || a->kind != SIM_ALLOC_IPC || a->base != (uintptr_t)dptr)
		return CUDA_ERROR_INVALID_VALUE;
	bool last = true;
	pthread_mutex_lock(&ipc_mu);
	for (struct opened **link = &opened_list; *link; link = &(*link)->next)
		if ((*link)->a == a) {
			struct opened *o = *link;
			last = --o->refs == 0;
			if (last) {
				*link = o->next;
				free(o);
			}
			break;
		}
	pthread_mutex_unlock(&ipc_mu);
	return last ? sim_mem_close_ipc(a) : CUDA_SUCCESS;
}
