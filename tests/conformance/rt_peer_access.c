/* Conformance: the runtime peer API's answers and error codes, as the real driver gives them
 * (measured on two H200s, FACTS.md), and the runtime's last-error bookkeeping after each. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cudaTypedefs.h>

#include <string.h>

#include "tap.h"

/* A failed call must leave its code for cudaPeekAtLastError (not reset) and cudaGetLastError
 * (reset to success). */
static void last_error_is(cudaError_t want, const char *what)
{
	check_code(cudaPeekAtLastError(), want, "%s: cudaPeekAtLastError", what);
	check_code(cudaPeekAtLastError(), want, "%s: cudaPeekAtLastError does not reset", what);
	check_code(cudaGetLastError(), want, "%s: cudaGetLastError", what);
	check_code(cudaGetLastError(), cudaSuccess, "%s: cudaGetLastError resets", what);
}

static void matrix(int n)
{
	PFN_cuDeviceCanAccessPeer_v4000 drv_can = NULL;
	PFN_cuDeviceGet_v2000 drv_get = NULL;
	enum cudaDriverEntryPointQueryResult st;
	check_code(cudaGetDriverEntryPointByVersion("cuDeviceCanAccessPeer", (void **)&drv_can,
						    4000, cudaEnableDefault, &st),
		   cudaSuccess, "entry point cuDeviceCanAccessPeer");
	check(drv_can != NULL && st == cudaDriverEntryPointSuccess,
	      "entry point cuDeviceCanAccessPeer found");
	cudaGetDriverEntryPointByVersion("cuDeviceGet", (void **)&drv_get, 2000, cudaEnableDefault,
					 &st);
	check(drv_get != NULL, "entry point cuDeviceGet found");

	for (int i = 0; i < n; i++)
		for (int j = 0; j < n; j++) {
			int can = -1;
			check_code(cudaDeviceCanAccessPeer(&can, i, j), cudaSuccess,
				   "cudaDeviceCanAccessPeer(%d, %d)", i, j);
			if (i == j)
				check_code(can, 0, "device %d cannot access itself as a peer", i);
			else
				check(can == 0 || can == 1, "can-access(%d, %d) is 0 or 1", i, j);
			if (!drv_can || !drv_get)
				continue;
			CUdevice di, dj;
			int dcan = -1;
			if (drv_get(&di, i) == CUDA_SUCCESS && drv_get(&dj, j) == CUDA_SUCCESS)
				drv_can(&dcan, di, dj);
			check_code(dcan, can, "driver cuDeviceCanAccessPeer(%d, %d) agrees", i, j);
			if (i == j)
				continue;
			int access = -1, atomics = -1, rank = -1;
			check_code(
			    cudaDeviceGetP2PAttribute(&access, cudaDevP2PAttrAccessSupported, i, j),
			    cudaSuccess, "P2P attribute access (%d, %d)", i, j);
			check_code(access, can, "P2P attribute access (%d, %d) matches can-access",
				   i, j);
			cudaDeviceGetP2PAttribute(&atomics, cudaDevP2PAttrNativeAtomicSupported, i,
						  j);
			check(atomics == 0 || atomics == 1, "P2P native atomics (%d, %d) is 0/1", i,
			      j);
			cudaDeviceGetP2PAttribute(&rank, cudaDevP2PAttrPerformanceRank, i, j);
			check(rank >= 0, "P2P performance rank (%d, %d) >= 0", i, j);
		}

	int can = -1;
	check_code(cudaDeviceCanAccessPeer(&can, 0, n), cudaErrorInvalidDevice,
		   "cudaDeviceCanAccessPeer with a bad peer ordinal");
	last_error_is(cudaErrorInvalidDevice, "bad ordinal in can-access");
}

static void enable_disable(int n)
{
	int bad = n < 7 ? 7 : n;
	check_code(cudaSetDevice(0), cudaSuccess, "cudaSetDevice(0)");

	check_code(cudaDeviceEnablePeerAccess(0, 0), cudaErrorPeerAccessUnsupported,
		   "enable peer access to the own device");
	last_error_is(cudaErrorPeerAccessUnsupported, "own device");

	check_code(cudaDeviceEnablePeerAccess(bad, 0), cudaErrorInvalidDevice,
		   "enable peer access to device %d (bad ordinal)", bad);
	last_error_is(cudaErrorInvalidDevice, "bad ordinal");

	check_code(cudaDeviceDisablePeerAccess(bad), cudaErrorInvalidDevice,
		   "disable peer access to device %d (bad ordinal)", bad);
	last_error_is(cudaErrorInvalidDevice, "bad ordinal in disable");

	if (n < 2) {
		skip("enable/disable between two devices: needs two devices");
		return;
	}
	int can = 0;
	cudaDeviceCanAccessPeer(&can, 0, 1);

	check_code(cudaDeviceEnablePeerAccess(1, 1), cudaErrorInvalidValue,
		   "enable peer access with flags 1");
	last_error_is(cudaErrorInvalidValue, "flags != 0");

	check_code(cudaDeviceDisablePeerAccess(1), cudaErrorPeerAccessNotEnabled,
		   "disable peer access never enabled (0 -> 1)");
	last_error_is(cudaErrorPeerAccessNotEnabled, "disable not enabled");

	if (!can) {
		check_code(cudaDeviceEnablePeerAccess(1, 0), cudaErrorPeerAccessUnsupported,
			   "enable peer access 0 -> 1 without P2P support");
		last_error_is(cudaErrorPeerAccessUnsupported, "no P2P");
		return;
	}
	check_code(cudaDeviceEnablePeerAccess(1, 0), cudaSuccess, "enable peer access 0 -> 1");
	check_code(cudaGetLastError(), cudaSuccess, "no last error after a successful enable");
	check_code(cudaDeviceEnablePeerAccess(1, 0), cudaErrorPeerAccessAlreadyEnabled,
		   "enable peer access 0 -> 1 a second time");
	last_error_is(cudaErrorPeerAccessAlreadyEnabled, "second enable");

	/* Peer access is directional: device 1 has enabled nothing. */
	check_code(cudaSetDevice(1), cudaSuccess, "cudaSetDevice(1)");
	check_code(cudaDeviceDisablePeerAccess(0), cudaErrorPeerAccessNotEnabled,
		   "disable 1 -> 0, never enabled, while 0 -> 1 is");
	last_error_is(cudaErrorPeerAccessNotEnabled, "directional disable");
	check_code(cudaDeviceEnablePeerAccess(0, 0), cudaSuccess, "enable peer access 1 -> 0");
	check_code(cudaDeviceDisablePeerAccess(0), cudaSuccess, "disable peer access 1 -> 0");

	check_code(cudaSetDevice(0), cudaSuccess, "cudaSetDevice(0)");
	check_code(cudaDeviceDisablePeerAccess(1), cudaSuccess, "disable peer access 0 -> 1");
	check_code(cudaDeviceDisablePeerAccess(1), cudaErrorPeerAccessNotEnabled,
		   "disable peer access 0 -> 1 a second time");
	last_error_is(cudaErrorPeerAccessNotEnabled, "second disable");
	check_code(cudaDeviceEnablePeerAccess(1, 0), cudaSuccess,
		   "enable peer access 0 -> 1 again after disabling");
	check_code(cudaDeviceDisablePeerAccess(1), cudaSuccess, "and disable it again");
}

/* More than eight peers from one device is refused; only testable with ten devices or more. */
static void too_many_peers(int n)
{
	if (n < 10) {
		skip("too many peers: needs ten devices");
		return;
	}
	cudaSetDevice(0);
	int enabled = 0, peer = 1;
	for (; peer < n && enabled < 8; peer++) {
		int can = 0;
		cudaDeviceCanAccessPeer(&can, 0, peer);
		if (can && cudaDeviceEnablePeerAccess(peer, 0) == cudaSuccess)
			enabled++;
	}
	int ninth = -1;
	for (; peer < n; peer++) {
		int can = 0;
		cudaDeviceCanAccessPeer(&can, 0, peer);
		if (can) {
			ninth = peer;
			break;
		}
	}
	if (enabled < 8 || ninth < 0) {
		skip("too many peers: fewer than nine P2P-capable peers of device 0");
	} else {
		check_code(cudaDeviceEnablePeerAccess(ninth, 0), cudaErrorTooManyPeers,
			   "ninth peer from device 0");
		last_error_is(cudaErrorTooManyPeers, "too many peers");
	}
	for (int p = 1; p < n; p++)
		cudaDeviceDisablePeerAccess(p);
	cudaGetLastError();
}

static void strings(void)
{
	check(strcmp(cudaGetErrorName(cudaErrorPeerAccessAlreadyEnabled),
		     "cudaErrorPeerAccessAlreadyEnabled") == 0,
	      "name of 704");
	check(strcmp(cudaGetErrorString(cudaErrorPeerAccessAlreadyEnabled),
		     "peer access is already enabled") == 0,
	      "string of 704");
	check(strcmp(cudaGetErrorString(cudaErrorPeerAccessUnsupported),
		     "peer access is not supported between these two devices") == 0,
	      "string of 217");
	check(strcmp(cudaGetErrorString(cudaErrorInvalidDevice), "invalid device ordinal") == 0,
	      "string of 101");
	check_code(cudaErrorPeerAccessUnsupported, CUDA_ERROR_PEER_ACCESS_UNSUPPORTED,
		   "runtime and driver codes agree: 217");
	check_code(cudaErrorPeerAccessAlreadyEnabled, CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED,
		   "runtime and driver codes agree: 704");
	check_code(cudaErrorPeerAccessNotEnabled, CUDA_ERROR_PEER_ACCESS_NOT_ENABLED,
		   "runtime and driver codes agree: 705");
	check_code(cudaErrorTooManyPeers, CUDA_ERROR_TOO_MANY_PEERS,
		   "runtime and driver codes agree: 711");
}

static void properties(int n)
{
	for (int d = 0; d < n; d++) {
		struct cudaDeviceProp p;
		check_code(cudaGetDeviceProperties(&p, d), cudaSuccess, "properties of device %d",
			   d);
		check(p.name[0] != '\0', "device %d has a name", d);
		check_code(p.unifiedAddressing, 1, "device %d uses unified addressing", d);
		int bus = -1;
		cudaDeviceGetAttribute(&bus, cudaDevAttrPciBusId, d);
		check_code(p.pciBusID, bus, "device %d PCI bus id agrees with the attribute", d);
	}
}

int main(void)
{
	int n = 0;
	check_code(cudaGetDeviceCount(&n), cudaSuccess, "cudaGetDeviceCount");
	if (!check(n >= 1, "at least one device (%d)", n))
		return tap_finish();
	int rt = 0;
	cudaRuntimeGetVersion(&rt);
	check(rt >= 13000, "runtime version %d >= 13000", rt);
	strings();
	properties(n);
	matrix(n);
	enable_disable(n);
	too_many_peers(n);
	check_code(cudaGetLastError(), cudaSuccess, "no error left behind");
	return tap_finish();
}
