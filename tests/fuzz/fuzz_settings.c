/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the environment's P2PGUARD_* values. The input is the values, NUL-separated
 * (a value may hold a newline, as an environment's can), in the order of names[] (fewer: the rest
 * unset). A warning must stay one line whatever the value holds. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "settings.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const names[] = {
    "P2PGUARD_DISABLE",	   "P2PGUARD_MODE",
    "P2PGUARD_DB",	   "P2PGUARD_RECORD",
    "P2PGUARD_GPU_TIMING", "P2PGUARD_GPU_TIMING_INTERVAL_US",
    "P2PGUARD_STAGING_MB", "P2PGUARD_PAIRS",
    "P2PGUARD_BACKTRACE",  "P2PGUARD_PROBE",
    "P2PGUARD_RULES",	   "P2PGUARD_QUIET",
    "P2PGUARD_NCCL",	   "RANK",
    "LOCAL_RANK",
};
#define NAMES (sizeof(names) / sizeof(names[0]))

static char *values[NAMES];

static char *get(const char *name)
{
	for (size_t k = 0; k < NAMES; k++)
		if (strcmp(name, names[k]) == 0)
			return values[k];
	return NULL;
}

static void warn(const char *line)
{
	for (const char *p = line; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	memset(values, 0, sizeof(values));
	size_t pos = 0;
	for (size_t k = 0; k < NAMES && pos <= size; k++) {
		values[k] = text + pos;
		pos += strlen(text + pos) + 1;
	}
	static struct p2pg_settings s;
	p2pg_settings_parse(&s, get, warn);
	/* A rank is a rank or nothing: never a number made up from what is not one. */
	if (s.rank < -1 || s.local_rank < -1)
		abort();
	char path[sizeof(s.db_path)];
	memcpy(path, s.db_path, sizeof(path));
	if (p2pg_settings_absolute(path, sizeof(path)) == 0 && path[0] != '/')
		abort();
	for (int a = -1; a <= P2PG_MAX_DEVICES; a++)
		p2pg_settings_pair_selected(&s, a, P2PG_MAX_DEVICES - 1 - a);
	p2pg_mode_name(s.mode);
	free(text);
	return 0;
}
