/* SPDX-License-Identifier: MIT */
/*
 * A stand-in libnvidia-ml.so.1 with just the calls the guard makes (the evidence gatherer, the
 * devices' identity and `p2pguard topo`), answering differently for each question so that a test
 * sees every answer mapped to its own fact. It knows the simulated driver's devices by PCI bus id
 * (0000:1N:00.0 for device N) and by UUID (the simulated driver's: "SimCUDA-device-" and the
 * device's number as bytes, printed as nvidia-smi does), at NVML index N whatever
 * CUDA_VISIBLE_DEVICES says; any other GPU is "not found", as for a GPU NVML cannot see.
 *
 * FAKE_NVML_INIT_FAIL=1 makes nvmlInit_v2 fail (NVML_ERROR_DRIVER_NOT_LOADED).
 * FAKE_NVML_DEVICES=N (default 2): how many devices it knows.
 * FAKE_NVML_NVLINK: NVLinks, "0-1:4,2-3:2" (4 links between 0 and 1, 2 between 2 and 3), or
 *   "switch:18" (every device has 18 links to NVSwitches). Unset, the evidence gatherer's
 *   answers: device 0 has links 0-3 up and 4-5 down, device 1 no NVLink at all, and no link says
 *   where it leads.
 * FAKE_NVML_LEVEL: common ancestor levels, "0-1:10,*:50" (a pair, or * for every other pair);
 *   default 40 (NODE).
 * CPU affinity: device N has CPUs 8*(N/2) to 8*(N/2)+7 (two devices per NUMA node, node N/2).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAKE_API    __attribute__((visibility("default")))
#define MAX_DEVICES 16
#define MAX_LINKS   18

struct nvml_device {
	int index;
};

struct pci_info { /* nvmlPciInfo_t */
	char bus_id_legacy[16];
	unsigned int domain, bus, device, pci_device_id, pci_subsystem_id;
	char bus_id[32];
};

static struct nvml_device devices[MAX_DEVICES] = {{0}, {1}, {2},  {3},	{4},  {5},  {6},  {7},
						  {8}, {9}, {10}, {11}, {12}, {13}, {14}, {15}};

FAKE_API int nvmlInit_v2(void);
FAKE_API int nvmlDeviceGetHandleByPciBusId_v2(const char *bus_id, struct nvml_device **device);
FAKE_API int nvmlDeviceGetP2PStatus(struct nvml_device *a, struct nvml_device *b, int caps,
				    int *status);
FAKE_API int nvmlDeviceGetTopologyCommonAncestor(struct nvml_device *a, struct nvml_device *b,
						 int *level);
FAKE_API int nvmlDeviceGetNvLinkState(struct nvml_device *device, unsigned int link, int *active);
FAKE_API int nvmlDeviceGetNvLinkRemotePciInfo_v2(struct nvml_device *device, unsigned int link,
						 struct pci_info *pci);
FAKE_API int nvmlDeviceGetNvLinkRemoteDeviceType(struct nvml_device *device, unsigned int link,
						 int *type);
FAKE_API int nvmlDeviceGetVirtualizationMode(struct nvml_device *device, int *mode);
FAKE_API int nvmlDeviceGetCpuAffinity(struct nvml_device *device, unsigned int words,
				      unsigned long *set);
FAKE_API int nvmlDeviceGetNumaNodeId(struct nvml_device *device, unsigned int *node);
FAKE_API int nvmlDeviceGetUUID(struct nvml_device *device, char *uuid, unsigned int len);
FAKE_API int nvmlDeviceGetIndex(struct nvml_device *device, unsigned int *index);
FAKE_API int nvmlShutdown(void);
FAKE_API int nvmlDeviceGetHandleByUUID(const char *uuid, struct nvml_device **device);

static int device_count(void)
{
	const char *n = getenv("FAKE_NVML_DEVICES");
	int v = n ? atoi(n) : 2;
	return v < 0 ? 0 : v > MAX_DEVICES ? MAX_DEVICES : v;
}

/* The peer of `device`'s link `link` under FAKE_NVML_NVLINK: -1 none, -2 an NVSwitch. */
static int link_peer(int device, unsigned int link)
{
	const char *spec = getenv("FAKE_NVML_NVLINK");
	unsigned int k = 0;
	int a, b, n;
	if (strncmp(spec, "switch:", 7) == 0)
		return link < (unsigned)atoi(spec + 7) ? -2 : -1;
	for (const char *p = spec; p && *p;) {
		if (sscanf(p, "%d-%d:%d", &a, &b, &n) == 3 && (a == device || b == device)) {
			if (link < k + (unsigned)n)
				return a == device ? b : a;
			k += (unsigned)n;
		}
		p = strchr(p, ',');
		p = p ? p + 1 : NULL;
	}
	return -1;
}

int nvmlInit_v2(void)
{
	const char *fail = getenv("FAKE_NVML_INIT_FAIL");
	return fail && *fail == '1' ? 9 : 0;
}

int nvmlDeviceGetHandleByPciBusId_v2(const char *bus_id, struct nvml_device **device)
{
	unsigned int domain, bus, dev, fn;
	if (!bus_id || !device || sscanf(bus_id, "%x:%x:%x.%x", &domain, &bus, &dev, &fn) != 4)
		return 2; /* NVML_ERROR_INVALID_ARGUMENT */
	if (domain != 0 || bus < 0x10 || bus >= 0x10 + (unsigned)device_count() || dev != 0 ||
	    fn != 0)
		return 6; /* NVML_ERROR_NOT_FOUND */
	*device = &devices[bus - 0x10];
	return 0;
}

int nvmlDeviceGetP2PStatus(struct nvml_device *a, struct nvml_device *b, int caps, int *status)
{
	/* read ok, write chipset_not_supported, nvlink ok, atomics disabled_by_regkey */
	static const int answers[] = {0, 1, 0, 4};
	if (!a || !b || !status || caps < 0 || caps > 3)
		return 2;
	*status = answers[caps];
	return 0;
}

int nvmlDeviceGetTopologyCommonAncestor(struct nvml_device *a, struct nvml_device *b, int *level)
{
	if (!a || !b || !level)
		return 2;
	*level = 40; /* NVML_TOPOLOGY_NODE */
	const char *spec = getenv("FAKE_NVML_LEVEL");
	int x, y, v;
	for (const char *p = spec; p && *p;) {
		if (sscanf(p, "%d-%d:%d", &x, &y, &v) == 3 &&
		    ((x == a->index && y == b->index) || (x == b->index && y == a->index))) {
			*level = v;
			return 0;
		}
		if (p[0] == '*' && sscanf(p, "*:%d", &v) == 1)
			*level = v;
		p = strchr(p, ',');
		p = p ? p + 1 : NULL;
	}
	return 0;
}

int nvmlDeviceGetNvLinkState(struct nvml_device *device, unsigned int link, int *active)
{
	if (!device || !active)
		return 2;
	if (getenv("FAKE_NVML_NVLINK")) {
		if (link >= MAX_LINKS)
			return 2;
		*active = link_peer(device->index, link) != -1;
		return 0;
	}
	/* Device 0: links 0-3 up, 4-5 down, no link 6. Device 1: no NVLink at all. */
	if (device->index == 1)
		return 3; /* NVML_ERROR_NOT_SUPPORTED */
	if (link >= 6)
		return 2;
	*active = link < 4;
	return 0;
}

int nvmlDeviceGetNvLinkRemotePciInfo_v2(struct nvml_device *device, unsigned int link,
					struct pci_info *pci)
{
	if (!device || !pci || !getenv("FAKE_NVML_NVLINK"))
		return 3;
	int peer = link_peer(device->index, link);
	if (peer == -1)
		return 2;
	memset(pci, 0, sizeof(*pci));
	/* A switch has a PCI address of its own, no GPU's. */
	pci->bus = peer == -2 ? 0xc0 : 0x10 + (unsigned)peer;
	snprintf(pci->bus_id, sizeof(pci->bus_id), "00000000:%02X:00.0", pci->bus);
	snprintf(pci->bus_id_legacy, sizeof(pci->bus_id_legacy), "0000:%02X:00.0", pci->bus);
	return 0;
}

int nvmlDeviceGetNvLinkRemoteDeviceType(struct nvml_device *device, unsigned int link, int *type)
{
	if (!device || !type || !getenv("FAKE_NVML_NVLINK"))
		return 3;
	int peer = link_peer(device->index, link);
	if (peer == -1)
		return 2;
	*type = peer == -2 ? 2 : 0; /* NVML_NVLINK_DEVICE_TYPE_SWITCH, _GPU */
	return 0;
}

int nvmlDeviceGetVirtualizationMode(struct nvml_device *device, int *mode)
{
	if (!device || !mode)
		return 2;
	*mode = device->index == 0 ? 1 : 0; /* passthrough, none */
	return 0;
}

int nvmlDeviceGetCpuAffinity(struct nvml_device *device, unsigned int words, unsigned long *set)
{
	if (!device || !set || words < 1)
		return 2;
	memset(set, 0, words * sizeof(*set));
	set[0] = 0xffUL << (8 * (device->index / 2));
	return 0;
}

int nvmlDeviceGetNumaNodeId(struct nvml_device *device, unsigned int *node)
{
	if (!device || !node)
		return 2;
	*node = (unsigned)device->index / 2;
	return 0;
}

/* The simulated driver's UUID of device k, as nvidia-smi prints a UUID. */
static void sim_uuid(int k, char *text, size_t len)
{
	static const char base[16] = "SimCUDA-device-";
	unsigned char u[16];
	for (int b = 0; b < 16; b++)
		u[b] = (unsigned char)base[b];
	u[15] = (unsigned char)k;
	snprintf(text, len,
		 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
		 u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
		 u[14], u[15]);
}

int nvmlDeviceGetUUID(struct nvml_device *device, char *uuid, unsigned int len)
{
	if (!device || !uuid)
		return 2;
	sim_uuid(device->index, uuid, len);
	return 0;
}

int nvmlDeviceGetHandleByUUID(const char *uuid, struct nvml_device **device)
{
	if (!uuid || !device)
		return 2;
	for (int k = 0; k < device_count(); k++) {
		char text[48];
		sim_uuid(k, text, sizeof(text));
		if (strcmp(text, uuid) == 0) {
			*device = &devices[k];
			return 0;
		}
	}
	return 6; /* NVML_ERROR_NOT_FOUND */
}

int nvmlDeviceGetIndex(struct nvml_device *device, unsigned int *index)
{
	if (!device || !index)
		return 2;
	*index = (unsigned)device->index;
	return 0;
}

int nvmlShutdown(void)
{
	/* The guard must never call it: NCCL may share the same NVML. */
	fprintf(stderr, "fake NVML: nvmlShutdown called\n");
	abort();
}
