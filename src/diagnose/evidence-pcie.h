/* SPDX-License-Identifier: MIT */
/* The PCIe path between two GPUs, from sysfs: ACS on the bridges between them, their IOMMU
 * groups, whether one PCIe switch holds both. */
#pragma once

#include "p2pguard/facts.h"

/*
 * Adds the PCIe facts (rules/README.md, "Fact keys": pcie_acs_redirect, pcie_acs_bridge,
 * pcie_acs_ctl, iommu_group, peer_iommu_group, iommu_group_shared, pcie_switch_shared) for the
 * devices with these PCI bus ids (as cuDeviceGetPCIBusId or NVML write them; "" when unknown).
 * A pair's facts are set only for two known, distinct devices. Never fails: what sysfs does not
 * show is "unknown" or left out.
 */
void p2pg_evidence_pcie_gather(const char *device_pci, const char *peer_pci,
			       struct p2pg_facts *facts);

/* Reads sysfs under root instead of /sys (tests: a fake tree). NULL restores /sys. Not
 * thread-safe: set it before any gathering. */
void p2pg_evidence_pcie_set_root(const char *root);
