/* SPDX-License-Identifier: MIT */
/*
 * p2pguard topo: for every ordered pair of GPUs, what the driver claims (can-access, P2P
 * attributes) and what a probe measures (P2P correct? P2P and staged bandwidth), as a matrix, and
 * recorded into the database like the guard's own findings.
 *
 * Every CUDA call is made in a child process: one that lists the devices, then one per pair. A
 * stuck P2P copy (IOMMU/ACS, some VMs) can leave a process unable to finish, so a child that does
 * not answer by the deadline is killed and left behind, and the matrix goes on. The parent never
 * initialises CUDA (or NVML), which would not survive the fork. The listing child also asks NVML
 * for the links and affinities (topo_nvml.c); each pair's child, after the probe, measures both
 * directions at once, a small copy's latency and, with --sweep, bandwidth by size (topo_bench.c).
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
#include "dbread.h"
#include "driver.h"
#include "failure.h"
#include "notice.h"
#include "probe.h"
#include "recorder.h"
#include "clock.h"
#include "settings.h"
#include "topo.h"

#define MAX_GPUS TOPO_MAX_GPUS

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
	topo_nvml_facts(l);
}

struct probe_job {
	int src, dst;
	size_t bytes;
	unsigned timeout_ms;
	int can;
	bool sweep;
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
	/* Measured further only where the probe found nothing wrong (a lying or stuck pair is not
	 * a pair to time), or where there is no P2P (the driver's own path, as a program gets it).
	 */
	bool healthy = strcmp(r->verdict, "ok") == 0 || strcmp(r->verdict, "slow") == 0;
	if (r->probe.status == 0 && (healthy || !job->can)) {
		struct topo_bench_job bench = {job->src, job->dst, job->bytes, job->sweep,
					       job->can != 0};
		topo_bench_pair(&bench, &r->m);
	}
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

static void usage(FILE *out)
{
	fputs(
	    "Usage: p2pguard topo [--db PATH] [--bytes N] [--sweep] [--no-record] [--json]\n"
	    "\n"
	    "For every GPU and ordered pair of GPUs on this machine: the link as nvidia-smi topo "
	    "-m\n"
	    "names it (NV# for NVLinks, PIX, PXB, PHB, NODE, SYS from NVML) with each GPU's CPU\n"
	    "and NUMA affinity; what the driver claims (can-access, P2P attributes); and what\n"
	    "copies measure: a health probe (P2P correct? faster than staging through host\n"
	    "memory?), bandwidth one way, both ways at once and staged, and the latency of a\n"
	    "small copy. Copy-engine copies (cuMemcpyPeerAsync); each pair in a process of its\n"
	    "own that is killed if a copy never finishes (the pair is then HANG).\n"
	    "\n"
	    "  --db PATH    record the findings there (default $P2PGUARD_DB, else p2pguard.db)\n"
	    "  --bytes N    the copy size (default 64 MiB)\n"
	    "  --sweep      also bandwidth by copy size, from 4 KiB by factors of 4 up to N\n"
	    "  --no-record  write no database\n"
	    "  --json       everything as one JSON object\n"
	    "\n"
	    "Exit status: 0 no pair in trouble, 1 a pair whose P2P lies, hangs or is slower than\n"
	    "staging (the closing hint names them), 2 no GPU, no driver or a usage error.\n"
	    "Progress is redrawn on one line when stderr is a terminal; nothing when it is not.\n",
	    out);
}

static void quiet_warn(const char *line)
{
	fprintf(stderr, "p2pguard: %s\n", line);
}

int p2pg_cmd_topo(int argc, char **argv)
{
	const char *db = NULL;
	size_t bytes = 64u << 20;
	bool record = true, json = false, sweep = false;
	static const struct option options[] = {{"db", required_argument, NULL, 'd'},
						{"bytes", required_argument, NULL, 'b'},
						{"no-record", no_argument, NULL, 'n'},
						{"json", no_argument, NULL, 'j'},
						{"sweep", no_argument, NULL, 's'},
						{"help", no_argument, NULL, 'h'},
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
		else if (opt == 's')
			sweep = true;
		else if (opt == 'h') {
			usage(stdout);
			return 0;
		} else {
			fprintf(stderr, "p2pguard topo: unknown option %s (p2pguard topo --help)\n",
				argv[optind - 1]);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "p2pguard topo: unexpected argument %s (p2pguard topo --help)\n",
			argv[optind]);
		return 2;
	}
	if (bytes < 4096) {
		fprintf(stderr, "p2pguard topo: --bytes wants at least 4096\n");
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
	bool tty = isatty(STDERR_FILENO) == 1;
	for (int src = 0; src < n; src++)
		for (int dst = 0; dst < n; dst++) {
			if (src == dst)
				continue;
			struct pair_report *r = &rep[src][dst];
			/* One line redrawn on a terminal; into a pipe or a file, nothing. */
			++done;
			if (tty)
				fprintf(stderr, "\r\033[Kprobing %d->%d (%d/%d)...", src, dst, done,
					total);
			struct probe_job job = {
			    src, dst, bytes, s.probe_timeout_ms, list.can[src][dst], sweep};
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
	if (tty && total)
		fputs("\r\033[K", stderr);
	struct topo_options o = {.bytes = bytes,
				 .json = json,
				 .sweep = sweep,
				 .record = record,
				 .db = p2pg_cli_db_path(db),
				 .timeout_ms = s.probe_timeout_ms};
	if (json)
		topo_print_json(&list, rep, &o);
	else
		topo_print_text(&list, rep, &o, problems);
	return problems ? 1 : 0;
}
