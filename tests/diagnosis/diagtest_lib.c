/* SPDX-License-Identifier: MIT */
#include "diagtest_lib.h"

#include "backtrace.h"
#include "pystack.h"

#include <dlfcn.h>
#include <stdint.h>

size_t diagtest_python_stack(char *buf, size_t len)
{
	return p2pg_python_stack(buf, len);
}

size_t diagtest_python_stack_with_error(char *buf, size_t len)
{
	void (*set_string)(void *type, const char *message);
	*(void **)&set_string = dlsym(RTLD_DEFAULT, "PyErr_SetString");
	void **runtime_error = dlsym(RTLD_DEFAULT, "PyExc_RuntimeError");
	if (!set_string || !runtime_error)
		return 0;
	set_string(*runtime_error, "kept");
	return p2pg_python_stack(buf, len);
}

/* Two library frames above the capture, so the test sees that a whole run is dropped. */
__attribute__((noinline)) static size_t diagtest_backtrace_inner(char *buf, size_t len)
{
	uintptr_t ips[P2PG_BACKTRACE_MAX];
	int n = p2pg_backtrace_capture(ips, P2PG_BACKTRACE_MAX);
	size_t written = p2pg_backtrace_format(ips, n, buf, len);
	/* Keeps the call above from becoming a tail call, which would hide this frame. */
	__asm__ volatile("" ::: "memory");
	return written;
}

size_t diagtest_backtrace(char *buf, size_t len)
{
	size_t written = diagtest_backtrace_inner(buf, len);
	__asm__ volatile("" ::: "memory");
	return written;
}

size_t diagtest_python_stack_signal_safe(char *buf, size_t len)
{
	p2pg_python_stack_prepare();
	return p2pg_python_stack_signal_safe(buf, len);
}

size_t diagtest_python_stack_convert(char *text, size_t n)
{
	return p2pg_python_stack_convert(text, n);
}
