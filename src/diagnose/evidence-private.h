/* SPDX-License-Identifier: MIT */
/* Pieces of evidence.c exposed to its tests only. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/*
 * Keeps the IOMMU-related kernel parameters of cmdline (intel_iommu=, amd_iommu=, iommu=,
 * iommu.passthrough=, pcie_acs_override=), space separated, in out; whole parameters only, as
 * many as fit. cmdline is modified (split into tokens).
 */
void p2pg_evidence_iommu_params(char *cmdline, char *out, size_t len);

/* A cgroup path that names a container runtime (docker, kubepods, containerd, libpod, ...). */
bool p2pg_evidence_cgroup_is_container(const char *cgroup);
