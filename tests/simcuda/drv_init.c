/* Simulated driver: configuration, initialisation, devices, peer capability queries, errors. */
#include "sim.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct sim_config sim_cfg;
int sim_init_state;
pthread_mutex_t sim_mu = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t sim_progress = PTHREAD_COND_INITIALIZER;

int sim_ordinal_of(int phys)
{
	for (int d = 0; d < sim_cfg.ndev; d++)
		if (sim_cfg.phys[d] == phys)
			return d;
	return -1;
}

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void warn_env(const char *name, const char *value, const char *fallback)
{
	fprintf(stderr, "simcuda: ignoring %s=\"%s\" (malformed); using %s\n", name, value,
		fallback);
}

static bool parse_long(const char *s, long lo, long hi, long *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end != '\0' || v < lo || v > hi)
		return false;
	*out = v;
	return true;
}

/* "all", "none" or "a-b,c-d": pairs are symmetric. Returns false on anything else. */
static bool parse_pairs(const char *s, int ndev, unsigned char m[SIM_MAX_DEVICES][SIM_MAX_DEVICES],
			bool allow_all)
{
	unsigned char tmp[SIM_MAX_DEVICES][SIM_MAX_DEVICES];
	memset(tmp, 0, sizeof(tmp));
	if (strcmp(s, "none") == 0 || strcmp(s, "") == 0) {
		memcpy(m, tmp, sizeof(tmp));
		return true;
	}
	if (strcmp(s, "all") == 0) {
		if (!allow_all)
			return false;
		for (int a = 0; a < ndev; a++)
			for (int b = 0; b < ndev; b++)
				tmp[a][b] = a != b;
		memcpy(m, tmp, sizeof(tmp));
		return true;
	}
	const char *p = s;
	while (*p) {
		char *end;
		errno = 0;
		long a = strtol(p, &end, 10);
		if (errno || end == p || *end != '-' || a < 0 || a >= ndev)
			return false;
		p = end + 1;
		long b = strtol(p, &end, 10);
		if (errno || end == p || b < 0 || b >= ndev || a == b)
			return false;
		tmp[a][b] = tmp[b][a] = 1;
		p = end;
		if (*p == ',')
			p++;
		else if (*p != '\0')
			return false;
	}
	memcpy(m, tmp, sizeof(tmp));
	return true;
}

/* A device's UUID: 16 bytes, the same for the same simulated device in every process. */
void sim_device_uuid(int phys, unsigned char out[16])
{
	static const char base[16] = "SimCUDA-device-";
	memcpy(out, base, 16);
	out[15] = (unsigned char)phys;
}

/* One entry of CUDA_VISIBLE_DEVICES: a device's index, or its UUID ("GPU-" and at least its first
 * hex digit, dashes as nvidia-smi prints them; a prefix must name one device). -1: neither. */
static int visible_entry(const char *s, size_t n)
{
	char *end;
	errno = 0;
	long k = strtol(s, &end, 10);
	if (end == s + n && n > 0 && !errno)
		return k >= 0 && k < sim_cfg.nphys ? (int)k : -1;
	if (n <= 4 || strncmp(s, "GPU-", 4) != 0)
		return -1;
	int found = -1;
	for (int d = 0; d < sim_cfg.nphys; d++) {
		unsigned char u[16];
		char text[48];
		sim_device_uuid(d, u);
		snprintf(text, sizeof(text),
			 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
			 u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11],
			 u[12], u[13], u[14], u[15]);
		if (strncasecmp(text, s, n) == 0) {
			if (found >= 0)
				return -1;
			found = d;
		}
	}
	return found;
}

/*
 * CUDA_VISIBLE_DEVICES as the driver reads it: the devices named, in that order, become ordinals
 * 0, 1, ...; the list ends at the first entry that names no device (or one already named); set
 * but empty, no device. Unset: every device, in order.
 */
static void read_visible(void)
{
	const char *v = getenv("CUDA_VISIBLE_DEVICES");
	sim_cfg.ndev = 0;
	if (!v) {
		for (int d = 0; d < sim_cfg.nphys; d++)
			sim_cfg.phys[sim_cfg.ndev++] = d;
		return;
	}
	const char *p = v;
	while (*p && sim_cfg.ndev < SIM_MAX_DEVICES) {
		while (*p == ' ')
			p++;
		size_t n = strcspn(p, ",");
		size_t len = n;
		while (len > 0 && p[len - 1] == ' ')
			len--;
		int d = visible_entry(p, len);
		for (int k = 0; k < sim_cfg.ndev && d >= 0; k++)
			if (sim_cfg.phys[k] == d)
				d = -1;
		if (d < 0)
			break;
		sim_cfg.phys[sim_cfg.ndev++] = d;
		p += n;
		if (*p == ',')
			p++;
	}
}

/* A pair matrix in physical indices, as the settings name devices, seen through the process's
 * ordinals. */
static void to_ordinals(unsigned char phys[SIM_MAX_DEVICES][SIM_MAX_DEVICES],
			unsigned char m[SIM_MAX_DEVICES][SIM_MAX_DEVICES])
{
	unsigned char tmp[SIM_MAX_DEVICES][SIM_MAX_DEVICES];
	memset(tmp, 0, sizeof(tmp));
	for (int a = 0; a < sim_cfg.ndev; a++)
		for (int b = 0; b < sim_cfg.ndev; b++)
			tmp[a][b] = phys[sim_cfg.phys[a]][sim_cfg.phys[b]];
	memcpy(m, tmp, sizeof(tmp));
}

static void read_config(void)
{
	const char *v;
	long n;

	sim_cfg.nphys = 2;
	if ((v = getenv("SIMCUDA_DEVICES")) != NULL) {
		if (parse_long(v, 0, SIM_MAX_DEVICES, &n))
			sim_cfg.nphys = (int)n;
		else
			warn_env("SIMCUDA_DEVICES", v, "2");
	}
	read_visible();

	parse_pairs("all", sim_cfg.nphys, sim_cfg.p2p_phys, true);
	if ((v = getenv("SIMCUDA_P2P")) != NULL &&
	    !parse_pairs(v, sim_cfg.nphys, sim_cfg.p2p_phys, true))
		warn_env("SIMCUDA_P2P", v, "all");
	to_ordinals(sim_cfg.p2p_phys, sim_cfg.p2p);

	memset(sim_cfg.corrupt, 0, sizeof(sim_cfg.corrupt));
	if ((v = getenv("SIMCUDA_P2P_CORRUPT")) != NULL &&
	    !parse_pairs(v, sim_cfg.nphys, sim_cfg.corrupt, true))
		warn_env("SIMCUDA_P2P_CORRUPT", v, "none");
	to_ordinals(sim_cfg.corrupt, sim_cfg.corrupt);

	memset(sim_cfg.hang, 0, sizeof(sim_cfg.hang));
	if ((v = getenv("SIMCUDA_P2P_HANG")) != NULL &&
	    !parse_pairs(v, sim_cfg.nphys, sim_cfg.hang, true))
		warn_env("SIMCUDA_P2P_HANG", v, "none");
	to_ordinals(sim_cfg.hang, sim_cfg.hang);

	sim_cfg.dev_mem = (size_t)4096 << 20;
	if ((v = getenv("SIMCUDA_DEVICE_MEM_MB")) != NULL) {
		if (parse_long(v, 1, 1L << 20, &n))
			sim_cfg.dev_mem = (size_t)n << 20;
		else
			warn_env("SIMCUDA_DEVICE_MEM_MB", v, "4096");
	}

	sim_cfg.ns_per_byte = 0;
	if ((v = getenv("SIMCUDA_COPY_NS_PER_BYTE")) != NULL) {
		char *end;
		errno = 0;
		double d = strtod(v, &end);
		if (errno || end == v || *end != '\0' || !(d >= 0) || d > 1e6)
			warn_env("SIMCUDA_COPY_NS_PER_BYTE", v, "0");
		else
			sim_cfg.ns_per_byte = d;
	}
}

/* The child of a fork has none of the parent's worker threads, and its copy of sim_mu may be
 * held by a thread that does not exist there: like the real driver, refuse service. */
static void forked_child(void)
{
	if (__atomic_load_n(&sim_init_state, __ATOMIC_ACQUIRE) == 1)
		__atomic_store_n(&sim_init_state, 3, __ATOMIC_RELEASE);
}

static void do_init(void)
{
	pthread_atfork(NULL, NULL, forked_child);
	read_config();
	if (sim_cfg.ndev == 0) {
		__atomic_store_n(&sim_init_state, 2, __ATOMIC_RELEASE);
		return;
	}
	__atomic_store_n(&sim_init_state, sim_mem_setup() ? 1 : 2, __ATOMIC_RELEASE);
}

SIM_API CUresult cuInit(unsigned int Flags)
{
	SIM_FAULT();
	if (Flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_once(&init_once, do_init);
	return sim_ready();
}

SIM_API CUresult cuDriverGetVersion(int *driverVersion)
{
	SIM_FAULT();
	if (!driverVersion)
		return CUDA_ERROR_INVALID_VALUE;
	*driverVersion = SIM_DRIVER_VERSION;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuGetErrorName(CUresult error, const char **pStr)
{
	SIM_FAULT();
	if (!pStr)
		return CUDA_ERROR_INVALID_VALUE;
	*pStr = simcuda_drv_error_name((int)error);
	return *pStr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIM_API CUresult cuGetErrorString(CUresult error, const char **pStr)
{
	SIM_FAULT();
	if (!pStr)
		return CUDA_ERROR_INVALID_VALUE;
	*pStr = simcuda_drv_error_name((int)error) ? simcuda_error_string((int)error) : NULL;
	return *pStr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ---- devices ---- */

static CUresult check_dev(CUdevice dev)
{
	CUresult r = sim_ready();
	if (r != CUDA_SUCCESS)
		return r;
	if (dev < 0 || dev >= sim_cfg.ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGetCount(int *count)
{
	SIM_FAULT();
	CUresult r = sim_ready();
	if (r == CUDA_ERROR_NO_DEVICE) {
		if (count)
			*count = 0;
		return count ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
	}
	if (r != CUDA_SUCCESS)
		return r;
	if (!count)
		return CUDA_ERROR_INVALID_VALUE;
	*count = sim_cfg.ndev;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
	SIM_FAULT();
	CUresult r = sim_ready();
	if (r != CUDA_SUCCESS)
		return r;
	if (!device)
		return CUDA_ERROR_INVALID_VALUE;
	if (ordinal < 0 || ordinal >= sim_cfg.ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	*device = ordinal;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
	SIM_FAULT();
	CUresult r = check_dev(dev);
	if (r != CUDA_SUCCESS)
		return r;
	if (!name || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	snprintf(name, (size_t)len, "SimCUDA H200 sim #%d", sim_cfg.phys[dev]);
	return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
	SIM_FAULT();
	CUresult r = check_dev(dev);
	if (r != CUDA_SUCCESS)
		return r;
	if (!uuid)
		return CUDA_ERROR_INVALID_VALUE;
	sim_device_uuid(sim_cfg.phys[dev], (unsigned char *)uuid->bytes);
	return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
	SIM_FAULT();
	return cuDeviceGetUuid_v2(uuid, dev);
}

SIM_API CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
	SIM_FAULT();
	CUresult r = check_dev(dev);
	if (r != CUDA_SUCCESS)
		return r;
	if (!bytes)
		return CUDA_ERROR_INVALID_VALUE;
	*bytes = sim_cfg.dev_mem;
	return CUDA_SUCCESS;
}

static int attribute(CUdevice_attribute a, CUdevice dev)
{
	switch (a) {
	case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
		return 1024;
	case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
	case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y:
		return 1024;
	case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z:
		return 64;
	case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X:
		return 2147483647;
	case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
	case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z:
		return 65535;
	case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK:
		return 49152;
	case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY:
		return 65536;
	case CU_DEVICE_ATTRIBUTE_WARP_SIZE:
		return 32;
	case CU_DEVICE_ATTRIBUTE_MAX_PITCH:
		return 2147483647;
	case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK:
	case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR:
		return 65536;
	case CU_DEVICE_ATTRIBUTE_CLOCK_RATE:
		return 1980000;
	case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT:
		return 512;
	case CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT:
		return 32;
	case CU_DEVICE_ATTRIBUTE_GPU_OVERLAP:
		return 1;
	case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
		return 132;
	case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
	case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS:
	case CU_DEVICE_ATTRIBUTE_ECC_ENABLED:
	case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
	case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
	case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
	case CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM:
	case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH:
	case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS:
	case CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR:
	case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH:
		return 1;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
		return 9;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
		return 0;
	case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
		return 0x10 + sim_cfg.phys[dev];
	case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID:
	case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID:
		return 0;
	case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE:
		return 3201000;
	case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH:
		return 6144;
	case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE:
		return 62914560;
	case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR:
		return 2048;
	case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT:
		return 2;
	case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR:
		return 233472;
	case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
		return 232448;
	case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR:
		return 32;
	case CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE:
		return 82837504;
	case CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE:
		return 134213632;
	case CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK:
		return 1024;
	default:
		return 0;
	}
}

SIM_API CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
	SIM_FAULT();
	CUresult r = check_dev(dev);
	if (r != CUDA_SUCCESS)
		return r;
	if (!pi || (int)attrib <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX)
		return CUDA_ERROR_INVALID_VALUE;
	*pi = attribute(attrib, dev);
	return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)
{
	SIM_FAULT();
	CUresult r = check_dev(dev);
	if (r != CUDA_SUCCESS)
		return r;
	if (!pciBusId || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	snprintf(pciBusId, (size_t)len, "0000:%02x:00.0", 0x10 + sim_cfg.phys[dev]);
	return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGetByPCIBusId(CUdevice *dev, const char *pciBusId)
{
	SIM_FAULT();
	CUresult r = sim_ready();
	if (r != CUDA_SUCCESS)
		return r;
	if (!dev || !pciBusId)
		return CUDA_ERROR_INVALID_VALUE;
	unsigned dom = 0, bus, d = 0, fn = 0;
	int ok = sscanf(pciBusId, "%x:%x:%x.%x", &dom, &bus, &d, &fn);
	if (ok < 3)
		ok = sscanf(pciBusId, "%x:%x.%x", &bus, &d, &fn) + 1;
	if (ok < 3 || dom != 0 || d != 0 || fn != 0)
		return CUDA_ERROR_INVALID_VALUE;
	for (int k = 0; k < sim_cfg.ndev; k++)
		if (bus == 0x10u + (unsigned)sim_cfg.phys[k]) {
			*dev = k;
			return CUDA_SUCCESS;
		}
	return CUDA_ERROR_INVALID_VALUE;
}

/* ---- peer capability ---- */

SIM_API CUresult cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev)
{
	SIM_FAULT();
	CUresult r = check_dev(dev);
	if (r == CUDA_SUCCESS)
		r = check_dev(peerDev);
	if (r != CUDA_SUCCESS)
		return r;
	if (!canAccessPeer)
		return CUDA_ERROR_INVALID_VALUE;
	*canAccessPeer = dev != peerDev && sim_cfg.p2p[dev][peerDev];
	return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGetP2PAttribute(int *value, CUdevice_P2PAttribute attrib,
					 CUdevice srcDevice, CUdevice dstDevice)
{
	SIM_FAULT();
	CUresult r = check_dev(srcDevice);
	if (r == CUDA_SUCCESS)
		r = check_dev(dstDevice);
	if (r != CUDA_SUCCESS)
		return r;
	if (!value)
		return CUDA_ERROR_INVALID_VALUE;
	if (srcDevice == dstDevice)
		return CUDA_ERROR_INVALID_DEVICE;
	int p2p = sim_cfg.p2p[srcDevice][dstDevice];
	switch (attrib) {
	case CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK:
		*value = 0;
		break;
	case CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED:
	case CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED:
	case CU_DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED:
		*value = p2p;
		break;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

bool sim_copy_corrupts(int dst_region, int src_region)
{
	if (dst_region < 0 || src_region < 0 || dst_region == src_region)
		return false;
	return sim_cfg.corrupt[dst_region][src_region] && sim_p2p_active(dst_region, src_region);
}

/* Like a corrupting pair: only the path peer access opens is broken; copies the driver moves
 * through host memory (no peer access) finish. */
bool sim_copy_hangs(int dst_region, int src_region)
{
	if (dst_region < 0 || src_region < 0 || dst_region == src_region)
		return false;
	return sim_cfg.hang[dst_region][src_region] && sim_p2p_active(dst_region, src_region);
}
