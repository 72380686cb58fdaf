/* SPDX-License-Identifier: MIT */
/*
 * Transfers, failures and the trace know devices by the process's ordinals, which
 * CUDA_VISIBLE_DEVICES renumbers per process. This writes, once per process, what each ordinal is
 * physically: the UUID and PCI bus id that nvidia-smi, NVML and dcgm-exporter name a GPU by, its
 * name, and nvidia-smi's index. It runs in the drainer, off the program's calls: the driver's
 * answers take microseconds, but NVML's start can take a long time once.
 */
#include "devices.h"

#include <cuda.h>
#include <stdio.h>

#include "clock.h"
#include "driver.h"
#include "nvml.h"
#include "recorder.h"
#include "spool.h"
#include "spool_blob.h"

#define MAX_DEVICES 64

void p2pg_devices_uuid_text(const unsigned char u[16], char *out, size_t len)
{
	snprintf(out, len,
		 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
		 u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
		 u[14], u[15]);
}

void p2pg_devices_pci_text(const char *bus_id, char *out, size_t len)
{
	unsigned domain, bus, device, function;
	char end;
	if (len)
		out[0] = '\0';
	if (sscanf(bus_id, "%x:%x:%x.%x%c", &domain, &bus, &device, &function, &end) == 4 &&
	    bus <= 0xff && device <= 0x1f && function <= 7)
		snprintf(out, len, "%08X:%02X:%02X.%X", domain, bus, device, function);
}

bool p2pg_devices_record(struct p2pg_spool_layout *spool)
{
	int count = 0;
	if (!p2pg_drv.cuDeviceGetCount || p2pg_drv.cuDeviceGetCount(&count) != CUDA_SUCCESS ||
	    count <= 0)
		return true;
	if (count > MAX_DEVICES)
		count = MAX_DEVICES;
	struct p2pg_spool_blob *blob = p2pg_spool_blob_claim(spool);
	if (!blob)
		return false;
	blob->kind = P2PG_BLOB_DEVICES;
	blob->serial = 0;
	blob->seq = 0;
	blob->tid = p2pg_tid();
	blob->started_ns = p2pg_realtime_ns();
	blob->status = 0;
	blob->signal = 0;
	blob->device = count;
	blob->peer_device = 0;
	blob->api = 0;
	for (int ordinal = 0; ordinal < count; ordinal++) {
		char field[16], uuid[48] = "", pci[32] = "", name[256] = "", raw[32];
		CUdevice dev;
		CUuuid bytes;
		bool known =
		    p2pg_drv.cuDeviceGet && p2pg_drv.cuDeviceGet(&dev, ordinal) == CUDA_SUCCESS;
		if (known && p2pg_drv.cuDeviceGetUuid &&
		    p2pg_drv.cuDeviceGetUuid(&bytes, dev) == CUDA_SUCCESS)
			p2pg_devices_uuid_text((const unsigned char *)bytes.bytes, uuid,
					       sizeof(uuid));
		if (known && p2pg_drv.cuDeviceGetPCIBusId &&
		    p2pg_drv.cuDeviceGetPCIBusId(raw, sizeof(raw), dev) == CUDA_SUCCESS) {
			raw[sizeof(raw) - 1] = '\0';
			p2pg_devices_pci_text(raw, pci, sizeof(pci));
		}
		if (known && p2pg_drv.cuDeviceGetName &&
		    p2pg_drv.cuDeviceGetName(name, sizeof(name), dev) != CUDA_SUCCESS)
			name[0] = '\0';
		name[sizeof(name) - 1] = '\0';
		snprintf(field, sizeof(field), "%d", ordinal);
		p2pg_spool_blob_add(blob, field);
		p2pg_spool_blob_add(blob, uuid);
		p2pg_spool_blob_add(blob, pci);
		p2pg_spool_blob_add(blob, name);
		int index = p2pg_nvml_index(uuid, pci);
		if (index >= 0)
			snprintf(field, sizeof(field), "%d", index);
		else
			field[0] = '\0';
		p2pg_spool_blob_add(blob, field);
	}
	p2pg_spool_blob_publish(blob);
	return true;
}
