/* SPDX-License-Identifier: MIT */
/*
 * Evidence for a failed cross-process or VMM mapping call: what decides whether one process may
 * map another's GPU memory. The handle itself (its type; for an imported file descriptor, whether
 * it is open and what it is), the process's namespaces and container (a legacy IPC handle names
 * its exporter by PID, which means nothing in another PID namespace), what pidfd_getfd needs
 * (Yama's ptrace_scope, CAP_SYS_PTRACE; PyTorch's expandable segments take the exporter's
 * descriptor with it), /dev/shm, and how many peers the device reaches already through mappings
 * (each takes one of its 8 peer slots). The owner's side is not knowable from here: a handle does
 * not say which process made it, and a descriptor passed over a socket does not either (only a
 * program that asks SO_PEERCRED learns that). Comparing two processes' facts is left to the
 * database, where both processes' failure rows carry their namespaces.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "driver.h"
#include "evidence-private.h"
#include "evidence.h"
#include "settings.h"

/* The inode numbers the kernel gives the initial namespaces (include/linux/proc_ns.h). */
#define INITIAL_PID_NS 0xEFFFFFFCu
#define INITIAL_IPC_NS 0xEFFFFFFFu
#define CAP_SYS_PTRACE 19

/* "pid:[4026531836]" for /proc/self/ns/pid; false when it cannot be read. */
static bool namespace_of(const char *name, char *out, size_t len, unsigned long *ret_inode)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/ns/%s", name);
	ssize_t n = readlink(path, out, len - 1);
	if (n <= 0)
		return false;
	out[n] = '\0';
	const char *open = strchr(out, '[');
	*ret_inode = open ? strtoul(open + 1, NULL, 10) : 0;
	return true;
}

/* The first line of a small file under /proc or /sys; false when it cannot be read. */
static bool first_line(const char *path, char *out, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, out, len - 1);
	close(fd);
	if (n <= 0)
		return false;
	out[n] = '\0';
	out[strcspn(out, "\n")] = '\0';
	return true;
}

/* CapEff's bits from /proc/self/status; false when it cannot be read. */
static bool effective_caps(unsigned long long *ret)
{
	FILE *f = fopen("/proc/self/status", "re");
	if (!f)
		return false;
	char line[256];
	bool found = false;
	while (!found && fgets(line, sizeof(line), f))
		if (strncmp(line, "CapEff:", 7) == 0)
			found = sscanf(line + 7, "%llx", ret) == 1;
	fclose(f);
	return found;
}

bool p2pg_evidence_cgroup_is_container(const char *cgroup)
{
	static const char *const marks[] = {"docker", "kubepods", "containerd", "libpod",
					    "crio",   "lxc",	  "garden"};
	for (size_t k = 0; k < sizeof(marks) / sizeof(marks[0]); k++)
		if (strstr(cgroup, marks[k]))
			return true;
	return false;
}

/* The process's cgroup: the unified hierarchy's line (0::), else a line naming a container
 * runtime, else the first. */
static bool cgroup_line(char *out, size_t len)
{
	FILE *f = fopen("/proc/self/cgroup", "re");
	if (!f)
		return false;
	char line[512];
	int rank = 0; /* 1 first line, 2 a container's, 3 the unified one */
	while (rank < 3 && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		int r = strncmp(line, "0::", 3) == 0		  ? 3
			: p2pg_evidence_cgroup_is_container(line) ? 2
								  : 1;
		if (r > rank) {
			rank = r;
			size_t n = strnlen(line, len - 1);
			memcpy(out, line, n);
			out[n] = '\0';
		}
	}
	fclose(f);
	return rank > 0;
}

static void process_facts(struct p2pg_facts *facts)
{
	char text[P2PG_FACT_STR_MAX];
	unsigned long inode = 0;
	bool pid_ns_initial = true;
	if (namespace_of("pid", text, sizeof(text), &inode)) {
		p2pg_facts_set_str(facts, "pid_namespace", text);
		pid_ns_initial = inode == INITIAL_PID_NS;
		p2pg_facts_set_bool(facts, "pid_namespace_initial", pid_ns_initial);
	}
	if (namespace_of("ipc", text, sizeof(text), &inode))
		p2pg_facts_set_bool(facts, "ipc_namespace_initial", inode == INITIAL_IPC_NS);
	if (namespace_of("mnt", text, sizeof(text), &inode))
		p2pg_facts_set_str(facts, "mount_namespace", text);
	bool container = !pid_ns_initial || access("/.dockerenv", F_OK) == 0 ||
			 access("/run/.containerenv", F_OK) == 0;
	if (cgroup_line(text, sizeof(text))) {
		p2pg_facts_set_str(facts, "cgroup", text);
		container = container || p2pg_evidence_cgroup_is_container(text);
	}
	p2pg_facts_set_bool(facts, "container", container);
	p2pg_facts_set_int(facts, "pid", getpid());

	if (first_line("/proc/sys/kernel/yama/ptrace_scope", text, sizeof(text)))
		p2pg_facts_set_int(facts, "ptrace_scope", atoi(text));
	unsigned long long caps;
	if (effective_caps(&caps))
		p2pg_facts_set_bool(facts, "cap_sys_ptrace", (caps >> CAP_SYS_PTRACE) & 1);
	struct statvfs vfs;
	if (statvfs("/dev/shm", &vfs) == 0)
		p2pg_facts_set_int(facts, "dev_shm_bytes",
				   (long long)vfs.f_blocks * (long long)vfs.f_frsize);
}

/* An imported POSIX file descriptor: open or not, and what it is. */
static void descriptor_facts(int fd, struct p2pg_facts *facts)
{
	struct stat st;
	bool open = fd >= 0 && fstat(fd, &st) == 0;
	p2pg_facts_set_bool(facts, "import_fd_open", open);
	if (!open)
		return;
	char path[64], target[P2PG_FACT_STR_MAX];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(path, target, sizeof(target) - 1);
	if (n > 0) {
		target[n] = '\0';
		p2pg_facts_set_str(facts, "import_fd_target", target);
	}
}

/* Visible devices the accessor cannot reach over P2P: when an IPC open fails, the owner's device
 * is not known, but it is one of the devices the process sees (or one it does not see). */
static void reach_facts(int accessor, struct p2pg_facts *facts)
{
	int count = 0;
	if (accessor < 0 || !p2pg_drv.cuDeviceGetCount || !p2pg_drv.cuDeviceCanAccessPeer ||
	    p2pg_drv.cuDeviceGetCount(&count) != CUDA_SUCCESS)
		return;
	int unreachable = 0;
	for (int d = 0; d < count; d++) {
		int can = 1;
		if (d != accessor &&
		    p2pg_drv.cuDeviceCanAccessPeer(&can, accessor, d) == CUDA_SUCCESS && !can)
			unreachable++;
	}
	p2pg_facts_set_int(facts, "peers_unreachable", unreachable);
}

void p2pg_evidence_process(const struct p2pg_failure_context *ctx, struct p2pg_facts *facts)
{
	p2pg_facts_set_str(facts, "mode", p2pg_mode_name(p2pg_settings_get()->mode));
	const struct p2pg_failure_mapping *m = ctx->mapping;
	if (!m)
		return;
	if (m->handle_type)
		p2pg_facts_set_str(facts, "mapping_handle_type", m->handle_type);
	if (m->fd_import)
		descriptor_facts(m->fd, facts);
	if (m->allocation_handle_types >= 0)
		p2pg_facts_set_int(facts, "allocation_handle_types", m->allocation_handle_types);
	p2pg_facts_set_int(facts, "mapped_peer_devices", m->mapped_peers);
	reach_facts(ctx->device, facts);
	process_facts(facts);
}
