/* SPDX-License-Identifier: MIT */
/*
 * topo's output: GPU x GPU tables that fit 80 columns for 8 GPUs as `nvidia-smi topo -m` does
 * (source rows, destination columns), and the same facts as one JSON object.
 */
#include <stdio.h>
#include <string.h>

#include "report_format.h"
#include "topo.h"

typedef void (*cell_fn)(const struct device_list *l, const struct pair_report *r, int s, int d,
			char *cell, size_t len);

static void print_matrix(const struct device_list *l,
			 struct pair_report rep[TOPO_MAX_GPUS][TOPO_MAX_GPUS], cell_fn cell)
{
	printf("      ");
	for (int d = 0; d < l->n; d++) {
		char head[16];
		snprintf(head, sizeof(head), "GPU%d", d);
		printf("%8s ", head);
	}
	printf("\n");
	for (int s = 0; s < l->n; s++) {
		printf("GPU%-3d", s);
		for (int d = 0; d < l->n; d++) {
			char text[32] = "X";
			if (s != d)
				cell(l, &rep[s][d], s, d, text, sizeof(text));
			printf("%8s ", text);
		}
		printf("\n");
	}
}

/* Short words, so that 8 GPUs fit 80 columns. */
static void verdict_cell(const struct device_list *l, const struct pair_report *r, int s, int d,
			 char *cell, size_t len)
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

static void gbps_cell(double v, char *cell, size_t len)
{
	if (v > 0)
		snprintf(cell, len, "%.1f", v);
	else
		snprintf(cell, len, "-");
}

static void p2p_cell(const struct device_list *l, const struct pair_report *r, int s, int d,
		     char *cell, size_t len)
{
	if (r->can && strcmp(r->verdict, "hang") == 0)
		snprintf(cell, len, "HANG");
	else
		gbps_cell(r->can ? r->probe.p2p_gbps : 0, cell, len);
}

static void staged_cell(const struct device_list *l, const struct pair_report *r, int s, int d,
			char *cell, size_t len)
{
	gbps_cell(r->probe.staged_gbps, cell, len);
}

static void bidir_cell(const struct device_list *l, const struct pair_report *r, int s, int d,
		       char *cell, size_t len)
{
	gbps_cell(r->m.bidir_gbps, cell, len);
}

static void latency_cell(const struct device_list *l, const struct pair_report *r, int s, int d,
			 char *cell, size_t len)
{
	if (r->m.latency_us > 0)
		snprintf(cell, len, "%.1f", r->m.latency_us);
	else
		snprintf(cell, len, "-");
}

static bool any_measure(const struct device_list *l,
			struct pair_report rep[TOPO_MAX_GPUS][TOPO_MAX_GPUS])
{
	for (int s = 0; s < l->n; s++)
		for (int d = 0; d < l->n; d++)
			if (s != d && (rep[s][d].m.bidir_gbps > 0 || rep[s][d].m.latency_us > 0))
				return true;
	return false;
}

static void links(const struct device_list *l)
{
	printf("\nLinks (as nvidia-smi topo -m)\n      ");
	for (int d = 0; d < l->n; d++) {
		char head[16];
		snprintf(head, sizeof(head), "GPU%d", d);
		printf("%6s", head);
	}
	printf("  CPU Affinity     NUMA\n");
	for (int s = 0; s < l->n; s++) {
		printf("GPU%-3d", s);
		for (int d = 0; d < l->n; d++)
			printf("%6s", l->link[s][d].code);
		char numa[16] = "N/A";
		if (l->numa[s] >= 0)
			snprintf(numa, sizeof(numa), "%d", l->numa[s]);
		printf("  %-16s %s\n", l->cpus[s][0] ? l->cpus[s] : "N/A", numa);
	}
	if (!l->nvml)
		printf("(NVML unavailable: %s; links unknown)\n", l->nvml_why);
	else
		printf("NV#: # NVLinks (through NVSwitches: the fewer of the two GPUs')  PIX: one "
		       "PCIe\n"
		       "switch  PXB: several switches  PHB: a PCIe host bridge  NODE: host bridges "
		       "of\n"
		       "one NUMA node  SYS: across NUMA nodes  ?: NVML did not say\n");
}

static void sweep(const struct device_list *l, struct pair_report rep[TOPO_MAX_GPUS][TOPO_MAX_GPUS])
{
	const struct topo_measure *first = NULL;
	for (int s = 0; s < l->n && !first; s++)
		for (int d = 0; d < l->n && !first; d++)
			if (s != d && rep[s][d].m.sweep_n)
				first = &rep[s][d].m;
	if (!first)
		return;
	printf("\nbandwidth by copy size (GB/s, one direction, best of three batches of %d)\n"
	       "pair   ",
	       5);
	for (int k = 0; k < first->sweep_n; k++) {
		size_t b = first->sweep_bytes[k];
		char head[16];
		if (b >= (1u << 20))
			snprintf(head, sizeof(head), "%zuM", b >> 20);
		else
			snprintf(head, sizeof(head), "%zuK", b >> 10);
		printf("%7s", head);
	}
	printf("\n");
	for (int s = 0; s < l->n; s++)
		for (int d = 0; d < l->n; d++) {
			const struct topo_measure *m = &rep[s][d].m;
			if (s == d || !m->sweep_n)
				continue;
			char pair[32];
			snprintf(pair, sizeof(pair), "%d->%d", s, d);
			printf("%-7s", pair);
			for (int k = 0; k < m->sweep_n; k++)
				printf("%7.1f", m->sweep_gbps[k]);
			printf("%s\n", m->p2p ? "" : "  (driver path)");
		}
}

/* Room for every pair of TOPO_MAX_GPUS as P2PGUARD_PAIRS writes it. */
#define STAGE_PAIRS_LEN (TOPO_MAX_GPUS * TOPO_MAX_GPUS * 6)

/*
 * The pairs to stage, as P2PGUARD_PAIRS takes them (unordered: "0-1,2-3"), from every pair whose
 * P2P is claimed but lies, hangs or is slower than staging; which (NULL: not wanted) lists those
 * ordered pairs with their verdict ("0->1 WRONG, 1->0 WRONG").
 */
static void stage_pairs(const struct device_list *l,
			struct pair_report rep[TOPO_MAX_GPUS][TOPO_MAX_GPUS],
			char pairs[STAGE_PAIRS_LEN], char *which, size_t which_len)
{
	size_t pl = 0, wl = 0;
	pairs[0] = '\0';
	for (int s = 0; s < l->n; s++)
		for (int d = 0; d < l->n; d++) {
			const struct pair_report *r = &rep[s][d];
			if (s == d || !r->can || strcmp(r->verdict, "ok") == 0)
				continue;
			if (which) {
				char word[16];
				verdict_cell(l, r, s, d, word, sizeof(word));
				wl += (size_t)snprintf(which + wl, which_len - wl, "%s%d->%d %s",
						       wl ? ", " : "", s, d, word);
			}
			const struct pair_report *back = &rep[d][s];
			bool back_bad = back->can && strcmp(back->verdict, "ok") != 0;
			if (s < d || !back_bad)
				pl += (size_t)snprintf(pairs + pl, STAGE_PAIRS_LEN - pl, "%s%d-%d",
						       pl ? "," : "", s < d ? s : d, s < d ? d : s);
		}
}

void topo_print_text(const struct device_list *l,
		     struct pair_report rep[TOPO_MAX_GPUS][TOPO_MAX_GPUS],
		     const struct topo_options *o, int problems)
{
	printf("%d GPU%s\n", l->n, l->n == 1 ? "" : "s");
	for (int d = 0; d < l->n; d++) {
		printf("  GPU%d  %s  %s\n", d, l->name[d], l->bus[d]);
		/* A line of its own: a UUID is 40 columns. */
		if (l->nvml && strcmp(l->uuid[d], "?") != 0)
			printf("        %s", l->uuid[d]);
		if (l->nvml && l->smi_index[d] >= 0 && l->smi_index[d] != d)
			printf("  (nvidia-smi's GPU %d)", l->smi_index[d]);
		if (l->nvml && strcmp(l->uuid[d], "?") != 0)
			printf("\n");
	}
	links(l);
	printf("\nP2P matrix (src row -> dst column): probe verdict\n");
	print_matrix(l, rep, verdict_cell);
	printf("OK: P2P correct and not slower than staging   WRONG: P2P delivers wrong data\n"
	       "SLOW: P2P below 80%% of staging   HANG: a P2P copy never finished\n"
	       "ERR: the probe failed   NO: no P2P access (staged)   X: the device itself\n");
	printf("\nP2P bandwidth, one direction, %zu MiB copies (GB/s)\n", o->bytes >> 20);
	print_matrix(l, rep, p2p_cell);
	printf("\nstaged (through host memory) bandwidth (GB/s)\n");
	print_matrix(l, rep, staged_cell);
	if (any_measure(l, rep)) {
		printf(
		    "\nboth directions at once, %zu MiB copies each way (GB/s, the sum; P2P where\n"
		    "the pair has it, else the driver's path)\n",
		    o->bytes >> 20);
		print_matrix(l, rep, bidir_cell);
		printf(
		    "\nsmall-copy latency (us: 8 bytes, enqueue to completion, median of 101)\n");
		print_matrix(l, rep, latency_cell);
	}
	sweep(l, rep);
	if (o->record)
		printf("\nrecorded in %s\n", o->db);
	if (!problems)
		return;
	char pairs[STAGE_PAIRS_LEN], which[TOPO_MAX_GPUS * TOPO_MAX_GPUS * 14] = "";
	stage_pairs(l, rep, pairs, which, sizeof(which));
	char text[sizeof(which) + 128];
	snprintf(text, sizeof(text),
		 "%d pair%s where P2P is claimed but lies, hangs or is slower than staging: %s.",
		 problems, problems == 1 ? "" : "s", which);
	printf("\n");
	fmt_wrap(stdout, text, 0, 0, 80);
	printf("Run jobs on this node with P2PGUARD_MODE=staged P2PGUARD_PAIRS=%s\n"
	       "(or P2PGUARD_MODE=fallback, which probes each pair at its first use).\n",
	       pairs);
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

static void json_gbps(double v)
{
	if (v > 0)
		printf("%.3f", v);
	else
		printf("null");
}

void topo_print_json(const struct device_list *l,
		     struct pair_report rep[TOPO_MAX_GPUS][TOPO_MAX_GPUS],
		     const struct topo_options *o)
{
	printf("{\"bytes\": %zu, \"probe_timeout_ms\": %u, \"nvml\": {\"available\": %s, \"why\": ",
	       o->bytes, o->timeout_ms, l->nvml ? "true" : "false");
	if (l->nvml)
		printf("null");
	else
		json_string(l->nvml_why);
	printf("}, \"devices\": [");
	for (int d = 0; d < l->n; d++) {
		printf("%s{\"index\": %d, \"name\": ", d ? ", " : "", d);
		json_string(l->name[d]);
		printf(", \"pci_bus_id\": ");
		json_string(l->bus[d]);
		printf(", \"uuid\": ");
		if (strcmp(l->uuid[d], "?") != 0)
			json_string(l->uuid[d]);
		else
			printf("null");
		printf(", \"nvidia_smi_index\": ");
		l->smi_index[d] >= 0 ? printf("%d", l->smi_index[d]) : printf("null");
		printf(", \"cpu_affinity\": ");
		l->cpus[d][0] ? json_string(l->cpus[d]) : (void)printf("null");
		printf(", \"numa_node\": ");
		l->numa[d] >= 0 ? printf("%d", l->numa[d]) : printf("null");
		printf("}");
	}
	printf("], \"pairs\": [");
	bool first = true;
	for (int s = 0; s < l->n; s++)
		for (int d = 0; d < l->n; d++) {
			if (s == d)
				continue;
			const struct pair_report *r = &rep[s][d];
			const struct topo_link *lk = &l->link[s][d];
			printf("%s{\"src\": %d, \"dst\": %d, \"can_access\": %s, "
			       "\"performance_rank\": %d, \"link\": {\"type\": ",
			       first ? "" : ", ", s, d, r->can ? "true" : "false", r->rank);
			if (strcmp(lk->code, "?") != 0)
				json_string(lk->code);
			else
				printf("null");
			printf(", \"nvlinks\": %d, \"nvswitch\": %s, \"common_ancestor_level\": ",
			       lk->nvlinks, lk->nvswitch ? "true" : "false");
			lk->level >= 0 ? printf("%d", lk->level) : printf("null");
			printf(", \"nvml_p2p_read\": ");
			lk->p2p_read >= 0 ? printf("%d", lk->p2p_read) : printf("null");
			printf("}, \"verdict\": ");
			json_string(r->can ? r->verdict : "staged");
			printf(", \"status\": %d, \"p2p_correct\": %s, \"staged_correct\": %s, "
			       "\"bandwidth_gbps\": {\"p2p\": ",
			       r->probe.status, r->probe.p2p_correct ? "true" : "false",
			       r->probe.staged_correct ? "true" : "false");
			json_gbps(r->can ? r->probe.p2p_gbps : 0);
			printf(", \"staged\": ");
			json_gbps(r->probe.staged_gbps);
			printf(", \"bidirectional\": ");
			json_gbps(r->m.bidir_gbps);
			printf("}, \"bidirectional_over_p2p\": %s, \"latency_us\": ",
			       r->m.p2p ? "true" : "false");
			if (r->m.latency_us > 0)
				printf("%.2f", r->m.latency_us);
			else
				printf("null");
			printf(", \"sweep\": [");
			for (int k = 0; k < r->m.sweep_n; k++)
				printf("%s{\"bytes\": %zu, \"gbps\": %.3f}", k ? ", " : "",
				       r->m.sweep_bytes[k], r->m.sweep_gbps[k]);
			printf("], \"probe_ms\": %.1f, \"timed_out\": %s}", r->probe.elapsed_ms,
			       r->timed_out ? "true" : "false");
			first = false;
		}
	/* The text's closing advice: "" when no pair needs staging. */
	char pairs[STAGE_PAIRS_LEN];
	stage_pairs(l, rep, pairs, NULL, 0);
	printf("], \"stage_pairs\": ");
	json_string(pairs);
	printf("}\n");
}
