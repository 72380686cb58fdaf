/* SPDX-License-Identifier: MIT */
/*
 * topo's facts from NVML, the way `nvidia-smi topo -m` shows them: per pair the link (NV# for
 * NVLinks, else the PCIe level PIX, PXB, PHB, NODE or SYS from the devices' common ancestor), per
 * GPU its CPU and NUMA affinity, UUID and nvidia-smi index. NVML is loaded at run time (nothing
 * links it) in topo's child process, never in topo itself; nvmlShutdown is never called.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report_format.h"
#include "topo.h"

#define NVML_SUCCESS	     0
#define NVLINK_MAX_LINKS     18 /* NVML_NVLINK_MAX_LINKS */
#define NVLINK_DEVICE_GPU    0	/* nvmlIntNvLinkDeviceType_t */
#define NVLINK_DEVICE_SWITCH 2

typedef struct nvml_device *nvml_device_t;

/* nvmlPciInfo_t of nvml.h (NVML 11 and later). */
struct nvml_pci_info {
	char bus_id_legacy[16];
	unsigned int domain, bus, device, pci_device_id, pci_subsystem_id;
	char bus_id[32];
};

static struct {
	int (*init)(void);
	int (*by_pci)(const char *bus, nvml_device_t *d);
	int (*common_ancestor)(nvml_device_t a, nvml_device_t b, int *level);
	int (*p2p_status)(nvml_device_t a, nvml_device_t b, int caps, int *status);
	int (*nvlink_state)(nvml_device_t d, unsigned int link, int *active);
	int (*nvlink_remote_pci)(nvml_device_t d, unsigned int link, struct nvml_pci_info *pci);
	int (*nvlink_remote_type)(nvml_device_t d, unsigned int link, int *type);
	int (*cpu_affinity)(nvml_device_t d, unsigned int words, unsigned long *set);
	int (*numa_node)(nvml_device_t d, unsigned int *node);
	int (*uuid)(nvml_device_t d, char *buf, unsigned int len);
	int (*index)(nvml_device_t d, unsigned int *index);
} nvml;

/* nvmlDeviceGetTopologyCommonAncestor's levels, as nvidia-smi names them. */
static const char *level_code(int level)
{
	switch (level) {
	case 0:
		return "X"; /* the same board */
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
		return "?";
	}
}

static bool load(struct device_list *l)
{
	void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		snprintf(l->nvml_why, sizeof(l->nvml_why), "libnvidia-ml.so.1 not found");
		return false;
	}
	*(void **)&nvml.init = dlsym(lib, "nvmlInit_v2");
	*(void **)&nvml.by_pci = dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
	*(void **)&nvml.common_ancestor = dlsym(lib, "nvmlDeviceGetTopologyCommonAncestor");
	*(void **)&nvml.p2p_status = dlsym(lib, "nvmlDeviceGetP2PStatus");
	*(void **)&nvml.nvlink_state = dlsym(lib, "nvmlDeviceGetNvLinkState");
	*(void **)&nvml.nvlink_remote_pci = dlsym(lib, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
	*(void **)&nvml.nvlink_remote_type = dlsym(lib, "nvmlDeviceGetNvLinkRemoteDeviceType");
	*(void **)&nvml.cpu_affinity = dlsym(lib, "nvmlDeviceGetCpuAffinity");
	*(void **)&nvml.numa_node = dlsym(lib, "nvmlDeviceGetNumaNodeId");
	*(void **)&nvml.uuid = dlsym(lib, "nvmlDeviceGetUUID");
	*(void **)&nvml.index = dlsym(lib, "nvmlDeviceGetIndex");
	if (!nvml.init || !nvml.by_pci) {
		snprintf(l->nvml_why, sizeof(l->nvml_why), "NVML lacks nvmlInit_v2");
		return false;
	}
	int rc = nvml.init();
	if (rc != NVML_SUCCESS) {
		snprintf(l->nvml_why, sizeof(l->nvml_why), "nvmlInit_v2 failed (%d)", rc);
		return false;
	}
	return true;
}

/* The CPUs of a set as ranges. */
static void cpu_ranges(const unsigned long *set, unsigned int words, char *buf, size_t len)
{
	int cpus[1024];
	size_t n = 0;
	for (unsigned int w = 0; w < words; w++)
		for (unsigned int b = 0; b < 8 * sizeof(unsigned long); b++)
			if (set[w] >> b & 1UL && n < sizeof(cpus) / sizeof(cpus[0]))
				cpus[n++] = (int)(w * 8 * sizeof(unsigned long) + b);
	struct rbuf r = {0};
	fmt_ranges(&r, cpus, n);
	snprintf(buf, len, "%s", rbuf_str(&r));
	rbuf_free(&r);
}

/* The NUMA node from sysfs, where NVML has no nvmlDeviceGetNumaNodeId (before driver 535). */
static int sysfs_numa(const char *bus)
{
	unsigned int domain, b, dev, fn;
	if (sscanf(bus, "%x:%x:%x.%x", &domain, &b, &dev, &fn) != 4)
		return -1;
	char path[128];
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%04x:%02x:%02x.%x/numa_node", domain, b,
		 dev, fn);
	FILE *f = fopen(path, "re");
	int node = -1;
	if (f) {
		if (fscanf(f, "%d", &node) != 1)
			node = -1;
		fclose(f);
	}
	return node;
}

/* The NUMA node holding CPU cpu (the first of a GPU's affinity), as nvidia-smi infers a GPU's
 * node where neither NVML nor sysfs says (a VM's numa_node is -1): the node whose cpulist names
 * it. -1 when none does. */
static int numa_of_cpu(int cpu)
{
	for (int node = 0; node < 1024; node++) {
		char path[96], list[4096];
		snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/cpulist", node);
		FILE *f = fopen(path, "re");
		if (!f)
			return -1;
		bool read = fgets(list, sizeof(list), f) != NULL;
		fclose(f);
		for (char *p = list; read && *p;) {
			char *end;
			long lo = strtol(p, &end, 10), hi = lo;
			if (end == p)
				break;
			if (*end == '-')
				hi = strtol(end + 1, &end, 10);
			if (cpu >= lo && cpu <= hi)
				return node;
			p = *end == ',' ? end + 1 : end;
		}
	}
	return -1;
}

struct link_end {
	unsigned int domain, bus, device;
	int type; /* NVLINK_DEVICE_*, -1 unknown */
};

void topo_nvml_facts(struct device_list *l)
{
	nvml_device_t dev[TOPO_MAX_GPUS] = {0};
	for (int d = 0; d < l->n; d++) {
		l->smi_index[d] = -1;
		l->numa[d] = -1;
		snprintf(l->uuid[d], sizeof(l->uuid[d]), "?");
		for (int e = 0; e < l->n; e++)
			l->link[d][e] =
			    (struct topo_link){.code = "?", .level = -1, .p2p_read = -1};
		snprintf(l->link[d][d].code, sizeof(l->link[d][d].code), "X");
	}
	l->nvml = load(l);
	for (int d = 0; d < l->n; d++) {
		if (l->nvml && nvml.by_pci(l->bus[d], &dev[d]) != NVML_SUCCESS)
			dev[d] = NULL;
		if (!dev[d]) {
			l->numa[d] = sysfs_numa(l->bus[d]);
			continue;
		}
		unsigned int u;
		if (nvml.uuid && nvml.uuid(dev[d], l->uuid[d], sizeof(l->uuid[d])) != NVML_SUCCESS)
			snprintf(l->uuid[d], sizeof(l->uuid[d]), "?");
		if (nvml.index && nvml.index(dev[d], &u) == NVML_SUCCESS)
			l->smi_index[d] = (int)u;
		unsigned long set[16] = {0};
		if (nvml.cpu_affinity && nvml.cpu_affinity(dev[d], 16, set) == NVML_SUCCESS)
			cpu_ranges(set, 16, l->cpus[d], sizeof(l->cpus[d]));
		if (nvml.numa_node && nvml.numa_node(dev[d], &u) == NVML_SUCCESS)
			l->numa[d] = (int)u;
		else
			l->numa[d] = sysfs_numa(l->bus[d]);
		if (l->numa[d] < 0 && l->cpus[d][0] >= '0' && l->cpus[d][0] <= '9')
			l->numa[d] = numa_of_cpu(atoi(l->cpus[d]));
	}
	if (!l->nvml)
		return;

	/* Each GPU's active links and where they lead. */
	static struct link_end ends[TOPO_MAX_GPUS][NVLINK_MAX_LINKS];
	int active[TOPO_MAX_GPUS][NVLINK_MAX_LINKS] = {{0}};
	for (int d = 0; d < l->n; d++)
		for (unsigned int k = 0; dev[d] && nvml.nvlink_state && k < NVLINK_MAX_LINKS; k++) {
			int on = 0;
			if (nvml.nvlink_state(dev[d], k, &on) != NVML_SUCCESS || !on)
				continue;
			struct nvml_pci_info pci;
			memset(&pci, 0, sizeof(pci));
			ends[d][k] = (struct link_end){0, 0, 0, -1};
			if (nvml.nvlink_remote_pci &&
			    nvml.nvlink_remote_pci(dev[d], k, &pci) == NVML_SUCCESS)
				ends[d][k] = (struct link_end){pci.domain, pci.bus, pci.device, -1};
			int type;
			if (nvml.nvlink_remote_type &&
			    nvml.nvlink_remote_type(dev[d], k, &type) == NVML_SUCCESS)
				ends[d][k].type = type;
			active[d][k] = 1;
		}
	for (int d = 0; d < l->n; d++) {
		unsigned int dom, bus, devno, fn;
		int switched_d = 0;
		for (int k = 0; k < NVLINK_MAX_LINKS; k++)
			switched_d += active[d][k] && ends[d][k].type == NVLINK_DEVICE_SWITCH;
		for (int e = 0; e < l->n; e++) {
			if (d == e || !dev[d] || !dev[e])
				continue;
			struct topo_link *lk = &l->link[d][e];
			int level;
			if (nvml.common_ancestor &&
			    nvml.common_ancestor(dev[d], dev[e], &level) == NVML_SUCCESS)
				lk->level = level;
			int status;
			if (nvml.p2p_status &&
			    nvml.p2p_status(dev[d], dev[e], 0, &status) == NVML_SUCCESS)
				lk->p2p_read = status;
			/* Direct links: those whose far end is the other GPU's PCI address. */
			if (sscanf(l->bus[e], "%x:%x:%x.%x", &dom, &bus, &devno, &fn) == 4)
				for (int k = 0; k < NVLINK_MAX_LINKS; k++)
					lk->nvlinks += active[d][k] &&
						       ends[d][k].type != NVLINK_DEVICE_SWITCH &&
						       ends[d][k].domain == dom &&
						       ends[d][k].bus == bus &&
						       ends[d][k].device == devno;
			/* Through NVSwitches every pair has the links of the less connected GPU. */
			int switched_e = 0;
			for (int k = 0; k < NVLINK_MAX_LINKS; k++)
				switched_e +=
				    active[e][k] && ends[e][k].type == NVLINK_DEVICE_SWITCH;
			if (!lk->nvlinks && switched_d && switched_e) {
				lk->nvlinks = switched_d < switched_e ? switched_d : switched_e;
				lk->nvswitch = true;
			}
			if (lk->nvlinks)
				snprintf(lk->code, sizeof(lk->code), "NV%d", lk->nvlinks);
			else
				snprintf(lk->code, sizeof(lk->code), "%s", level_code(lk->level));
		}
	}
}
