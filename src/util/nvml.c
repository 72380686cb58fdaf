/* SPDX-License-Identifier: MIT */
#include "nvml.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>

#include "driver.h"

/* NVML's types and codes, declared here: the guard builds without nvml.h. */
typedef struct nvml_device *nvml_device_t;
#define NVML_SUCCESS 0

static struct {
	int (*init)(void);
	int (*by_uuid)(const char *uuid, nvml_device_t *device);
	int (*by_pci)(const char *bus_id, nvml_device_t *device);
	int (*index)(nvml_device_t device, unsigned int *index);
	bool ok;
} nvml;

static pthread_once_t nvml_once = PTHREAD_ONCE_INIT;

/* Loaded once and never shut down: NCCL, the program or the guard's evidence may share the same
 * NVML (its start is counted), and nvmlShutdown would pull it from under them. */
static void nvml_load(void)
{
	void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!lib)
		return;
	*(void **)&nvml.init = p2pg_real_dlsym(lib, "nvmlInit_v2");
	*(void **)&nvml.by_uuid = p2pg_real_dlsym(lib, "nvmlDeviceGetHandleByUUID");
	*(void **)&nvml.by_pci = p2pg_real_dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
	*(void **)&nvml.index = p2pg_real_dlsym(lib, "nvmlDeviceGetIndex");
	nvml.ok =
	    nvml.init && nvml.index && (nvml.by_uuid || nvml.by_pci) && nvml.init() == NVML_SUCCESS;
}

int p2pg_nvml_index(const char *uuid, const char *pci_bus_id)
{
	pthread_once(&nvml_once, nvml_load);
	if (!nvml.ok)
		return -1;
	nvml_device_t device = NULL;
	bool found = uuid && *uuid && nvml.by_uuid && nvml.by_uuid(uuid, &device) == NVML_SUCCESS;
	if (!found)
		found = pci_bus_id && *pci_bus_id && nvml.by_pci &&
			nvml.by_pci(pci_bus_id, &device) == NVML_SUCCESS;
	unsigned int index;
	if (!found || nvml.index(device, &index) != NVML_SUCCESS || index > 0x7fffffff)
		return -1;
	return (int)index;
}
