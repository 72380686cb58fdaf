/* SPDX-License-Identifier: MIT */
/*
 * What the preload left in this process: `idle_probe` prints it without touching CUDA,
 * `idle_probe cuda` after the runtime's first call (cudaFree(0)). One line each:
 *   handlers=N  fatal signals (SEGV, BUS, FPE, ILL, ABRT) with a handler installed
 *   core=0|1    libp2pguard-core.so mapped
 *   libraries=  which of SQLite, jansson, libunwind are mapped
 */
#include <cuda_runtime_api.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static bool mapped(const char *name)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[4096];
	bool found = false;
	while (f && !found && fgets(line, sizeof(line), f))
		found = strstr(line, name) != NULL;
	if (f)
		fclose(f);
	return found;
}

static void report(const char *when)
{
	static const int fatal[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
	int handlers = 0;
	for (size_t k = 0; k < sizeof(fatal) / sizeof(fatal[0]); k++) {
		struct sigaction sa;
		if (sigaction(fatal[k], NULL, &sa) == 0 && sa.sa_handler != SIG_DFL &&
		    sa.sa_handler != SIG_IGN)
			handlers++;
	}
	printf("%s handlers=%d core=%d libraries=%s%s%s\n", when, handlers,
	       mapped("libp2pguard-core.so"), mapped("libsqlite3") ? "sqlite," : "",
	       mapped("libjansson") ? "jansson," : "", mapped("libunwind") ? "unwind," : "");
}

int main(int argc, char **argv)
{
	report("start");
	if (argc > 1 && strcmp(argv[1], "cuda") == 0) {
		if (cudaFree(0) != cudaSuccess)
			return 1;
		report("cuda");
	}
	return 0;
}
