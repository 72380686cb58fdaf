/* SPDX-License-Identifier: MIT */
/*
 * A stand-in libnvidia-ml.so.1 with just the calls the evidence gatherer makes, answering
 * differently for each question so that the test sees every answer mapped to its own fact.
 * It knows the simulated machine's first two devices by PCI bus id (0000:10:00.0, 0000:11:00.0)
 * and by UUID (the simulated driver's: "SimCUDA-device-" and the device's number as bytes,
 * printed as nvidia-smi does), at NVML indices 0 and 1 whatever CUDA_VISIBLE_DEVICES says; any
 * other GPU is "not found", as for a GPU NVML cannot see.
 * FAKE_NVML_INIT_FAIL=1 makes nvmlInit_v2 fail (NVML_ERROR_DRIVER_NOT_LOADED).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAKE_API __attribute__((visibility("default")))

struct nvml_device {
	int index;
};

static struct nvml_device devices[2] = {{0}, {1}};

FAKE_API int nvmlInit_v2(void);
FAKE_API int nvmlDeviceGetHandleByPciBusId_v2(const char *bus_id, struct nvml_device **device);
FAKE_API int nvmlDeviceGetP2PStatus(struct nvml_device *a, struct nvml_device *b, int caps,
				    int *status);
FAKE_API int nvmlDeviceGetTopologyCommonAncestor(struct nvml_device *a, struct nvml_device *b,
						 int *level);
FAKE_API int nvmlDeviceGetNvLinkState(struct nvml_device *device, unsigned int link, int *active);
FAKE_API int nvmlDeviceGetVirtualizationMode(struct nvml_device *device, int *mode);
FAKE_API int nvmlShutdown(void);
FAKE_API int nvmlDeviceGetHandleByUUID(const char *uuid, struct nvml_device **device);
FAKE_API int nvmlDeviceGetIndex(struct nvml_device *device, unsigned int *index);

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
	if (domain != 0 || bus < 0x10 || bus > 0x11 || dev != 0 || fn != 0)
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
	return 0;
}

int nvmlDeviceGetNvLinkState(struct nvml_device *device, unsigned int link, int *active)
{
	if (!device || !active)
		return 2;
	/* Device 0: links 0-3 up, 4-5 down, no link 6. Device 1: no NVLink at all. */
	if (device->index == 1)
		return 3; /* NVML_ERROR_NOT_SUPPORTED */
	if (link >= 6)
		return 2;
	*active = link < 4;
	return 0;
}

int nvmlDeviceGetVirtualizationMode(struct nvml_device *device, int *mode)
{
	if (!device || !mode)
		return 2;
	*mode = device->index == 0 ? 1 : 0; /* passthrough, none */
	return 0;
}

int nvmlDeviceGetHandleByUUID(const char *uuid, struct nvml_device **device)
{
	if (!uuid || !device)
		return 2;
	for (int k = 0; k < 2; k++) {
		static const char base[16] = "SimCUDA-device-";
		unsigned char u[16];
		char text[48];
		for (int b = 0; b < 16; b++)
			u[b] = (unsigned char)base[b];
		u[15] = (unsigned char)k;
		snprintf(text, sizeof(text),
			 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
			 u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11],
			 u[12], u[13], u[14], u[15]);
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
	*index = (unsigned int)device->index;
	return 0;
}

int nvmlShutdown(void)
{
	/* The gatherer must never call it: NCCL may share the same NVML. */
	fprintf(stderr, "fake NVML: nvmlShutdown called\n");
	abort();
}
