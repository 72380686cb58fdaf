/* Conformance: cross-device copies through the runtime are byte-exact, with and without peer
 * access: cudaMemcpyPeer(Async), cudaMemcpy(Async) with DeviceToDevice and Default, and
 * cudaMemcpy3DPeer(Async) on pitched linear memory. */
#include <cuda_runtime_api.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"

/* Odd on purpose: no copy path may assume whole words or pages. */
#define N ((size_t)(1 << 20) + 13)

static unsigned char *host_a, *host_b;
static void *dev0, *dev1;
static unsigned salt = 1;

static void fill(unsigned char *p, size_t n)
{
	salt += 7;
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(i * 31u + salt + (i >> 11));
}

static int put(void *dev, int device)
{
	fill(host_a, N);
	cudaSetDevice(device);
	return cudaMemcpy(dev, host_a, N, cudaMemcpyHostToDevice) == cudaSuccess;
}

/* Reads dev back and compares with host_a, the bytes last put somewhere. */
static int same(const void *dev, size_t off, size_t n)
{
	memset(host_b, 0, N);
	if (cudaMemcpy(host_b, dev, N, cudaMemcpyDeviceToHost) != cudaSuccess)
		return 0;
	return memcmp(host_a + off, host_b + off, n) == 0;
}

static void copies(const char *mode)
{
	cudaStream_t s0, s1;
	cudaSetDevice(0);
	cudaStreamCreate(&s0);
	cudaSetDevice(1);
	cudaStreamCreate(&s1);

	put(dev0, 0);
	check_code(cudaMemcpyPeer(dev1, 1, dev0, 0, N), cudaSuccess, "%s: cudaMemcpyPeer 0 -> 1",
		   mode);
	check(same(dev1, 0, N), "%s: cudaMemcpyPeer 0 -> 1 byte-exact", mode);

	put(dev1, 1);
	check_code(cudaMemcpyPeer(dev0, 0, dev1, 1, N), cudaSuccess, "%s: cudaMemcpyPeer 1 -> 0",
		   mode);
	check(same(dev0, 0, N), "%s: cudaMemcpyPeer 1 -> 0 byte-exact", mode);

	put(dev0, 0);
	cudaSetDevice(0);
	check_code(cudaMemcpyPeerAsync(dev1, 1, dev0, 0, N, s0), cudaSuccess,
		   "%s: cudaMemcpyPeerAsync 0 -> 1 on a device-0 stream", mode);
	check_code(cudaStreamSynchronize(s0), cudaSuccess, "%s: synchronize", mode);
	check(same(dev1, 0, N), "%s: cudaMemcpyPeerAsync 0 -> 1 byte-exact", mode);

	put(dev1, 1);
	cudaSetDevice(0);
	check_code(cudaMemcpyPeerAsync(dev0, 0, dev1, 1, N, 0), cudaSuccess,
		   "%s: cudaMemcpyPeerAsync 1 -> 0 on the default stream", mode);
	check_code(cudaDeviceSynchronize(), cudaSuccess, "%s: synchronize", mode);
	check(same(dev0, 0, N), "%s: cudaMemcpyPeerAsync 1 -> 0 byte-exact", mode);

	/* Unaligned sub-range: offset 3, length N - 10. */
	put(dev0, 0);
	cudaSetDevice(1);
	check_code(cudaMemcpyPeerAsync((char *)dev1 + 3, 1, (char *)dev0 + 3, 0, N - 10, s1),
		   cudaSuccess, "%s: cudaMemcpyPeerAsync unaligned sub-range", mode);
	cudaStreamSynchronize(s1);
	check(same(dev1, 3, N - 10), "%s: unaligned sub-range byte-exact", mode);

	put(dev0, 0);
	cudaSetDevice(0);
	check_code(cudaMemcpyAsync(dev1, dev0, N, cudaMemcpyDeviceToDevice, s0), cudaSuccess,
		   "%s: cudaMemcpyAsync DeviceToDevice 0 -> 1", mode);
	cudaStreamSynchronize(s0);
	check(same(dev1, 0, N), "%s: cudaMemcpyAsync DeviceToDevice byte-exact", mode);

	put(dev1, 1);
	cudaSetDevice(0);
	check_code(cudaMemcpyAsync(dev0, dev1, N, cudaMemcpyDefault, s0), cudaSuccess,
		   "%s: cudaMemcpyAsync Default 1 -> 0", mode);
	cudaStreamSynchronize(s0);
	check(same(dev0, 0, N), "%s: cudaMemcpyAsync Default byte-exact", mode);

	put(dev0, 0);
	cudaSetDevice(1);
	check_code(cudaMemcpy(dev1, dev0, N, cudaMemcpyDefault), cudaSuccess,
		   "%s: cudaMemcpy Default 0 -> 1 from device 1", mode);
	check(same(dev1, 0, N), "%s: cudaMemcpy Default byte-exact", mode);

	put(dev1, 1);
	cudaSetDevice(0);
	check_code(cudaMemcpy(dev0, dev1, N, cudaMemcpyDeviceToDevice), cudaSuccess,
		   "%s: cudaMemcpy DeviceToDevice 1 -> 0", mode);
	check(same(dev0, 0, N), "%s: cudaMemcpy DeviceToDevice byte-exact", mode);

	cudaStreamDestroy(s0);
	cudaStreamDestroy(s1);
}

/* A 3D box of 100 x 7 x 3 bytes between pitched buffers (pitch 512, 16 rows a slice), at
 * different offsets on each side. */
static void copies_3d(const char *mode)
{
	const size_t pitch = 512, rows = 16, w = 100, h = 7, d = 3;
	put(dev0, 0);
	put(dev1, 1); /* host_a now mirrors dev1; remember it to compute the expected result */
	unsigned char *want = malloc(N);
	memcpy(want, host_a, N);
	unsigned char *src = malloc(N);
	cudaMemcpy(src, dev0, N, cudaMemcpyDeviceToHost);

	struct cudaMemcpy3DPeerParms p;
	memset(&p, 0, sizeof(p));
	p.srcDevice = 0;
	p.srcPtr.ptr = dev0;
	p.srcPtr.pitch = pitch;
	p.srcPtr.xsize = pitch;
	p.srcPtr.ysize = rows;
	p.srcPos.x = 5;
	p.srcPos.y = 2;
	p.srcPos.z = 1;
	p.dstDevice = 1;
	p.dstPtr.ptr = dev1;
	p.dstPtr.pitch = pitch;
	p.dstPtr.xsize = pitch;
	p.dstPtr.ysize = rows;
	p.dstPos.x = 17;
	p.dstPos.y = 3;
	p.dstPos.z = 0;
	p.extent.width = w;
	p.extent.height = h;
	p.extent.depth = d;
	for (size_t z = 0; z < d; z++)
		for (size_t y = 0; y < h; y++)
			memcpy(want + (p.dstPos.z + z) * pitch * rows + (p.dstPos.y + y) * pitch +
				   p.dstPos.x,
			       src + (p.srcPos.z + z) * pitch * rows + (p.srcPos.y + y) * pitch +
				   p.srcPos.x,
			       w);

	cudaSetDevice(0);
	check_code(cudaMemcpy3DPeer(&p), cudaSuccess, "%s: cudaMemcpy3DPeer 0 -> 1", mode);
	memcpy(host_a, want, N);
	check(same(dev1, 0, N), "%s: cudaMemcpy3DPeer copies the box and nothing else", mode);

	cudaStream_t s;
	cudaStreamCreate(&s);
	put(dev1, 1);
	memcpy(want, host_a, N);
	for (size_t z = 0; z < d; z++)
		for (size_t y = 0; y < h; y++)
			memcpy(want + (p.dstPos.z + z) * pitch * rows + (p.dstPos.y + y) * pitch +
				   p.dstPos.x,
			       src + (p.srcPos.z + z) * pitch * rows + (p.srcPos.y + y) * pitch +
				   p.srcPos.x,
			       w);
	cudaSetDevice(0);
	check_code(cudaMemcpy3DPeerAsync(&p, s), cudaSuccess, "%s: cudaMemcpy3DPeerAsync 0 -> 1",
		   mode);
	cudaStreamSynchronize(s);
	memcpy(host_a, want, N);
	check(same(dev1, 0, N), "%s: cudaMemcpy3DPeerAsync byte-exact", mode);
	cudaStreamDestroy(s);
	free(want);
	free(src);
}

int main(void)
{
	int n = 0;
	check_code(cudaGetDeviceCount(&n), cudaSuccess, "cudaGetDeviceCount");
	if (n < 2) {
		skip("cross-device copies: needs two devices (%d)", n);
		return tap_finish();
	}
	char x[16], y[16] = {0};
	check_code(cudaMemcpy(x, y, sizeof(x), (enum cudaMemcpyKind)7),
		   cudaErrorInvalidMemcpyDirection, "cudaMemcpy with an unknown kind");
	check_code(cudaGetLastError(), cudaErrorInvalidMemcpyDirection, "  is the last error");
	check_code(cudaMallocHost((void **)&host_a, N), cudaSuccess, "pinned buffer");
	check_code(cudaMallocHost((void **)&host_b, N), cudaSuccess, "pinned buffer");
	cudaSetDevice(0);
	check_code(cudaMalloc(&dev0, N), cudaSuccess, "cudaMalloc on device 0");
	cudaSetDevice(1);
	check_code(cudaMalloc(&dev1, N), cudaSuccess, "cudaMalloc on device 1");
	if (!host_a || !host_b || !dev0 || !dev1)
		return tap_finish();

	copies("no peer access");
	copies_3d("no peer access");

	int can01 = 0, can10 = 0;
	cudaDeviceCanAccessPeer(&can01, 0, 1);
	cudaDeviceCanAccessPeer(&can10, 1, 0);
	if (can01 && can10) {
		cudaSetDevice(0);
		check_code(cudaDeviceEnablePeerAccess(1, 0), cudaSuccess, "enable 0 -> 1");
		cudaSetDevice(1);
		check_code(cudaDeviceEnablePeerAccess(0, 0), cudaSuccess, "enable 1 -> 0");
		copies("peer access");
		copies_3d("peer access");
		cudaSetDevice(0);
		cudaDeviceDisablePeerAccess(1);
		cudaSetDevice(1);
		cudaDeviceDisablePeerAccess(0);
	} else {
		skip("copies with peer access: no P2P between devices 0 and 1");
	}

	check_code(cudaFree(dev0), cudaSuccess, "cudaFree device 0 buffer");
	check_code(cudaFree(dev1), cudaSuccess, "cudaFree device 1 buffer");
	cudaFreeHost(host_a);
	cudaFreeHost(host_b);
	check_code(cudaGetLastError(), cudaSuccess, "no error left behind");
	return tap_finish();
}
