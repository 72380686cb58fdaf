/* SPDX-License-Identifier: MIT */
/* P2PGUARD_* parsing: defaults, every accepted value, and one clear line for each bad one. */
#include <string.h>

#include "settings.h"
#include "tap.h"

static const char *env_names[16];
static const char *env_values[16];
static int env_count;
static char warnings[8][512];
static int warning_count;

static char *fake_getenv(const char *name)
{
	for (int k = 0; k < env_count; k++)
		if (strcmp(env_names[k], name) == 0)
			return (char *)env_values[k];
	return NULL;
}

static void collect(const char *line)
{
	if (warning_count < 8)
		snprintf(warnings[warning_count], sizeof(warnings[0]), "%s", line);
	warning_count++;
}

static void parse(struct p2pg_settings *s, const char *name, const char *value)
{
	env_count = 0;
	warning_count = 0;
	if (name) {
		env_names[0] = name;
		env_values[0] = value;
		env_count = 1;
	}
	p2pg_settings_parse(s, fake_getenv, collect);
}

int main(void)
{
	struct p2pg_settings s;
	parse(&s, NULL, NULL);
	CHECK(s.enabled && s.mode == P2PG_MODE_OBSERVE && strcmp(s.db_path, "p2pguard.db") == 0 &&
		  s.record == P2PG_RECORD_ALL && s.gpu_timing == P2PG_GPU_TIMING_SAMPLED &&
		  s.pairs_all && s.staging_bytes == 256u << 20 && warning_count == 0,
	      "defaults, no warning");

	parse(&s, "P2PGUARD_MODE", "STAGED");
	CHECK(s.mode == P2PG_MODE_STAGED && warning_count == 0, "mode names are case-insensitive");
	parse(&s, "P2PGUARD_MODE", "fallback");
	CHECK(s.mode == P2PG_MODE_FALLBACK, "fallback");
	parse(&s, "P2PGUARD_MODE", "turbo");
	CHECK(s.mode == P2PG_MODE_OBSERVE && warning_count == 1 &&
		  strstr(warnings[0], "P2PGUARD_MODE=turbo") &&
		  strstr(warnings[0], "observe, fallback, staged"),
	      "bad mode: default kept, one line naming the variable and the choices (%s)",
	      warnings[0]);
	CHECK(strstr(warnings[0], "; using observe") != NULL,
	      "bad mode: the guard says what it uses instead (%s)", warnings[0]);
	/* A command that refuses the value runs nothing: its line says no "using". */
	warning_count = 0;
	p2pg_settings_check(&s, fake_getenv, collect);
	CHECK(warning_count == 1 &&
		  strcmp(warnings[0], "P2PGUARD_MODE=turbo is not a mode (accepted: observe, "
				      "fallback, staged)") == 0,
	      "bad mode refused: the value and the choices, nothing about a default (%s)",
	      warnings[0]);

	parse(&s, "P2PGUARD_PAIRS", "0-1,3-2");
	CHECK(!s.pairs_all && p2pg_settings_pair_selected(&s, 1, 0) &&
		  p2pg_settings_pair_selected(&s, 2, 3) && !p2pg_settings_pair_selected(&s, 0, 2) &&
		  !p2pg_settings_pair_selected(&s, 1, 1),
	      "pairs are symmetric and exact");
	const char *bad_pairs[] = {"0-0", "1", "0-1,", "a-b", "0-64", "-1-2", "0-1;2-3"};
	for (size_t k = 0; k < sizeof(bad_pairs) / sizeof(bad_pairs[0]); k++) {
		parse(&s, "P2PGUARD_PAIRS", bad_pairs[k]);
		CHECK(s.pairs_all && warning_count == 1, "P2PGUARD_PAIRS=%s rejected, all kept",
		      bad_pairs[k]);
	}
	parse(&s, "P2PGUARD_STAGING_MB", "64");
	CHECK(s.staging_bytes == 64u << 20, "staging MiB");
	parse(&s, "P2PGUARD_STAGING_MB", "0");
	CHECK(s.staging_bytes == 256u << 20 && warning_count == 1, "staging 0 rejected");
	parse(&s, "P2PGUARD_GPU_TIMING_INTERVAL_US", "12x");
	CHECK(s.gpu_timing_interval_us == 50 && warning_count == 1,
	      "timing interval: trailing garbage rejected");
	parse(&s, "P2PGUARD_GPU_TIMING_INTERVAL_US", "0");
	CHECK(s.gpu_timing_interval_us == 0 && warning_count == 0, "timing interval 0 accepted");
	parse(&s, "P2PGUARD_GPU_TIMING", "cupti");
	CHECK(s.gpu_timing == P2PG_GPU_TIMING_CUPTI && warning_count == 0, "timing cupti");
	parse(&s, "P2PGUARD_GPU_TIMING", "everything");
	CHECK(s.gpu_timing == P2PG_GPU_TIMING_SAMPLED && warning_count == 1,
	      "an unknown timing: a warning, the default (sampled)");
	parse(&s, "P2PGUARD_RECORD", "summary");
	CHECK(s.record == P2PG_RECORD_SUMMARY, "record summary");
	parse(&s, "P2PGUARD_DISABLE", "yes");
	CHECK(!s.enabled, "disable");
	parse(&s, "P2PGUARD_BACKTRACE", "maybe");
	CHECK(s.backtraces && warning_count == 1, "bad boolean rejected");
	parse(&s, NULL, NULL);
	CHECK(s.probe_timeout_ms == 5000 && s.stall_s == 30,
	      "probe deadline 5 s, stalls after 30 s");
	parse(&s, "P2PGUARD_PROBE_TIMEOUT_MS", "250");
	CHECK(s.probe_timeout_ms == 250 && warning_count == 0, "probe deadline 250 ms");
	parse(&s, "P2PGUARD_PROBE_TIMEOUT_MS", "0");
	CHECK(s.probe_timeout_ms == 5000 && warning_count == 1 &&
		  strstr(warnings[0], "P2PGUARD_PROBE_TIMEOUT_MS=0"),
	      "probe deadline 0 rejected: one line, 5000 kept (%s)", warnings[0]);
	parse(&s, "P2PGUARD_STALL_S", "1");
	CHECK(s.stall_s == 1 && warning_count == 0, "stall after 1 s");
	parse(&s, "P2PGUARD_STALL_S", "30s");
	CHECK(s.stall_s == 30 && warning_count == 1 && strstr(warnings[0], "P2PGUARD_STALL_S=30s"),
	      "stall 30s rejected: one line, 30 kept (%s)", warnings[0]);
	parse(&s, "P2PGUARD_DB", "/tmp/x.db");
	CHECK(strcmp(s.db_path, "/tmp/x.db") == 0, "database path");
	parse(&s, NULL, NULL);
	CHECK(s.nccl, "NCCL's profiler plugin: on by default");
	parse(&s, "P2PGUARD_NCCL", "0");
	CHECK(!s.nccl && warning_count == 0, "P2PGUARD_NCCL=0 turns it off");
	parse(&s, "P2PGUARD_NCCL", "sometimes");
	CHECK(s.nccl && warning_count == 1 && strstr(warnings[0], "P2PGUARD_NCCL=sometimes"),
	      "P2PGUARD_NCCL=sometimes rejected: one line, on kept (%s)", warnings[0]);
	return TAP_DONE();
}
