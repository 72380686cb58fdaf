/* SPDX-License-Identifier: MIT */
/* libFuzzer target: one rule file's text through the public loader, then the set it made used the
 * way the guard and the CLI use it; and the same bytes through both JSON readers, which must build
 * the same tree wherever both accept the text, also when the checked reader is given a count of
 * values. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "../rules/json-same.h"
#include "json.h"
#include "p2pguard/rules.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void ignore(void *userdata, const char *file, int line, const char *message)
{
}

static void compare_readers(const uint8_t *data, size_t size)
{
	struct p2pg_json *strict = NULL, *checked = NULL;
	int a = p2pg_json_parse((const char *)data, size, &strict, NULL);
	int b = p2pg_json_parse_checked((const char *)data, size, &checked);
	if (a == 0 && b == 0 && json_first_difference(strict, checked) != 0)
		abort();
	p2pg_json_free(checked);
	/* A count of values given by the caller, right or wrong, never reads or writes past what
	 * it allocated; when it is accepted, the tree is the same. */
	size_t values = size ? (size_t)data[0] % 16 + 1 : 1;
	checked = NULL;
	b = p2pg_json_parse_checked_values((const char *)data, size, values, &checked);
	if (a == 0 && b == 0 && json_first_difference(strict, checked) != 0)
		abort();
	p2pg_json_free(strict);
	p2pg_json_free(checked);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	compare_readers(data, size);
	struct p2pg_ruleset *rs = p2pg_ruleset_new();
	if (!rs)
		return 0;
	p2pg_ruleset_add_text(rs, "fuzz.json", (const char *)data, size, ignore, NULL);
	p2pg_ruleset_check_examples(rs, ignore, NULL);
	const struct p2pg_rule *found[8];
	p2pg_ruleset_explain(rs, "cudaErrorPeerAccessUnsupported (217) peer access", found, 8);
	p2pg_ruleset_match(rs, "cudaDeviceEnablePeerAccess", 217, NULL);
	for (size_t k = 0; k < p2pg_ruleset_count(rs); k++) {
		const struct p2pg_rule *rule = p2pg_ruleset_at(rs, k);
		const char *a, *b;
		double rate;
		for (size_t w = 0; w < p2pg_rule_workaround_count(rule); w++)
			p2pg_rule_workaround(rule, w, &a, &b, &rate);
		for (size_t d = 0; d < p2pg_rule_dead_end_count(rule); d++)
			p2pg_rule_dead_end(rule, d, &a, &b, &rate);
		p2pg_rule_advice(rule);
		p2pg_rule_dead_ends(rule);
	}
	p2pg_ruleset_free(rs);
	return 0;
}
