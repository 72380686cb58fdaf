/* SPDX-License-Identifier: MIT */
/*
 * A small shared library with the core linked in statically, standing in for libp2pguard.so: the
 * Python stack is read from inside a library loaded by ctypes, and the backtrace must leave out
 * the library's own frames as it does the guard's.
 */
#pragma once

#include <stddef.h>

#define DIAGTEST_EXPORT __attribute__((visibility("default")))

/* p2pg_python_stack, as ctypes calls it. */
DIAGTEST_EXPORT size_t diagtest_python_stack(char *buf, size_t len);

/* p2pg_python_stack called with a Python exception pending (RuntimeError("kept")), which must
 * still be pending afterwards: ctypes.PyDLL then raises it. */
DIAGTEST_EXPORT size_t diagtest_python_stack_with_error(char *buf, size_t len);

/* p2pg_backtrace_capture + p2pg_backtrace_format from inside the library. */
DIAGTEST_EXPORT size_t diagtest_backtrace(char *buf, size_t len);

/* p2pg_python_stack_signal_safe (after p2pg_python_stack_prepare), as the crash handler reads it.
 */
DIAGTEST_EXPORT size_t diagtest_python_stack_signal_safe(char *buf, size_t len);

/* p2pg_python_stack_convert: the traceback writer's text in buf[0..n), turned into ours in place.
 */
DIAGTEST_EXPORT size_t diagtest_python_stack_convert(char *text, size_t n);
