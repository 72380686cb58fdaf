/* SPDX-License-Identifier: MIT */
/*
 * p2pguard topo: for every ordered pair of GPUs, what the driver claims (can-access, P2P
 * attributes) and what a probe measures (P2P correct? P2P and staged bandwidth), as a matrix, and
 * recorded into the database like the guard's own findings.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api.h"
#include "cli.h"
#include "driver.h"
#include "failure.h"
#include "guard.h"
#include "notice.h"
#include "probe.h"
#include "recorder.h"
#include "settings.h"

#define MAX_GPUS 16

static uint64_t realtime_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct pair_report {
	int can;
	int rank;
	struct p2pg_probe_result probe;
};

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
		    .started_ns = realtime_ns(),
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
	if (r->can && strcmp(r->probe.verdict, "ok") != 0) {
		char args[192];
		snprintf(args, sizeof(args), "p2pguard topo: p2p %s at %.1f GB/s, staged %.1f GB/s",
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
					 .started_ns = realtime_ns(),
					 .peer_access_enabled = 1,
					 .probe = r->probe.verdict};
		p2pg_failure_record(&f);
	}
}

static void verdict_cell(const struct pair_report *r, char *cell, size_t len)
{
	snprintf(cell, len, "%s/%s", r->can ? "yes" : "no", r->can ? r->probe.verdict : "staged");
}

static void bandwidth_cell(const struct pair_report *r, char *cell, size_t len)
{
	if (r->can)
		snprintf(cell, len, "%.1f | %.1f", r->probe.p2p_gbps, r->probe.staged_gbps);
	else
		snprintf(cell, len, "- | %.1f", r->probe.staged_gbps);
}

/* A GPU x GPU table, source rows and destination columns, one cell per ordered pair. */
static void print_matrix(struct pair_report rep[MAX_GPUS][MAX_GPUS], int n,
			 void (*cell)(const struct pair_report *, char *, size_t))
{
	printf("        ");
	for (int d = 0; d < n; d++)
		printf("GPU%-12d", d);
	printf("\n");
	for (int s = 0; s < n; s++) {
		printf("  GPU%-3d", s);
		for (int d = 0; d < n; d++) {
			char text[32] = "-";
			if (s != d)
				cell(&rep[s][d], text, sizeof(text));
			printf("%-15s", text);
		}
		printf("\n");
	}
}

static void usage(void)
{
	fputs("usage: p2pguard topo [--db PATH] [--bytes N] [--no-record]\n", stderr);
}

static void quiet_warn(const char *line)
{
	fprintf(stderr, "p2pguard: %s\n", line);
}

int p2pg_cmd_topo(int argc, char **argv)
{
	const char *db = NULL;
	size_t bytes = 64u << 20;
	bool record = true;
	static const struct option options[] = {{"db", required_argument, NULL, 'd'},
						{"bytes", required_argument, NULL, 'b'},
						{"no-record", no_argument, NULL, 'n'},
						{NULL, 0, NULL, 0}};
	int opt;
	optind = 1;
	while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
		if (opt == 'd')
			db = optarg;
		else if (opt == 'b')
			bytes = strtoull(optarg, NULL, 0);
		else if (opt == 'n')
			record = false;
		else {
			usage();
			return 2;
		}
	}
	if (p2pg_driver_load() < 0 || p2pg_drv.cuInit(0) != CUDA_SUCCESS) {
		fprintf(stderr, "p2pguard: no CUDA driver or no GPU usable here\n");
		return 2;
	}
	int n = 0;
	p2pg_drv.cuDeviceGetCount(&n);
	if (n > MAX_GPUS)
		n = MAX_GPUS;
	if (record) {
		struct p2pg_settings s;
		p2pg_settings_parse(&s, getenv, quiet_warn);
		snprintf(s.db_path, sizeof(s.db_path), "%s", p2pg_cli_db_path(db));
		p2pg_recorder_configure(&s, "topo");
		p2pg_failure_configure(s.rules_dir, s.backtraces);
	}

	printf("%d GPU%s\n", n, n == 1 ? "" : "s");
	for (int d = 0; d < n; d++) {
		char name[128] = "?", bus[32] = "?";
		p2pg_drv.cuDeviceGetName(name, sizeof(name), d);
		p2pg_drv.cuDeviceGetPCIBusId(bus, sizeof(bus), d);
		printf("  GPU%d  %s  %s\n", d, name, bus);
	}
	static struct pair_report rep[MAX_GPUS][MAX_GPUS];
	int problems = 0;
	for (int s = 0; s < n; s++)
		for (int d = 0; d < n; d++) {
			if (s == d)
				continue;
			struct pair_report *r = &rep[s][d];
			p2pg_drv.cuDeviceCanAccessPeer(&r->can, s, d);
			p2pg_drv.cuDeviceGetP2PAttribute(
			    &r->rank, CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK, s, d);
			p2pg_probe_pair(s, d, bytes, 3, r->can != 0, 5000, &r->probe);
			if (r->can && strcmp(r->probe.verdict, "ok") != 0)
				problems++;
			if (record)
				record_probe(s, d, r, bytes);
		}

	printf("\nP2P matrix (src row -> dst column): can-access / probe verdict\n");
	print_matrix(rep, n, verdict_cell);
	printf("\nbandwidth, %zu MiB copies (GB/s): p2p | staged\n", bytes >> 20);
	print_matrix(rep, n, bandwidth_cell);
	if (record) {
		p2pg_recorder_shutdown();
		printf("\nrecorded in %s\n", p2pg_cli_db_path(db));
	}
	if (problems)
		printf(
		    "\n%d pair%s where P2P is claimed but lies or is slower than staging: run jobs "
		    "there with P2PGUARD_MODE=staged P2PGUARD_PAIRS=... or fallback\n",
		    problems, problems == 1 ? "" : "s");
	return problems ? 1 : 0;
}
