/* SPDX-License-Identifier: MIT */
/*
 * NVML (libnvidia-ml.so.1), loaded with dlopen the first time it is asked for and never linked:
 * the guard runs where it is missing. One loader for every reader: the devices' physical
 * identity (record/), a failure's evidence (diagnose/) and `p2pguard topo` (cli/). NVML's types
 * and codes are declared here: the guard builds without nvml.h.
 */
#pragma once

#include <stdbool.h>

typedef struct nvml_device *nvml_device_t;
typedef int nvml_return_t;

#define NVML_SUCCESS		    0
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED    3
#define NVML_FEATURE_ENABLED	    1
#define NVML_NVLINK_MAX_LINKS	    18
#define NVML_NVLINK_DEVICE_GPU	    0 /* nvmlIntNvLinkDeviceType_t */
#define NVML_NVLINK_DEVICE_SWITCH   2

/* nvmlPciInfo_t of nvml.h (NVML 11 and later). */
struct nvml_pci_info {
	char bus_id_legacy[16];
	unsigned int domain, bus, device, pci_device_id, pci_subsystem_id;
	char bus_id[32];
};

/* Every NVML function the guard calls; any but init may be NULL (an older NVML lacks it):
 * callers check what they use. */
struct p2pg_nvml {
	nvml_return_t (*init)(void);
	nvml_return_t (*by_uuid)(const char *uuid, nvml_device_t *device);
	nvml_return_t (*by_pci)(const char *bus_id, nvml_device_t *device);
	nvml_return_t (*index)(nvml_device_t device, unsigned int *index);
	nvml_return_t (*uuid)(nvml_device_t device, char *buf, unsigned int len);
	nvml_return_t (*p2p_status)(nvml_device_t a, nvml_device_t b, int caps, int *status);
	nvml_return_t (*common_ancestor)(nvml_device_t a, nvml_device_t b, int *level);
	nvml_return_t (*nvlink_state)(nvml_device_t device, unsigned int link, int *active);
	nvml_return_t (*nvlink_remote_pci)(nvml_device_t device, unsigned int link,
					   struct nvml_pci_info *pci);
	nvml_return_t (*nvlink_remote_type)(nvml_device_t device, unsigned int link, int *type);
	nvml_return_t (*cpu_affinity)(nvml_device_t device, unsigned int words, unsigned long *set);
	nvml_return_t (*numa_node)(nvml_device_t device, unsigned int *node);
	nvml_return_t (*virtualization_mode)(nvml_device_t device, int *mode);
};

/*
 * NVML, loaded and started (nvmlInit_v2) by the first caller of the process; NULL when it is
 * missing or does not start, and then p2pg_nvml_why() says why in a few words. Not for a hot
 * path: NVML's start can take a long time once.
 */
const struct p2pg_nvml *p2pg_nvml(void);
const char *p2pg_nvml_why(void);

/*
 * The index nvidia-smi shows for the GPU with this UUID ("GPU-..." as nvidia-smi prints it) or,
 * when NVML does not know the UUID, this PCI bus id ("00000000:1B:00.0"); either may be NULL or
 * empty. NVML numbers every GPU of the machine, whatever CUDA_VISIBLE_DEVICES hides. Returns the
 * index, or -1 when NVML is missing, does not start, or knows neither.
 */
int p2pg_nvml_index(const char *uuid, const char *pci_bus_id);

/* A nvmlDeviceGetTopologyCommonAncestor level as nvidia-smi names it between two boards (PIX,
 * PXB, PHB, NODE, SYS), else `other`: each reader names the same board and an unknown level its
 * own way. */
const char *p2pg_nvml_level_name(int level, const char *other);
