/* SPDX-License-Identifier: MIT */
/* The process's devices and the physical GPU behind each ordinal, kept in the spool. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "p2pguard/spool.h"

/*
 * Drainer, once the program's first cuInit has succeeded: asks the driver for every device the
 * process sees (ordinal, UUID, PCI bus id, name) and NVML for nvidia-smi's index of each, and
 * publishes them as one blob of the spool, so that a process killed right after still has them.
 * true when that is done, or when there is nothing to say (no device); false when every blob
 * slot waits for the drainer (the caller tries again).
 */
bool p2pg_devices_record(struct p2pg_spool_layout *spool);

/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (nvidia-smi's spelling) for the driver's 16 bytes. */
void p2pg_devices_uuid_text(const unsigned char bytes[16], char *out, size_t len);
/* NVML's spelling of a PCI bus id ("00000000:1B:00.0") for the driver's ("0000:1b:00.0");
 * "" when it cannot be read. */
void p2pg_devices_pci_text(const char *driver_bus_id, char *out, size_t len);
