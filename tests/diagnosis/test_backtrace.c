/* SPDX-License-Identifier: MIT */
/*
 * Backtraces: capture + format, the signal-safe raw text + symbolisation, a real crash in a child
 * process, and the leaving out of the capturing library's own frames.
 *
 * Built with frame pointers and exported symbols; run once as a PIE and once as a fixed-address
 * (ET_EXEC) executable, which symbolise differently (--expect-exec).
 */
#include "backtrace.h"
#include "pystack.h"
#include "diagtest_lib.h"

#include <elf.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define EXPORTED __attribute__((visibility("default"), noinline))

enum mode { MODE_FORMAT, MODE_RAW, MODE_LIBRARY };

/* Exported, so that dladdr can name them. */
EXPORTED void level_two(enum mode mode);
EXPORTED void level_one(enum mode mode);
EXPORTED void crash_two(void);
EXPORTED void crash_one(void);
EXPORTED void crash_entry_one(void);
void crash_at_entry(volatile int *p);
/* An empty asm after a call keeps it from becoming a tail call, which would drop the frame. */
#define NO_TAIL_CALL() __asm__ volatile("" ::: "memory")

static int failures;

static void check(bool ok, const char *what, const char *text)
{
	printf("%s - %s\n", ok ? "ok" : "not ok", what);
	/* Shown on success too: the log then shows what real output looks like. */
	if (text && text[0])
		printf("--- output:\n%s---\n", text);
	if (!ok)
		failures++;
}

/* The frame number of the first line naming function (as "name+0x"), or -1. */
static int frame_of(const char *text, const char *function)
{
	char needle[128];
	snprintf(needle, sizeof(needle), " %s+0x", function);
	const char *hit = strstr(text, needle);
	if (!hit)
		return -1;
	const char *line = hit;
	while (line > text && line[-1] != '\n')
		line--;
	return line[0] == '#' ? atoi(line + 1) : -1;
}

/* level_two, level_one and main, in that order, with level_two first when first_is_level_two. */
static bool names_chain(const char *text, bool first_is_level_two)
{
	int two = frame_of(text, "level_two");
	int one = frame_of(text, "level_one");
	int top = frame_of(text, "main");
	return two >= 0 && one > two && top > one && (!first_is_level_two || two == 0);
}

static char out[16384];

void level_two(enum mode mode)
{
	uintptr_t ips[P2PG_BACKTRACE_MAX];
	int n;
	switch (mode) {
	case MODE_FORMAT:
		n = p2pg_backtrace_capture(ips, P2PG_BACKTRACE_MAX);
		p2pg_backtrace_format(ips, n, out, sizeof(out));
		break;
	case MODE_RAW: {
		char raw[8192];
		n = p2pg_backtrace_capture(ips, P2PG_BACKTRACE_MAX);
		p2pg_backtrace_raw_signal_safe(ips, n, raw, sizeof(raw));
		p2pg_backtrace_symbolise_raw(raw, out, sizeof(out));
		break;
	}
	case MODE_LIBRARY:
		diagtest_backtrace(out, sizeof(out));
		break;
	}
	NO_TAIL_CALL();
}

void level_one(enum mode mode)
{
	level_two(mode);
	NO_TAIL_CALL();
}

/* Not exported: dladdr cannot name it, the ELF symbol table can. */
__attribute__((noinline)) static void hidden_level(void)
{
	uintptr_t ips[P2PG_BACKTRACE_MAX];
	int n = p2pg_backtrace_capture(ips, P2PG_BACKTRACE_MAX);
	p2pg_backtrace_format(ips, n, out, sizeof(out));
	NO_TAIL_CALL();
}

static void test_raw_lines(void)
{
	uintptr_t ips[2] = {(uintptr_t)&level_one + 4, 0};
	char raw[1024];
	size_t len = p2pg_backtrace_raw_signal_safe(ips, 2, raw, sizeof(raw));
	char expect[64];
	snprintf(expect, sizeof(expect), "0x%lx /", (unsigned long)ips[0]);
	check(len == strlen(raw) && strncmp(raw, expect, strlen(expect)) == 0,
	      "raw line: address then absolute module path", raw);
	check(strstr(raw, "\n0x0 ? 0x0\n") != NULL, "raw line for an unmapped address", raw);

	/* A buffer too small for the second line keeps only whole lines. */
	size_t first_line = (size_t)(strchr(raw, '\n') - raw) + 1;
	char small[256];
	size_t got = p2pg_backtrace_raw_signal_safe(ips, 2, small, first_line + 3);
	check(got == first_line && small[got] == '\0', "raw output truncated at a line end", small);
}

static void test_format_edges(void)
{
	uintptr_t ips[P2PG_BACKTRACE_MAX];
	int n = p2pg_backtrace_capture(ips, P2PG_BACKTRACE_MAX);
	check(n >= 1, "capture returns frames", NULL);
	char small[48];
	size_t len = p2pg_backtrace_format(ips, n, small, sizeof(small));
	check(len < sizeof(small) && (len == 0 || small[len - 1] == '\n'),
	      "format truncated at a line end", small);
	check(p2pg_backtrace_format(ips, n, small, 0) == 0, "format into nothing", NULL);
	check(p2pg_backtrace_capture(ips, 0) == 0, "capture of no frames", NULL);

	uintptr_t unknown[1] = {0x10};
	p2pg_backtrace_format(unknown, 1, out, sizeof(out));
	check(strcmp(out, "#0 0x10\n") == 0, "format of an address outside any module", out);

	/* Malformed raw text and missing files give what can be given, and no crash. */
	const char *garbage = "nonsense\n"
			      "0x12\n"
			      "0x1 /nonexistent/lib.so 0x0\n"
			      "0x1010 /etc/hostname 0x1000\n"
			      "0x7 ? 0x0\n"
			      "0x20 [vdso] 0x10";
	p2pg_backtrace_symbolise_raw(garbage, out, sizeof(out));
	check(strcmp(out, "#0 lib.so+0x1\n#1 hostname+0x10\n#2 0x7\n#3 [vdso]+0x10\n") == 0,
	      "symbolise of malformed input", out);
	check(p2pg_backtrace_symbolise_raw(NULL, out, sizeof(out)) == 0, "symbolise of NULL", NULL);
}

/* ---- a real crash ---- */

static int crash_pipe = -1;

static void on_segv(int sig, siginfo_t *info, void *context)
{
	/* Only what the header promises is async-signal-safe, plus write and _exit. */
	static char raw[8192];
	uintptr_t ips[P2PG_BACKTRACE_MAX];
	int n = p2pg_backtrace_capture(ips, P2PG_BACKTRACE_MAX);
	size_t len = p2pg_backtrace_raw_signal_safe(ips, n, raw, sizeof(raw));
	ssize_t written = write(crash_pipe, raw, len);
	_exit(written == (ssize_t)len ? 0 : 3);
}

/* The fault is the point: the undefined-behaviour sanitizer is told not to report it. */
__attribute__((no_sanitize("undefined"))) void crash_two(void)
{
	volatile int *volatile nowhere = NULL;
	*nowhere = 42;
	NO_TAIL_CALL();
}

void crash_one(void)
{
	crash_two();
	NO_TAIL_CALL();
}

#if defined(__x86_64__)
/* Faults on its very first instruction, as code without a frame pointer can: the interrupted
 * frame's address is then the symbol's own address, and the byte before it (an int3 that no
 * symbol covers) belongs to nothing. */
__asm__(".text\n"
	".p2align 4\n"
	"\tint3\n"
	".globl crash_at_entry\n"
	".type crash_at_entry, @function\n"
	"crash_at_entry:\n"
	".cfi_startproc\n"
	"\tmovl $42, (%rdi)\n"
	"\tret\n"
	".cfi_endproc\n"
	".size crash_at_entry, .-crash_at_entry\n");
#else
__attribute__((noinline, no_sanitize("undefined"))) void crash_at_entry(volatile int *p)
{
	*p = 42;
}
#endif

void crash_entry_one(void)
{
	crash_at_entry(NULL);
	NO_TAIL_CALL();
}

static void test_crash(void (*crash)(void), const char *inner, const char *outer)
{
	int fds[2];
	if (pipe(fds) != 0) {
		check(false, "pipe", NULL);
		return;
	}
	pid_t pid = fork();
	if (pid == 0) {
		close(fds[0]);
		crash_pipe = fds[1];
		static char alt[64 * 1024];
		stack_t ss = {.ss_sp = alt, .ss_size = sizeof(alt)};
		sigaltstack(&ss, NULL);
		struct sigaction sa = {.sa_sigaction = on_segv,
				       .sa_flags = SA_SIGINFO | SA_ONSTACK};
		sigemptyset(&sa.sa_mask);
		sigaction(SIGSEGV, &sa, NULL);
		crash();
		_exit(4);
	}
	close(fds[1]);
	static char raw[8192];
	size_t have = 0;
	ssize_t got;
	while (have < sizeof(raw) - 1 &&
	       (got = read(fds[0], raw + have, sizeof(raw) - 1 - have)) > 0)
		have += (size_t)got;
	raw[have] = '\0';
	close(fds[0]);
	int status = 0;
	waitpid(pid, &status, 0);
	check(WIFEXITED(status) && WEXITSTATUS(status) == 0, "crash handler wrote the raw text",
	      raw);
	p2pg_backtrace_symbolise_raw(raw, out, sizeof(out));
	int two = frame_of(out, inner);
	int one = frame_of(out, outer);
	int handler = frame_of(out, "on_segv");
	char what[160];
	snprintf(what, sizeof(what), "crash: handler, then %s, %s, main, symbolised after the fact",
		 inner, outer);
	check(handler >= 0 && two > handler && one == two + 1 && frame_of(out, "main") > one, what,
	      out);
}

static bool running_as_exec(void)
{
	FILE *f = fopen("/proc/self/exe", "rb");
	Elf64_Ehdr eh = {0};
	if (f) {
		if (fread(&eh, sizeof(eh), 1, f) != 1)
			eh.e_type = ET_NONE;
		fclose(f);
	}
	return eh.e_type == ET_EXEC;
}

int main(int argc, char **argv)
{
	bool expect_exec = argc > 1 && strcmp(argv[1], "--expect-exec") == 0;
	check(running_as_exec() == expect_exec, expect_exec ? "built as ET_EXEC" : "built as a PIE",
	      NULL);

	level_one(MODE_FORMAT);
	check(names_chain(out, true), "capture + format: level_two, level_one, main", out);

	level_one(MODE_RAW);
	check(names_chain(out, true), "raw + symbolise: level_two, level_one, main", out);
	/* Both paths give the same text for the frames they share (ip and module offsets). */
	char formatted[sizeof(out)];
	level_one(MODE_FORMAT);
	memcpy(formatted, out, sizeof(out));
	level_one(MODE_RAW);
	const char *a = strstr(formatted, "level_one+"), *b = strstr(out, "level_one+");
	check(a && b && strncmp(a, b, strcspn(a, "\n")) == 0,
	      "format and symbolise agree on level_one's line", out);

	level_one(MODE_LIBRARY);
	check(names_chain(out, true) && !strstr(out, "diagtest_backtrace"),
	      "from a shared library: its own frames left out", out);

	hidden_level();
	check(frame_of(out, "hidden_level") == 0, "static function named from the ELF symtab", out);

	test_raw_lines();
	test_format_edges();
	test_crash(crash_one, "crash_two", "crash_one");
	test_crash(crash_entry_one, "crash_at_entry", "crash_entry_one");

	char py[256];
	check(p2pg_python_stack(py, sizeof(py)) == 0 && py[0] == '\0',
	      "no Python stack in a C program", py);

	printf("%d failure(s)\n", failures);
	return failures ? 1 : 0;
}
