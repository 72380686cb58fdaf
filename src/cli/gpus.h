/* SPDX-License-Identifier: MIT */
/*
 * Physical GPUs as the outputs name them when a figure spans processes and hosts (NCCL's device
 * pairs, cross-process mappings): a GPU is its host and UUID, else its host and index, so that
 * two processes that number one GPU differently (CUDA_VISIBLE_DEVICES) still name it once.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "report_format.h"

struct cli_gpu {
	char *host, *uuid, *pci_bus_id;
	int index;     /* nvidia-smi's index where the devices table knows it, else the ordinal */
	bool physical; /* index is nvidia-smi's */
};

struct cli_gpus {
	struct cli_gpu *v;
	size_t n, cap;
	struct imap index;
	bool hosts; /* the GPUs are on more than one host (set by cli_gpus_order) */
};

/* The GPU of host and uuid (else of host and index), made on first sight: its index in g->v, or
 * -ENOMEM. */
int cli_gpus_add(struct cli_gpus *g, const char *host, const char *uuid, const char *pci_bus_id,
		 int index, bool physical);
/* Sorts the GPUs by host, index and UUID and sets g->hosts; (*ret_moved)[old] is each GPU's new
 * index (the caller frees it and renumbers what it holds). Returns 0 or -ENOMEM. */
int cli_gpus_order(struct cli_gpus *g, int **ret_moved);
/* "gpu-node-001 GPU 3" (with the host when the GPUs are on several hosts), "GPU 3", or "?" */
void cli_gpus_name(const struct cli_gpus *g, int gpu, char *buf, size_t len);
/* "END_gpu": 3, "END_gpu_is_nvidia_smi_index": true, "END_uuid": "GPU-...", "END_pci_bus_id":
 * "00000000:18:00.0" of a GPU (nulls for gpu -1), for a JSON object being written. */
void cli_gpus_json(FILE *out, const struct cli_gpus *g, int gpu, const char *end);
void cli_gpus_free(struct cli_gpus *g);
