/* SPDX-License-Identifier: MIT */
#include "nvml.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>

#include "driver.h"

static struct p2pg_nvml nvml;
static bool nvml_ok;
static char nvml_why[64];
static pthread_once_t nvml_once = PTHREAD_ONCE_INIT;

/* Loaded once and never shut down: NCCL, the program and the guard's own readers may share the
 * same NVML (its start is counted), and nvmlShutdown would pull it from under them. */
static void nvml_load(void)
{
	void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		snprintf(nvml_why, sizeof(nvml_why), "libnvidia-ml.so.1 not found");
		return;
	}
	static const struct {
		size_t offset;
		const char *name;
	} symbols[] = {
	    {offsetof(struct p2pg_nvml, init), "nvmlInit_v2"},
	    {offsetof(struct p2pg_nvml, by_uuid), "nvmlDeviceGetHandleByUUID"},
	    {offsetof(struct p2pg_nvml, by_pci), "nvmlDeviceGetHandleByPciBusId_v2"},
	    {offsetof(struct p2pg_nvml, index), "nvmlDeviceGetIndex"},
	    {offsetof(struct p2pg_nvml, uuid), "nvmlDeviceGetUUID"},
	    {offsetof(struct p2pg_nvml, p2p_status), "nvmlDeviceGetP2PStatus"},
	    {offsetof(struct p2pg_nvml, common_ancestor), "nvmlDeviceGetTopologyCommonAncestor"},
	    {offsetof(struct p2pg_nvml, nvlink_state), "nvmlDeviceGetNvLinkState"},
	    {offsetof(struct p2pg_nvml, nvlink_remote_pci), "nvmlDeviceGetNvLinkRemotePciInfo_v2"},
	    {offsetof(struct p2pg_nvml, nvlink_remote_type), "nvmlDeviceGetNvLinkRemoteDeviceType"},
	    {offsetof(struct p2pg_nvml, cpu_affinity), "nvmlDeviceGetCpuAffinity"},
	    {offsetof(struct p2pg_nvml, numa_node), "nvmlDeviceGetNumaNodeId"},
	    {offsetof(struct p2pg_nvml, virtualization_mode), "nvmlDeviceGetVirtualizationMode"},
	};
	for (size_t i = 0; i < sizeof(symbols) / sizeof(symbols[0]); i++)
		*(void **)((char *)&nvml + symbols[i].offset) =
		    p2pg_real_dlsym(lib, symbols[i].name);
	if (!nvml.init) {
		snprintf(nvml_why, sizeof(nvml_why), "NVML lacks nvmlInit_v2");
		return;
	}
	int rc = nvml.init();
	if (rc != NVML_SUCCESS) {
		snprintf(nvml_why, sizeof(nvml_why), "nvmlInit_v2 failed (%d)", rc);
		return;
	}
	nvml_ok = true;
}

const struct p2pg_nvml *p2pg_nvml(void)
{
	pthread_once(&nvml_once, nvml_load);
	return nvml_ok ? &nvml : NULL;
}

const char *p2pg_nvml_why(void)
{
	pthread_once(&nvml_once, nvml_load);
	return nvml_ok ? "" : nvml_why;
}

int p2pg_nvml_index(const char *uuid, const char *pci_bus_id)
{
	const struct p2pg_nvml *n = p2pg_nvml();
	if (!n || !n->index)
		return -1;
	nvml_device_t device = NULL;
	bool found = uuid && *uuid && n->by_uuid && n->by_uuid(uuid, &device) == NVML_SUCCESS;
	if (!found)
		found = pci_bus_id && *pci_bus_id && n->by_pci &&
			n->by_pci(pci_bus_id, &device) == NVML_SUCCESS;
	unsigned int index;
	if (!found || n->index(device, &index) != NVML_SUCCESS || index > 0x7fffffff)
		return -1;
	return (int)index;
}

const char *p2pg_nvml_level_name(int level, const char *other)
{
	switch (level) {
	case 10:
		return "PIX";
	case 20:
		return "PXB";
	case 30:
		return "PHB";
	case 40:
		return "NODE";
	case 50:
		return "SYS";
	default:
		return other;
	}
}
