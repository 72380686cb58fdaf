/* SPDX-License-Identifier: MIT */
/*
 * bench_mappings: what the guard adds to each cross-process and VMM mapping call, measured inside
 * one process against libcuda's own function. Run under the guard:
 *
 *   LD_PRELOAD=build/src/preload/libp2pguard.so P2PGUARD_DB=/tmp/b.db \
 *       build/tests/bench/bench_mappings [--calls N] [--runs N]
 *
 * The guarded function is what dlsym gives a program (the guard's wrapper); libcuda's own comes
 * from glibc's dlsym on the library's handle, past the guard. Each call below is timed both ways,
 * --calls calls a run (default 100), runs interleaved (guarded, own, own, guarded, ...), host time
 * by CLOCK_MONOTONIC, only the timed call inside the loop timed. The table gives per call the
 * fastest run of each (the figure least disturbed by other work on a shared machine) and their
 * difference, which the budget is judged on, and the median over --runs runs (default 31) of
 * each run's difference to the run beside it:
 *   cuMemMap, cuMemSetAccess, cuMemUnmap   a 2 MiB allocation of the process's own device 0
 *                                          (counted, not rowed), mapped, given access, unmapped
 *   ... with 256 peer mappings live        the same with 256 imported mappings in the guard's
 *                                          table, which an unmap searches
 *   cuMemImportFromShareableHandle,        an export of the process's own allocation imported
 *   cuMemRelease (import)                  back (each a row, the release ends it)
 *   cuMemMap, cuMemSetAccess (imported)    that import mapped and given access: rows
 *   cuIpcOpenMemHandle, cuIpcCloseMemHandle  a handle of another process (a child started as
 *                                          `bench_mappings --owner`, on device 0) opened on
 *                                          device 1 (device 0 with one device) and closed
 *   cuMemPoolSetAccess, cuMemPool-         a stream-ordered pool of device 0 that can be
 *   ExportToShareableHandle, -ExportPointer  exported as a POSIX descriptor: access granted
 *                                          again, the pool and one of its pointers exported
 *   cuMemPoolImportFromShareableHandle,    that export imported back, and the pointer through
 *   cuMemPoolImportPointer                 it (rows); where the driver refuses an import into
 *                                          the exporting process, those two are not run
 * The budget is 2 us a call. With the simulated CUDA: LD_LIBRARY_PATH=build/tests/simcuda. On a
 * GPU: the real libcuda.so.1 is found as usual.
 */

#include <cuda.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_RUNS 128
#define PEERS	 256

extern char **environ;

typedef void *(*dlsym_fn)(void *, const char *);

struct fns {
	CUresult(CUDAAPI *map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
			       unsigned long long);
	CUresult(CUDAAPI *unmap)(CUdeviceptr, size_t);
	CUresult(CUDAAPI *set_access)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
	CUresult(CUDAAPI *import)(CUmemGenericAllocationHandle *, void *,
				  CUmemAllocationHandleType);
	CUresult(CUDAAPI *release)(CUmemGenericAllocationHandle);
	CUresult(CUDAAPI *ipc_open)(CUdeviceptr *, CUipcMemHandle, unsigned int);
	CUresult(CUDAAPI *ipc_close)(CUdeviceptr);
	CUresult(CUDAAPI *copy)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
	CUresult(CUDAAPI *pool_access)(CUmemoryPool, const CUmemAccessDesc *, size_t);
	CUresult(CUDAAPI *pool_export)(void *, CUmemoryPool, CUmemAllocationHandleType,
				       unsigned long long);
	CUresult(CUDAAPI *pool_import)(CUmemoryPool *, void *, CUmemAllocationHandleType,
				       unsigned long long);
	CUresult(CUDAAPI *ptr_export)(CUmemPoolPtrExportData *, CUdeviceptr);
	CUresult(CUDAAPI *ptr_import)(CUdeviceptr *, CUmemoryPool, CUmemPoolPtrExportData *);
};

static struct fns guarded, own;

static void resolve(struct fns *f, void *lib, dlsym_fn look)
{
	*(void **)&f->map = look(lib, "cuMemMap");
	*(void **)&f->unmap = look(lib, "cuMemUnmap");
	*(void **)&f->set_access = look(lib, "cuMemSetAccess");
	*(void **)&f->import = look(lib, "cuMemImportFromShareableHandle");
	*(void **)&f->release = look(lib, "cuMemRelease");
	*(void **)&f->ipc_open = look(lib, "cuIpcOpenMemHandle_v2");
	*(void **)&f->ipc_close = look(lib, "cuIpcCloseMemHandle");
	*(void **)&f->copy = look(lib, "cuMemcpyAsync");
	*(void **)&f->pool_access = look(lib, "cuMemPoolSetAccess");
	*(void **)&f->pool_export = look(lib, "cuMemPoolExportToShareableHandle");
	*(void **)&f->pool_import = look(lib, "cuMemPoolImportFromShareableHandle");
	*(void **)&f->ptr_export = look(lib, "cuMemPoolExportPointer");
	*(void **)&f->ptr_import = look(lib, "cuMemPoolImportPointer");
}

static double now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void check(CUresult r, const char *what)
{
	if (r != CUDA_SUCCESS) {
		fprintf(stderr, "bench_mappings: %s failed: %d\n", what, r);
		exit(1);
	}
}

static void desc_for(CUmemAccessDesc *d, int dev)
{
	memset(d, 0, sizeof(*d));
	d->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	d->location.id = dev;
	d->flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
}

static CUmemGenericAllocationHandle create(size_t size, int dev)
{
	CUmemAllocationProp prop;
	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = dev;
	prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	CUmemGenericAllocationHandle h;
	check(cuMemCreate(&h, size, &prop, 0), "cuMemCreate");
	return h;
}

enum op {
	OP_MAP,
	OP_ACCESS,
	OP_UNMAP,
	OP_MAP_L,
	OP_ACCESS_L,
	OP_UNMAP_L,
	OP_IMPORT,
	OP_RELEASE,
	OP_MAP_I,
	OP_ACCESS_I,
	OP_UNMAP_I,
	OP_IPC_OPEN,
	OP_IPC_CLOSE,
	OP_POOL_ACCESS,
	OP_POOL_EXPORT,
	OP_PTR_EXPORT,
	OP_POOL_IMPORT,
	OP_PTR_IMPORT,
	OP_COPY,
	OP_COPY_L,
	NOPS
};

static const char *const op_names[NOPS] = {
    "cuMemMap (own device, counted)",
    "cuMemSetAccess (own device, counted)",
    "cuMemUnmap (own device, counted)",
    "cuMemMap (counted), 256 peer maps live",
    "cuMemSetAccess (counted), 256 live",
    "cuMemUnmap (counted), 256 live",
    "cuMemImportFromShareableHandle (row)",
    "cuMemRelease of an import (row)",
    "cuMemMap of an import (row)",
    "cuMemSetAccess of an import (row)",
    "cuMemUnmap of an import (row)",
    "cuIpcOpenMemHandle_v2 (row)",
    "cuIpcCloseMemHandle (row)",
    "cuMemPoolSetAccess (row)",
    "cuMemPoolExportToShareableHandle (row)",
    "cuMemPoolExportPointer (row)",
    "cuMemPoolImportFromShareableHandle (row)",
    "cuMemPoolImportPointer (row)",
    "cuMemcpyAsync 256 B within one device (budget 0.2 us)",
    "cuMemcpyAsync 256 B within one device, 256 live (budget 0.2 us)",
};

static double samples[NOPS][2][MAX_RUNS];

struct setup {
	size_t size;
	CUmemGenericAllocationHandle local;
	CUdeviceptr va; /* room for one mapping per call */
	int fd;		/* the local allocation exported */
	int calls;
	CUipcMemHandle ipc;
	bool have_ipc;
	int dev;
	CUdeviceptr own;   /* the own allocation mapped amid the peer mappings' addresses */
	CUcontext own_ctx; /* its device's, where the copies run */
	CUstream stream;
	CUmemoryPool pool;     /* device 0's, exportable as a descriptor */
	CUdeviceptr pool_ptr;  /* one allocation from it */
	bool pool_self_import; /* the driver imports into the exporting process */
	CUresult pool_refusal; /* what it said when it did not */
};

/* One run of the own-device triple and the imported triple with f's functions. */
static void run_vmm(const struct fns *f, const struct setup *s, int base_op, double *t)
{
	CUmemAccessDesc d;
	desc_for(&d, 0);
	for (int k = 0; k < s->calls; k++) {
		CUdeviceptr p = s->va + (CUdeviceptr)k * s->size;
		double a = now_us();
		check(f->map(p, s->size, 0, s->local, 0), "cuMemMap");
		double b = now_us();
		check(f->set_access(p, s->size, &d, 1), "cuMemSetAccess");
		double c = now_us();
		t[base_op] += b - a;
		t[base_op + 1] += c - b;
	}
	for (int k = 0; k < s->calls; k++) {
		double a = now_us();
		check(f->unmap(s->va + (CUdeviceptr)k * s->size, s->size), "cuMemUnmap");
		t[base_op + 2] += now_us() - a;
	}
}

static void run_import(const struct fns *f, const struct setup *s, double *t)
{
	CUmemAccessDesc d;
	desc_for(&d, s->dev);
	for (int k = 0; k < s->calls; k++) {
		CUmemGenericAllocationHandle h;
		CUdeviceptr p = s->va + (CUdeviceptr)k * s->size;
		double a = now_us();
		check(f->import(&h, (void *)(uintptr_t)s->fd,
				CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
		      "cuMemImportFromShareableHandle");
		double b = now_us();
		check(f->map(p, s->size, 0, h, 0), "cuMemMap (import)");
		double c = now_us();
		check(f->set_access(p, s->size, &d, 1), "cuMemSetAccess (import)");
		double e = now_us();
		check(f->unmap(p, s->size), "cuMemUnmap (import)");
		double g = now_us();
		check(f->release(h), "cuMemRelease (import)");
		double i = now_us();
		t[OP_IMPORT] += b - a;
		t[OP_MAP_I] += c - b;
		t[OP_ACCESS_I] += e - c;
		t[OP_UNMAP_I] += g - e;
		t[OP_RELEASE] += i - g;
	}
}

static void run_ipc(const struct fns *f, const struct setup *s, double *t)
{
	for (int k = 0; s->have_ipc && k < s->calls; k++) {
		CUdeviceptr p;
		double a = now_us();
		check(f->ipc_open(&p, s->ipc, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
		      "cuIpcOpenMemHandle");
		double b = now_us();
		check(f->ipc_close(p), "cuIpcCloseMemHandle");
		t[OP_IPC_OPEN] += b - a;
		t[OP_IPC_CLOSE] += now_us() - b;
	}
}

/* The pool's calls in device 0's context. A pool exported and imported back within one process is
 * what the guard sees of a consumer process, rows included; the import and the pointer import run
 * only where the driver allows it. */
static void run_pool(const struct fns *f, const struct setup *s, double *t)
{
	CUmemAccessDesc d;
	desc_for(&d, 0);
	check(cuCtxPushCurrent(s->own_ctx), "cuCtxPushCurrent");
	for (int k = 0; k < s->calls; k++) {
		int fd = -1;
		CUmemPoolPtrExportData data;
		double a = now_us();
		check(f->pool_access(s->pool, &d, 1), "cuMemPoolSetAccess");
		double b = now_us();
		check(f->pool_export(&fd, s->pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
		      "cuMemPoolExportToShareableHandle");
		double c = now_us();
		check(f->ptr_export(&data, s->pool_ptr), "cuMemPoolExportPointer");
		double e = now_us();
		t[OP_POOL_ACCESS] += b - a;
		t[OP_POOL_EXPORT] += c - b;
		t[OP_PTR_EXPORT] += e - c;
		if (s->pool_self_import) {
			CUmemoryPool imported;
			CUdeviceptr p;
			double g = now_us();
			check(f->pool_import(&imported, (void *)(uintptr_t)fd,
					     CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
			      "cuMemPoolImportFromShareableHandle");
			double i = now_us();
			check(f->ptr_import(&p, imported, &data), "cuMemPoolImportPointer");
			double j = now_us();
			t[OP_POOL_IMPORT] += i - g;
			t[OP_PTR_IMPORT] += j - i;
			check(cuMemFreeAsync(p, s->stream), "cuMemFreeAsync (imported)");
			check(cuStreamSynchronize(s->stream), "cuStreamSynchronize");
			check(cuMemPoolDestroy(imported), "cuMemPoolDestroy (imported)");
		}
		close(fd);
	}
	CUcontext popped;
	cuCtxPopCurrent(&popped);
}

/* Whether the driver imports a pool, and a pointer from it, into the process that exported it. */
static void probe_pool_self_import(struct setup *s)
{
	int fd = -1;
	CUmemoryPool imported;
	CUmemPoolPtrExportData data;
	CUdeviceptr p;
	check(cuCtxPushCurrent(s->own_ctx), "cuCtxPushCurrent");
	check(cuMemPoolExportToShareableHandle(&fd, s->pool,
					       CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
	      "cuMemPoolExportToShareableHandle (probe)");
	check(cuMemPoolExportPointer(&data, s->pool_ptr), "cuMemPoolExportPointer (probe)");
	s->pool_refusal = cuMemPoolImportFromShareableHandle(
	    &imported, (void *)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
	if (s->pool_refusal == CUDA_SUCCESS) {
		s->pool_refusal = cuMemPoolImportPointer(&p, imported, &data);
		if (s->pool_refusal == CUDA_SUCCESS) {
			check(cuMemFreeAsync(p, s->stream), "cuMemFreeAsync (probe)");
			check(cuStreamSynchronize(s->stream), "cuStreamSynchronize");
		}
		cuMemPoolDestroy(imported);
	}
	s->pool_self_import = s->pool_refusal == CUDA_SUCCESS;
	close(fd);
	CUcontext popped;
	cuCtxPopCurrent(&popped);
}

/* Copies within the own allocation, which lies amid the peer mappings' addresses: with mappings
 * live, both of its pointers are looked up in the guard's table and found in none. */
static void run_copy(const struct fns *f, const struct setup *s, int op, double *t)
{
	check(cuCtxPushCurrent(s->own_ctx), "cuCtxPushCurrent");
	double a = now_us();
	for (int k = 0; k < s->calls; k++)
		check(f->copy(s->own + 4096, s->own, 256, s->stream), "cuMemcpyAsync");
	t[op] += now_us() - a;
	check(cuStreamSynchronize(s->stream), "cuStreamSynchronize");
	CUcontext popped;
	cuCtxPopCurrent(&popped);
}

/* Peer mapping k's address: the own allocation keeps the middle one. */
static CUdeviceptr peer_slot(CUdeviceptr peer_va, const struct setup *s, int k)
{
	return peer_va + (CUdeviceptr)(k < PEERS / 2 ? k : k + 1) * s->size;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The handle of a cuMemAlloc of another process, which waits until stdin closes. */
static int owner(void)
{
	CUdevice dev;
	CUcontext ctx;
	CUdeviceptr p;
	CUipcMemHandle h;
	check(cuInit(0), "cuInit");
	cuDeviceGet(&dev, 0);
	cuDevicePrimaryCtxRetain(&ctx, dev);
	cuCtxSetCurrent(ctx);
	check(cuMemAlloc(&p, 1 << 20), "cuMemAlloc");
	check(cuIpcGetMemHandle(&h, p), "cuIpcGetMemHandle");
	fwrite(&h, sizeof(h), 1, stdout);
	fflush(stdout);
	char buf[16];
	while (fread(buf, 1, sizeof(buf), stdin) > 0)
		;
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "--owner") == 0)
		return owner();
	int calls = 100, runs = 31;
	for (int k = 1; k + 1 < argc; k += 2) {
		if (strcmp(argv[k], "--calls") == 0)
			calls = atoi(argv[k + 1]);
		else if (strcmp(argv[k], "--runs") == 0)
			runs = atoi(argv[k + 1]);
	}
	if (calls < 1 || runs < 1 || runs > MAX_RUNS) {
		fprintf(stderr, "usage: bench_mappings [--calls N] [--runs 1-%d]\n", MAX_RUNS);
		return 2;
	}

	/* The owner first: a child forked after cuInit could make no CUDA call. */
	struct setup s = {.calls = calls};
	int to_child[2], from_child[2];
	pid_t child = 0;
	if (pipe2(to_child, O_CLOEXEC) == 0 && pipe2(from_child, O_CLOEXEC) == 0) {
		posix_spawn_file_actions_t fa;
		posix_spawn_file_actions_init(&fa);
		posix_spawn_file_actions_adddup2(&fa, to_child[0], 0);
		posix_spawn_file_actions_adddup2(&fa, from_child[1], 1);
		char *cargv[] = {argv[0], "--owner", NULL};
		if (posix_spawn(&child, "/proc/self/exe", &fa, NULL, cargv, environ) == 0) {
			close(to_child[0]);
			close(from_child[1]);
			s.have_ipc = read(from_child[0], &s.ipc, sizeof(s.ipc)) == sizeof(s.ipc);
		}
	}

	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	if (!lib)
		lib = dlopen("libcuda.so.1", RTLD_NOW);
	dlsym_fn glibc_dlsym = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
	if (!glibc_dlsym)
		glibc_dlsym = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
	if (!lib || !glibc_dlsym) {
		fprintf(stderr, "bench_mappings: cannot load libcuda.so.1 or find glibc's dlsym\n");
		return 1;
	}
	resolve(&guarded, lib, dlsym);
	resolve(&own, lib, glibc_dlsym);
	bool under_guard = (void *)guarded.map != (void *)own.map;

	CUdevice dev;
	CUcontext ctx;
	int ndev = 0;
	check(cuInit(0), "cuInit");
	cuDeviceGetCount(&ndev);
	s.dev = ndev > 1 ? 1 : 0;
	cuDeviceGet(&dev, s.dev);
	cuDevicePrimaryCtxRetain(&ctx, dev);
	cuCtxSetCurrent(ctx);
	CUmemAllocationProp prop;
	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	check(cuMemGetAllocationGranularity(&s.size, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
	      "cuMemGetAllocationGranularity");
	s.local = create(s.size, 0);
	check(cuMemAddressReserve(&s.va, s.size * (size_t)calls, 0, 0, 0), "cuMemAddressReserve");
	check(cuMemExportToShareableHandle(&s.fd, s.local, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
					   0),
	      "cuMemExportToShareableHandle");

	/* The peer mappings' addresses, with the own allocation mapped in the middle. */
	CUdeviceptr peer_va;
	check(cuMemAddressReserve(&peer_va, s.size * (PEERS + 1), 0, 0, 0),
	      "cuMemAddressReserve (peers)");
	s.own = peer_va + (CUdeviceptr)(PEERS / 2) * s.size;
	CUmemAccessDesc own_access;
	desc_for(&own_access, 0);
	check(cuMemMap(s.own, s.size, 0, s.local, 0), "cuMemMap (own)");
	check(cuMemSetAccess(s.own, s.size, &own_access, 1), "cuMemSetAccess (own)");
	CUdevice dev0;
	cuDeviceGet(&dev0, 0);
	check(cuDevicePrimaryCtxRetain(&s.own_ctx, dev0), "cuDevicePrimaryCtxRetain (own)");
	check(cuCtxPushCurrent(s.own_ctx), "cuCtxPushCurrent");
	check(cuStreamCreate(&s.stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
	CUmemPoolProps pool_props;
	memset(&pool_props, 0, sizeof(pool_props));
	pool_props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
	pool_props.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	pool_props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	pool_props.location.id = 0;
	check(cuMemPoolCreate(&s.pool, &pool_props), "cuMemPoolCreate");
	check(cuMemAllocFromPoolAsync(&s.pool_ptr, 1 << 20, s.pool, s.stream),
	      "cuMemAllocFromPoolAsync");
	check(cuStreamSynchronize(s.stream), "cuStreamSynchronize");
	CUcontext popped;
	cuCtxPopCurrent(&popped);
	probe_pool_self_import(&s);

	for (int r = 0; r < runs; r++)
		for (int order = 0; order < 2; order++) {
			/* guarded first in even runs, own first in odd ones */
			int which = (r + order) % 2;
			const struct fns *f = which == 0 ? &guarded : &own;
			double t[NOPS] = {0};
			run_vmm(f, &s, OP_MAP, t);
			run_import(f, &s, t);
			run_ipc(f, &s, t);
			run_pool(f, &s, t);
			run_copy(f, &s, OP_COPY, t);
			for (int op = 0; op < NOPS; op++)
				if ((op < OP_MAP_L || op > OP_UNMAP_L) && op != OP_COPY_L)
					samples[op][which][r] = t[op] / calls;
		}

	/* 256 imported mappings live in the guard's table while the own-device calls run. */
	CUmemGenericAllocationHandle imported[PEERS];
	for (int k = 0; k < PEERS; k++) {
		check(guarded.import(&imported[k], (void *)(uintptr_t)s.fd,
				     CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
		      "import (peers)");
		check(guarded.map(peer_slot(peer_va, &s, k), s.size, 0, imported[k], 0),
		      "cuMemMap (peers)");
	}
	for (int r = 0; r < runs; r++)
		for (int order = 0; order < 2; order++) {
			int which = (r + order) % 2;
			double t[NOPS] = {0};
			run_vmm(which == 0 ? &guarded : &own, &s, OP_MAP_L, t);
			run_copy(which == 0 ? &guarded : &own, &s, OP_COPY_L, t);
			for (int op = OP_MAP_L; op <= OP_UNMAP_L; op++)
				samples[op][which][r] = t[op] / calls;
			samples[OP_COPY_L][which][r] = t[OP_COPY_L] / calls;
		}
	for (int k = 0; k < PEERS; k++) {
		guarded.unmap(peer_slot(peer_va, &s, k), s.size);
		guarded.release(imported[k]);
	}

	printf("bench_mappings: %d calls a run, %d runs, %d device(s)%s\n", calls, runs, ndev,
	       under_guard ? "" : " -- NOT under the guard: both columns are libcuda's own");
	printf(
	    "| call | libcuda's own, fastest run (us) | guarded, fastest run (us) | guard's cost "
	    "(us) | median of paired differences (us) | budget (2 us a mapping call) |\n");
	printf("| --- | --- | --- | --- | --- | --- |\n");
	int over = 0;
	for (int op = 0; op < NOPS; op++) {
		double budget = op >= OP_COPY ? 0.2 : 2.0;
		if ((op == OP_IPC_OPEN || op == OP_IPC_CLOSE) && !s.have_ipc) {
			printf("| %s | not run: no owner process | | | | |\n", op_names[op]);
			continue;
		}
		if ((op == OP_POOL_IMPORT || op == OP_PTR_IMPORT) && !s.pool_self_import) {
			printf("| %s | not run: the driver refused an import into the exporting "
			       "process (%d) | | | | |\n",
			       op_names[op], s.pool_refusal);
			continue;
		}
		double diff[MAX_RUNS];
		for (int r = 0; r < runs; r++)
			diff[r] = samples[op][0][r] - samples[op][1][r];
		double paired = median(diff, runs);
		qsort(samples[op][0], (size_t)runs, sizeof(double), cmp);
		qsort(samples[op][1], (size_t)runs, sizeof(double), cmp);
		double g = samples[op][0][0], o = samples[op][1][0];
		over += g - o > budget;
		printf("| %s | %.3f | %.3f | %+.3f | %+.3f | %s |\n", op_names[op], o, g, g - o,
		       paired, g - o <= budget ? "met" : "MISSED");
	}

	cuCtxPushCurrent(s.own_ctx);
	cuMemFreeAsync(s.pool_ptr, s.stream);
	cuStreamSynchronize(s.stream);
	cuMemPoolDestroy(s.pool);
	cuCtxPopCurrent(&popped);
	cuStreamDestroy(s.stream);
	cuMemUnmap(s.own, s.size);
	cuMemAddressFree(peer_va, s.size * (PEERS + 1));
	cuMemAddressFree(s.va, s.size * (size_t)calls);
	close(s.fd);
	cuMemRelease(s.local);
	if (child > 0) {
		close(to_child[1]);
		waitpid(child, NULL, 0);
	}
	return over ? 3 : 0;
}
