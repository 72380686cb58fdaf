/* SPDX-License-Identifier: MIT */
/*
 * The Python stack of the calling thread, read through the interpreter's exports found at run
 * time. libpython is never linked: the guard must load into any process, and a Python process
 * already exports them from its executable or its libpython, which RTLD_DEFAULT finds either way.
 *
 * Three ways, best first:
 *  - The traceback writer faulthandler uses (_Py_DumpTraceback, exported by 3.8-3.12;
 *    PyUnstable_DumpTraceback where a later version exports it again). It needs no GIL, takes no
 *    lock, allocates nothing and is async-signal-safe: it only follows the thread's own frame
 *    chain, which cannot change while that thread is in here. It writes text to an fd (a pipe
 *    here), which is turned into our format in place.
 *  - Without it (3.13 and 3.14 keep it hidden), the same walk done here from the interpreter's
 *    debug offsets (pystack_offsets.c): no GIL, async-signal-safe as well.
 *  - Where neither can be had (an interpreter without both, a free-threaded build), the stable
 *    frame API of 3.9+, which touches reference counts and so is used only when the calling
 *    thread holds the GIL.
 */
#include "pystack.h"
#include "driver.h"
#include "pystack_offsets.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define PYSTACK_MAX_FRAMES 64

typedef struct py_object py_object; /* PyObject, opaque here */

struct py_api {
	int (*Py_IsInitialized)(void);
	int (*PyGILState_Check)(void);
	void *(*current_thread_state)(void);
	py_object *(*PyThreadState_GetFrame)(void *tstate);
	py_object *(*PyFrame_GetBack)(py_object *frame);
	py_object *(*PyFrame_GetCode)(py_object *frame);
	int (*PyFrame_GetLineNumber)(py_object *frame);
	py_object *(*PyObject_GetAttrString)(py_object *obj, const char *name);
	const char *(*PyUnicode_AsUTF8)(py_object *obj);
	void (*Py_DecRef)(py_object *obj);
	void (*PyErr_Fetch)(py_object **type, py_object **value, py_object **tb);
	void (*PyErr_Restore)(py_object *type, py_object *value, py_object *tb);
	void (*PyErr_Clear)(void);
};

/*
 * Resolves the API each time: on the failure path that is cheap, and an interpreter can appear
 * after the first call (a C program that embeds Python later). Returns false when any piece is
 * missing (no Python in the process, or one older than 3.9).
 */
static bool py_api_resolve(struct py_api *api)
{
#define PY_RESOLVE(field, name)                                              \
	do {                                                                 \
		*(void **)&api->field = p2pg_real_dlsym(RTLD_DEFAULT, name); \
		if (!api->field)                                             \
			return false;                                        \
	} while (0)
	PY_RESOLVE(Py_IsInitialized, "Py_IsInitialized");
	PY_RESOLVE(PyGILState_Check, "PyGILState_Check");
	PY_RESOLVE(PyThreadState_GetFrame, "PyThreadState_GetFrame");
	PY_RESOLVE(PyFrame_GetBack, "PyFrame_GetBack");
	PY_RESOLVE(PyFrame_GetCode, "PyFrame_GetCode");
	PY_RESOLVE(PyFrame_GetLineNumber, "PyFrame_GetLineNumber");
	PY_RESOLVE(PyObject_GetAttrString, "PyObject_GetAttrString");
	PY_RESOLVE(PyUnicode_AsUTF8, "PyUnicode_AsUTF8");
	PY_RESOLVE(Py_DecRef, "Py_DecRef");
	PY_RESOLVE(PyErr_Fetch, "PyErr_Fetch");
	PY_RESOLVE(PyErr_Restore, "PyErr_Restore");
	PY_RESOLVE(PyErr_Clear, "PyErr_Clear");
#undef PY_RESOLVE
	/* PyThreadState_Get aborts the process when the thread has no state (possible once
	 * sub-interpreters make PyGILState_Check answer 1 unconditionally); the unchecked getters
	 * return NULL instead. 3.13 made one public; 3.9-3.12 export the underscored one. */
	static const char *const getters[] = {
	    "PyThreadState_GetUnchecked",
	    "_PyThreadState_UncheckedGet",
	    "PyGILState_GetThisThreadState",
	};
	for (size_t k = 0; k < sizeof(getters) / sizeof(getters[0]); k++) {
		*(void **)&api->current_thread_state = p2pg_real_dlsym(RTLD_DEFAULT, getters[k]);
		if (api->current_thread_state)
			return true;
	}
	return false;
}

/* A str attribute of obj as UTF-8, copied into out; "?" when it cannot be read. */
static void py_attr_text(const struct py_api *api, py_object *obj, const char *attr, char *out,
			 size_t len)
{
	snprintf(out, len, "?");
	py_object *value = api->PyObject_GetAttrString(obj, attr);
	if (!value) {
		api->PyErr_Clear();
		return;
	}
	const char *text = api->PyUnicode_AsUTF8(value);
	if (text)
		snprintf(out, len, "%s", text);
	else
		api->PyErr_Clear();
	api->Py_DecRef(value);
}

static size_t python_stack_with_gil(char *buf, size_t len)
{
	struct py_api api;
	if (!py_api_resolve(&api))
		return 0;
	/* Without the GIL no Python object may be touched; PyTorch releases it around most CUDA
	 * work, so this is the common case and simply means no Python stack. */
	if (!api.Py_IsInitialized() || !api.PyGILState_Check())
		return 0;
	void *tstate = api.current_thread_state();
	if (!tstate)
		return 0;

	/* The caller may be in the middle of raising: keep its exception intact. */
	py_object *err_type, *err_value, *err_tb;
	api.PyErr_Fetch(&err_type, &err_value, &err_tb);

	size_t pos = 0;
	py_object *frame = api.PyThreadState_GetFrame(tstate);
	for (int depth = 0; frame && depth < PYSTACK_MAX_FRAMES; depth++) {
		char file[256], function[128];
		py_object *code = api.PyFrame_GetCode(frame);
		if (code) {
			py_attr_text(&api, code, "co_filename", file, sizeof(file));
			py_attr_text(&api, code, "co_name", function, sizeof(function));
			api.Py_DecRef(code);
		} else {
			snprintf(file, sizeof(file), "?");
			snprintf(function, sizeof(function), "?");
		}
		char line[512];
		int n = snprintf(line, sizeof(line), "%s:%d in %s\n", file,
				 api.PyFrame_GetLineNumber(frame), function);
		if (n > 0 && (size_t)n < sizeof(line) && pos + (size_t)n < len) {
			memcpy(buf + pos, line, (size_t)n);
			pos += (size_t)n;
			buf[pos] = '\0';
		} else {
			/* Out of room: stop at a whole line. */
			depth = PYSTACK_MAX_FRAMES;
		}
		py_object *back = api.PyFrame_GetBack(frame);
		api.Py_DecRef(frame);
		frame = back;
	}
	if (frame)
		api.Py_DecRef(frame);

	api.PyErr_Restore(err_type, err_value, err_tb);
	return pos;
}

/* ---- without the GIL: the interpreter's signal-safe traceback writer ---- */

typedef void (*dump_traceback_fn)(int fd, void *tstate);
typedef void *(*this_thread_state_fn)(void);
typedef int (*is_initialized_fn)(void);

/* Resolved outside signal handlers (dlsym is not async-signal-safe), read by them. */
static _Atomic(dump_traceback_fn) dump_traceback;
static _Atomic(this_thread_state_fn) this_thread_state;
static _Atomic(is_initialized_fn) is_initialized;

void p2pg_python_stack_prepare(void)
{
	if (atomic_load_explicit(&dump_traceback, memory_order_acquire))
		return;
	/* Resolved below only where the interpreter exports a writer (3.8-3.12, 3.15+): else the
	 * walk by the debug offsets (3.13, 3.14). */
	bool writer = p2pg_real_dlsym(RTLD_DEFAULT, "PyUnstable_DumpTraceback") ||
		      p2pg_real_dlsym(RTLD_DEFAULT, "_Py_DumpTraceback");
	if (!writer) {
		p2pg_pyoffsets_prepare();
		return;
	}
	is_initialized_fn init =
	    (is_initialized_fn)p2pg_real_dlsym(RTLD_DEFAULT, "Py_IsInitialized");
	this_thread_state_fn state =
	    (this_thread_state_fn)p2pg_real_dlsym(RTLD_DEFAULT, "PyGILState_GetThisThreadState");
	dump_traceback_fn dump =
	    (dump_traceback_fn)p2pg_real_dlsym(RTLD_DEFAULT, "PyUnstable_DumpTraceback");
	if (!dump)
		dump = (dump_traceback_fn)p2pg_real_dlsym(RTLD_DEFAULT, "_Py_DumpTraceback");
	if (!init || !state || !dump)
		return;
	atomic_store_explicit(&is_initialized, init, memory_order_relaxed);
	atomic_store_explicit(&this_thread_state, state, memory_order_relaxed);
	atomic_store_explicit(&dump_traceback, dump, memory_order_release);
}

static bool starts_with(const char *p, const char *end, const char *prefix)
{
	size_t n = strlen(prefix);
	return (size_t)(end - p) >= n && memcmp(p, prefix, n) == 0;
}

/*
 * Turns the writer's text ("  File \"train.py\", line 42 in forward" lines, most recent call
 * first, under a header) into ours ("train.py:42 in forward"), in place: each line only shrinks,
 * so the write position never passes the read position. Only whole lines are kept, at most
 * PYSTACK_MAX_FRAMES. No library call but memcpy/memmove/strlen: async-signal-safe.
 */
size_t p2pg_python_stack_convert(char *text, size_t n)
{
	static const char file_prefix[] = "  File \"";
	static const char line_sep[] = "\", line ";
	static const char in_sep[] = " in ";
	size_t out = 0;
	int frames = 0;
	char *p = text, *end = text + n;
	while (p < end && frames < PYSTACK_MAX_FRAMES) {
		char *eol = memchr(p, '\n', (size_t)(end - p));
		if (!eol)
			break; /* cut off: not a whole line */
		char *next = eol + 1;
		if (!starts_with(p, eol, file_prefix)) {
			p = next;
			continue;
		}
		char *file = p + sizeof(file_prefix) - 1;
		/* The last separator: a file name may itself hold one. */
		char *sep = NULL;
		for (char *q = file; q + sizeof(line_sep) - 1 <= eol; q++)
			if (starts_with(q, eol, line_sep))
				sep = q;
		if (!sep) {
			p = next;
			continue;
		}
		char *number = sep + sizeof(line_sep) - 1, *digits_end = number;
		while (digits_end < eol && (*digits_end >= '0' && *digits_end <= '9'))
			digits_end++;
		/* "line ???" when the line is unknown: kept as is. */
		if (digits_end == number)
			while (digits_end < eol && *digits_end == '?')
				digits_end++;
		const char *function = "?";
		size_t function_len = 1;
		if (starts_with(digits_end, eol, in_sep)) {
			function = digits_end + sizeof(in_sep) - 1;
			function_len = (size_t)(eol - function);
		}
		size_t file_len = (size_t)(sep - file), number_len = (size_t)(digits_end - number);
		/* file ":" number " in " function "\n": shorter than the source line, which has
		 * 9 more bytes of decoration around the same three parts. */
		memmove(text + out, file, file_len);
		out += file_len;
		text[out++] = ':';
		memmove(text + out, number, number_len);
		out += number_len;
		memcpy(text + out, in_sep, sizeof(in_sep) - 1);
		out += sizeof(in_sep) - 1;
		memmove(text + out, function, function_len);
		out += function_len;
		text[out++] = '\n';
		frames++;
		p = next;
	}
	if (out < n)
		text[out] = '\0';
	return out;
}

/*
 * A scratch fd for the writer: a non-blocking pipe, which costs half what a memfd does (the writer
 * makes a few small writes per frame: 126 against 250 us of CPU for 40 frames, measured). A full
 * pipe (64 KiB, some 600 ordinary frames) loses only the outermost frames, which the cap drops
 * anyway; the writer ignores the failed writes. A memfd where no pipe can be had. Raw system calls:
 * async-signal-safe.
 */
static int scratch_fd(int *ret_read_end)
{
	int ends[2];
	if (pipe2(ends, O_CLOEXEC | O_NONBLOCK) == 0) {
		*ret_read_end = ends[0];
		return ends[1];
	}
#ifdef SYS_memfd_create
	int fd = (int)syscall(SYS_memfd_create, "p2pguard-pystack", 1u /* MFD_CLOEXEC */);
	if (fd >= 0) {
		*ret_read_end = fd;
		return fd;
	}
#endif
	return -1;
}

size_t p2pg_python_stack_signal_safe(char *buf, size_t len)
{
	if (!buf || len == 0)
		return 0;
	buf[0] = '\0';
	dump_traceback_fn dump = atomic_load_explicit(&dump_traceback, memory_order_acquire);
	if (!dump)
		return p2pg_pyoffsets_stack(buf, len, PYSTACK_MAX_FRAMES);
	is_initialized_fn init = atomic_load_explicit(&is_initialized, memory_order_relaxed);
	this_thread_state_fn state = atomic_load_explicit(&this_thread_state, memory_order_relaxed);
	if (!init())
		return 0;
	void *tstate = state();
	if (!tstate)
		return 0; /* a thread Python does not know */
	int read_end;
	int fd = scratch_fd(&read_end);
	if (fd < 0)
		return 0;
	dump(fd, tstate);
	size_t got = 0;
	ssize_t r;
	if (read_end == fd) { /* a memfd: read from its start */
		while (got < len - 1 && (r = pread(fd, buf + got, len - 1 - got, (off_t)got)) > 0)
			got += (size_t)r;
	} else { /* a pipe: with its write end closed, reads end at what was written */
		close(fd);
		while (got < len - 1 && (r = read(read_end, buf + got, len - 1 - got)) > 0)
			got += (size_t)r;
	}
	close(read_end);
	buf[got] = '\0';
	return p2pg_python_stack_convert(buf, got);
}

size_t p2pg_python_stack(char *buf, size_t len)
{
	if (!buf || len == 0)
		return 0;
	buf[0] = '\0';
	p2pg_python_stack_prepare();
	if (atomic_load_explicit(&dump_traceback, memory_order_acquire) || p2pg_pyoffsets_prepare())
		return p2pg_python_stack_signal_safe(buf, len);
	return python_stack_with_gil(buf, len);
}
