/* SPDX-License-Identifier: MIT */
/*
 * Python 3.13 and 3.14: the calling thread's Python stack, read from the interpreter's own
 * description of its structures (_PyRuntime's _Py_DebugOffsets), without the GIL. Private to
 * diagnose/: pystack.c decides when it is used.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What the walk needs, taken from the debug offsets and checked once. */
struct p2pg_pyoffsets {
	unsigned minor; /* 13 or 14 */
	uint64_t tstate_current_frame;
	uint64_t frame_size, frame_previous, frame_executable, frame_instr_ptr, frame_owner;
	uint64_t code_size, code_filename, code_name, code_linetable, code_firstlineno,
	    code_adaptive;
	uint64_t frame_read, code_read; /* how much of a frame, of a code object, the walk reads */
	uint64_t object_type;		/* PyObject.ob_type */
	uint64_t var_size; /* PyVarObject.ob_size (a code object's length in code units) */
	uint64_t bytes_size, bytes_data;
	uint64_t unicode_state, unicode_length, unicode_ascii_size, unicode_size;
	int owner_cstack, owner_interpreter; /* frames that are not Python code (-1: none) */
	uintptr_t tag_mask;		     /* bits of a tagged reference (3.14's f_executable) */
};

/*
 * Reads the offsets from a copy of the start of _PyRuntime (available bytes of it). 0, or
 * -EINVAL with the reason in *why (not Python 3.13/3.14, a free-threaded build, an offset out of
 * its structure's bounds). Pure: for tests too.
 */
int p2pg_pyoffsets_parse(const void *runtime, size_t available, struct p2pg_pyoffsets *ret,
			 const char **why);

/* Looks up the interpreter in the process (dlsym: not async-signal-safe) and readies the walk;
 * true when it is ready. Cheap once done. */
bool p2pg_pyoffsets_prepare(void);

/*
 * Async-signal-safe, no lock, no allocation: the calling thread's stack as
 * "file.py:LINE in function" lines, innermost first, at most max_frames, whole lines only.
 * Every read of the interpreter's memory goes through the kernel (process_vm_readv, or a pipe),
 * so a pointer that is not what the offsets say ends the walk instead of faulting. Returns the
 * length written (0: not ready, no interpreter, no Python frame).
 */
size_t p2pg_pyoffsets_stack(char *buf, size_t len, int max_frames);
