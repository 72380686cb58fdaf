/* SPDX-License-Identifier: MIT */
#include "failure.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "backtrace.h"
#include "pystack.h"
#include "driver.h"
#include "evidence.h"
#include "nccl_stall.h"
#include "notice.h"
#include "p2pguard/rules.h"
#include "recorder.h"
#include "settings.h"
#include "spool.h"

static char user_rules[4096];
static bool want_backtraces = true;
static struct p2pg_ruleset *ruleset;
static pthread_once_t rules_once = PTHREAD_ONCE_INIT;

void p2pg_failure_configure(const char *user_rules_dir, bool backtraces)
{
	want_backtraces = backtraces;
	snprintf(user_rules, sizeof(user_rules), "%s", user_rules_dir ? user_rules_dir : "");
}

static void report_rule_problem(void *userdata, const char *file, int line, const char *message)
{
	(void)userdata;
	p2pg_notice("rule %s:%d: %s (this rule is skipped, the others load)", file, line, message);
}

static void load_rules(void)
{
	ruleset = p2pg_ruleset_new();
	if (!ruleset)
		return;
	p2pg_ruleset_load_builtin(ruleset, report_rule_problem, NULL);
	if (user_rules[0] &&
	    p2pg_ruleset_load_dir(ruleset, user_rules, report_rule_problem, NULL) < 0)
		p2pg_notice("P2PGUARD_RULES=%s cannot be read; using the built-in rules",
			    user_rules);
}

/* What staged mode cannot do for a mapping, and what to set instead: the guard stages copy
 * calls, and a kernel that reads a peer's memory through a mapping makes none. */
#define STAGED_MAPPING_ADVICE                                                                  \
	"P2PGUARD_MODE=staged does not stage cross-process mappings (its own: "                \
	"NCCL_P2P_DISABLE=1 for NCCL): turn the path off in the framework instead - vLLM "     \
	"--disable-custom-all-reduce; PyTorch tensors shared between processes: keep them on " \
	"the host or copy them through it; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False " \
	"for the pidfd_getfd path; SGLang/NCCL legacy IPC: NCCL_P2P_DISABLE=1."

static void add_advice(struct p2pg_spool_blob *blob, const struct p2pg_rule *rule,
		       const struct p2pg_failure *f)
{
	const char *advice = rule && p2pg_rule_advice(rule) ? p2pg_rule_advice(rule) : "";
	if (!f->mapping || p2pg_settings_get()->mode != P2PG_MODE_STAGED) {
		p2pg_spool_blob_add(blob, advice);
		return;
	}
	size_t len = strlen(advice) + sizeof(STAGED_MAPPING_ADVICE) + 2;
	char *text = malloc(len);
	if (!text) {
		p2pg_spool_blob_add(blob, advice);
		return;
	}
	snprintf(text, len, "%s%s%s", advice, *advice ? "\n" : "", STAGED_MAPPING_ADVICE);
	p2pg_spool_blob_add(blob, text);
	free(text);
}

void p2pg_failure_record(const struct p2pg_failure *f)
{
	struct p2pg_spool_blob *blob = p2pg_recorder_blob();
	if (!blob)
		return;
	pthread_once(&rules_once, load_rules);

	struct p2pg_facts *facts = calloc(1, sizeof(*facts));
	char *text = malloc(16 << 10);
	if (!facts || !text) {
		free(facts);
		free(text);
		p2pg_spool_blob_publish(blob); /* an empty blob is still the record of the call */
		return;
	}

	struct p2pg_failure_context ctx = {
	    .api = p2pg_api_name(f->api),
	    .status = f->status,
	    .device = f->device,
	    .peer_device = f->peer_device,
	    .flags = f->flags,
	    .peers_enabled = f->peers_enabled,
	    .peer_access_enabled = f->peer_access_enabled,
	    .mapping = f->mapping,
	};
	p2pg_evidence_gather(&ctx, facts);
	if (f->probe)
		p2pg_facts_set_str(facts, "p2p_probe", f->probe);

	const struct p2pg_rule *rule =
	    ruleset ? p2pg_ruleset_match(ruleset, ctx.api, f->status, facts) : NULL;

	blob->kind = P2PG_BLOB_FAILURE;
	blob->serial = f->serial;
	blob->tid = p2pg_tid();
	blob->seq = f->seq;
	blob->started_ns = f->started_ns;
	blob->status = f->status;
	blob->device = f->device;
	blob->peer_device = f->peer_device;
	blob->api = f->api;

	/* The field order is the one store.c reads (enum failure_field). */
	p2pg_spool_blob_add(blob, f->args ? f->args : "");
	p2pg_spool_blob_add(blob, p2pg_cuda_error_name(f->status));
	p2pg_spool_blob_add(blob, p2pg_cuda_error_string(f->status));
	p2pg_spool_blob_add(blob, rule ? p2pg_rule_id(rule) : "");
	/* With the notes whose evidence holds: "ACS redirects peer traffic on bridge ...". */
	char *root_cause = rule ? p2pg_rule_root_cause_for(rule, facts) : NULL;
	const char *plain = rule ? p2pg_rule_root_cause(rule) : NULL;
	p2pg_spool_blob_add(blob, root_cause ? root_cause : plain ? plain : "");
	free(root_cause);
	add_advice(blob, rule, f);

	uintptr_t ips[P2PG_BACKTRACE_MAX];
	int n = want_backtraces ? p2pg_backtrace_capture(ips, P2PG_BACKTRACE_MAX) : 0;
	p2pg_backtrace_format(ips, n, text, 8 << 10);
	p2pg_spool_blob_add(blob, text);

	text[0] = '\0';
	p2pg_python_stack(text, 6 << 10);
	p2pg_spool_blob_add(blob, text);

	if (p2pg_facts_to_json(facts, text, 8 << 10) < 0)
		text[0] = '\0';
	p2pg_spool_blob_add(blob, text);
	p2pg_spool_blob_add(blob, p2pg_action_name(f->action));

	p2pg_spool_blob_publish(blob);
	free(facts);
	free(text);
}

/* ---- hooks for the recorder (drainer thread only) ---- */

static struct p2pg_ruleset *ruleset_with(const char *rules_dir)
{
	struct p2pg_ruleset *rs = p2pg_ruleset_new();
	if (!rs)
		return NULL;
	p2pg_ruleset_load_builtin(rs, NULL, NULL);
	if (rules_dir && rules_dir[0])
		p2pg_ruleset_load_dir(rs, rules_dir, NULL, NULL);
	return rs;
}

static void write_rules(sqlite3 *db, const char *rules_dir)
{
	struct p2pg_ruleset *rs = ruleset_with(rules_dir);
	if (!rs)
		return;
	p2pg_rules_write_sqlite(db, rs);
	p2pg_ruleset_free(rs);
}

static bool stall_diagnosis(const char *rules_dir, const char **rule_id, const char **root_cause,
			    const char **advice)
{
	static struct p2pg_ruleset *rs; /* kept for the process's life: rule points into it */
	static const struct p2pg_rule *rule;
	static bool loaded;
	if (!loaded) {
		loaded = true;
		rs = ruleset_with(rules_dir);
		if (rs)
			rule = p2pg_ruleset_find(rs, "p2p/copy-never-completes");
	}
	if (!rule)
		return false;
	*rule_id = p2pg_rule_id(rule);
	*root_cause = p2pg_rule_root_cause(rule);
	*advice = p2pg_rule_advice(rule);
	return true;
}

const struct p2pg_recorder_hooks p2pg_knowledge_hooks = {
    .database_opened = write_rules,
    .stall_diagnosis = stall_diagnosis,
    .nccl_stall_diagnosis = p2pg_nccl_stall_diagnosis,
};
