/* SPDX-License-Identifier: MIT */
/* Pieces of evidence.c exposed to its tests only. */
#pragma once

#include <stddef.h>

/*
 * Keeps the IOMMU-related kernel parameters of cmdline (intel_iommu=, amd_iommu=, iommu=,
 * iommu.passthrough=, pcie_acs_override=), space separated, in out; whole parameters only, as
 * many as fit. cmdline is modified (split into tokens).
 */
void p2pg_evidence_iommu_params(char *cmdline, char *out, size_t len);
