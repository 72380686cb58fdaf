/* SPDX-License-Identifier: MIT */
/*
 * NVML (libnvidia-ml.so.1), loaded with dlopen the first time it is asked for and never linked:
 * the guard runs where it is missing. Only what identifies a GPU physically lives here; the
 * evidence of a failure reads NVML its own way (diagnose/evidence.c).
 */
#pragma once

#include <stdbool.h>

/*
 * The index nvidia-smi shows for the GPU with this UUID ("GPU-..." as nvidia-smi prints it) or,
 * when NVML does not know the UUID, this PCI bus id ("00000000:1B:00.0"); either may be NULL or
 * empty. NVML numbers every GPU of the machine, whatever CUDA_VISIBLE_DEVICES hides. Returns the
 * index, or -1 when NVML is missing, does not start, or knows neither. Not for a hot path: NVML's
 * start can take a long time once.
 */
int p2pg_nvml_index(const char *uuid, const char *pci_bus_id);
