/* Cross-process mappings for the preload tests, one side per process so that a test can start
 * each side in the environment it wants (another CUDA_VISIBLE_DEVICES, another PID namespace,
 * other simulated faults):
 *
 *   xproc_peer ipc-owner DEV...         cudaMalloc 1 MiB on each DEV, print one legacy IPC handle a
 *                                       line (hex), then wait for stdin to close
 *   xproc_peer ipc-open DEV HEX...      on DEV open each handle (lazy peer access), print the
 * codes; copy the first mapping into DEV's memory and check it; close them all xproc_peer vmm-owner
 * DEV SOCKET     a POSIX-fd exportable cuMem allocation on DEV, mapped and filled; serve its
 * exported descriptor to each connection on the Unix socket SOCKET (SCM_RIGHTS) until stdin closes
 *   xproc_peer vmm-import DEV SOCKET    take the descriptor, import, map, give DEV access, copy
 *                                       into DEV's memory, unmap, release; print the codes
 *
 * Every line is "CALL=code"; the program's exit status is 0 whatever the codes (the test reads
 * them). With XPROC_KEEP=1 in its environment, ipc-open and vmm-import end without closing,
 * unmapping or releasing what they mapped: mappings still live when the process ends. Each failing
 * call is made in a function of its own, so that backtraces name it. */
#include <cuda.h>
#include <cuda_runtime_api.h>

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

static void wait_for_stdin(void)
{
	char buf[64];
	while (fread(buf, 1, sizeof(buf), stdin) > 0)
		;
}

static int ipc_owner(int argc, char **argv)
{
	void *bufs[16];
	int n = argc < 16 ? argc : 16;
	unsigned char *host = malloc(SIZE);
	for (int k = 0; k < n; k++) {
		int dev = atoi(argv[k]);
		cudaSetDevice(dev);
		cudaMalloc(&bufs[k], SIZE);
		fill(host, SIZE, (unsigned)dev);
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

static __attribute__((noinline)) cudaError_t open_handle(void **p, cudaIpcMemHandle_t h)
{
	return cudaIpcOpenMemHandle(p, h, cudaIpcMemLazyEnablePeerAccess);
}

static int keep(void)
{
	const char *v = getenv("XPROC_KEEP");
	return v && strcmp(v, "1") == 0;
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
		printf("cudaIpcOpenMemHandle=%d\n", rc);
		if (rc != cudaSuccess)
			maps[k] = NULL;
	}
	if (maps[0]) {
		void *local = NULL;
		unsigned char *host = malloc(SIZE);
		cudaMalloc(&local, SIZE);
		printf("cudaMemcpy=%d\n",
		       cudaMemcpy(local, maps[0], SIZE, cudaMemcpyDeviceToDevice));
		cudaMemcpy(host, local, SIZE, cudaMemcpyDeviceToHost);
		struct cudaPointerAttributes a;
		cudaPointerGetAttributes(&a, maps[0]);
		printf("data=%d\n", same(host, SIZE, (unsigned)a.device));
		cudaFree(local);
		free(host);
	}
	for (int k = 0; k < n && !keep(); k++)
		if (maps[k])
			printf("cudaIpcCloseMemHandle=%d\n", cudaIpcCloseMemHandle(maps[k]));
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
	printf("cuMemMap=%d\n", cuMemMap(va, size, 0, h, 0));
	access_desc(&d, dev);
	printf("cuMemSetAccess=%d\n", cuMemSetAccess(va, size, &d, 1));
	unsigned char *host = malloc(size);
	fill(host, size, 7);
	cuMemcpyHtoD(va, host, size);
	int fd = -1;
	printf("cuMemExportToShareableHandle=%d\n",
	       cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
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
	cuMemUnmap(va, size);
	cuMemRelease(h);
	cuMemAddressFree(va, size);
	free(host);
	return 0;
}

static __attribute__((noinline)) CUresult import_fd(CUmemGenericAllocationHandle *h, int fd)
{
	return cuMemImportFromShareableHandle(h, (void *)(uintptr_t)fd,
					      CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
}

static __attribute__((noinline)) CUresult give_access(CUdeviceptr va, size_t size, int dev)
{
	CUmemAccessDesc d;
	access_desc(&d, dev);
	return cuMemSetAccess(va, size, &d, 1);
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
	printf("cuMemMap=%d\n", cuMemMap(va, size, 0, h, 0));
	rc = give_access(va, size, dev);
	printf("cuMemSetAccess=%d\n", rc);
	if (rc == CUDA_SUCCESS) {
		CUdeviceptr local;
		unsigned char *host = malloc(size);
		cuMemAlloc(&local, size);
		printf("cuMemcpyDtoD=%d\n", cuMemcpyDtoD(local, va, size));
		cuMemcpyDtoH(host, local, size);
		printf("data=%d\n", same(host, size, 7));
		cuMemFree(local);
		free(host);
	}
	if (keep())
		return 0;
	printf("cuMemUnmap=%d\n", cuMemUnmap(va, size));
	printf("cuMemRelease=%d\n", cuMemRelease(h));
	cuMemAddressFree(va, size);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
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
