/* Cross-process mappings for the preload tests, one side per process so that a test can start
 * each side in the environment it wants (another CUDA_VISIBLE_DEVICES, another PID namespace,
 * other simulated faults):
 *
 *   xproc_peer ipc-owner DEV...         cudaMalloc 1 MiB on each DEV, print one legacy IPC handle a
 *                                       line (hex), then wait for stdin to close
 *   xproc_peer ipc-open DEV HEX...      on DEV open each handle (lazy peer access), print the
 *                                       codes; copy the first mapping into DEV's memory and check
 *                                       it; close them all
 *   xproc_peer vmm-owner DEV SOCKET     a POSIX-fd exportable cuMem allocation on DEV, mapped and
 *                                       filled; serve its exported descriptor to each connection
 *                                       on the Unix socket SOCKET (SCM_RIGHTS) until stdin closes
 *   xproc_peer vmm-import DEV SOCKET    take the descriptor, import, map, give DEV access, copy
 *                                       into DEV's memory, unmap, release; print the codes
 *
 * Every line is "CALL=code"; the program's exit status is 0 whatever the codes (the test reads
 * them). Each failing call is made in a function of its own, so that backtraces name it. Its
 * environment changes how it goes about it:
 *
 *   XPROC_KEEP=1     ipc-open and vmm-import end without closing, unmapping or releasing what
 *                    they mapped: mappings still live when the process ends
 *   XPROC_COPY=async the copy out of the mapping is asynchronous, on a stream of its own, then
 *                    synchronised
 *   XPROC_LOOKUP=... where the mapping calls (IPC open and close, cuMem export, import, map,
 *                    access, unmap, release) come from, instead of the symbols the program links;
 *                    ipc-open then opens and closes with the driver's calls:
 *       entry-point    cudaGetDriverEntryPoint, at the runtime's own version
 *       procaddr       cuGetProcAddress at 12000, found as a static runtime finds it (dlsym of
 *                      cuGetProcAddress_v2 in libcuda, asked for "cuGetProcAddress" itself)
 *       procaddr-nccl  cuGetProcAddress found with cudaGetDriverEntryPoint, each call asked for
 *                      at the version that introduced it, as NCCL's table is filled
 */
#include <cuda.h>
/* cudaGetDriverEntryPoint is deprecated, and programs built before CUDA 12.5 still call it. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#include <cuda_runtime_api.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define SIZE ((size_t)1 << 20)

static void fill(unsigned char *p, size_t n, unsigned seed)
{
	for (size_t k = 0; k < n; k++)
		p[k] = (unsigned char)(k * 13 + seed);
}

static int same(const unsigned char *p, size_t n, unsigned seed)
{
	for (size_t k = 0; k < n; k++)
		if (p[k] != (unsigned char)(k * 13 + seed))
			return 0;
	return 1;
}

static int keep(void)
{
	const char *v = getenv("XPROC_KEEP");
	return v && strcmp(v, "1") == 0;
}

static int async_copy(void)
{
	const char *v = getenv("XPROC_COPY");
	return v && strcmp(v, "async") == 0;
}

/* The mapping calls as the program found them (XPROC_LOOKUP). */
static struct {
	CUresult(CUDAAPI *IpcOpenMemHandle)(CUdeviceptr *, CUipcMemHandle, unsigned);
	CUresult(CUDAAPI *IpcCloseMemHandle)(CUdeviceptr);
	CUresult(CUDAAPI *MemExportToShareableHandle)(void *, CUmemGenericAllocationHandle,
						      CUmemAllocationHandleType,
						      unsigned long long);
	CUresult(CUDAAPI *MemImportFromShareableHandle)(CUmemGenericAllocationHandle *, void *,
							CUmemAllocationHandleType);
	CUresult(CUDAAPI *MemMap)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
				  unsigned long long);
	CUresult(CUDAAPI *MemSetAccess)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
	CUresult(CUDAAPI *MemUnmap)(CUdeviceptr, size_t);
	CUresult(CUDAAPI *MemRelease)(CUmemGenericAllocationHandle);
} mapping_calls = {
    cuIpcOpenMemHandle,
    cuIpcCloseMemHandle,
    cuMemExportToShareableHandle,
    cuMemImportFromShareableHandle,
    cuMemMap,
    cuMemSetAccess,
    cuMemUnmap,
    cuMemRelease,
};

/* Set when the mapping calls were looked up: ipc-open then uses the driver's IPC calls. */
static int looked_up;

typedef CUresult(CUDAAPI *get_proc_fn)(const char *, void **, int, cuuint64_t,
				       CUdriverProcAddressQueryResult *);

static get_proc_fn get_proc_as_static_runtime(void)
{
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	get_proc_fn boot = lib ? (get_proc_fn)dlsym(lib, "cuGetProcAddress_v2") : NULL;
	CUdriverProcAddressQueryResult st;
	void *self = NULL;
	if (!boot || boot("cuGetProcAddress", &self, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &st) !=
			 CUDA_SUCCESS)
		return NULL;
	return (get_proc_fn)self;
}

static get_proc_fn get_proc_as_nccl(void)
{
	void *self = NULL;
	enum cudaDriverEntryPointQueryResult st;
	if (cudaGetDriverEntryPoint("cuGetProcAddress", &self, cudaEnableDefault, &st) !=
	    cudaSuccess)
		return NULL;
	return (get_proc_fn)self;
}

/* One call through cuGetProcAddress at version, or without it through cudaGetDriverEntryPoint
 * (which takes no version: the runtime's own). A call not found ends the program: the test
 * would read nothing useful. */
static void look_up(const char *how, get_proc_fn get_proc, const char *symbol, int version,
		    void *ret_fn)
{
	void *fn = NULL;
	if (get_proc) {
		CUdriverProcAddressQueryResult st;
		get_proc(symbol, &fn, version, CU_GET_PROC_ADDRESS_DEFAULT, &st);
	} else {
		enum cudaDriverEntryPointQueryResult st;
		cudaGetDriverEntryPoint(symbol, &fn, cudaEnableDefault, &st);
	}
	if (!fn) {
		fprintf(stderr, "xproc_peer: %s found no %s\n", how, symbol);
		exit(1);
	}
	memcpy(ret_fn, &fn, sizeof(fn));
}

static void look_up_mapping_calls(void)
{
	const char *how = getenv("XPROC_LOOKUP");
	if (!how || !*how)
		return;
	int nccl = strcmp(how, "procaddr-nccl") == 0;
	int entry_point = strcmp(how, "entry-point") == 0;
	if (!nccl && !entry_point && strcmp(how, "procaddr") != 0) {
		fprintf(stderr, "xproc_peer: XPROC_LOOKUP=%s: not a lookup this program makes\n",
			how);
		exit(2);
	}
	get_proc_fn get_proc = NULL;
	if (!entry_point) {
		get_proc = nccl ? get_proc_as_nccl() : get_proc_as_static_runtime();
		if (!get_proc) {
			fprintf(stderr, "xproc_peer: %s found no cuGetProcAddress\n", how);
			exit(1);
		}
	}
	/* A static runtime's table asks for everything at its own version (12000: the ABIs this
	 * file declares); NCCL's asks for each call at the version that introduced it, which for
	 * cuIpcOpenMemHandle is the CUDA 4.1 ABI (its arguments are 11.0's). */
	int ipc = nccl ? 4010 : 12000, vmm = nccl ? 10020 : 12000;
	look_up(how, get_proc, "cuIpcOpenMemHandle", ipc, &mapping_calls.IpcOpenMemHandle);
	look_up(how, get_proc, "cuIpcCloseMemHandle", ipc, &mapping_calls.IpcCloseMemHandle);
	look_up(how, get_proc, "cuMemExportToShareableHandle", vmm,
		&mapping_calls.MemExportToShareableHandle);
	look_up(how, get_proc, "cuMemImportFromShareableHandle", vmm,
		&mapping_calls.MemImportFromShareableHandle);
	look_up(how, get_proc, "cuMemMap", vmm, &mapping_calls.MemMap);
	look_up(how, get_proc, "cuMemSetAccess", vmm, &mapping_calls.MemSetAccess);
	look_up(how, get_proc, "cuMemUnmap", vmm, &mapping_calls.MemUnmap);
	look_up(how, get_proc, "cuMemRelease", vmm, &mapping_calls.MemRelease);
	looked_up = 1;
}

static void wait_for_stdin(void)
{
	char buf[64];
	while (fread(buf, 1, sizeof(buf), stdin) > 0)
		;
}

static int ipc_owner(int argc, char **argv)
{
	int n = argc;
	void **bufs = calloc((size_t)n, sizeof(*bufs));
	unsigned char *host = malloc(SIZE);
	for (int k = 0; k < n; k++) {
		int dev = atoi(argv[k]);
		cudaSetDevice(dev);
		cudaMalloc(&bufs[k], SIZE);
		fill(host, SIZE,
		     7); /* the importer cannot learn the owner's device from its mapping */
		cudaMemcpy(bufs[k], host, SIZE, cudaMemcpyHostToDevice);
		cudaIpcMemHandle_t h;
		int rc = cudaIpcGetMemHandle(&h, bufs[k]);
		printf("cudaIpcGetMemHandle=%d ", rc);
		for (size_t i = 0; i < sizeof(h); i++)
			printf("%02x", (unsigned char)h.reserved[i]);
		printf("\n");
	}
	fflush(stdout);
	wait_for_stdin();
	for (int k = 0; k < n; k++)
		cudaFree(bufs[k]);
	free(bufs);
	free(host);
	return 0;
}

static int parse_handle(const char *hex, cudaIpcMemHandle_t *h)
{
	if (strlen(hex) != 2 * sizeof(*h))
		return -1;
	for (size_t i = 0; i < sizeof(*h); i++) {
		unsigned v;
		if (sscanf(hex + 2 * i, "%2x", &v) != 1)
			return -1;
		h->reserved[i] = (char)v;
	}
	return 0;
}

static __attribute__((noinline)) int open_handle(void **p, cudaIpcMemHandle_t h)
{
	if (!looked_up)
		return cudaIpcOpenMemHandle(p, h, cudaIpcMemLazyEnablePeerAccess);
	CUipcMemHandle driver_handle;
	memcpy(&driver_handle, &h, sizeof(driver_handle));
	CUdeviceptr dptr = 0;
	CUresult rc = mapping_calls.IpcOpenMemHandle(&dptr, driver_handle,
						     CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
	*p = (void *)(uintptr_t)dptr;
	return rc;
}

static int close_handle(void *p)
{
	if (!looked_up)
		return cudaIpcCloseMemHandle(p);
	return mapping_calls.IpcCloseMemHandle((CUdeviceptr)(uintptr_t)p);
}

/* The copy out of the first mapping, synchronous or, with XPROC_COPY=async, on a stream of its
 * own. */
static void copy_out_of_ipc_mapping(void *local, const void *mapped)
{
	if (!async_copy()) {
		printf("cudaMemcpy=%d\n",
		       cudaMemcpy(local, mapped, SIZE, cudaMemcpyDeviceToDevice));
		return;
	}
	cudaStream_t s;
	cudaStreamCreate(&s);
	printf("cudaMemcpyAsync=%d\n",
	       cudaMemcpyAsync(local, mapped, SIZE, cudaMemcpyDeviceToDevice, s));
	printf("cudaStreamSynchronize=%d\n", cudaStreamSynchronize(s));
	cudaStreamDestroy(s);
}

static int ipc_open(int argc, char **argv)
{
	int dev = atoi(argv[0]);
	cudaSetDevice(dev);
	void *maps[16] = {0};
	int n = argc - 1 < 16 ? argc - 1 : 16;
	for (int k = 0; k < n; k++) {
		cudaIpcMemHandle_t h;
		memset(&h, 0, sizeof(h));
		if (parse_handle(argv[k + 1], &h) < 0)
			memset(&h, 0x5a, sizeof(h));
		int rc = open_handle(&maps[k], h);
		printf("%s=%d\n", looked_up ? "cuIpcOpenMemHandle" : "cudaIpcOpenMemHandle", rc);
		if (rc != 0)
			maps[k] = NULL;
	}
	if (maps[0]) {
		void *local = NULL;
		unsigned char *host = malloc(SIZE);
		cudaMalloc(&local, SIZE);
		copy_out_of_ipc_mapping(local, maps[0]);
		cudaMemcpy(host, local, SIZE, cudaMemcpyDeviceToHost);
		printf("data=%d\n", same(host, SIZE, 7));
		cudaFree(local);
		free(host);
	}
	for (int k = 0; k < n && !keep(); k++)
		if (maps[k])
			printf("%s=%d\n",
			       looked_up ? "cuIpcCloseMemHandle" : "cudaIpcCloseMemHandle",
			       close_handle(maps[k]));
	return 0;
}

static int unix_socket(const char *path, struct sockaddr_un *addr)
{
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	memset(addr, 0, sizeof(*addr));
	addr->sun_family = AF_UNIX;
	snprintf(addr->sun_path, sizeof(addr->sun_path), "%s", path);
	return s;
}

static void use_device(int ordinal)
{
	CUdevice dev;
	CUcontext ctx;
	cuInit(0);
	cuDeviceGet(&dev, ordinal);
	cuDevicePrimaryCtxRetain(&ctx, dev);
	cuCtxSetCurrent(ctx);
}

static void access_desc(CUmemAccessDesc *d, int dev)
{
	memset(d, 0, sizeof(*d));
	d->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	d->location.id = dev;
	d->flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
}

struct server {
	int sock, fd;
	uint64_t size;
};

/* Each connection gets the descriptor (SCM_RIGHTS) and the size; a thread that makes no CUDA
 * call. */
static void *serve(void *arg)
{
	struct server *srv = arg;
	for (;;) {
		int c = accept(srv->sock, NULL, NULL);
		if (c < 0)
			return NULL;
		uint64_t sz = srv->size;
		struct iovec iov = {&sz, sizeof(sz)};
		union {
			char buf[CMSG_SPACE(sizeof(int))];
			struct cmsghdr align;
		} control;
		memset(&control, 0, sizeof(control));
		struct msghdr msg = {.msg_iov = &iov,
				     .msg_iovlen = 1,
				     .msg_control = control.buf,
				     .msg_controllen = sizeof(control.buf)};
		struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &srv->fd, sizeof(int));
		sendmsg(c, &msg, 0);
		close(c);
	}
}

static int vmm_owner(int dev, const char *path)
{
	use_device(dev);
	CUmemAllocationProp prop;
	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = dev;
	prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	size_t size = 0;
	cuMemGetAllocationGranularity(&size, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
	CUmemGenericAllocationHandle h;
	CUdeviceptr va;
	CUmemAccessDesc d;
	printf("cuMemCreate=%d\n", cuMemCreate(&h, size, &prop, 0));
	cuMemAddressReserve(&va, size, 0, 0, 0);
	printf("cuMemMap=%d\n", mapping_calls.MemMap(va, size, 0, h, 0));
	access_desc(&d, dev);
	printf("cuMemSetAccess=%d\n", mapping_calls.MemSetAccess(va, size, &d, 1));
	unsigned char *host = malloc(size);
	fill(host, size, 7);
	cuMemcpyHtoD(va, host, size);
	int fd = -1;
	printf("cuMemExportToShareableHandle=%d\n",
	       mapping_calls.MemExportToShareableHandle(
		   &fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
	struct sockaddr_un addr;
	int s = unix_socket(path, &addr);
	unlink(path);
	if (bind(s, (struct sockaddr *)&addr, sizeof(addr)) < 0 || listen(s, 8) < 0)
		perror("xproc_peer: socket");
	printf("listening\n");
	fflush(stdout);
	struct server srv = {s, fd, size};
	pthread_t t;
	pthread_create(&t, NULL, serve, &srv);
	wait_for_stdin();
	shutdown(s, SHUT_RDWR);
	pthread_join(t, NULL);
	mapping_calls.MemUnmap(va, size);
	mapping_calls.MemRelease(h);
	cuMemAddressFree(va, size);
	free(host);
	return 0;
}

static __attribute__((noinline)) CUresult import_fd(CUmemGenericAllocationHandle *h, int fd)
{
	return mapping_calls.MemImportFromShareableHandle(h, (void *)(uintptr_t)fd,
							  CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
}

static __attribute__((noinline)) CUresult give_access(CUdeviceptr va, size_t size, int dev)
{
	CUmemAccessDesc d;
	access_desc(&d, dev);
	return mapping_calls.MemSetAccess(va, size, &d, 1);
}

/* As copy_out_of_ipc_mapping, through the driver. */
static void copy_out_of_vmm_mapping(CUdeviceptr local, CUdeviceptr mapped, size_t size)
{
	if (!async_copy()) {
		printf("cuMemcpyDtoD=%d\n", cuMemcpyDtoD(local, mapped, size));
		return;
	}
	CUstream s;
	cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
	printf("cuMemcpyDtoDAsync=%d\n", cuMemcpyDtoDAsync(local, mapped, size, s));
	printf("cuStreamSynchronize=%d\n", cuStreamSynchronize(s));
	cuStreamDestroy(s);
}

static int vmm_import(int dev, const char *path)
{
	struct sockaddr_un addr;
	int s = unix_socket(path, &addr);
	if (connect(s, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		perror("xproc_peer: connect");
		return 0;
	}
	uint64_t size = 0;
	int fd = -1;
	struct iovec iov = {&size, sizeof(size)};
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} control;
	struct msghdr msg = {.msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = control.buf,
			     .msg_controllen = sizeof(control.buf)};
	if (recvmsg(s, &msg, MSG_CMSG_CLOEXEC) > 0 && CMSG_FIRSTHDR(&msg))
		memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&msg)), sizeof(int));
	close(s);
	use_device(dev);
	CUmemGenericAllocationHandle h;
	CUresult rc = import_fd(&h, fd);
	printf("cuMemImportFromShareableHandle=%d\n", rc);
	close(fd);
	if (rc != CUDA_SUCCESS)
		return 0;
	CUdeviceptr va;
	cuMemAddressReserve(&va, size, 0, 0, 0);
	printf("cuMemMap=%d\n", mapping_calls.MemMap(va, size, 0, h, 0));
	rc = give_access(va, size, dev);
	printf("cuMemSetAccess=%d\n", rc);
	if (rc == CUDA_SUCCESS) {
		CUdeviceptr local;
		unsigned char *host = malloc(size);
		cuMemAlloc(&local, size);
		copy_out_of_vmm_mapping(local, va, size);
		cuMemcpyDtoH(host, local, size);
		printf("data=%d\n", same(host, size, 7));
		cuMemFree(local);
		free(host);
	}
	if (keep())
		return 0;
	printf("cuMemUnmap=%d\n", mapping_calls.MemUnmap(va, size));
	printf("cuMemRelease=%d\n", mapping_calls.MemRelease(h));
	cuMemAddressFree(va, size);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	look_up_mapping_calls();
	if (argc >= 3 && strcmp(argv[1], "ipc-owner") == 0)
		return ipc_owner(argc - 2, argv + 2);
	if (argc >= 4 && strcmp(argv[1], "ipc-open") == 0)
		return ipc_open(argc - 2, argv + 2);
	if (argc == 4 && strcmp(argv[1], "vmm-owner") == 0)
		return vmm_owner(atoi(argv[2]), argv[3]);
	if (argc == 4 && strcmp(argv[1], "vmm-import") == 0)
		return vmm_import(atoi(argv[2]), argv[3]);
	fprintf(stderr, "usage: see the comment at the top of xproc_peer.c\n");
	return 2;
}
