/* SPDX-License-Identifier: MIT */
/*
 * topo's facts from NVML, the way `nvidia-smi topo -m` shows them: per pair the link (NV# for
 * NVLinks, else the PCIe level PIX, PXB, PHB, NODE or SYS from the devices' common ancestor), per
 * GPU its CPU and NUMA affinity, UUID and nvidia-smi index. NVML is loaded at run time (nothing
 * links it) in topo's child process, never in topo itself; nvmlShutdown is never called.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvml.h"
#include "report_format.h"
#include "topo.h"

/* nvmlDeviceGetTopologyCommonAncestor's levels, as nvidia-smi names them. */
static const char *level_code(int level)
{
	return level == 0 ? "X" /* the same board */ : p2pg_nvml_level_name(level, "?");
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
	const struct p2pg_nvml *nvml = p2pg_nvml();
	if (!nvml)
		snprintf(l->nvml_why, sizeof(l->nvml_why), "%s", p2pg_nvml_why());
	else if (!nvml->by_pci) {
		snprintf(l->nvml_why, sizeof(l->nvml_why),
			 "NVML lacks nvmlDeviceGetHandleByPciBusId_v2");
		nvml = NULL;
	}
	l->nvml = nvml != NULL;
	for (int d = 0; d < l->n; d++) {
		if (l->nvml && nvml->by_pci(l->bus[d], &dev[d]) != NVML_SUCCESS)
			dev[d] = NULL;
		if (!dev[d]) {
			l->numa[d] = sysfs_numa(l->bus[d]);
			continue;
		}
		unsigned int u;
		if (nvml->uuid &&
		    nvml->uuid(dev[d], l->uuid[d], sizeof(l->uuid[d])) != NVML_SUCCESS)
			snprintf(l->uuid[d], sizeof(l->uuid[d]), "?");
		if (nvml->index && nvml->index(dev[d], &u) == NVML_SUCCESS)
			l->smi_index[d] = (int)u;
		unsigned long set[16] = {0};
		if (nvml->cpu_affinity && nvml->cpu_affinity(dev[d], 16, set) == NVML_SUCCESS)
			cpu_ranges(set, 16, l->cpus[d], sizeof(l->cpus[d]));
		if (nvml->numa_node && nvml->numa_node(dev[d], &u) == NVML_SUCCESS)
			l->numa[d] = (int)u;
		else
			l->numa[d] = sysfs_numa(l->bus[d]);
		if (l->numa[d] < 0 && l->cpus[d][0] >= '0' && l->cpus[d][0] <= '9')
			l->numa[d] = numa_of_cpu(atoi(l->cpus[d]));
	}
	if (!l->nvml)
		return;

	/* Each GPU's active links and where they lead. */
	static struct link_end ends[TOPO_MAX_GPUS][NVML_NVLINK_MAX_LINKS];
	int active[TOPO_MAX_GPUS][NVML_NVLINK_MAX_LINKS] = {{0}};
	for (int d = 0; d < l->n; d++)
		for (unsigned int k = 0; dev[d] && nvml->nvlink_state && k < NVML_NVLINK_MAX_LINKS;
		     k++) {
			int on = 0;
			if (nvml->nvlink_state(dev[d], k, &on) != NVML_SUCCESS || !on)
				continue;
			struct nvml_pci_info pci;
			memset(&pci, 0, sizeof(pci));
			ends[d][k] = (struct link_end){0, 0, 0, -1};
			if (nvml->nvlink_remote_pci &&
			    nvml->nvlink_remote_pci(dev[d], k, &pci) == NVML_SUCCESS)
				ends[d][k] = (struct link_end){pci.domain, pci.bus, pci.device, -1};
			int type;
			if (nvml->nvlink_remote_type &&
			    nvml->nvlink_remote_type(dev[d], k, &type) == NVML_SUCCESS)
				ends[d][k].type = type;
			active[d][k] = 1;
		}
	for (int d = 0; d < l->n; d++) {
		unsigned int dom, bus, devno, fn;
		int switched_d = 0;
		for (int k = 0; k < NVML_NVLINK_MAX_LINKS; k++)
			switched_d += active[d][k] && ends[d][k].type == NVML_NVLINK_DEVICE_SWITCH;
		for (int e = 0; e < l->n; e++) {
			if (d == e || !dev[d] || !dev[e])
				continue;
			struct topo_link *lk = &l->link[d][e];
			int level;
			if (nvml->common_ancestor &&
			    nvml->common_ancestor(dev[d], dev[e], &level) == NVML_SUCCESS)
				lk->level = level;
			int status;
			if (nvml->p2p_status &&
			    nvml->p2p_status(dev[d], dev[e], 0, &status) == NVML_SUCCESS)
				lk->p2p_read = status;
			/* Direct links: those whose far end is the other GPU's PCI address. */
			if (sscanf(l->bus[e], "%x:%x:%x.%x", &dom, &bus, &devno, &fn) == 4)
				for (int k = 0; k < NVML_NVLINK_MAX_LINKS; k++)
					lk->nvlinks +=
					    active[d][k] &&
					    ends[d][k].type != NVML_NVLINK_DEVICE_SWITCH &&
					    ends[d][k].domain == dom && ends[d][k].bus == bus &&
					    ends[d][k].device == devno;
			/* Through NVSwitches every pair has the links of the less connected GPU. */
			int switched_e = 0;
			for (int k = 0; k < NVML_NVLINK_MAX_LINKS; k++)
				switched_e +=
				    active[e][k] && ends[e][k].type == NVML_NVLINK_DEVICE_SWITCH;
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
