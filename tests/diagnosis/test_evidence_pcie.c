/* SPDX-License-Identifier: MIT */
/*
 * The PCIe evidence (src/diagnose/evidence_pcie.c) over fake sysfs trees built here the way the
 * kernel lays them out: /sys/devices/pci0000:17/<root port>/<switch up>/<switch down>/<GPU>, each
 * function with its `config` (ACS in the extended space, or the 64 bytes an unprivileged reader
 * gets) and `iommu_group` link, and /sys/bus/pci/devices/<bus id> linking to it. Then through
 * p2pg_evidence_gather against the simulated driver (its GPUs are 0000:10:00.0 and 0000:11:00.0)
 * and into the diagnosis: the wrong-data and hang rules' notes name the redirecting bridge.
 */
#include "evidence-pcie.h"
#include "evidence.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "p2pguard/rules.h"

static int failures;
static char base[256]; /* this run's folder; each case a tree under it */
static char root[512]; /* the current tree: what the evidence code reads instead of /sys */
static int trees;

static void check(bool ok, const char *what)
{
	printf("%s - %s\n", ok ? "ok" : "not ok", what);
	if (!ok)
		failures++;
}

static void must(bool ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "test-evidence-pcie: %s: %s\n", what, strerror(errno));
		exit(2);
	}
}

static void mkdirs(const char *path)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s", path);
	for (char *s = p + 1; *s; s++)
		if (*s == '/') {
			*s = '\0';
			must(mkdir(p, 0755) == 0 || errno == EEXIST, p);
			*s = '/';
		}
	must(mkdir(p, 0755) == 0 || errno == EEXIST, p);
}

static void new_tree(void)
{
	snprintf(root, sizeof(root), "%s/sys%d", base, ++trees);
	mkdirs(root);
	p2pg_evidence_pcie_set_root(root);
}

/* A device at `where` ("pci0000:17/0000:17:00.0/.../0000:1b:00.0"), linked from bus/pci/devices
 * as the kernel links it (relatively), in IOMMU group `group` (-1: none). */
static void add_device(const char *where, int group)
{
	char dir[PATH_MAX / 2], link[PATH_MAX], target[PATH_MAX];
	const char *bdf = strrchr(where, '/') + 1;

	snprintf(dir, sizeof(dir), "%s/devices/%s", root, where);
	mkdirs(dir);
	snprintf(link, sizeof(link), "%s/bus/pci/devices", root);
	mkdirs(link);
	snprintf(link, sizeof(link), "%s/bus/pci/devices/%s", root, bdf);
	snprintf(target, sizeof(target), "../../../devices/%s", where);
	must(symlink(target, link) == 0, link);
	if (group >= 0) {
		snprintf(target, sizeof(target), "%s/kernel/iommu_groups/%d", root, group);
		mkdirs(target);
		snprintf(link, sizeof(link), "%s/iommu_group", dir);
		must(symlink(target, link) == 0, link);
	}
}

enum config_kind {
	ACS,	      /* 4096 bytes, an AER capability first, then ACS with the control given */
	NO_ACS,	      /* 4096 bytes, extended capabilities without ACS */
	UNPRIVILEGED, /* the 64 bytes sysfs gives a reader without CAP_SYS_ADMIN */
	CONVENTIONAL, /* 256 bytes: a PCI function without extended space */
};

static void put32(uint8_t *c, unsigned at, uint32_t v)
{
	for (int k = 0; k < 4; k++)
		c[at + k] = (uint8_t)(v >> (8 * k));
}

/* Writes the config file of the function at `where` (a folder under devices/). */
static void set_config(const char *where, enum config_kind kind, unsigned acs_ctl)
{
	static uint8_t config[4096];
	char path[PATH_MAX];
	size_t len = kind == UNPRIVILEGED ? 64 : kind == CONVENTIONAL ? 256 : sizeof(config);

	memset(config, 0, sizeof(config));
	put32(config, 0, 0x1af110de); /* vendor, device: any */
	if (kind == ACS || kind == NO_ACS) {
		/* AER (id 1, version 2) at 0x100 pointing on to 0x148. */
		put32(config, 0x100, 0x0001 | 2u << 16 | 0x148u << 20);
		if (kind == ACS) {
			put32(config, 0x148, 0x000d | 1u << 16 | 0x000u << 20);
			put32(config, 0x14c, 0x5f | (acs_ctl & 0xffff) << 16); /* cap, control */
		} else {
			put32(config, 0x148, 0x0010 | 1u << 16); /* SR-IOV, last */
		}
	}
	snprintf(path, sizeof(path), "%s/devices/%s/config", root, where);
	FILE *f = fopen(path, "wb");
	must(f && fwrite(config, 1, len, f) == len && fclose(f) == 0, path);
}

static const struct p2pg_fact *get(const struct p2pg_facts *f, const char *key)
{
	return p2pg_facts_get(f, key);
}

static bool is_str(const struct p2pg_facts *f, const char *key, const char *value)
{
	const struct p2pg_fact *x = get(f, key);
	return x && x->type == P2PG_FACT_STR && strcmp(x->s, value) == 0;
}

static bool is_int(const struct p2pg_facts *f, const char *key, long long value)
{
	const struct p2pg_fact *x = get(f, key);
	return x && x->type == P2PG_FACT_INT && x->i == value;
}

static bool is_bool(const struct p2pg_facts *f, const char *key, bool value)
{
	const struct p2pg_fact *x = get(f, key);
	return x && x->type == P2PG_FACT_BOOL && x->i == value;
}

static void pcie(struct p2pg_facts *f, const char *device, const char *peer)
{
	memset(f, 0, sizeof(*f));
	p2pg_evidence_pcie_gather(device, peer, f);
	char json[4096];
	if (p2pg_facts_to_json(f, json, sizeof(json)) >= 0)
		printf("# %s\n", json);
}

#define RP1 "pci0000:17/0000:17:00.0"
#define UP  RP1 "/0000:18:00.0"
#define DN1 UP "/0000:19:08.0"
#define DN2 UP "/0000:19:10.0"
#define GA  DN1 "/0000:1b:00.0"
#define GB  DN2 "/0000:1c:00.0"

/* Two GPUs under one switch: root port, upstream port, a downstream port each. */
static void switch_tree(unsigned acs_down1, unsigned acs_down2, int group_a, int group_b)
{
	new_tree();
	add_device(GA, group_a);
	add_device(GB, group_b);
	set_config(RP1, ACS, 0x1d);
	set_config(UP, NO_ACS, 0);
	set_config(DN1, ACS, acs_down1);
	set_config(DN2, ACS, acs_down2);
}

static void test_switch_redirect(void)
{
	struct p2pg_facts f;

	/* What `lspci -vvv` shows as ACSCtl: SrcValid+ ReqRedir+ CmpltRedir+ UpstreamFwd+. */
	switch_tree(0x1d, 0, 30, 31);
	pcie(&f, "0000:1B:00.0", "0000:1C:00.0"); /* as cuDeviceGetPCIBusId writes them */
	check(
	    is_str(&f, "pcie_acs_redirect", "yes") && is_str(&f, "pcie_acs_bridge", "0000:19:08.0"),
	    "switch, ReqRedir+ CmpltRedir+ on the device's downstream port: redirect, that bridge");
	check(is_str(&f, "pcie_acs_ctl",
		     "0000:19:08.0 SrcValid+ ReqRedir+ CmpltRedir+ UpstreamFwd+; 0000:19:10.0 off"),
	      "the bridges between, from the device to the peer, in lspci's names; the switch's "
	      "upstream port and the root port above the meeting point are not between them");
	check(is_bool(&f, "pcie_switch_shared", true), "one switch holds both");
	check(is_int(&f, "iommu_group", 30) && is_int(&f, "peer_iommu_group", 31) &&
		  is_bool(&f, "iommu_group_shared", false),
	      "IOMMU groups 30 and 31, not shared");

	pcie(&f, "00000000:1C:00.0", "0000:1b:00.0"); /* NVML's spelling, the other way round */
	check(
	    is_str(&f, "pcie_acs_redirect", "yes") &&
		is_str(&f, "pcie_acs_bridge", "0000:19:08.0") &&
		is_str(
		    &f, "pcie_acs_ctl",
		    "0000:19:10.0 off; 0000:19:08.0 SrcValid+ ReqRedir+ CmpltRedir+ UpstreamFwd+"),
	    "from the peer's side: the same bridge, the path read the other way");

	/* Only the completion redirect, on the peer's side. */
	switch_tree(0x01, 0x09, 40, 40);
	pcie(&f, "0000:1b:00.0", "0000:1c:00.0");
	check(is_str(&f, "pcie_acs_redirect", "yes") &&
		  is_str(&f, "pcie_acs_bridge", "0000:19:10.0"),
	      "CmpltRedir+ alone redirects; SrcValid+ alone does not");
	check(is_int(&f, "iommu_group", 40) && is_bool(&f, "iommu_group_shared", true),
	      "one IOMMU group for both");
}

static void test_no_redirect(void)
{
	struct p2pg_facts f;

	/* SrcValid, TransBlk, UpstreamFwd, EgressCtrl, DirectTrans: none of them redirects. */
	switch_tree(0x73, 0, 7, 7);
	pcie(&f, "0000:1b:00.0", "0000:1c:00.0");
	check(is_str(&f, "pcie_acs_redirect", "no") && !get(&f, "pcie_acs_bridge"),
	      "ACS on without ReqRedir or CmpltRedir: no redirect, no bridge named");
	check(is_str(&f, "pcie_acs_ctl",
		     "0000:19:08.0 SrcValid+ TransBlk+ UpstreamFwd+ EgressCtrl+ DirectTrans+; "
		     "0000:19:10.0 off"),
	      "every control bit named");

	/* Bridges without the capability, or conventional PCI ones: nothing there redirects. */
	new_tree();
	add_device(GA, -1);
	add_device(GB, -1);
	set_config(DN1, NO_ACS, 0);
	set_config(DN2, CONVENTIONAL, 0);
	pcie(&f, "0000:1b:00.0", "0000:1c:00.0");
	check(is_str(&f, "pcie_acs_redirect", "no") &&
		  is_str(&f, "pcie_acs_ctl", "0000:19:08.0 no-ACS; 0000:19:10.0 no-ACS"),
	      "no ACS capability (extended space without it, or none at all): no redirect");
	check(!get(&f, "iommu_group") && !get(&f, "peer_iommu_group") &&
		  !get(&f, "iommu_group_shared"),
	      "no IOMMU: no group facts");

	/* GPUs on the root bus, as in many virtual machines: no bridge between them. */
	new_tree();
	add_device("pci0000:00/0000:00:05.0", 5);
	add_device("pci0000:00/0000:00:06.0", 6);
	pcie(&f, "0000:00:05.0", "0000:00:06.0");
	check(is_str(&f, "pcie_acs_redirect", "no") &&
		  is_str(&f, "pcie_acs_ctl", "no bridge between the GPUs") &&
		  is_bool(&f, "pcie_switch_shared", false),
	      "on the root bus: no bridge between, no switch");
}

static void test_root_ports(void)
{
	struct p2pg_facts f;

	/* Each GPU under its own root port of one host bridge: the ports are between them. */
	new_tree();
	add_device("pci0000:00/0000:00:01.0/0000:01:00.0", 1);
	add_device("pci0000:00/0000:00:03.0/0000:02:00.0", 2);
	set_config("pci0000:00/0000:00:01.0", ACS, 0x1d);
	set_config("pci0000:00/0000:00:03.0", ACS, 0x1d);
	pcie(&f, "0000:01:00.0", "0000:02:00.0");
	check(is_bool(&f, "pcie_switch_shared", false) && is_str(&f, "pcie_acs_redirect", "yes") &&
		  is_str(&f, "pcie_acs_bridge", "0000:00:01.0"),
	      "two root ports: no shared switch, the device's root port redirects");

	/* Across host bridges (sockets). */
	new_tree();
	add_device("pci0000:00/0000:00:01.0/0000:01:00.0", -1);
	add_device("pci0000:80/0000:80:01.0/0000:81:00.0", -1);
	set_config("pci0000:00/0000:00:01.0", ACS, 0);
	set_config("pci0000:80/0000:80:01.0", ACS, 0);
	pcie(&f, "0000:01:00.0", "0000:81:00.0");
	check(is_bool(&f, "pcie_switch_shared", false) && is_str(&f, "pcie_acs_redirect", "no") &&
		  is_str(&f, "pcie_acs_ctl", "0000:00:01.0 off; 0000:80:01.0 off"),
	      "two host bridges: both root ports between, ACS off on both");
}

static void test_unknown(void)
{
	struct p2pg_facts f;

	/* Not root: sysfs gives 64 bytes of config, no ACS to read. */
	switch_tree(0, 0, 3, 4);
	set_config(DN2, UNPRIVILEGED, 0);
	pcie(&f, "0000:1b:00.0", "0000:1c:00.0");
	check(is_str(&f, "pcie_acs_redirect", "unknown") &&
		  is_str(&f, "pcie_acs_ctl", "0000:19:08.0 off; 0000:19:10.0 unreadable"),
	      "a bridge's extended space unreadable: unknown, not no");
	check(is_bool(&f, "pcie_switch_shared", true) && is_int(&f, "iommu_group", 3),
	      "what could be read is still said");

	switch_tree(0x1d, 0, 3, 4);
	set_config(DN2, UNPRIVILEGED, 0);
	pcie(&f, "0000:1b:00.0", "0000:1c:00.0");
	check(is_str(&f, "pcie_acs_redirect", "yes"), "one redirecting bridge is enough to know");

	/* No config file at all on a bridge. */
	new_tree();
	add_device(GA, -1);
	add_device(GB, -1);
	pcie(&f, "0000:1b:00.0", "0000:1c:00.0");
	check(is_str(&f, "pcie_acs_redirect", "unknown"), "no config files: unknown");

	/* A GPU sysfs does not show (a container without /sys, a wrong bus id). */
	switch_tree(0x1d, 0, 3, 4);
	pcie(&f, "0000:1b:00.0", "0000:5e:00.0");
	check(is_str(&f, "pcie_acs_redirect", "unknown") && !get(&f, "pcie_acs_ctl") &&
		  !get(&f, "pcie_switch_shared") && is_int(&f, "iommu_group", 3) &&
		  !get(&f, "iommu_group_shared"),
	      "the peer not in sysfs: unknown; the device's group still said");

	/* One device, or the same device twice, or nothing known: no pair facts. */
	pcie(&f, "0000:1b:00.0", "");
	check(!get(&f, "pcie_acs_redirect") && is_int(&f, "iommu_group", 3) &&
		  !get(&f, "peer_iommu_group"),
	      "one device: its group only");
	pcie(&f, "0000:1b:00.0", "0000:1B:00.0");
	check(!get(&f, "pcie_acs_redirect") && !get(&f, "peer_iommu_group"),
	      "a device and itself: no pair");
	pcie(&f, "", "not a bus id");
	check(f.n == 0, "nothing known: nothing said");
	pcie(&f, NULL, NULL);
	check(f.n == 0, "NULL bus ids: nothing said");
}

/* The whole gather against the simulated driver, and the rules' notes on what it found. */
static void test_diagnosis(void)
{
	struct p2pg_facts f;
	struct p2pg_failure_context ctx = {.api = "p2pguard_probe",
					   .status = 0,
					   .device = 0,
					   .peer_device = 1,
					   .peer_access_enabled = -1};

	new_tree();
	add_device(RP1 "/0000:18:00.0/0000:19:08.0/0000:10:00.0", 30);
	add_device(RP1 "/0000:18:00.0/0000:19:10.0/0000:11:00.0", 31);
	set_config(DN1, ACS, 0x1d);
	set_config(DN2, ACS, 0x1d);
	memset(&f, 0, sizeof(f));
	p2pg_evidence_gather(&ctx, &f);
	check(is_str(&f, "device_pci", "0000:10:00.0") && is_str(&f, "pcie_acs_redirect", "yes") &&
		  is_str(&f, "pcie_acs_bridge", "0000:19:08.0") &&
		  is_bool(&f, "pcie_switch_shared", true) && is_int(&f, "iommu_group", 30),
	      "p2pg_evidence_gather: the PCIe facts of the simulated pair");

	struct p2pg_ruleset *rs = p2pg_ruleset_new();
	must(rs && p2pg_ruleset_load_builtin(rs, NULL, NULL) == 0, "the built-in rules");
	static const char *const probes[] = {"wrong_data", "hang"};
	for (int k = 0; k < 2; k++) {
		char what[160];
		p2pg_facts_set_str(&f, "p2p_probe", probes[k]);
		const struct p2pg_rule *rule = p2pg_ruleset_match(rs, ctx.api, 0, &f);
		char *text = rule ? p2pg_rule_root_cause_for(rule, &f) : NULL;
		printf("# %s: %s\n", rule ? p2pg_rule_id(rule) : "no rule", text ? text : "");
		snprintf(
		    what, sizeof(what),
		    "probe %s, %s: the diagnosis says ACS redirects on bridge 0000:19:08.0 and "
		    "names the groups",
		    probes[k], rule ? p2pg_rule_id(rule) : "no rule");
		check(
		    text && strstr(text, "ACS redirects peer traffic on bridge 0000:19:08.0: ") &&
			strstr(text, "0000:19:08.0 SrcValid+ ReqRedir+ CmpltRedir+ UpstreamFwd+") &&
			strstr(text, "different IOMMU groups (30 and 31)") &&
			!strstr(text, "could not be read") && !strstr(text, "No bridge between"),
		    what);
		free(text);
	}
	p2pg_facts_set_str(&f, "pcie_acs_redirect", "no");
	const struct p2pg_rule *rule = p2pg_ruleset_match(rs, ctx.api, 0, &f);
	char *text = rule ? p2pg_rule_root_cause_for(rule, &f) : NULL;
	check(text && strstr(text, "No bridge between the two GPUs redirects peer traffic") &&
		  !strstr(text, "ACS redirects peer traffic on bridge"),
	      "no redirect: the diagnosis says so, and names no bridge");
	free(text);
	check(rule && strstr(p2pg_rule_root_cause(rule), "ACS redirects") == NULL,
	      "explain's root cause (no evidence) carries no note");
	p2pg_ruleset_free(rs);
}

int main(void)
{
	snprintf(base, sizeof(base), "%s/p2pg-pcie-XXXXXX", getenv("TMPDIR") ?: "/tmp");
	must(mkdtemp(base) != NULL, "mkdtemp");
	test_switch_redirect();
	test_no_redirect();
	test_root_ports();
	test_unknown();
	test_diagnosis();
	p2pg_evidence_pcie_set_root(NULL);
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
	if (system(cmd) != 0)
		fprintf(stderr, "test-evidence-pcie: could not remove %s\n", base);
	printf("%d failed\n", failures);
	return failures ? 1 : 0;
}
