/* SPDX-License-Identifier: MIT */
/*
 * Fatal signals: the faulting thread's raw backtrace and its Python stack go into the spool from
 * the handler (nothing but memory writes, read-only /proc access and the interpreter's signal-safe
 * traceback writer there); the backtrace is symbolised later by whoever imports the spool. The
 * handler then gives the drainer (another thread, which is not interrupted) up to a second to put
 * the crash and everything before it into the database, so the row is there when the process is
 * gone; past that the spool keeps them for recovery. Then the previous handler runs, so Python's
 * faulthandler and the frameworks' own handlers still work, and the process ends with the same
 * signal.
 */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "backtrace.h"
#include "clock.h"
#include "pystack.h"
#include "crash.h"
#include "recorder.h"
#include "spool.h"
#include "spool_blob.h"

static const int fatal_signals[] = {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL};
#define NFATAL (sizeof(fatal_signals) / sizeof(fatal_signals[0]))
/* A crash's Python stack: 64 frames of ordinary length. */
#define PYSTACK_CRASH_MAX (8 << 10)

static struct sigaction previous[NFATAL];
static _Atomic int in_handler;

static int signal_index(int sig)
{
	for (unsigned k = 0; k < NFATAL; k++)
		if (fatal_signals[k] == sig)
			return (int)k;
	return -1;
}

/* The final import's bound: the process is dying, and whoever waits for it (a launcher, a user)
 * must not notice. */
#define CRASH_IMPORT_WAIT_NS 1000000000ull

static struct p2pg_spool_blob *write_crash(int sig, void *uctx)
{
	struct p2pg_spool_layout *spool = p2pg_recorder_spool_signal_safe();
	if (!spool)
		return NULL;
	struct p2pg_spool_blob *blob = p2pg_spool_blob_claim(spool);
	if (!blob) {
		/* Counted as a lost record; a lock-free atomic add is safe in a signal handler. */
		atomic_fetch_add_explicit(&spool->header.dropped_no_slot, 1, memory_order_relaxed);
		return NULL;
	}
	uint64_t now = p2pg_realtime_ns();
	uintptr_t ips[P2PG_BACKTRACE_MAX];
	int n = p2pg_backtrace_signal_safe(uctx, ips, P2PG_BACKTRACE_MAX);
	blob->kind = P2PG_BLOB_CRASH;
	blob->tid = p2pg_tid_signal_safe();
	blob->signal = sig;
	blob->started_ns = now;
	/* Fields: the raw backtrace, then the Python stack (the import reads them in this order).
	 */
	size_t pos = p2pg_backtrace_raw_signal_safe(ips, n, blob->text, sizeof(blob->text) - 1);
	blob->text[pos++] = '\0';
	size_t room = sizeof(blob->text) - pos;
	if (room > PYSTACK_CRASH_MAX)
		room = PYSTACK_CRASH_MAX;
	pos += p2pg_python_stack_signal_safe(blob->text + pos, room);
	blob->text[pos++] = '\0';
	blob->length = (uint32_t)pos;
	p2pg_spool_blob_publish(blob);
	return blob;
}

static void on_fatal_signal(int sig, siginfo_t *info, void *uctx)
{
	int k = signal_index(sig);
	if (k < 0)
		return;
	int saved_errno = errno;
	/* A second fault inside the handler must not loop: straight to the previous handler. */
	if (atomic_exchange(&in_handler, 1) == 0) {
		struct p2pg_spool_blob *blob = write_crash(sig, uctx);
		if (blob)
			p2pg_recorder_await_signal_safe(CRASH_IMPORT_WAIT_NS);
		/* A previous handler may recover (longjmp out, or fix and return): the next fault
		 * is recorded again. */
		atomic_store(&in_handler, 0);
	}
	errno = saved_errno;

	struct sigaction *prev = &previous[k];
	if (prev->sa_flags & SA_SIGINFO) {
		if (prev->sa_sigaction) {
			prev->sa_sigaction(sig, info, uctx);
			return;
		}
	} else if (prev->sa_handler != SIG_DFL && prev->sa_handler != SIG_IGN) {
		prev->sa_handler(sig);
		return;
	}
	/* Default action: restore it and let the signal end the process as it would have. A fault
	 * re-executes and takes the default; a signal sent with kill() or raise() needs raising
	 * again. */
	sigaction(sig, prev, NULL);
	if (info->si_code <= 0 || sig == SIGABRT)
		raise(sig);
}

void p2pg_crash_install(void)
{
	/* The interpreter's traceback writer, if one is loaded already (dlsym cannot be called in
	 * the handler); the first cuInit and every failure look again. */
	p2pg_python_stack_prepare();
	for (unsigned k = 0; k < NFATAL; k++) {
		struct sigaction sa;
		memset(&sa, 0, sizeof(sa));
		sa.sa_sigaction = on_fatal_signal;
		sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
		sigemptyset(&sa.sa_mask);
		if (sigaction(fatal_signals[k], &sa, &previous[k]) < 0)
			memset(&previous[k], 0, sizeof(previous[k]));
		/* A program that ignores a fatal signal keeps doing so. */
		if (!(previous[k].sa_flags & SA_SIGINFO) && previous[k].sa_handler == SIG_IGN)
			sigaction(fatal_signals[k], &previous[k], NULL);
	}
}
