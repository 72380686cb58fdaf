/* SPDX-License-Identifier: MIT */
/*
 * What the PCIe evidence says and costs on this machine: for each pair of PCI functions, the
 * facts p2pg_evidence_pcie_gather writes (ACS control of the bridges between them, IOMMU groups,
 * a shared switch) and the median CPU time of one gather (it runs on every failure, uncached).
 *   build/tests/bench/bench_pcie [--root SYSFS] [--repeats N] [BUS_ID BUS_ID]...
 * Without bus ids: every pair of NVIDIA display or 3D controllers in sysfs; with fewer than two,
 * the first one paired with each other function that is not a bridge (at most 16), so that one
 * GPU's bridges are still read. scripts/gpu-parts/kb-pcie.sh compares the result with lspci.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "evidence-pcie.h"

#define MAX_FUNCS 512

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int compare_doubles(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static unsigned long read_hex(const char *root, const char *bdf, const char *file)
{
	char path[4096], text[64] = "";
	snprintf(path, sizeof(path), "%s/bus/pci/devices/%s/%s", root, bdf, file);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	if (!fgets(text, sizeof(text), f))
		text[0] = '\0';
	fclose(f);
	return strtoul(text, NULL, 16);
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void measure(const char *a, const char *b, int repeats)
{
	double *t = calloc((size_t)repeats, sizeof(double));
	struct p2pg_facts facts;
	char json[4096];

	if (!t)
		exit(2);
	for (int r = 0; r < repeats; r++) {
		memset(&facts, 0, sizeof(facts));
		double t0 = now_us();
		p2pg_evidence_pcie_gather(a, b, &facts);
		t[r] = now_us() - t0;
	}
	qsort(t, (size_t)repeats, sizeof(double), compare_doubles);
	if (p2pg_facts_to_json(&facts, json, sizeof(json)) < 0)
		snprintf(json, sizeof(json), "(too long)");
	printf("| %s | %s | %.1f us | `%s` |\n", a, b, t[repeats / 2], json);
	free(t);
}

int main(int argc, char **argv)
{
	const char *root = "/sys";
	int repeats = 200, first = 1;
	char *funcs[MAX_FUNCS];
	size_t n = 0, gpus = 0;

	for (; first < argc && argv[first][0] == '-'; first += 2) {
		if (first + 1 >= argc)
			return 2;
		if (strcmp(argv[first], "--root") == 0)
			root = argv[first + 1];
		else if (strcmp(argv[first], "--repeats") == 0)
			repeats = atoi(argv[first + 1]) > 0 ? atoi(argv[first + 1]) : 1;
		else
			return 2;
	}
	p2pg_evidence_pcie_set_root(root);
	printf("bench_pcie: sysfs at %s, %d gathers a pair (median of CPU time)\n", root, repeats);
	printf("| device | peer | one gather | facts |\n|---|---|---|---|\n");
	if (first < argc) {
		for (int k = first; k + 1 < argc; k += 2)
			measure(argv[k], argv[k + 1], repeats);
		return 0;
	}

	char path[4096];
	snprintf(path, sizeof(path), "%s/bus/pci/devices", root);
	DIR *dir = opendir(path);
	if (!dir) {
		fprintf(stderr, "bench_pcie: cannot read %s\n", path);
		return 1;
	}
	struct dirent *e;
	while ((e = readdir(dir)) && n < MAX_FUNCS)
		if (e->d_name[0] != '.')
			funcs[n++] = strdup(e->d_name);
	closedir(dir);
	qsort(funcs, n, sizeof(funcs[0]), by_name);
	/* NVIDIA GPUs first, in bus order. */
	for (size_t k = 0; k < n; k++) {
		unsigned long class = read_hex(root, funcs[k], "class") >> 16;
		if (read_hex(root, funcs[k], "vendor") == 0x10de && (class == 0x03)) {
			char *gpu = funcs[k];
			memmove(funcs + gpus + 1, funcs + gpus, (k - gpus) * sizeof(funcs[0]));
			funcs[gpus++] = gpu;
		}
	}
	if (gpus >= 2) {
		for (size_t a = 0; a < gpus; a++)
			for (size_t b = a + 1; b < gpus; b++)
				measure(funcs[a], funcs[b], repeats);
	} else {
		size_t shown = 0;
		for (size_t k = 1; k < n && shown < 16; k++)
			if (read_hex(root, funcs[k], "class") >> 8 != 0x0604) {
				measure(funcs[0], funcs[k], repeats);
				shown++;
			}
	}
	for (size_t k = 0; k < n; k++)
		free(funcs[k]);
	return 0;
}
