/* SPDX-License-Identifier: MIT */
/*
 * An NCCL stall's facts (nccl_op, nccl_peer_state: rules/README.md) matched against the knowledge
 * base like a failed call's evidence, so that a user's rules folder can refine the builtin
 * nccl/ rules.
 */
#include "nccl_stall.h"

#include <stddef.h>

#include "p2pguard/facts.h"
#include "p2pguard/rules.h"

bool p2pg_nccl_stall_diagnosis(const char *rules_dir, const char *func, const char *peer_state,
			       const char **rule_id, const char **root_cause, const char **advice)
{
	static struct p2pg_ruleset *rs; /* kept for the process's life: the answers point into it */
	static bool loaded;
	static struct p2pg_facts facts; /* 17 KiB: not on the drainer's stack */
	if (!loaded) {
		loaded = true;
		rs = p2pg_ruleset_new();
		if (rs) {
			p2pg_ruleset_load_builtin(rs, NULL, NULL);
			if (rules_dir && rules_dir[0])
				p2pg_ruleset_load_dir(rs, rules_dir, NULL, NULL);
		}
	}
	if (!rs || !func)
		return false;
	facts.n = 0;
	p2pg_facts_set_str(&facts, "nccl_op", func);
	if (peer_state)
		p2pg_facts_set_str(&facts, "nccl_peer_state", peer_state);
	const struct p2pg_rule *rule = p2pg_ruleset_match(rs, NULL, 0, &facts);
	if (!rule)
		return false;
	*rule_id = p2pg_rule_id(rule);
	*root_cause = p2pg_rule_root_cause(rule);
	*advice = p2pg_rule_advice(rule);
	return true;
}
