/* SPDX-License-Identifier: MIT */
/*
 * The Python stack of the calling thread, read through the interpreter's C API found at run time.
 * libpython is never linked: the guard must load into any process, and a Python process already
 * exports the API from its executable or its libpython, which RTLD_DEFAULT finds either way. Only
 * the stable frame functions of 3.9+ are used, so no interpreter struct layout is assumed.
 */
#include "backtrace.h"
#include "driver.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define PYSTACK_MAX_FRAMES 32

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

size_t p2pg_python_stack(char *buf, size_t len)
{
	if (!buf || len == 0)
		return 0;
	buf[0] = '\0';
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
