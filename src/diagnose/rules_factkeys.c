/* SPDX-License-Identifier: MIT */
/* The fact keys a rule may test: the contract with the evidence gatherer (rules/README.md, "Fact
 * keys"). */
#include <string.h>

#include "rules-loader.h"

static const char *const available_values[] = {"ok", "unavailable", NULL};
static const char *const nvml_p2p_values[] = {"ok",
					      "chipset_not_supported",
					      "gpu_not_supported",
					      "ioh_topology_not_supported",
					      "disabled_by_regkey",
					      "not_supported",
					      "unknown",
					      NULL};
static const char *const topology_values[] = {"INTERNAL", "PIX", "PXB",	    "PHB",
					      "NODE",	  "SYS", "unknown", NULL};
static const char *const virtualization_values[] = {"none",	 "passthrough", "vgpu", "host_vgpu",
						    "host_vsga", "unknown",	NULL};
static const char *const mode_values[] = {"observe", "fallback", "staged", NULL};
static const char *const probe_values[] = {"ok", "wrong_data", "slow", "hang", NULL};
static const char *const nccl_peer_values[] = {"waiting",   "ahead", "unknown",
					       "elsewhere", "gone",  NULL};
static const char *const acs_redirect_values[] = {"yes", "no", "unknown", NULL};
static const char *const handle_type_values[] = {"ipc", "posix_fd", "fabric", "other", NULL};

static const struct fact_key fact_keys[] = {
    {"api", KIND_STR, NULL},
    {"status", KIND_INT, NULL},
    {"device", KIND_INT, NULL},
    {"peer_device", KIND_INT, NULL},
    {"peer_is_self", KIND_BOOL, NULL},
    {"device_count", KIND_INT, NULL},
    {"ordinal_valid", KIND_BOOL, NULL},
    {"device_name", KIND_STR, NULL},
    {"peer_name", KIND_STR, NULL},
    {"device_pci", KIND_STR, NULL},
    {"peer_pci", KIND_STR, NULL},
    {"can_access_peer", KIND_INT, NULL},
    {"p2p_access_supported", KIND_INT, NULL},
    {"p2p_native_atomic", KIND_INT, NULL},
    {"p2p_performance_rank", KIND_INT, NULL},
    {"nvml", KIND_STR, available_values},
    {"nvml_p2p_read", KIND_STR, nvml_p2p_values},
    {"nvml_p2p_write", KIND_STR, nvml_p2p_values},
    {"nvml_p2p_nvlink", KIND_STR, nvml_p2p_values},
    {"nvml_p2p_atomics", KIND_STR, nvml_p2p_values},
    {"topology", KIND_STR, topology_values},
    {"nvlinks_active", KIND_INT, NULL},
    {"virtualization", KIND_STR, virtualization_values},
    {"iommu_present", KIND_BOOL, NULL},
    {"iommu_cmdline", KIND_STR, NULL},
    {"sysfs", KIND_STR, available_values},
    {"peers_enabled", KIND_INT, NULL},
    {"peer_access_enabled", KIND_BOOL, NULL},
    {"flags", KIND_INT, NULL},
    {"nccl_p2p_disable", KIND_STR, NULL},
    {"nccl_p2p_level", KIND_STR, NULL},
    {"cuda_visible_devices", KIND_STR, NULL},
    {"driver", KIND_STR, available_values},
    {"driver_version", KIND_INT, NULL},
    {"runtime_version", KIND_INT, NULL},
    {"mode", KIND_STR, mode_values},
    {"p2p_probe", KIND_STR, probe_values},
    /* NCCL: an operation whose kernel never finishes (the drainer's watch, record/nccl_watch.c) */
    {"nccl_op", KIND_STR, NULL},
    {"nccl_peer_state", KIND_STR, nccl_peer_values},
    /* The PCIe path between the two GPUs (evidence_pcie.c): ACS, IOMMU groups, a shared switch. */
    {"pcie_acs_redirect", KIND_STR, acs_redirect_values},
    {"pcie_acs_bridge", KIND_STR, NULL},
    {"pcie_acs_ctl", KIND_STR, NULL},
    {"iommu_group", KIND_INT, NULL},
    {"peer_iommu_group", KIND_INT, NULL},
    {"iommu_group_shared", KIND_BOOL, NULL},
    {"pcie_switch_shared", KIND_BOOL, NULL},
    /* cross-process and VMM mappings (evidence_process.c) */
    {"mapping_handle_type", KIND_STR, handle_type_values},
    {"import_fd_open", KIND_BOOL, NULL},
    {"import_fd_target", KIND_STR, NULL},
    {"allocation_handle_types", KIND_INT, NULL},
    {"mapped_peer_devices", KIND_INT, NULL},
    {"peers_unreachable", KIND_INT, NULL},
    {"pid", KIND_INT, NULL},
    {"pid_namespace", KIND_STR, NULL},
    {"pid_namespace_initial", KIND_BOOL, NULL},
    {"ipc_namespace_initial", KIND_BOOL, NULL},
    {"mount_namespace", KIND_STR, NULL},
    {"cgroup", KIND_STR, NULL},
    {"container", KIND_BOOL, NULL},
    {"ptrace_scope", KIND_INT, NULL},
    {"cap_sys_ptrace", KIND_BOOL, NULL},
    {"dev_shm_bytes", KIND_INT, NULL},
};

#define N_FACT_KEYS (sizeof(fact_keys) / sizeof(fact_keys[0]))

const char *p2pg_rules_fact_key(size_t index)
{
	return index < N_FACT_KEYS ? fact_keys[index].name : NULL;
}

const struct fact_key *rules_fact_key_lookup(const char *name)
{
	for (size_t k = 0; k < N_FACT_KEYS; k++)
		if (strcmp(fact_keys[k].name, name) == 0)
			return &fact_keys[k];
	return NULL;
}

const char *rules_kind_name(enum kind kind)
{
	switch (kind) {
	case KIND_BOOL:
		return "a boolean";
	case KIND_INT:
		return "an integer";
	case KIND_STR:
		return "a string";
	}
	return "a value";
}
