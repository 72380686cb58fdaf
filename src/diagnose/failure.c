/* SPDX-License-Identifier: MIT */
#include "failure.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sqlite3.h>
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
#include "spool_blob.h"

/*
 * Built with AddressSanitizer or ThreadSanitizer only. GCC 12's ASan allocator (LLVM's before 18)
 * takes no lock around fork(), nor do TSan's size-class regions: a child forked while the drainer
 * allocates for the rules it reads inherits the allocator's lock held and waits for ever at its
 * first malloc of that size (seen once in 30 runs of the fork test under ASan; under TSan in half
 * the runs once built-in rules were read into one block a rule, of one size class). glibc's
 * malloc, jemalloc and tcmalloc lock themselves around fork(), so the product lets fork() go on
 * while the rules are read; the instrumented build reads them where the guard starts,
 * in the thread that starts it, before any thread of the guard's runs, and a fork() that comes in
 * the middle of that all the same (from another of the program's threads) waits for the read.
 */
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define P2PG_ALLOCATOR_NOT_FORK_SAFE 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define P2PG_ALLOCATOR_NOT_FORK_SAFE 1
#endif

static char user_rules[4096];
static bool configured; /* p2pg_failure_configure ran: user_rules is the process's */
static bool want_backtraces = true;
/* The rules are read once per process (rules_needed). Not pthread_once: a fork() while another
 * thread reads them (the drainer reads them with no lock fork() waits for) must leave the child
 * free to read its own, not waiting on a reader it does not have. */
static pthread_mutex_t rules_lock = PTHREAD_MUTEX_INITIALIZER;
static bool rules_loaded, rules_loading;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static struct p2pg_ruleset *ruleset;

static void register_atfork(void);
static void rules_needed(void);

void p2pg_failure_configure(const char *user_rules_dir, bool backtraces)
{
	/* Registered here, at the guard's start, before any thread of the guard's reads rules: a
	 * handler registered while another thread forks is not run in that child. */
	pthread_once(&atfork_once, register_atfork);
	want_backtraces = backtraces;
	snprintf(user_rules, sizeof(user_rules), "%s", user_rules_dir ? user_rules_dir : "");
	configured = true;
#ifdef P2PG_ALLOCATOR_NOT_FORK_SAFE
	rules_needed();
#endif
}

/* A user's folder full of broken files costs this many lines, then one that says how many more. */
#define RULE_LINES_MAX 20
static unsigned rule_problems;

static void report_rule_problem(void *userdata, const char *file, int line, const char *message)
{
	(void)userdata;
	if (++rule_problems <= RULE_LINES_MAX)
		p2pg_notice("rule %s:%d: %s (this rule is skipped, the others load)", file, line,
			    message);
}

static void *load_rules_thread(void *arg)
{
	(void)arg;
	p2pg_ruleset_load_builtin(ruleset, report_rule_problem, NULL);
	if (user_rules[0] &&
	    p2pg_ruleset_load_dir(ruleset, user_rules, report_rule_problem, NULL) < 0)
		p2pg_notice("P2PGUARD_RULES=%s cannot be read; using the built-in rules",
			    user_rules);
	if (rule_problems > RULE_LINES_MAX)
		p2pg_notice("%u more problems in the rules of P2PGUARD_RULES=%s (`p2pguard rules "
			    "validate %s` lists them)",
			    rule_problems - RULE_LINES_MAX, user_rules, user_rules);
	return NULL;
}

/*
 * The rules are read once per process, where the stack is big enough: the regexes of the rule
 * files in P2PGUARD_RULES are compiled as they are read (the built-in rules' never are in the
 * guard's process: only explain uses them, so without P2PGUARD_RULES the calling thread reads
 * them), and glibc's regcomp() recurses as deep as a regex's optional parts are long
 * (rules-loader.h bounds that within 256 KiB, but a program's thread may be smaller still, and
 * the bound is a margin, not a promise). A thread whose
 * stack is at least RULES_STACK_HERE (the drainer's 4 MiB, a main thread's) reads them itself; a
 * smaller one has a thread of RULES_STACK made for it, its signals blocked (they are the
 * program's). A stack is address space: only what is used becomes memory.
 */
#define RULES_STACK	 (8u << 20)
#define RULES_STACK_HERE (2u << 20)

static bool stack_is_big(void)
{
	pthread_attr_t attr;
	size_t size = 0;
	if (pthread_getattr_np(pthread_self(), &attr) == 0) {
		pthread_attr_getstacksize(&attr, &size);
		pthread_attr_destroy(&attr);
	}
	return size >= RULES_STACK_HERE;
}

static void load_rules(void)
{
	ruleset = p2pg_ruleset_new();
	if (!ruleset)
		return;
	/* The built-in rules alone compile no regex here: any thread's stack reads them. */
	if (!user_rules[0] || stack_is_big()) {
		load_rules_thread(NULL);
		return;
	}
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, RULES_STACK);
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_t loader;
	int rc = pthread_create(&loader, &attr, load_rules_thread, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (rc == 0) {
		pthread_join(loader, NULL);
		return;
	}
	/* No thread to be had: the built-in rules, whose regexes are small (tested), here. */
	p2pg_ruleset_load_builtin(ruleset, report_rule_problem, NULL);
	if (user_rules[0])
		p2pg_notice("P2PGUARD_RULES=%s is not read: no thread could be started to read it "
			    "(%s); using the built-in rules",
			    user_rules, strerror(rc));
}

/* In a child forked while a thread of the parent read the rules: that thread is not here, the lock
 * it held is, and the set is half made (left as it is: freeing it could follow a pointer not yet
 * written). The child reads its own. */
static void rules_after_fork_child(void)
{
	pthread_mutex_init(&rules_lock, NULL);
	if (rules_loading) {
		ruleset = NULL;
		rules_loading = rules_loaded = false;
		rule_problems = 0;
	}
}

#ifdef P2PG_ALLOCATOR_NOT_FORK_SAFE
static void rules_before_fork(void)
{
	pthread_mutex_lock(&rules_lock);
}

static void rules_after_fork_parent(void)
{
	pthread_mutex_unlock(&rules_lock);
}

static void register_atfork(void)
{
	pthread_atfork(rules_before_fork, rules_after_fork_parent, rules_after_fork_child);
}
#else
static void register_atfork(void)
{
	pthread_atfork(NULL, NULL, rules_after_fork_child);
}
#endif

static void rules_needed(void)
{
	pthread_once(&atfork_once, register_atfork);
	pthread_mutex_lock(&rules_lock);
	if (!rules_loaded) {
		rules_loading = true;
		load_rules();
		rules_loading = false;
		rules_loaded = true;
	}
	pthread_mutex_unlock(&rules_lock);
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
	rules_needed();

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

/* The same rules as the failures' (the user's folder read once), read without the drainer's pass
 * lock held. */
static void prepare_rules(const char *rules_dir)
{
	/* `p2pguard topo` configures the recorder only: its P2PGUARD_RULES comes this way, before
	 * anything of it reads rules (its drainer is the only reader). */
	if (!configured && rules_dir && rules_dir[0])
		snprintf(user_rules, sizeof(user_rules), "%s", rules_dir);
	rules_needed();
}

/* The rules the database's rows name, written as rows come (the drainer's database only). */
static struct {
	sqlite3 *db;
	int changes; /* the connection's sqlite3_total_changes() when last read */
	struct p2pg_rules_named marks;
} rules_named;

static void write_named_rules(sqlite3 *db)
{
	/* Nothing written since the last look: no row can name a new rule. */
	if (!ruleset || (db == rules_named.db && sqlite3_total_changes(db) == rules_named.changes))
		return;
	if (db != rules_named.db) {
		rules_named.db = db;
		memset(&rules_named.marks, 0, sizeof(rules_named.marks));
	}
	if (p2pg_rules_write_named_sqlite(db, ruleset, &rules_named.marks) >= 0)
		rules_named.changes = sqlite3_total_changes(db);
}

static void database_opened(sqlite3 *db, const char *rules_dir)
{
	(void)rules_dir;
	rules_needed();
	if (!ruleset)
		return;
	p2pg_rules_note_set_sqlite(db, ruleset);
	/* A file opened anew (another at the path) is read from its first row. */
	rules_named.db = NULL;
	write_named_rules(db);
}

static bool stall_diagnosis(const char *rules_dir, const char **rule_id, const char **root_cause,
			    const char **advice)
{
	(void)rules_dir;
	rules_needed();
	const struct p2pg_rule *rule =
	    ruleset ? p2pg_ruleset_find(ruleset, "p2p/copy-never-completes") : NULL;
	if (!rule)
		return false;
	*rule_id = p2pg_rule_id(rule);
	*root_cause = p2pg_rule_root_cause(rule);
	*advice = p2pg_rule_advice(rule);
	return true;
}

const struct p2pg_recorder_hooks p2pg_knowledge_hooks = {
    .prepare = prepare_rules,
    .database_opened = database_opened,
    .rows_written = write_named_rules,
    .stall_diagnosis = stall_diagnosis,
    .nccl_stall_diagnosis = p2pg_nccl_stall_diagnosis,
};
