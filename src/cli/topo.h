/* SPDX-License-Identifier: MIT */
/*
 * p2pguard topo: what it learns of each GPU and pair (cmd_topo.c runs it), from NVML
 * (topo_nvml.c: link type, NVLinks, CPU and NUMA affinity) and from copies (topo_bench.c:
 * bandwidth both ways and at once, small-copy latency, a size sweep), and how it prints them
 * (topo_print.c). Every struct here crosses a pipe from a child process: fixed sizes, no pointers.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "probe.h"

#define TOPO_MAX_GPUS  16
#define TOPO_SWEEP_MAX 16

/* One ordered pair's link, as `nvidia-smi topo -m` names it. */
struct topo_link {
	char code[8]; /* "NV18", "PIX", "PXB", "PHB", "NODE", "SYS", "X" or "?" */
	int nvlinks;  /* active NVLinks between the two (through NVSwitches: the fewer of each's) */
	bool nvswitch; /* the NVLinks go through NVSwitches */
	int level;     /* nvmlDeviceGetTopologyCommonAncestor's answer, -1 unknown */
	int p2p_read;  /* nvmlDeviceGetP2PStatus (read), -1 unknown */
};

struct device_list {
	int n;
	char name[TOPO_MAX_GPUS][96];
	char bus[TOPO_MAX_GPUS][32];
	int can[TOPO_MAX_GPUS][TOPO_MAX_GPUS], rank[TOPO_MAX_GPUS][TOPO_MAX_GPUS];
	/* From NVML, where it answers (nvml false: none of these is known). */
	bool nvml;
	char nvml_why[64];
	char uuid[TOPO_MAX_GPUS][96];
	int smi_index[TOPO_MAX_GPUS]; /* nvidia-smi's index, -1 unknown */
	char cpus[TOPO_MAX_GPUS][96]; /* CPU affinity as ranges ("0-15,32-47"), "" unknown */
	int numa[TOPO_MAX_GPUS];      /* NUMA node, -1 unknown */
	struct topo_link link[TOPO_MAX_GPUS][TOPO_MAX_GPUS];
};

/* What copies measured for one ordered pair beyond the probe. */
struct topo_measure {
	double bidir_gbps; /* both directions at once, the sum; 0 not measured */
	double latency_us; /* a small copy's median time, enqueue to completion; 0 not measured */
	int sweep_n;	   /* sizes measured */
	size_t sweep_bytes[TOPO_SWEEP_MAX];
	double sweep_gbps[TOPO_SWEEP_MAX];
	bool p2p; /* measured over P2P (peer access on); else the driver's own path */
};

struct pair_report {
	int can;
	int rank;
	bool timed_out; /* the child did not answer by the deadline: killed, left behind */
	struct p2pg_probe_result probe;
	char verdict[16]; /* probe.verdict, carried across the pipe */
	struct topo_measure m;
};

/* Fills the NVML facts of l (whose n, bus are set). Never fails: what NVML cannot say stays
 * unknown, and l->nvml_why says why when NVML could not be used at all. */
void topo_nvml_facts(struct device_list *l);

struct topo_bench_job {
	int src, dst;
	size_t bytes;
	bool sweep;
	bool can; /* peer access possible: measured over P2P */
};

/* Bidirectional bandwidth, small-copy latency and (job->sweep) the size sweep of one pair, in a
 * process that has initialised CUDA. Returns 0 or the first driver error. */
int topo_bench_pair(const struct topo_bench_job *job, struct topo_measure *m);

struct topo_options {
	size_t bytes;
	bool json, sweep, record;
	const char *db;
	unsigned timeout_ms;
};

void topo_print_text(const struct device_list *l,
		     struct pair_report rep[TOPO_MAX_GPUS][TOPO_MAX_GPUS],
		     const struct topo_options *o, int problems);
void topo_print_json(const struct device_list *l,
		     struct pair_report rep[TOPO_MAX_GPUS][TOPO_MAX_GPUS],
		     const struct topo_options *o);
