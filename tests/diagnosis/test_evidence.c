/* SPDX-License-Identifier: MIT */
/*
 * Evidence gathered against the simulated driver (two devices, P2P between them unless
 * SIMCUDA_P2P says otherwise).
 *
 *   test-evidence --nvml=absent    no usable NVML expected when none can be loaded here; an extra
 *                                  argument names a fake libcudart to load afterwards
 *   test-evidence --nvml=fake      the fake NVML of tests/diagnosis/fakenvml
 *   test-evidence --nvml=failing   an NVML whose nvmlInit fails
 *   test-evidence --no-driver      no libcuda on the library path (checked only when none loads)
 *   test-evidence --json           prints the facts of a (0,1) failure as JSON, nothing else
 */
#include "driver.h"
#include "evidence-private.h"
#include "evidence.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int failures;
/* Devices of the simulated driver: SIMCUDA_DEVICES, 2 by default. */
static int ndev = 2;

static void check(bool ok, const char *what)
{
	printf("%s - %s\n", ok ? "ok" : "not ok", what);
	if (!ok)
		failures++;
}

static void dump(const struct p2pg_facts *facts)
{
	char json[16384];
	if (p2pg_facts_to_json(facts, json, sizeof(json)) >= 0)
		printf("# %s\n", json);
}

static void gather(struct p2pg_facts *facts, const char *api, int status, int device, int peer)
{
	struct p2pg_failure_context ctx = {
	    .api = api,
	    .status = status,
	    .device = device,
	    .peer_device = peer,
	    .flags = 0,
	    .peers_enabled = 0,
	    .peer_access_enabled = -1,
	};
	memset(facts, 0, sizeof(*facts));
	p2pg_evidence_gather(&ctx, facts);
}

static bool is_str(const struct p2pg_facts *facts, const char *key, const char *value)
{
	const struct p2pg_fact *f = p2pg_facts_get(facts, key);
	return f && f->type == P2PG_FACT_STR && strcmp(f->s, value) == 0;
}

static bool is_int(const struct p2pg_facts *facts, const char *key, long long value)
{
	const struct p2pg_fact *f = p2pg_facts_get(facts, key);
	return f && f->type == P2PG_FACT_INT && f->i == value;
}

static bool is_bool(const struct p2pg_facts *facts, const char *key, bool value)
{
	const struct p2pg_fact *f = p2pg_facts_get(facts, key);
	return f && f->type == P2PG_FACT_BOOL && f->i == (value ? 1 : 0);
}

static bool absent(const struct p2pg_facts *facts, const char *key)
{
	return p2pg_facts_get(facts, key) == NULL;
}

static bool library_loads(const char *name)
{
	void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	return lib != NULL;
}

static void test_self_pair(void)
{
	struct p2pg_facts f;
	gather(&f, "cudaDeviceEnablePeerAccess", 217, 0, 0);
	dump(&f);
	check(is_str(&f, "api", "cudaDeviceEnablePeerAccess") && is_int(&f, "status", 217) &&
		  is_int(&f, "device", 0) && is_int(&f, "peer_device", 0) &&
		  is_int(&f, "flags", 0) && is_int(&f, "peers_enabled", 0) &&
		  absent(&f, "peer_access_enabled"),
	      "(0,0): the call's own facts");
	check(is_bool(&f, "peer_is_self", true), "(0,0): peer_is_self");
	check(is_str(&f, "driver", "ok") && is_int(&f, "device_count", ndev) &&
		  is_int(&f, "driver_version", 13000),
	      "(0,0): driver, device count and version");
	check(is_bool(&f, "ordinal_valid", true), "(0,0): ordinals valid");
	check(is_str(&f, "device_name", "SimCUDA H200 sim #0") &&
		  is_str(&f, "device_pci", "0000:10:00.0") &&
		  is_str(&f, "peer_name", "SimCUDA H200 sim #0"),
	      "(0,0): names and PCI ids");
	check(is_int(&f, "can_access_peer", -1) && absent(&f, "p2p_access_supported") &&
		  absent(&f, "p2p_native_atomic") && absent(&f, "p2p_performance_rank"),
	      "(0,0): the driver is not asked about a device and itself");
	check(p2pg_facts_get(&f, "iommu_cmdline") != NULL, "(0,0): iommu_cmdline present");
	check(p2pg_facts_get(&f, "iommu_present") || is_str(&f, "sysfs", "unavailable"),
	      "(0,0): iommu_present, or why not");
	check(absent(&f, "runtime_version"), "no libcudart loaded: no runtime_version");
}

static void test_pair(void)
{
	struct p2pg_facts f;
	gather(&f, "cudaMemcpyPeerAsync", 1, 0, 1);
	dump(&f);
	check(is_bool(&f, "peer_is_self", false) && is_bool(&f, "ordinal_valid", true),
	      "(0,1): distinct valid ordinals");
	check(is_str(&f, "device_name", "SimCUDA H200 sim #0") &&
		  is_str(&f, "peer_name", "SimCUDA H200 sim #1") &&
		  is_str(&f, "device_pci", "0000:10:00.0") &&
		  is_str(&f, "peer_pci", "0000:11:00.0"),
	      "(0,1): names and PCI ids of both");
	check(is_int(&f, "can_access_peer", 1), "(0,1): can_access_peer 1");
	check(is_int(&f, "p2p_access_supported", 1) && is_int(&f, "p2p_native_atomic", 1) &&
		  is_int(&f, "p2p_performance_rank", 0),
	      "(0,1): P2P attributes");
}

static void test_bad_ordinal(void)
{
	struct p2pg_facts f;
	gather(&f, "cudaDeviceEnablePeerAccess", 101, 0, 7);
	dump(&f);
	check(is_bool(&f, "ordinal_valid", false), "(0,7): ordinal_valid false");
	check(is_bool(&f, "peer_is_self", false) &&
		  is_str(&f, "device_name", "SimCUDA H200 sim #0") && absent(&f, "peer_name") &&
		  absent(&f, "peer_pci") && is_int(&f, "can_access_peer", -1),
	      "(0,7): the valid side described, the other not asked about");

	gather(&f, "cudaMemcpyPeer", 1, -1, -1);
	check(absent(&f, "ordinal_valid") && is_bool(&f, "peer_is_self", false) &&
		  absent(&f, "device_name"),
	      "(-1,-1): unknown ordinals are neither valid nor invalid");
	gather(&f, "cudaMemcpyPeer", 1, 1, -1);
	check(is_bool(&f, "ordinal_valid", true) &&
		  is_str(&f, "device_name", "SimCUDA H200 sim #1"),
	      "(1,-1): the known ordinal decides");
	gather(&f, "cudaMemcpyPeer", 1, -5, 0);
	check(is_bool(&f, "ordinal_valid", false), "(-5,0): a negative ordinal is invalid");

	p2pg_evidence_gather(NULL, &f);
	p2pg_evidence_gather(NULL, NULL);
	check(true, "NULL context and facts: no crash");
}

static void test_call_facts(void)
{
	struct p2pg_facts f;
	struct p2pg_failure_context ctx = {
	    .api = "cuCtxEnablePeerAccess",
	    .status = 711,
	    .device = 1,
	    .peer_device = 0,
	    .flags = 0x10,
	    .peers_enabled = 8,
	    .peer_access_enabled = 0,
	};
	memset(&f, 0, sizeof(f));
	p2pg_evidence_gather(&ctx, &f);
	check(is_int(&f, "status", 711) && is_int(&f, "flags", 16) &&
		  is_int(&f, "peers_enabled", 8) && is_bool(&f, "peer_access_enabled", false),
	      "the call's flags, peer count and peer access");

	/* The environment is read on every failure. */
	const char *disable = getenv("NCCL_P2P_DISABLE");
	check(disable && is_str(&f, "nccl_p2p_disable", disable),
	      "NCCL_P2P_DISABLE from the test's environment");
	setenv("NCCL_P2P_LEVEL", "PHB", 1);
	setenv("CUDA_VISIBLE_DEVICES", "1,0", 1);
	unsetenv("NCCL_P2P_DISABLE");
	p2pg_evidence_gather(&ctx, &f);
	memset(&f, 0, sizeof(f));
	p2pg_evidence_gather(&ctx, &f);
	check(is_str(&f, "nccl_p2p_level", "PHB") && is_str(&f, "cuda_visible_devices", "1,0") &&
		  absent(&f, "nccl_p2p_disable"),
	      "environment read on each failure; unset variables absent");
	unsetenv("NCCL_P2P_LEVEL");
	unsetenv("CUDA_VISIBLE_DEVICES");
	if (disable)
		setenv("NCCL_P2P_DISABLE", disable, 1);
	check(f.n < P2PG_FACTS_MAX, "room to spare in the fact table");
}

static void test_nvml(const char *expect)
{
	struct p2pg_facts f;
	if (strcmp(expect, "absent") == 0 || strcmp(expect, "failing") == 0) {
		gather(&f, "cudaDeviceEnablePeerAccess", 217, 0, 1);
		if (strcmp(expect, "absent") == 0 && library_loads("libnvidia-ml.so.1")) {
			check(is_str(&f, "nvml", "ok") || is_str(&f, "nvml", "unavailable"),
			      "an NVML is installed here: nvml ok or unavailable");
			return;
		}
		check(is_str(&f, "nvml", "unavailable") && absent(&f, "nvml_p2p_read") &&
			  absent(&f, "topology") && absent(&f, "nvlinks_active") &&
			  absent(&f, "virtualization"),
		      "no usable NVML: nvml unavailable, no NVML facts");
		return;
	}

	gather(&f, "cudaDeviceEnablePeerAccess", 217, 0, 1);
	dump(&f);
	check(is_str(&f, "nvml", "ok"), "fake NVML: nvml ok");
	check(is_str(&f, "nvml_p2p_read", "ok") &&
		  is_str(&f, "nvml_p2p_write", "chipset_not_supported") &&
		  is_str(&f, "nvml_p2p_nvlink", "ok") &&
		  is_str(&f, "nvml_p2p_atomics", "disabled_by_regkey"),
	      "fake NVML: each P2P status by its own name");
	check(is_str(&f, "topology", "NODE"), "fake NVML: topology NODE");
	check(is_int(&f, "nvlinks_active", 4), "fake NVML: 4 of 6 links active");
	check(is_str(&f, "virtualization", "passthrough"), "fake NVML: passthrough");

	gather(&f, "cudaDeviceEnablePeerAccess", 217, 1, 0);
	check(is_int(&f, "nvlinks_active", 0) && is_str(&f, "virtualization", "none"),
	      "fake NVML: a device without NVLink has 0 active links");

	gather(&f, "cudaDeviceEnablePeerAccess", 217, 0, 0);
	check(is_str(&f, "nvml_p2p_read", "unknown") && is_str(&f, "topology", "unknown") &&
		  is_int(&f, "nvlinks_active", 4),
	      "fake NVML: no pair questions for a device and itself");

	/* A third simulated device, which NVML does not know. */
	if (ndev < 3)
		return;
	gather(&f, "cudaDeviceEnablePeerAccess", 217, 2, 0);
	check(is_str(&f, "device_pci", "0000:12:00.0") && is_str(&f, "nvml_p2p_read", "unknown") &&
		  is_str(&f, "virtualization", "unknown") && absent(&f, "nvlinks_active"),
	      "fake NVML: a device NVML cannot find is unknown");
}

static void test_iommu_params(void)
{
	char cmdline[] = "BOOT_IMAGE=/vmlinuz root=/dev/sda1 intel_iommu=on iommu=pt quiet "
			 "pcie_acs_override=downstream,multifunction noiommu=1 amd_iommu=off\n"
			 "iommu.passthrough=1";
	char out[128];
	p2pg_evidence_iommu_params(cmdline, out, sizeof(out));
	check(strcmp(out, "intel_iommu=on iommu=pt pcie_acs_override=downstream,multifunction "
			  "amd_iommu=off iommu.passthrough=1") == 0,
	      "IOMMU kernel parameters picked from the command line");

	char none[] = "quiet splash";
	p2pg_evidence_iommu_params(none, out, sizeof(out));
	check(strcmp(out, "") == 0, "no IOMMU parameters: empty");

	char many[] = "iommu=pt intel_iommu=on,sm_on,igfx_off,strict";
	p2pg_evidence_iommu_params(many, out, 20);
	check(strcmp(out, "iommu=pt") == 0, "only whole parameters when they do not all fit");
}

static void test_runtime_version(const char *path)
{
	if (!dlopen(path, RTLD_NOW | RTLD_GLOBAL)) {
		check(false, "load the fake libcudart");
		return;
	}
	struct p2pg_facts f;
	gather(&f, "cudaDeviceEnablePeerAccess", 217, 0, 1);
	check(is_int(&f, "runtime_version", 12080), "a loaded libcudart's version");
}

/* ---- cache ---- */

struct worker {
	int id;
	bool ok;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	w->ok = true;
	for (int k = 0; k < 200; k++) {
		int device = (w->id + k) % 3, peer = k % 2;
		struct p2pg_facts f;
		gather(&f, "cudaMemcpyPeerAsync", 1, device, peer);
		bool valid = device < ndev;
		bool distinct = valid && device != peer;
		if (!is_bool(&f, "ordinal_valid", valid) ||
		    !is_int(&f, "can_access_peer", distinct ? 1 : -1))
			w->ok = false;
	}
	return NULL;
}

static void test_cache(void)
{
	struct p2pg_facts first, again;
	gather(&first, "cudaMemcpyPeerAsync", 1, 1, 0);
	gather(&again, "cudaMemcpyPeerAsync", 1, 1, 0);
	char a[16384], b[16384];
	p2pg_facts_to_json(&first, a, sizeof(a));
	p2pg_facts_to_json(&again, b, sizeof(b));
	check(strcmp(a, b) == 0, "a cached pair gives the same facts");

	p2pg_evidence_reset();
	gather(&again, "cudaMemcpyPeerAsync", 1, 1, 0);
	p2pg_facts_to_json(&again, b, sizeof(b));
	check(strcmp(a, b) == 0, "after a reset the facts are gathered again, the same");

	struct worker workers[8];
	pthread_t threads[8];
	p2pg_evidence_reset();
	for (int k = 0; k < 8; k++) {
		workers[k].id = k;
		pthread_create(&threads[k], NULL, worker_main, &workers[k]);
	}
	bool ok = true;
	for (int k = 0; k < 8; k++) {
		pthread_join(threads[k], NULL);
		ok = ok && workers[k].ok;
	}
	check(ok, "8 threads gathering at once agree");

	/* More pairs than the cache holds still give right answers. */
	bool all = true;
	for (int device = 0; device < 12; device++)
		for (int peer = 0; peer < 12; peer++) {
			struct p2pg_facts f;
			gather(&f, "cudaMemcpyPeer", 1, device, peer);
			bool valid = device < ndev && peer < ndev;
			all = all && is_bool(&f, "ordinal_valid", valid);
		}
	check(all, "past the cache's size: still right");

	/* After fork the child resets and gathers on its own: a driver initialised in the parent
	 * refuses a forked child (the real one and the simulated one alike), and the child must say
	 * so rather than repeat the parent's cached facts. */
	pid_t pid = fork();
	if (pid == 0) {
		p2pg_evidence_reset();
		struct p2pg_facts f;
		gather(&f, "cudaMemcpyPeer", 1, 0, 1);
		_exit(is_str(&f, "driver", "unavailable") && absent(&f, "device_name") &&
			      is_int(&f, "can_access_peer", -1)
			  ? 0
			  : 1);
	}
	int status = 0;
	waitpid(pid, &status, 0);
	check(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "forked child: fresh facts, driver unavailable");
}

static void test_no_driver(void)
{
	struct p2pg_facts f;
	gather(&f, "cudaDeviceEnablePeerAccess", 217, 0, 1);
	dump(&f);
	if (p2pg_driver_load() == 0) {
		check(p2pg_facts_get(&f, "driver") != NULL, "a driver is installed here: no check");
		return;
	}
	check(is_str(&f, "driver", "unavailable") && absent(&f, "device_count") &&
		  absent(&f, "driver_version") && absent(&f, "ordinal_valid") &&
		  absent(&f, "device_name") && is_int(&f, "can_access_peer", -1),
	      "no driver: driver unavailable, no driver facts");
	check(is_str(&f, "api", "cudaDeviceEnablePeerAccess") &&
		  is_bool(&f, "peer_is_self", false) && p2pg_facts_get(&f, "nvml") &&
		  p2pg_facts_get(&f, "iommu_cmdline"),
	      "no driver: the other facts still there");
}

/* Facts read from the system go into JSON that strict readers parse: bytes that are not UTF-8
 * (a Latin-1 device name, a sequence cut by the fact's size) become U+FFFD; UTF-8 stays as is. */
static void test_facts_utf8(void)
{
	struct p2pg_facts f;
	memset(&f, 0, sizeof(f));
	p2pg_facts_set_str(&f, "latin1", "caf\xe9 GPU");
	p2pg_facts_set_str(&f, "utf8", "caf\xc3\xa9 \xe2\x80\x94 GPU");
	p2pg_facts_set_str(&f, "cut", "ab\xe2\x80");
	p2pg_facts_set_str(&f, "surrogate", "\xed\xa0\x80x");
	char json[1024];
	check(p2pg_facts_to_json(&f, json, sizeof(json)) > 0, "the facts fit");
	check(strcmp(
		  json,
		  "{\"latin1\":\"caf\\ufffd GPU\",\"utf8\":\"caf\xc3\xa9 \xe2\x80\x94 "
		  "GPU\",\"cut\":\"ab\\ufffd\\ufffd\",\"surrogate\":\"\\ufffd\\ufffd\\ufffdx\"}") ==
		  0,
	      "a byte that begins no well-formed UTF-8 sequence is \\ufffd, UTF-8 is kept");
	if (strstr(json, "\\ufffd") == NULL)
		printf("# %s\n", json);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "--nvml=absent";
	if (getenv("SIMCUDA_DEVICES"))
		ndev = atoi(getenv("SIMCUDA_DEVICES"));
	if (strcmp(mode, "--json") == 0) {
		struct p2pg_facts f;
		gather(&f, "cudaDeviceEnablePeerAccess", 217, 0, 1);
		char json[16384];
		if (p2pg_facts_to_json(&f, json, sizeof(json)) < 0)
			return 1;
		printf("%s\n", json);
		return 0;
	}
	if (strcmp(mode, "--no-driver") == 0) {
		test_no_driver();
	} else if (strncmp(mode, "--nvml=", 7) == 0) {
		test_self_pair();
		test_pair();
		test_bad_ordinal();
		test_call_facts();
		test_nvml(mode + 7);
		test_iommu_params();
		test_cache();
		test_facts_utf8();
		if (argc > 2)
			test_runtime_version(argv[2]);
	} else {
		fprintf(stderr,
			"usage: test-evidence --nvml=absent|fake|failing | --no-driver | --json\n");
		return 2;
	}
	printf("%d failure(s)\n", failures);
	return failures ? 1 : 0;
}
