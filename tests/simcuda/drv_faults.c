/* SPDX-License-Identifier: MIT */
/*
 * Fault injection and leak accounting (README.md, "Fault injection").
 *
 * SIMCUDA_FAIL=api:error[:every-N][,...] makes a driver entry point fail with error (a name such as
 * CUDA_ERROR_OUT_OF_MEMORY, or its number) on every Nth call (default: every call), before it does
 * anything. api is the base name (cuMemAlloc matches cuMemAlloc_v2; cuStreamDestroy matches its
 * _v2 form); only the outermost entry point of a call counts, not the ones it calls inside.
 *
 * SIMCUDA_REPORT_LEAKS=1 prints, at exit, what is still allocated: device and pinned host bytes,
 * events and streams created and not destroyed.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "sim.h"

#define MAX_FAULTS 32

struct fault {
	char api[64];
	CUresult error;
	unsigned long every;
	atomic_ulong calls;
};

static struct fault faults[MAX_FAULTS];
static int nfaults;
static pthread_once_t faults_once = PTHREAD_ONCE_INIT;
static __thread int api_depth;

_Atomic long sim_live_events, sim_live_streams;

static CUresult parse_error(const char *text, bool *ok)
{
	char *end;
	errno = 0;
	long n = strtol(text, &end, 10);
	*ok = true;
	if (!errno && end != text && *end == '\0' && n > 0 && n < 100000)
		return (CUresult)n;
	for (int code = 1; code < 1000; code++) {
		const char *name = simcuda_drv_error_name(code);
		if (name && strcmp(name, text) == 0)
			return (CUresult)code;
	}
	*ok = false;
	return CUDA_ERROR_UNKNOWN;
}

static void parse_faults(void)
{
	const char *spec = getenv("SIMCUDA_FAIL");
	if (!spec || !*spec)
		return;
	char *copy = strdup(spec), *save = NULL;
	for (char *entry = strtok_r(copy, ",", &save); entry; entry = strtok_r(NULL, ",", &save)) {
		char *api = entry, *error = strchr(entry, ':');
		char *every = error ? strchr(error + 1, ':') : NULL;
		if (error)
			*error++ = '\0';
		if (every)
			*every++ = '\0';
		bool ok =
		    error != NULL && nfaults < MAX_FAULTS && strlen(api) < sizeof(faults[0].api);
		struct fault *f = &faults[nfaults];
		if (ok)
			f->error = parse_error(error, &ok);
		f->every = 1;
		if (ok && every) {
			char *end;
			f->every = strtoul(every, &end, 10);
			ok = *every && *end == '\0' && f->every > 0;
		}
		if (!ok) {
			fprintf(stderr,
				"simcuda: bad SIMCUDA_FAIL entry '%s' (api:error[:every-N])\n",
				api);
			exit(2);
		}
		snprintf(f->api, sizeof(f->api), "%s", api);
		nfaults++;
	}
	free(copy);
}

/* cuStreamDestroy_v2 -> cuStreamDestroy; cuMemcpyPeerAsync_ptsz -> cuMemcpyPeerAsync. */
static size_t base_length(const char *name)
{
	static const char *const suffixes[] = {"_ptds", "_ptsz", "_v2", "_v3"};
	size_t len = strlen(name);
	for (bool again = true; again;) {
		again = false;
		for (size_t k = 0; k < sizeof(suffixes) / sizeof(suffixes[0]); k++) {
			size_t s = strlen(suffixes[k]);
			if (len > s && strncmp(name + len - s, suffixes[k], s) == 0) {
				len -= s;
				again = true;
			}
		}
	}
	return len;
}

int sim_fault_enter(void)
{
	return api_depth++;
}

void sim_fault_leave(int *depth)
{
	api_depth = *depth;
}

CUresult sim_fault_check(const char *func)
{
	pthread_once(&faults_once, parse_faults);
	if (nfaults == 0)
		return CUDA_SUCCESS;
	size_t base = base_length(func);
	for (int k = 0; k < nfaults; k++) {
		struct fault *f = &faults[k];
		if (strcmp(f->api, func) != 0 &&
		    (strlen(f->api) != base || strncmp(f->api, func, base) != 0))
			continue;
		unsigned long n = atomic_fetch_add(&f->calls, 1) + 1;
		if (n % f->every == 0)
			return f->error;
	}
	return CUDA_SUCCESS;
}

__attribute__((destructor)) static void report_leaks(void)
{
	const char *on = getenv("SIMCUDA_REPORT_LEAKS");
	/* Not in a forked child (state 3): what it inherited is its parent's. */
	if (!on || strcmp(on, "1") != 0 || __atomic_load_n(&sim_init_state, __ATOMIC_ACQUIRE) == 3)
		return;
	size_t device = __atomic_load_n(&sim_released_device_bytes, __ATOMIC_RELAXED);
	for (int d = 0; d < sim_cfg.ndev; d++)
		device += sim_mem_used(d);
	fprintf(stderr,
		"simcuda: live at exit: device_bytes=%zu host_bytes=%zu events=%ld streams=%ld\n",
		device,
		sim_mem_used(SIM_REGION_HOST) +
		    __atomic_load_n(&sim_released_host_bytes, __ATOMIC_RELAXED),
		atomic_load(&sim_live_events), atomic_load(&sim_live_streams));
}
