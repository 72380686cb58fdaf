/* SPDX-License-Identifier: MIT */
/*
 * Evidence for a failing peer call. Process-wide facts (driver, IOMMU) are read once, device facts
 * once per device and pair facts once per (device, peer): what the hardware says does not change
 * while the process runs, and a program that fails once per step must not pay for NVML each time.
 * The call's own facts and the environment are added on every failure.
 */
#include "evidence.h"
#include "driver.h"
#include "evidence-pcie.h"
#include "evidence-private.h"
#include "nvml.h"

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------------- */
/* NVML's answers by name                                                                       */

/* nvmlGpuP2PCapsIndex_t: read, write, nvlink, atomics (the order of the facts below). */
#define NVML_P2P_CAPS_COUNT 4

/* NVML for the evidence, NULL when it is missing, does not start, or cannot find a device by its
 * PCI bus id: without a way to find our devices no NVML fact can be tied to them. */
static const struct p2pg_nvml *evidence_nvml(void)
{
	const struct p2pg_nvml *nvml = p2pg_nvml();
	return nvml && nvml->by_pci ? nvml : NULL;
}

static const char *nvml_p2p_status_name(int status)
{
	static const char *const names[] = {
	    "ok",
	    "chipset_not_supported",
	    "gpu_not_supported",
	    "ioh_topology_not_supported",
	    "disabled_by_regkey",
	    "not_supported",
	    "unknown",
	};
	return status >= 0 && status < (int)(sizeof(names) / sizeof(names[0])) ? names[status]
									       : "unknown";
}

static const char *nvml_topology_name(int level)
{
	return level == 0 ? "INTERNAL" : p2pg_nvml_level_name(level, "unknown");
}

static const char *nvml_virtualization_name(int mode)
{
	static const char *const names[] = {"none", "passthrough", "vgpu", "host_vgpu",
					    "host_vsga"};
	return mode >= 0 && mode < (int)(sizeof(names) / sizeof(names[0])) ? names[mode]
									   : "unknown";
}

/* ------------------------------------------------------------------------------------------- */
/* What is cached                                                                               */

struct process_evidence {
	bool driver_ok;
	int device_count;   /* -1 unknown */
	int driver_version; /* -1 unknown */
	bool sysfs_ok;
	bool iommu_present;
	char iommu_cmdline[P2PG_FACT_STR_MAX];
};

struct device_evidence {
	int ordinal;
	char name[P2PG_FACT_STR_MAX]; /* "" unknown */
	char pci[P2PG_FACT_STR_MAX];  /* "" unknown */
	nvml_device_t nvml;	      /* NULL when NVML does not know the device */
	int nvlinks_active;	      /* -1 unknown */
	const char *virtualization;   /* NULL unknown */
};

#define P2P_ATTRS 3

static const struct {
	const char *key;
	CUdevice_P2PAttribute attr;
} p2p_attrs[P2P_ATTRS] = {
    {"p2p_access_supported", CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED},
    {"p2p_native_atomic", CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED},
    {"p2p_performance_rank", CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK},
};

static const char *const nvml_p2p_keys[NVML_P2P_CAPS_COUNT] = {
    "nvml_p2p_read",
    "nvml_p2p_write",
    "nvml_p2p_nvlink",
    "nvml_p2p_atomics",
};

struct pair_evidence {
	int device, peer;
	int can_access; /* -1 unknown */
	bool has_attr[P2P_ATTRS];
	int attr[P2P_ATTRS];
	const char *nvml_p2p[NVML_P2P_CAPS_COUNT]; /* NULL unknown */
	const char *topology;			   /* NULL unknown */
};

/* Fixed tables: a process sees a handful of devices; past the end facts are computed each time
 * rather than cached, which is slower but still right. */
#define DEVICE_SLOTS 32
#define PAIR_SLOTS   64

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static bool process_cached;
static struct process_evidence process_cache;
static int ndevices;
static struct device_evidence device_cache[DEVICE_SLOTS];
static int npairs;
static struct pair_evidence pair_cache[PAIR_SLOTS];

/*
 * Called after fork, when the child has one thread, and by tests between gathers: never while
 * another thread gathers. The lock is set up anew because fork may have copied it held by a
 * thread the child does not have.
 */
void p2pg_evidence_reset(void)
{
	pthread_mutex_init(&cache_lock, NULL);
	process_cached = false;
	ndevices = 0;
	npairs = 0;
}

/* ------------------------------------------------------------------------------------------- */
/* Reading the sources (never with the lock held: driver and NVML calls can take a while)      */

static bool dir_has_entries(const char *path)
{
	DIR *dir = opendir(path);
	if (!dir)
		return false;
	bool found = false;
	struct dirent *entry;
	while (!found && (entry = readdir(dir)))
		found = strcmp(entry->d_name, ".") != 0 && strcmp(entry->d_name, "..") != 0;
	closedir(dir);
	return found;
}

void p2pg_evidence_iommu_params(char *cmdline, char *out, size_t len)
{
	static const char *const prefixes[] = {
	    "intel_iommu=", "amd_iommu=", "iommu=", "iommu.passthrough=", "pcie_acs_override=",
	};
	size_t pos = 0;
	if (len == 0)
		return;
	out[0] = '\0';
	char *save = NULL;
	for (char *tok = strtok_r(cmdline, " \t\n", &save); tok;
	     tok = strtok_r(NULL, " \t\n", &save)) {
		bool wanted = false;
		for (size_t k = 0; k < sizeof(prefixes) / sizeof(prefixes[0]); k++)
			wanted = wanted || strncmp(tok, prefixes[k], strlen(prefixes[k])) == 0;
		size_t n = strlen(tok);
		if (!wanted || pos + (pos ? 1 : 0) + n + 1 > len)
			continue;
		if (pos)
			out[pos++] = ' ';
		memcpy(out + pos, tok, n + 1);
		pos += n;
	}
}

/* The IOMMU-related kernel parameters; "unknown" when /proc/cmdline cannot be read. */
static void read_iommu_cmdline(char *out, size_t len)
{
	char cmdline[4096];
	size_t have = 0;
	int fd = open("/proc/cmdline", O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(out, len, "unknown");
		return;
	}
	ssize_t got;
	while (have < sizeof(cmdline) - 1 &&
	       (got = read(fd, cmdline + have, sizeof(cmdline) - 1 - have)) > 0)
		have += (size_t)got;
	close(fd);
	cmdline[have] = '\0';
	p2pg_evidence_iommu_params(cmdline, out, len);
}

static void process_compute(struct process_evidence *p)
{
	memset(p, 0, sizeof(*p));
	p->device_count = -1;
	p->driver_version = -1;
	/* The failing program initialised CUDA already; cuInit is then only a check. */
	p->driver_ok =
	    p2pg_driver_load() == 0 && p2pg_drv.cuInit && p2pg_drv.cuInit(0) == CUDA_SUCCESS;
	if (p->driver_ok) {
		int value;
		if (p2pg_drv.cuDeviceGetCount && p2pg_drv.cuDeviceGetCount(&value) == CUDA_SUCCESS)
			p->device_count = value;
		if (p2pg_drv.cuDriverGetVersion &&
		    p2pg_drv.cuDriverGetVersion(&value) == CUDA_SUCCESS)
			p->driver_version = value;
	}
	/* A kernel without IOMMU support has neither directory; only a missing /sys (some
	 * containers) leaves the question open. */
	p->sysfs_ok = access("/sys/kernel", F_OK) == 0;
	p->iommu_present =
	    dir_has_entries("/sys/class/iommu") || dir_has_entries("/sys/kernel/iommu_groups");
	read_iommu_cmdline(p->iommu_cmdline, sizeof(p->iommu_cmdline));
}

static bool cu_device(int ordinal, CUdevice *dev)
{
	return p2pg_drv.cuDeviceGet && p2pg_drv.cuDeviceGet(dev, ordinal) == CUDA_SUCCESS;
}

static void device_compute(int ordinal, struct device_evidence *d)
{
	memset(d, 0, sizeof(*d));
	d->ordinal = ordinal;
	d->nvlinks_active = -1;
	CUdevice dev;
	if (!cu_device(ordinal, &dev))
		return;
	if (p2pg_drv.cuDeviceGetName &&
	    p2pg_drv.cuDeviceGetName(d->name, sizeof(d->name), dev) != CUDA_SUCCESS)
		d->name[0] = '\0';
	if (p2pg_drv.cuDeviceGetPCIBusId &&
	    p2pg_drv.cuDeviceGetPCIBusId(d->pci, sizeof(d->pci), dev) != CUDA_SUCCESS)
		d->pci[0] = '\0';

	/* CUDA and NVML number devices differently (CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER): the
	 * PCI bus id is what both agree on. */
	const struct p2pg_nvml *nvml = evidence_nvml();
	if (!nvml || !d->pci[0] || nvml->by_pci(d->pci, &d->nvml) != NVML_SUCCESS) {
		d->nvml = NULL;
		return;
	}
	if (nvml->nvlink_state) {
		int active = 0;
		bool answered = false;
		for (unsigned int link = 0; link < NVML_NVLINK_MAX_LINKS; link++) {
			int state = 0;
			nvml_return_t r = nvml->nvlink_state(d->nvml, link, &state);
			/* Past the device's last link, or a device without NVLink. */
			if (r == NVML_ERROR_INVALID_ARGUMENT || r == NVML_ERROR_NOT_SUPPORTED) {
				answered = true;
				break;
			}
			if (r != NVML_SUCCESS)
				continue;
			answered = true;
			if (state == NVML_FEATURE_ENABLED)
				active++;
		}
		d->nvlinks_active = answered ? active : -1;
	}
	int mode;
	if (nvml->virtualization_mode && nvml->virtualization_mode(d->nvml, &mode) == NVML_SUCCESS)
		d->virtualization = nvml_virtualization_name(mode);
}

/* Only called for two distinct valid ordinals: the driver refuses the others. */
static void pair_compute(const struct device_evidence *a, const struct device_evidence *b,
			 struct pair_evidence *pe)
{
	memset(pe, 0, sizeof(*pe));
	pe->device = a->ordinal;
	pe->peer = b->ordinal;
	pe->can_access = -1;
	CUdevice dev, peer;
	if (cu_device(a->ordinal, &dev) && cu_device(b->ordinal, &peer)) {
		int value;
		if (p2pg_drv.cuDeviceCanAccessPeer &&
		    p2pg_drv.cuDeviceCanAccessPeer(&value, dev, peer) == CUDA_SUCCESS)
			pe->can_access = value ? 1 : 0;
		for (int k = 0; k < P2P_ATTRS && p2pg_drv.cuDeviceGetP2PAttribute; k++)
			if (p2pg_drv.cuDeviceGetP2PAttribute(&value, p2p_attrs[k].attr, dev,
							     peer) == CUDA_SUCCESS) {
				pe->has_attr[k] = true;
				pe->attr[k] = value;
			}
	}
	const struct p2pg_nvml *nvml = evidence_nvml();
	if (!nvml || !a->nvml || !b->nvml)
		return;
	for (int caps = 0; caps < NVML_P2P_CAPS_COUNT && nvml->p2p_status; caps++) {
		int status;
		pe->nvml_p2p[caps] =
		    nvml->p2p_status(a->nvml, b->nvml, caps, &status) == NVML_SUCCESS
			? nvml_p2p_status_name(status)
			: "unknown";
	}
	int level;
	if (nvml->common_ancestor &&
	    nvml->common_ancestor(a->nvml, b->nvml, &level) == NVML_SUCCESS)
		pe->topology = nvml_topology_name(level);
}

/* ------------------------------------------------------------------------------------------- */
/* Cached lookups: look under the lock, compute outside it, store under it                      */

static void process_get(struct process_evidence *out)
{
	pthread_mutex_lock(&cache_lock);
	bool cached = process_cached;
	if (cached)
		*out = process_cache;
	pthread_mutex_unlock(&cache_lock);
	if (cached)
		return;
	process_compute(out);
	pthread_mutex_lock(&cache_lock);
	if (!process_cached) {
		process_cache = *out;
		process_cached = true;
	}
	pthread_mutex_unlock(&cache_lock);
}

static void device_get(int ordinal, struct device_evidence *out)
{
	bool cached = false;
	pthread_mutex_lock(&cache_lock);
	for (int k = 0; k < ndevices && !cached; k++)
		if (device_cache[k].ordinal == ordinal) {
			*out = device_cache[k];
			cached = true;
		}
	pthread_mutex_unlock(&cache_lock);
	if (cached)
		return;
	device_compute(ordinal, out);
	pthread_mutex_lock(&cache_lock);
	bool present = false;
	for (int k = 0; k < ndevices && !present; k++)
		present = device_cache[k].ordinal == ordinal;
	if (!present && ndevices < DEVICE_SLOTS)
		device_cache[ndevices++] = *out;
	pthread_mutex_unlock(&cache_lock);
}

static void pair_get(const struct device_evidence *a, const struct device_evidence *b,
		     struct pair_evidence *out)
{
	bool cached = false;
	pthread_mutex_lock(&cache_lock);
	for (int k = 0; k < npairs && !cached; k++)
		if (pair_cache[k].device == a->ordinal && pair_cache[k].peer == b->ordinal) {
			*out = pair_cache[k];
			cached = true;
		}
	pthread_mutex_unlock(&cache_lock);
	if (cached)
		return;
	pair_compute(a, b, out);
	pthread_mutex_lock(&cache_lock);
	bool present = false;
	for (int k = 0; k < npairs && !present; k++)
		present = pair_cache[k].device == a->ordinal && pair_cache[k].peer == b->ordinal;
	if (!present && npairs < PAIR_SLOTS)
		pair_cache[npairs++] = *out;
	pthread_mutex_unlock(&cache_lock);
}

/* ------------------------------------------------------------------------------------------- */
/* Facts                                                                                        */

static void set_env(struct p2pg_facts *facts, const char *key, const char *variable)
{
	const char *value = getenv(variable);
	if (value)
		p2pg_facts_set_str(facts, key, value);
}

static void set_device(struct p2pg_facts *facts, const struct device_evidence *d,
		       const char *name_key, const char *pci_key)
{
	if (d->name[0])
		p2pg_facts_set_str(facts, name_key, d->name);
	if (d->pci[0])
		p2pg_facts_set_str(facts, pci_key, d->pci);
}

/* The version of the libcudart the process loaded, if any; a statically linked runtime has no
 * symbol to find and the fact is then left out. */
static void set_runtime_version(struct p2pg_facts *facts)
{
	int (*get_version)(int *);
	*(void **)&get_version = p2pg_real_dlsym(RTLD_DEFAULT, "cudaRuntimeGetVersion");
	int version;
	if (get_version && get_version(&version) == 0)
		p2pg_facts_set_int(facts, "runtime_version", version);
}

void p2pg_evidence_gather(const struct p2pg_failure_context *ctx, struct p2pg_facts *facts)
{
	if (!facts)
		return;
	static const struct p2pg_failure_context unknown = {
	    .api = "unknown", .device = -1, .peer_device = -1, .peer_access_enabled = -1};
	if (!ctx)
		ctx = &unknown;
	bool nvml_ok = evidence_nvml() != NULL;

	/* The call itself. */
	p2pg_facts_set_str(facts, "api", ctx->api ? ctx->api : "unknown");
	p2pg_facts_set_int(facts, "status", ctx->status);
	p2pg_facts_set_int(facts, "device", ctx->device);
	p2pg_facts_set_int(facts, "peer_device", ctx->peer_device);
	p2pg_facts_set_bool(facts, "peer_is_self",
			    ctx->device >= 0 && ctx->device == ctx->peer_device);
	p2pg_facts_set_int(facts, "flags", (long long)ctx->flags);
	p2pg_facts_set_int(facts, "peers_enabled", ctx->peers_enabled);
	if (ctx->peer_access_enabled >= 0)
		p2pg_facts_set_bool(facts, "peer_access_enabled", ctx->peer_access_enabled != 0);

	/* The process. */
	struct process_evidence proc;
	process_get(&proc);
	p2pg_facts_set_str(facts, "driver", proc.driver_ok ? "ok" : "unavailable");
	if (proc.device_count >= 0)
		p2pg_facts_set_int(facts, "device_count", proc.device_count);
	if (proc.driver_version >= 0)
		p2pg_facts_set_int(facts, "driver_version", proc.driver_version);
	set_runtime_version(facts);

	/* The devices. -1 means "not known" (a copy whose peer was not worked out): such an
	 * ordinal neither makes the pair invalid nor gets asked about. Any other value outside
	 * [0, device_count) is a bad ordinal. */
	bool device_valid = false, peer_valid = false;
	if (proc.device_count >= 0) {
		device_valid = ctx->device >= 0 && ctx->device < proc.device_count;
		peer_valid = ctx->peer_device >= 0 && ctx->peer_device < proc.device_count;
		if (ctx->device != -1 || ctx->peer_device != -1)
			p2pg_facts_set_bool(facts, "ordinal_valid",
					    (ctx->device == -1 || device_valid) &&
						(ctx->peer_device == -1 || peer_valid));
	}
	struct device_evidence dev = {.ordinal = -1, .nvlinks_active = -1};
	struct device_evidence peer = {.ordinal = -1, .nvlinks_active = -1};
	if (proc.driver_ok && device_valid) {
		device_get(ctx->device, &dev);
		set_device(facts, &dev, "device_name", "device_pci");
	}
	if (proc.driver_ok && peer_valid) {
		device_get(ctx->peer_device, &peer);
		set_device(facts, &peer, "peer_name", "peer_pci");
	}

	/* The pair. */
	struct pair_evidence pair = {.can_access = -1};
	bool distinct = device_valid && peer_valid && ctx->device != ctx->peer_device;
	if (proc.driver_ok && distinct)
		pair_get(&dev, &peer, &pair);
	p2pg_facts_set_int(facts, "can_access_peer", pair.can_access);
	for (int k = 0; k < P2P_ATTRS; k++)
		if (pair.has_attr[k])
			p2pg_facts_set_int(facts, p2p_attrs[k].key, pair.attr[k]);

	/* NVML: once it answers at all, every question gets an answer, "unknown" included. */
	p2pg_facts_set_str(facts, "nvml", nvml_ok ? "ok" : "unavailable");
	if (nvml_ok) {
		for (int caps = 0; caps < NVML_P2P_CAPS_COUNT; caps++)
			p2pg_facts_set_str(facts, nvml_p2p_keys[caps],
					   pair.nvml_p2p[caps] ? pair.nvml_p2p[caps] : "unknown");
		p2pg_facts_set_str(facts, "topology", pair.topology ? pair.topology : "unknown");
		if (dev.nvlinks_active >= 0)
			p2pg_facts_set_int(facts, "nvlinks_active", dev.nvlinks_active);
		p2pg_facts_set_str(facts, "virtualization",
				   dev.virtualization ? dev.virtualization : "unknown");
	}

	/* The host. */
	if (proc.sysfs_ok)
		p2pg_facts_set_bool(facts, "iommu_present", proc.iommu_present);
	else
		p2pg_facts_set_str(facts, "sysfs", "unavailable");
	p2pg_facts_set_str(facts, "iommu_cmdline", proc.iommu_cmdline);
	p2pg_evidence_pcie_gather(dev.pci, distinct ? peer.pci : "", facts);

	/* The environment, read on each failure: a launcher may set it per process. */
	set_env(facts, "nccl_p2p_disable", "NCCL_P2P_DISABLE");
	set_env(facts, "nccl_p2p_level", "NCCL_P2P_LEVEL");
	set_env(facts, "cuda_visible_devices", "CUDA_VISIBLE_DEVICES");
	p2pg_evidence_process(ctx, facts);
}
