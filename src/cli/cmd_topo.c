/* SPDX-License-Identifier: MIT */
/*
 * p2pguard topo: for every ordered pair of GPUs, what the driver claims (can-access, P2P
 * attributes) and what a probe measures (P2P correct? P2P and staged bandwidth), as a matrix, and
 * recorded into the database like the guard's own findings.
 *
 * Every CUDA call is made in a child process: one that lists the devices, then one per pair. A
 * stuck P2P copy (IOMMU/ACS, some VMs) can leave a process unable to finish, so a child that does
 * not answer by the deadline is killed and left behind, and the matrix goes on. The parent never
 * initialises CUDA, which would not survive the fork.
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "api.h"
#include "cli.h"
#include "driver.h"
#include "failure.h"
#include "notice.h"
#include "probe.h"
#include "recorder.h"
#include "clock.h"
#include "settings.h"

#define MAX_GPUS 16

struct pair_report {
	int can;
	int rank;
	bool timed_out; /* the child did not answer by the deadline: killed, left behind */
	struct p2pg_probe_result probe;
	char verdict[16]; /* probe.verdict, carried across the pipe */
};

struct device_list {
	int n;
	char name[MAX_GPUS][96];
	char bus[MAX_GPUS][32];
	int can[MAX_GPUS][MAX_GPUS], rank[MAX_GPUS][MAX_GPUS];
};

static uint64_t mono_ms(void)
{
	return p2pg_now_ns() / 1000000;
}

/*
 * Runs fn(arg, out) in a child that initialises CUDA itself, and reads len bytes of its answer
 * within timeout_ms. Returns 0, -ETIMEDOUT (the child was killed and is not waited for: a process
 * stuck in the driver may not die at once), or another negative errno.
 */
static int in_child(void (*fn)(const void *arg, void *out), const void *arg, void *out, size_t len,
		    unsigned timeout_ms)
{
	int fds[2];
	if (pipe(fds) < 0)
		return -errno;
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		int e = -errno;
		close(fds[0]);
		close(fds[1]);
		return e;
	}
	if (pid == 0) {
		close(fds[0]);
		fn(arg, out);
		size_t off = 0;
		while (off < len) {
			ssize_t w = write(fds[1], (char *)out + off, len - off);
			if (w <= 0)
				break;
			off += (size_t)w;
		}
		/* No exit handlers: a stuck copy's streams must not be waited for. */
		_exit(off == len ? 0 : 1);
	}
	close(fds[1]);
	size_t off = 0;
	uint64_t until = mono_ms() + timeout_ms;
	int rc = 0;
	while (off < len) {
		uint64_t now = mono_ms();
		if (now >= until) {
			rc = -ETIMEDOUT;
			break;
		}
		struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
		int p = poll(&pfd, 1, (int)(until - now));
		if (p < 0 && errno == EINTR)
			continue;
		if (p <= 0)
			continue;
		ssize_t r = read(fds[0], (char *)out + off, len - off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			rc = -EPIPE; /* the child died without answering */
			break;
		}
		off += (size_t)r;
	}
	close(fds[0]);
	/* Even a child that answered may not get out of the driver: a process with a stuck copy
	 * can take long to tear down. It gets 5 s, then SIGKILL, and is left behind (reaped if it
	 * died at once; the kernel reaps the rest when topo exits). */
	uint64_t reap_until = mono_ms() + (rc == -ETIMEDOUT ? 0 : 5000);
	for (;;) {
		if (waitpid(pid, NULL, WNOHANG) != 0)
			break;
		if (mono_ms() >= reap_until) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, WNOHANG);
			break;
		}
		nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
	}
	return rc;
}

static void list_devices(const void *arg, void *out)
{
	(void)arg;
	struct device_list *l = out;
	memset(l, 0, sizeof(*l));
	l->n = -1;
	if (p2pg_driver_load() < 0 || p2pg_drv.cuInit(0) != CUDA_SUCCESS)
		return;
	int n = 0;
	p2pg_drv.cuDeviceGetCount(&n);
	l->n = n > MAX_GPUS ? MAX_GPUS : n;
	for (int d = 0; d < l->n; d++) {
		snprintf(l->name[d], sizeof(l->name[d]), "?");
		snprintf(l->bus[d], sizeof(l->bus[d]), "?");
		p2pg_drv.cuDeviceGetName(l->name[d], sizeof(l->name[d]), d);
		p2pg_drv.cuDeviceGetPCIBusId(l->bus[d], sizeof(l->bus[d]), d);
		for (int e = 0; e < l->n; e++)
			if (d != e) {
				p2pg_drv.cuDeviceCanAccessPeer(&l->can[d][e], d, e);
				p2pg_drv.cuDeviceGetP2PAttribute(
				    &l->rank[d][e], CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK, d, e);
			}
	}
}

struct probe_job {
	int src, dst;
	size_t bytes;
	unsigned timeout_ms;
	int can;
};

static void probe_one(const void *arg, void *out)
{
	const struct probe_job *job = arg;
	struct pair_report *r = out;
	if (p2pg_driver_load() < 0 || p2pg_drv.cuInit(0) != CUDA_SUCCESS) {
		r->probe.status = CUDA_ERROR_NOT_INITIALIZED;
		snprintf(r->verdict, sizeof(r->verdict), "error");
		return;
	}
	p2pg_probe_pair(job->src, job->dst, job->bytes, 3, job->can != 0, job->timeout_ms,
			&r->probe);
	snprintf(r->verdict, sizeof(r->verdict), "%s", r->probe.verdict);
	r->probe.verdict = NULL; /* a pointer into this process */
}

static void record_probe(int src, int dst, const struct pair_report *r, size_t bytes)
{
	uint32_t serial = 0;
	uint64_t seq = 0;
	/* Two transfer rows per pair (one per path), carrying the measured time as gpu_ns, so the
	 * peer_bandwidth view shows the probe's figures beside the programs'. */
	const struct {
		uint8_t path;
		double gbps;
	} paths[2] = {{P2PG_PATH_P2P, r->probe.p2p_gbps}, {P2PG_PATH_STAGED, r->probe.staged_gbps}};
	for (int k = 0; k < 2; k++) {
		if (paths[k].gbps <= 0 || (paths[k].path == P2PG_PATH_P2P && !r->can))
			continue;
		uint64_t ns = (uint64_t)((double)bytes / paths[k].gbps);
		struct p2pg_record rec = {
		    .started_ns = p2pg_realtime_ns(),
		    .host_ns = ns,
		    .gpu_ns = ns,
		    .bytes = bytes,
		    .api = P2PG_API_p2pguard_probe,
		    .kind = P2PG_REC_TRANSFER,
		    .path = paths[k].path,
		    .src_device = (int16_t)src,
		    .dst_device = (int16_t)dst,
		};
		seq = p2pg_record(&rec, &serial);
	}
	if (r->can && strcmp(r->verdict, "hang") == 0) {
		/* The copy that never finished: a row of its own (the failure refers to it), not
		 * ready, so that no bandwidth is read from it. */
		struct p2pg_record rec = {
		    .started_ns = p2pg_realtime_ns(),
		    .host_ns = (uint64_t)(r->probe.elapsed_ms * 1e6),
		    .bytes = bytes,
		    .api = P2PG_API_p2pguard_probe,
		    .kind = P2PG_REC_TRANSFER,
		    .path = P2PG_PATH_P2P,
		    .status = CUDA_ERROR_NOT_READY,
		    .src_device = (int16_t)src,
		    .dst_device = (int16_t)dst,
		};
		seq = p2pg_record(&rec, &serial);
	}
	if (r->can && strcmp(r->verdict, "ok") != 0) {
		char args[192];
		if (strcmp(r->verdict, "hang") == 0)
			snprintf(args, sizeof(args),
				 "p2pguard topo: a p2p copy %d -> %d unfinished after %.0f ms%s",
				 src, dst, r->probe.elapsed_ms,
				 r->timed_out
				     ? " (the probing process did not answer and was killed)"
				     : "");
		else
			snprintf(args, sizeof(args),
				 "p2pguard topo: p2p %s at %.1f GB/s, staged %.1f GB/s",
				 r->probe.p2p_correct ? "correct" : "WRONG DATA", r->probe.p2p_gbps,
				 r->probe.staged_gbps);
		struct p2pg_failure f = {.api = P2PG_API_p2pguard_probe,
					 .status = r->probe.status,
					 .device = src,
					 .peer_device = dst,
					 .args = args,
					 .action = P2PG_ACTION_PASSED,
					 .serial = serial,
					 .seq = seq,
					 .started_ns = p2pg_realtime_ns(),
					 .peer_access_enabled = 1,
					 .probe = r->verdict};
		p2pg_failure_record(&f);
	}
}

/* Short words, so that 8 GPUs fit 80 columns as `nvidia-smi topo -m` does. */
static void verdict_cell(const struct pair_report *r, char *cell, size_t len)
{
	static const struct {
		const char *verdict, *word;
	} words[] = {{"ok", "OK"},
		     {"wrong_data", "WRONG"},
		     {"slow", "SLOW"},
		     {"hang", "HANG"},
		     {"error", "ERR"}};
	if (!r->can) {
		snprintf(cell, len, "NO");
		return;
	}
	for (size_t k = 0; k < sizeof(words) / sizeof(words[0]); k++)
		if (strcmp(r->verdict, words[k].verdict) == 0) {
			snprintf(cell, len, "%s", words[k].word);
			return;
		}
	snprintf(cell, len, "?");
}

static void p2p_cell(const struct pair_report *r, char *cell, size_t len)
{
	if (r->can && r->probe.p2p_gbps > 0)
		snprintf(cell, len, "%.1f", r->probe.p2p_gbps);
	else
		snprintf(cell, len, "%s", r->can && strcmp(r->verdict, "hang") == 0 ? "HANG" : "-");
}

static void staged_cell(const struct pair_report *r, char *cell, size_t len)
{
	if (r->probe.staged_gbps > 0)
		snprintf(cell, len, "%.1f", r->probe.staged_gbps);
	else
		snprintf(cell, len, "-");
}

/* A GPU x GPU table, source rows and destination columns, one cell per ordered pair: 6 columns
 * of row label and 9 per GPU, 78 for 8 GPUs. */
static void print_matrix(struct pair_report rep[MAX_GPUS][MAX_GPUS], int n,
			 void (*cell)(const struct pair_report *, char *, size_t))
{
	printf("      ");
	for (int d = 0; d < n; d++) {
		char head[16];
		snprintf(head, sizeof(head), "GPU%d", d);
		printf("%8s ", head);
	}
	printf("\n");
	for (int s = 0; s < n; s++) {
		printf("GPU%-3d", s);
		for (int d = 0; d < n; d++) {
			char text[32] = "X";
			if (s != d)
				cell(&rep[s][d], text, sizeof(text));
			printf("%8s ", text);
		}
		printf("\n");
	}
}

static void usage(void)
{
	fputs("Usage: p2pguard topo [--db PATH] [--bytes N] [--no-record] [--json]\n", stderr);
}

static void json_string(const char *text)
{
	putchar('"');
	for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
		if (*p == '"' || *p == '\\')
			printf("\\%c", *p);
		else if (*p < 0x20)
			printf("\\u%04x", *p);
		else
			putchar(*p);
	}
	putchar('"');
}

static void print_json(const struct device_list *l, struct pair_report rep[MAX_GPUS][MAX_GPUS],
		       size_t bytes, unsigned timeout_ms)
{
	printf("{\"bytes\": %zu, \"probe_timeout_ms\": %u, \"devices\": [", bytes, timeout_ms);
	for (int d = 0; d < l->n; d++) {
		printf("%s{\"index\": %d, \"name\": ", d ? ", " : "", d);
		json_string(l->name[d]);
		printf(", \"pci_bus_id\": ");
		json_string(l->bus[d]);
		printf("}");
	}
	printf("], \"pairs\": [");
	bool first = true;
	for (int s = 0; s < l->n; s++)
		for (int d = 0; d < l->n; d++) {
			if (s == d)
				continue;
			const struct pair_report *r = &rep[s][d];
			printf("%s{\"src\": %d, \"dst\": %d, \"can_access\": %s, "
			       "\"performance_rank\": %d, \"link\": null, \"verdict\": ",
			       first ? "" : ", ", s, d, r->can ? "true" : "false", r->rank);
			json_string(r->can ? r->verdict : "staged");
			printf(", \"status\": %d, \"p2p_correct\": %s, \"staged_correct\": %s, "
			       "\"bandwidth_gbps\": {\"p2p\": ",
			       r->probe.status, r->probe.p2p_correct ? "true" : "false",
			       r->probe.staged_correct ? "true" : "false");
			if (r->can && r->probe.p2p_gbps > 0)
				printf("%.3f", r->probe.p2p_gbps);
			else
				printf("null");
			printf(", \"staged\": ");
			if (r->probe.staged_gbps > 0)
				printf("%.3f", r->probe.staged_gbps);
			else
				printf("null");
			printf("}, \"probe_ms\": %.1f, \"timed_out\": %s}", r->probe.elapsed_ms,
			       r->timed_out ? "true" : "false");
			first = false;
		}
	printf("]}\n");
}

static void quiet_warn(const char *line)
{
	fprintf(stderr, "p2pguard: %s\n", line);
}

int p2pg_cmd_topo(int argc, char **argv)
{
	const char *db = NULL;
	size_t bytes = 64u << 20;
	bool record = true, json = false;
	static const struct option options[] = {{"db", required_argument, NULL, 'd'},
						{"bytes", required_argument, NULL, 'b'},
						{"no-record", no_argument, NULL, 'n'},
						{"json", no_argument, NULL, 'j'},
						{NULL, 0, NULL, 0}};
	int opt;
	optind = 1;
	opterr = 0; /* the usage line says it all */
	while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
		if (opt == 'd')
			db = optarg;
		else if (opt == 'b')
			bytes = strtoull(optarg, NULL, 0);
		else if (opt == 'n')
			record = false;
		else if (opt == 'j')
			json = true;
		else {
			usage();
			return 2;
		}
	}
	if (optind < argc) {
		usage();
		return 2;
	}
	struct p2pg_settings s;
	p2pg_settings_parse(&s, getenv, quiet_warn);
	/* The probe's own deadline, plus what a fresh process needs to initialise CUDA and set up
	 * its buffers and the staged engine. */
	unsigned child_ms = s.probe_timeout_ms + 15000;

	static struct device_list list;
	if (p2pg_driver_load() < 0 ||
	    in_child(list_devices, NULL, &list, sizeof(list), child_ms) < 0 || list.n < 0) {
		fprintf(stderr, "p2pguard: no CUDA driver or no GPU usable here\n");
		return 2;
	}
	int n = list.n;

	static struct pair_report rep[MAX_GPUS][MAX_GPUS];
	int problems = 0, total = n * (n - 1), done = 0;
	for (int src = 0; src < n; src++)
		for (int dst = 0; dst < n; dst++) {
			if (src == dst)
				continue;
			struct pair_report *r = &rep[src][dst];
			fprintf(stderr, "probing %d->%d (%d/%d)...\n", src, dst, ++done, total);
			struct probe_job job = {src, dst, bytes, s.probe_timeout_ms,
						list.can[src][dst]};
			uint64_t t0 = mono_ms();
			int rc = in_child(probe_one, &job, r, sizeof(*r), child_ms);
			r->can = list.can[src][dst];
			r->rank = list.rank[src][dst];
			r->probe.verdict = NULL;
			if (rc == -ETIMEDOUT) {
				/* Stuck outside the probe's own deadline (a driver call that does
				 * not return): a hang all the same, with nothing measured. */
				memset(&r->probe, 0, sizeof(r->probe));
				r->timed_out = true;
				r->probe.elapsed_ms = (double)(mono_ms() - t0);
				snprintf(r->verdict, sizeof(r->verdict), "hang");
			} else if (rc < 0) {
				memset(&r->probe, 0, sizeof(r->probe));
				r->probe.status = CUDA_ERROR_UNKNOWN;
				snprintf(r->verdict, sizeof(r->verdict), "error");
			}
			if (r->can && strcmp(r->verdict, "ok") != 0)
				problems++;
		}

	if (record) {
		snprintf(s.db_path, sizeof(s.db_path), "%s", p2pg_cli_db_path(db));
		p2pg_recorder_configure(&s, "topo", &p2pg_knowledge_hooks);
		p2pg_failure_configure(s.rules_dir, s.backtraces);
		for (int src = 0; src < n; src++)
			for (int dst = 0; dst < n; dst++)
				if (src != dst)
					record_probe(src, dst, &rep[src][dst], bytes);
		p2pg_recorder_shutdown();
	}
	if (json) {
		print_json(&list, rep, bytes, s.probe_timeout_ms);
		return problems ? 1 : 0;
	}

	printf("%d GPU%s\n", n, n == 1 ? "" : "s");
	for (int d = 0; d < n; d++)
		printf("  GPU%d  %s  %s\n", d, list.name[d], list.bus[d]);
	printf("\nP2P matrix (src row -> dst column): probe verdict\n");
	print_matrix(rep, n, verdict_cell);
	printf("OK: P2P correct and not slower than staging   WRONG: P2P delivers wrong data\n"
	       "SLOW: P2P below 80%% of staging   HANG: a P2P copy never finished\n"
	       "ERR: the probe failed   NO: no P2P access (staged)   X: the device itself\n");
	printf("\nP2P bandwidth, %zu MiB copies (GB/s)\n", bytes >> 20);
	print_matrix(rep, n, p2p_cell);
	printf("\nstaged (through host memory) bandwidth (GB/s)\n");
	print_matrix(rep, n, staged_cell);
	if (record)
		printf("\nrecorded in %s\n", p2pg_cli_db_path(db));
	if (problems)
		printf(
		    "\n%d pair%s where P2P is claimed but lies, hangs or is slower than staging: "
		    "run\njobs there with P2PGUARD_MODE=staged P2PGUARD_PAIRS=... or fallback\n",
		    problems, problems == 1 ? "" : "s");
	return problems ? 1 : 0;
}
