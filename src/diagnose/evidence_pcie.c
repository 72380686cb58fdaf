/* SPDX-License-Identifier: MIT */
/*
 * The PCIe path between the two GPUs of a failing pair, read from sysfs.
 *
 * /sys/bus/pci/devices/<bus id> links to the device's place in the hierarchy:
 * .../pci0000:17/0000:17:00.0/0000:18:00.0/0000:19:08.0/0000:1b:00.0, one folder per bridge
 * above it (root port, switch upstream port, switch downstream port). Peer traffic turns at the
 * deepest bridge the two paths share; it enters and leaves through the bridges below that point,
 * and Access Control Services (ACS) on one of those with P2P Request or Completion Redirect set
 * sends it up to the root complex instead, where an IOMMU may drop or fault it: the classic
 * cause of a peer copy that never completes or returns wrong data. The ACS control register is
 * what `lspci -vvv` prints as ACSCtl; it lives in the extended configuration space, which sysfs
 * shows only to root (others read the first 64 bytes), so without privileges the answer is
 * "unknown" rather than a guess.
 *
 * Not cached: this runs on the failure path only, a few small reads of sysfs per failure.
 */
#include "evidence-pcie.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BDF_CHARS      12 /* "0000:1b:00.0", the shape sysfs names a function by */
#define BDF_LEN	       (BDF_CHARS + 1)
#define CHAIN_MAX      16 /* functions from the root port down to the device */
#define CONFIG_SIZE    4096
#define EXT_CAP_START  0x100
#define EXT_CAP_ACS    0x000d
#define ACS_REQ_REDIR  (1u << 2)
#define ACS_CMPL_REDIR (1u << 3)

static char sysfs_root[PATH_MAX] = "/sys";

void p2pg_evidence_pcie_set_root(const char *root)
{
	snprintf(sysfs_root, sizeof(sysfs_root), "%s", root ? root : "/sys");
}

/* "0000:1B:00.0", "00000000:1B:00.0" or "1b:00.0" as sysfs names it: "0000:1b:00.0". */
static bool normalize_bdf(const char *in, char out[BDF_LEN])
{
	unsigned domain = 0, bus, dev, fn;
	char tail;

	if (sscanf(in, "%x:%x:%x.%x%c", &domain, &bus, &dev, &fn, &tail) != 4) {
		domain = 0;
		if (sscanf(in, "%x:%x.%x%c", &bus, &dev, &fn, &tail) != 3)
			return false;
	}
	if (domain > 0xffff || bus > 0xff || dev > 0x1f || fn > 7)
		return false;
	snprintf(out, BDF_LEN, "%04x:%02x:%02x.%x", domain, bus, dev, fn);
	return true;
}

/* A path component shaped like a PCI function's folder: dddd:bb:dd.f in lower-case hex. */
static bool is_bdf(const char *s, size_t len)
{
	static const char shape[BDF_CHARS + 1] = "hhhh:hh:hh.h";

	if (len != BDF_CHARS)
		return false;
	for (size_t k = 0; k < len; k++) {
		bool hex = (s[k] >= '0' && s[k] <= '9') || (s[k] >= 'a' && s[k] <= 'f');
		if (shape[k] == 'h' ? !hex : s[k] != shape[k])
			return false;
	}
	return true;
}

/* One device's place in the hierarchy: the folder of every function from the top down, the
 * device last. */
struct chain {
	char path[PATH_MAX]; /* the device's resolved folder */
	size_t n;
	size_t end[CHAIN_MAX]; /* path[0, end[k]) is the folder of function k */
};

static const char *chain_bdf(const struct chain *c, size_t k, char out[BDF_LEN])
{
	memcpy(out, c->path + c->end[k] - BDF_CHARS, BDF_CHARS);
	out[BDF_CHARS] = '\0';
	return out;
}

static bool chain_same(const struct chain *a, size_t ka, const struct chain *b, size_t kb)
{
	char x[BDF_LEN], y[BDF_LEN];
	return strcmp(chain_bdf(a, ka, x), chain_bdf(b, kb, y)) == 0;
}

static bool chain_read(const char *bdf, struct chain *c)
{
	char link[PATH_MAX];

	c->n = 0;
	if (snprintf(link, sizeof(link), "%s/bus/pci/devices/%s", sysfs_root, bdf) >=
		(int)sizeof(link) ||
	    !realpath(link, c->path))
		return false;
	for (char *p = c->path; *p;) {
		size_t len = strcspn(p, "/");
		if (is_bdf(p, len)) {
			if (c->n == CHAIN_MAX)
				return false;
			c->end[c->n++] = (size_t)(p - c->path) + len;
		}
		p += len;
		if (*p)
			p++;
	}
	char last[BDF_LEN];
	return c->n > 0 && c->end[c->n - 1] == strlen(c->path) &&
	       strcmp(chain_bdf(c, c->n - 1, last), bdf) == 0;
}

static bool folder_of(const struct chain *c, size_t k, const char *file, char *out, size_t len)
{
	return snprintf(out, len, "%.*s/%s", (int)c->end[k], c->path, file) < (int)len;
}

enum { ACS_UNREADABLE = -1, ACS_ABSENT = -2 };

/* A little-endian dword of configuration space; false when it cannot be read. */
static bool config_dword(int fd, unsigned at, uint32_t *value)
{
	uint8_t b[4];

	if (pread(fd, b, sizeof(b), (off_t)at) != (ssize_t)sizeof(b))
		return false;
	*value = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
	return true;
}

/*
 * The ACS control register of function k, ACS_ABSENT without the capability, or ACS_UNREADABLE
 * when the extended configuration space cannot be read (not root, no such file). Only the
 * capability headers on the way are read: every dword of configuration space is a transaction on
 * the bus, so reading all 4 KiB of each bridge would cost far more.
 */
static int acs_control(const struct chain *c, size_t k)
{
	char path[PATH_MAX];
	struct stat st;
	uint32_t header, control;
	int result = ACS_UNREADABLE;

	if (!folder_of(c, k, "config", path, sizeof(path)))
		return ACS_UNREADABLE;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return ACS_UNREADABLE;
	/* A conventional PCI function has 256 bytes and no extended space, so no ACS. A PCIe one
	 * shows 4096 but sysfs reads only the first 64 to a reader without CAP_SYS_ADMIN. */
	if (fstat(fd, &st) == 0 && st.st_size == 256) {
		result = ACS_ABSENT;
		goto out;
	}
	unsigned at = EXT_CAP_START;
	for (int hops = 0; hops < 128; hops++) { /* a malformed list may loop */
		if (!config_dword(fd, at, &header))
			goto out;
		if (header == 0 || header == 0xffffffffu)
			break;
		if ((header & 0xffff) == EXT_CAP_ACS) {
			if (config_dword(fd, at + 4, &control))
				result = (int)(control >> 16);
			goto out;
		}
		unsigned next = (header >> 20) & 0xffc;
		if (next < EXT_CAP_START || next > CONFIG_SIZE - 8)
			break;
		at = next;
	}
	result = ACS_ABSENT;
out:
	close(fd);
	return result;
}

/* The number of the IOMMU group of the chain's device, -1 without one. */
static long iommu_group(const struct chain *c)
{
	char path[PATH_MAX], target[PATH_MAX];

	if (!folder_of(c, c->n - 1, "iommu_group", path, sizeof(path)))
		return -1;
	ssize_t len = readlink(path, target, sizeof(target) - 1);
	if (len <= 0)
		return -1;
	target[len] = '\0';
	const char *name = strrchr(target, '/');
	name = name ? name + 1 : target;
	char *end;
	errno = 0;
	long group = strtol(name, &end, 10);
	return errno || end == name || *end || group < 0 ? -1 : group;
}

/* Appends text to out (of size len); what does not fit is cut, and out then ends in "...". */
static void append(char *out, size_t len, const char *text)
{
	size_t have = strlen(out), n = strlen(text);

	if (have == len - 1 && strcmp(out + have - 3, "...") == 0)
		return; /* cut already */
	if (have + n < len) {
		memcpy(out + have, text, n + 1);
		return;
	}
	memcpy(out + have, text, len - 1 - have);
	memcpy(out + len - 4, "...", 4);
}

/* lspci's names for the ACS control bits. */
static void describe_acs(char *out, size_t len, const char *bdf, int ctl)
{
	static const char *const bits[] = {"SrcValid",	  "TransBlk",	"ReqRedir",   "CmpltRedir",
					   "UpstreamFwd", "EgressCtrl", "DirectTrans"};
	char text[160];

	snprintf(text, sizeof(text), "%s%s", out[0] ? "; " : "", bdf);
	if (ctl == ACS_UNREADABLE)
		strcat(text, " unreadable");
	else if (ctl == ACS_ABSENT)
		strcat(text, " no-ACS");
	else if ((ctl & 0x7f) == 0)
		strcat(text, " off");
	for (int b = 0; ctl >= 0 && b < 7; b++)
		if (ctl & (1 << b)) {
			strcat(text, " ");
			strcat(text, bits[b]);
			strcat(text, "+");
		}
	append(out, len, text);
}

static void pair_facts(const struct chain *a, const struct chain *b, struct p2pg_facts *facts)
{
	size_t common = 0;
	while (common + 1 < a->n && common + 1 < b->n && chain_same(a, common, b, common))
		common++;
	/* The two paths meet in a bridge both hang under; below the root port that is a switch. */
	p2pg_facts_set_bool(facts, "pcie_switch_shared", common >= 2);

	/* The bridges below the meeting point, from the device up and down to the peer. */
	struct {
		const struct chain *chain;
		size_t index;
	} between[2 * CHAIN_MAX];
	size_t n = 0;
	for (size_t k = a->n - 1; k-- > common;)
		between[n].chain = a, between[n++].index = k;
	for (size_t k = common; k + 1 < b->n; k++)
		between[n].chain = b, between[n++].index = k;

	char summary[P2PG_FACT_STR_MAX] = "", bdf[BDF_LEN], redirecting[BDF_LEN] = "";
	bool unreadable = false;
	for (size_t k = 0; k < n; k++) {
		int ctl = acs_control(between[k].chain, between[k].index);
		chain_bdf(between[k].chain, between[k].index, bdf);
		describe_acs(summary, sizeof(summary), bdf, ctl);
		if (ctl == ACS_UNREADABLE)
			unreadable = true;
		else if (ctl >= 0 && (ctl & (ACS_REQ_REDIR | ACS_CMPL_REDIR)) && !redirecting[0])
			memcpy(redirecting, bdf, sizeof(bdf));
	}
	if (n == 0)
		snprintf(summary, sizeof(summary), "no bridge between the GPUs");
	p2pg_facts_set_str(facts, "pcie_acs_redirect",
			   redirecting[0] ? "yes"
			   : unreadable	  ? "unknown"
					  : "no");
	if (redirecting[0])
		p2pg_facts_set_str(facts, "pcie_acs_bridge", redirecting);
	p2pg_facts_set_str(facts, "pcie_acs_ctl", summary);
}

void p2pg_evidence_pcie_gather(const char *device_pci, const char *peer_pci,
			       struct p2pg_facts *facts)
{
	char bdf[BDF_LEN], peer_bdf[BDF_LEN];
	bool known = device_pci && normalize_bdf(device_pci, bdf);
	bool peer_known = peer_pci && normalize_bdf(peer_pci, peer_bdf);
	bool pair = known && peer_known && strcmp(bdf, peer_bdf) != 0;
	struct chain *a = malloc(sizeof(*a)), *b = malloc(sizeof(*b));

	if (!a || !b)
		goto out;
	bool resolved = known && chain_read(bdf, a);
	bool peer_resolved = pair && chain_read(peer_bdf, b);

	long group = resolved ? iommu_group(a) : -1;
	long peer_group = peer_resolved ? iommu_group(b) : -1;
	if (group >= 0)
		p2pg_facts_set_int(facts, "iommu_group", group);
	if (peer_group >= 0)
		p2pg_facts_set_int(facts, "peer_iommu_group", peer_group);
	if (group >= 0 && peer_group >= 0)
		p2pg_facts_set_bool(facts, "iommu_group_shared", group == peer_group);

	if (resolved && peer_resolved)
		pair_facts(a, b, facts);
	else if (pair)
		p2pg_facts_set_str(facts, "pcie_acs_redirect", "unknown");
out:
	free(a);
	free(b);
}
