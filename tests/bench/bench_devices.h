/* SPDX-License-Identifier: MIT */
/* What every two-device benchmark starts with. */
#pragma once

#include "driver.h"

struct bench_devices {
	CUdevice d0, d1;
	CUcontext ctx0, ctx1; /* primary contexts, retained */
};

/*
 * Loads the driver, initialises it and retains the primary contexts of devices 0 and 1. On failure
 * prints why, prefixed with the program's name, and returns -1.
 */
int bench_devices_open(const char *program, struct bench_devices *ret);

/* For a benchmark's header line: the two devices' names and the driver's version. */
struct bench_devices_names {
	char d0[256], d1[256];
	int driver_version;
};
CUresult bench_devices_describe(const struct bench_devices *dev, struct bench_devices_names *ret);
