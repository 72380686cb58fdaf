/* SPDX-License-Identifier: MIT */
/*
 * The calling thread's Python stack on CPython 3.13 and 3.14, which no longer export the traceback
 * writer faulthandler uses (_Py_DumpTraceback, hidden since 3.13 by gh-107211). Both export
 * _PyRuntime, whose first member, _Py_DebugOffsets, describes the interpreter's structures for
 * debuggers and profilers that read them from outside (pystack, Austin): a cookie ("xdebugpy"),
 * the version, whether the build is free-threaded, and the offsets of the fields a stack walk
 * needs. The guard walks its own thread's frames the same way from inside, without the GIL: a
 * thread's frame chain cannot change while that thread is in here.
 *
 * The layout of _Py_DebugOffsets itself changes between minor versions (only within one it is
 * stable), so it is read by version: 3.13's from the installed headers
 * (Include/internal/pycore_runtime.h), 3.14's from CPython's sources as pystack mirrors them
 * (src/pystack/_pystack/cpython/runtime.h, Python3_14). The offsets inside are read at run time.
 *
 * What is trusted: nothing. Every read of the interpreter's memory goes through the kernel, so a
 * bad pointer is an error, not a fault; every object's type is checked against the interpreter's
 * own type objects before it is read as one (a frame's executable may be None or absent, which
 * crashed CPython's own dumper: cpython issue 123967); every length is capped. Frames the C stack
 * or the interpreter owns (entry trampolines, 3.14's base frame) carry no Python code and are
 * skipped whatever their executable is; 3.14's tagged stack references are masked. A
 * free-threaded build (per-thread bytecode, other object headers) is refused.
 */
#include "pystack_offsets.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "driver.h"

/* The parts of _Py_DebugOffsets that 3.13 and 3.14 lay out alike; a part a later version changes
 * gets a struct of that version's own. */
struct offsets_runtime_state {
	uint64_t size, finalizing, interpreters_head;
};
struct offsets_thread_state {
	uint64_t size, prev, next, interp, current_frame, thread_id, native_thread_id,
	    datastack_chunk, status;
};
struct offsets_pyobject {
	uint64_t size, ob_type;
};
struct offsets_type_object {
	uint64_t size, tp_name, tp_repr, tp_flags;
};
struct offsets_sequence_object { /* tuples' and lists' */
	uint64_t size, ob_item, ob_size;
};
struct offsets_dict_object {
	uint64_t size, ma_keys, ma_values;
};
struct offsets_float_object {
	uint64_t size, ob_fval;
};
struct offsets_long_object {
	uint64_t size, lv_tag, ob_digit;
};
struct offsets_bytes_object {
	uint64_t size, ob_size, ob_sval;
};
struct offsets_unicode_object {
	uint64_t size, state, length, asciiobject_size;
};

/* _Py_DebugOffsets of 3.13 (pycore_runtime.h), as far as the walk reads it. */
struct debug_offsets_313 {
	char cookie[8];
	uint64_t version, free_threaded;
	struct offsets_runtime_state runtime_state;
	struct {
		uint64_t size, id, next, threads_head, gc, imports_modules, sysdict, builtins,
		    ceval_gil, gil_runtime_state, gil_runtime_state_enabled,
		    gil_runtime_state_locked, gil_runtime_state_holder;
	} interpreter_state;
	struct offsets_thread_state thread_state;
	struct {
		uint64_t size, previous, executable, instr_ptr, localsplus, owner;
	} interpreter_frame;
	struct {
		uint64_t size, filename, name, qualname, linetable, firstlineno, argcount,
		    localsplusnames, localspluskinds, co_code_adaptive;
	} code_object;
	struct offsets_pyobject pyobject;
	struct offsets_type_object type_object;
	struct offsets_sequence_object tuple_object, list_object;
	struct offsets_dict_object dict_object;
	struct offsets_float_object float_object;
	struct offsets_long_object long_object;
	struct offsets_bytes_object bytes_object;
	struct offsets_unicode_object unicode_object;
};

/* 3.14's: the interpreter gained the main thread, code and bytecode generations; a frame its
 * stack pointer and bytecode index; a code object its per-thread bytecode; and sets came in. */
struct debug_offsets_314 {
	char cookie[8];
	uint64_t version, free_threaded;
	struct offsets_runtime_state runtime_state;
	struct {
		uint64_t size, id, next, threads_head, threads_main, gc, imports_modules, sysdict,
		    builtins, ceval_gil, gil_runtime_state, gil_runtime_state_enabled,
		    gil_runtime_state_locked, gil_runtime_state_holder, code_object_generation,
		    tlbc_generation;
	} interpreter_state;
	struct offsets_thread_state thread_state;
	struct {
		uint64_t size, previous, executable, instr_ptr, localsplus, owner, stackpointer,
		    tlbc_index;
	} interpreter_frame;
	struct {
		uint64_t size, filename, name, qualname, linetable, firstlineno, argcount,
		    localsplusnames, localspluskinds, co_code_adaptive, co_tlbc;
	} code_object;
	struct offsets_pyobject pyobject;
	struct offsets_type_object type_object;
	struct offsets_sequence_object tuple_object, list_object;
	struct {
		uint64_t size, used, table, mask;
	} set_object;
	struct offsets_dict_object dict_object;
	struct offsets_float_object float_object;
	struct offsets_long_object long_object;
	struct offsets_bytes_object bytes_object;
	struct offsets_unicode_object unicode_object;
};

/* No structure of the interpreter's is larger than this; an offset past it is damage. */
#define MAX_STRUCT 65536
/* What the walk copies of a frame and of a code object (their fields it reads lie within: 3.13's
 * and 3.14's within the first 80 and 160 bytes). Bounded, since the walk may run on a signal
 * stack. */
#define MAX_FRAME_READ 192
#define MAX_CODE_READ  320

static uint64_t end_of(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

/* Whether [offset, offset + width) lies within a structure of the given size. */
static bool within(uint64_t offset, uint64_t width, uint64_t size)
{
	return size <= MAX_STRUCT && offset < size && width <= size - offset;
}

#define TAKE(o, d)                                                              \
	do {                                                                    \
		(o)->tstate_current_frame = (d)->thread_state.current_frame;    \
		(o)->frame_size = (d)->interpreter_frame.size;                  \
		(o)->frame_previous = (d)->interpreter_frame.previous;          \
		(o)->frame_executable = (d)->interpreter_frame.executable;      \
		(o)->frame_instr_ptr = (d)->interpreter_frame.instr_ptr;        \
		(o)->frame_owner = (d)->interpreter_frame.owner;                \
		(o)->code_size = (d)->code_object.size;                         \
		(o)->code_filename = (d)->code_object.filename;                 \
		(o)->code_name = (d)->code_object.name;                         \
		(o)->code_linetable = (d)->code_object.linetable;               \
		(o)->code_firstlineno = (d)->code_object.firstlineno;           \
		(o)->code_adaptive = (d)->code_object.co_code_adaptive;         \
		(o)->object_type = (d)->pyobject.ob_type;                       \
		(o)->var_size = (d)->tuple_object.ob_size;                      \
		(o)->bytes_size = (d)->bytes_object.ob_size;                    \
		(o)->bytes_data = (d)->bytes_object.ob_sval;                    \
		(o)->unicode_state = (d)->unicode_object.state;                 \
		(o)->unicode_length = (d)->unicode_object.length;               \
		(o)->unicode_ascii_size = (d)->unicode_object.asciiobject_size; \
		(o)->unicode_size = (d)->unicode_object.size;                   \
		thread_size = (d)->thread_state.size;                           \
		bytes_size = (d)->bytes_object.size;                            \
		object_size = (d)->pyobject.size;                               \
	} while (0)

int p2pg_pyoffsets_parse(const void *runtime, size_t available, struct p2pg_pyoffsets *ret,
			 const char **why)
{
	struct debug_offsets_314 d14;
	struct debug_offsets_313 d13;
	if (available < sizeof(d13)) {
		*why = "no debug offsets";
		return -EINVAL;
	}
	memcpy(&d13, runtime, sizeof(d13));
	if (memcmp(d13.cookie, "xdebugpy", 8) != 0) {
		*why = "no debug offsets (cookie)";
		return -EINVAL;
	}
	unsigned major = (unsigned)(d13.version >> 24) & 0xff,
		 minor = (unsigned)(d13.version >> 16) & 0xff;
	if (major != 3 || (minor != 13 && minor != 14)) {
		*why = "a Python version whose debug offsets are not known here";
		return -EINVAL;
	}
	if (d13.free_threaded) {
		*why = "a free-threaded build";
		return -EINVAL;
	}
	struct p2pg_pyoffsets o = {.minor = minor};
	uint64_t thread_size, bytes_size, object_size;
	if (minor == 13) {
		TAKE(&o, &d13);
		o.owner_cstack = 3;
		o.owner_interpreter = -1;
		o.tag_mask = 0;
	} else {
		if (available < sizeof(d14)) {
			*why = "no debug offsets";
			return -EINVAL;
		}
		memcpy(&d14, runtime, sizeof(d14));
		TAKE(&o, &d14);
		o.owner_interpreter = 3;
		o.owner_cstack = 4;
		o.tag_mask = 3;
	}
	/* Everything the walk reads lies within its structure; a string's data follows its
	 * header; a code object is a variable-size object whose code units follow it. */
	bool ok = within(o.tstate_current_frame, 8, thread_size) &&
		  within(o.frame_previous, 8, o.frame_size) &&
		  within(o.frame_executable, 8, o.frame_size) &&
		  within(o.frame_instr_ptr, 8, o.frame_size) &&
		  within(o.frame_owner, 1, o.frame_size) && within(o.object_type, 8, object_size) &&
		  within(o.code_filename, 8, o.code_size) && within(o.code_name, 8, o.code_size) &&
		  within(o.code_linetable, 8, o.code_size) &&
		  within(o.code_firstlineno, 4, o.code_size) &&
		  within(o.object_type, 8, o.code_size) && within(o.var_size, 8, o.code_size) &&
		  o.code_adaptive <= o.code_size && within(o.bytes_size, 8, bytes_size) &&
		  o.bytes_data <= bytes_size && within(o.object_type, 8, o.unicode_size) &&
		  within(o.unicode_state, 4, o.unicode_size) &&
		  within(o.unicode_length, 8, o.unicode_size) && o.unicode_ascii_size >= 16 &&
		  o.unicode_ascii_size + 8 <= o.unicode_size && o.frame_size <= MAX_STRUCT &&
		  o.code_size <= MAX_STRUCT;
	o.frame_read = end_of(end_of(o.frame_previous + 8, o.frame_executable + 8),
			      end_of(o.frame_instr_ptr + 8, o.frame_owner + 1));
	o.code_read = end_of(
	    end_of(end_of(o.code_filename, o.code_name), end_of(o.code_linetable, o.var_size)) + 8,
	    end_of(o.code_firstlineno + 4, o.object_type + 8));
	if (ok && (o.frame_read > MAX_FRAME_READ || o.code_read > MAX_CODE_READ)) {
		*why = "frames or code objects laid out past what the walk reads";
		return -EINVAL;
	}
	if (!ok) {
		*why = "debug offsets out of their structures' bounds";
		return -EINVAL;
	}
	*ret = o;
	return 0;
}

/* ---- the interpreter, as found in the process ---- */

typedef int (*is_initialized_fn)(void);
typedef void *(*thread_state_fn)(void);

static struct {
	struct p2pg_pyoffsets o;
	is_initialized_fn is_initialized;
	thread_state_fn thread_state;
	uintptr_t code_type, unicode_type, bytes_type;
} py;
static atomic_bool py_ready;
static _Atomic(const void *) py_refused; /* a _PyRuntime found unusable, not looked at again */

static pthread_mutex_t py_lock = PTHREAD_MUTEX_INITIALIZER;
static bool prepare_locked(const void *runtime);

bool p2pg_pyoffsets_prepare(void)
{
	if (atomic_load_explicit(&py_ready, memory_order_acquire))
		return true;
	const void *runtime = p2pg_real_dlsym(RTLD_DEFAULT, "_PyRuntime");
	if (!runtime || atomic_load(&py_refused) == runtime)
		return false;
	/* Two failing threads may prepare at once; py is written once, before py_ready. */
	pthread_mutex_lock(&py_lock);
	bool ready = prepare_locked(runtime);
	pthread_mutex_unlock(&py_lock);
	return ready;
}

static bool prepare_locked(const void *runtime)
{
	if (atomic_load(&py_ready))
		return true;
	is_initialized_fn init =
	    (is_initialized_fn)p2pg_real_dlsym(RTLD_DEFAULT, "Py_IsInitialized");
	thread_state_fn state =
	    (thread_state_fn)p2pg_real_dlsym(RTLD_DEFAULT, "PyGILState_GetThisThreadState");
	void *code = p2pg_real_dlsym(RTLD_DEFAULT, "PyCode_Type");
	void *unicode = p2pg_real_dlsym(RTLD_DEFAULT, "PyUnicode_Type");
	void *bytes = p2pg_real_dlsym(RTLD_DEFAULT, "PyBytes_Type");
	struct p2pg_pyoffsets o;
	const char *why;
	/* _PyRuntime is far larger than its first member: reading the longer layout's worth of
	 * it stays inside the object. */
	if (!init || !state || !code || !unicode || !bytes ||
	    p2pg_pyoffsets_parse(runtime, sizeof(struct debug_offsets_314), &o, &why) < 0) {
		atomic_store(&py_refused, runtime);
		return false;
	}
	py.o = o;
	py.is_initialized = init;
	py.thread_state = state;
	py.code_type = (uintptr_t)code;
	py.unicode_type = (uintptr_t)unicode;
	py.bytes_type = (uintptr_t)bytes;
	atomic_store_explicit(&py_ready, true, memory_order_release);
	return true;
}

/* ---- reading memory without trusting it ---- */

/* How reads go: through process_vm_readv on this very process (no ptrace permission is needed
 * for one's own), or where a sandbox refuses it, through a pipe (write(2) of a bad address fails
 * with EFAULT). Learned once. */
enum { READ_VM, READ_PIPE, READ_NONE };
static atomic_int read_mode = READ_VM;

struct reader {
	pid_t pid;
	int fds[2];
};

/* Reads what it can of [addr, addr + n), n at most 4 KiB (what a pipe always takes whole): the
 * bytes read, which stop at the first that is not mapped; 0 when none is. */
static size_t mem_read_some(struct reader *r, uintptr_t addr, void *out, size_t n)
{
	if (!addr || n == 0 || n > 4096 || addr + n < addr)
		return 0;
	int mode = atomic_load_explicit(&read_mode, memory_order_relaxed);
	if (mode == READ_VM) {
		struct iovec local = {out, n}, remote = {(void *)addr, n};
		long got = syscall(SYS_process_vm_readv, r->pid, &local, 1UL, &remote, 1UL, 0UL);
		if (got >= 0)
			return (size_t)got;
		if (errno != ENOSYS && errno != EPERM)
			return 0; /* EFAULT: not mapped */
		atomic_store(&read_mode, READ_PIPE);
	}
	if (r->fds[0] < 0 && pipe2(r->fds, O_CLOEXEC | O_NONBLOCK) < 0)
		return 0;
	ssize_t w = write(r->fds[1], (const void *)addr, n);
	if (w <= 0)
		return 0;
	ssize_t got = read(r->fds[0], out, (size_t)w);
	return got == w ? (size_t)w : 0;
}

static bool mem_read(struct reader *r, uintptr_t addr, void *out, size_t n)
{
	return mem_read_some(r, addr, out, n) == n;
}

static bool read_u64(struct reader *r, uintptr_t addr, uint64_t *out)
{
	return mem_read(r, addr, out, sizeof(*out));
}

/* Of an object's first bytes already read (have of them), whether it is of the given type: the
 * interpreter's type objects are compared, never trusted. */
static bool type_is(const unsigned char *head, size_t have, uintptr_t type)
{
	uint64_t t;
	if (py.o.object_type + 8 > have)
		return false;
	memcpy(&t, head + py.o.object_type, 8);
	return t == type;
}

/* Appends a UTF-8 encoding of c to out (room left: *room); false when it does not fit. */
static bool put_utf8(uint32_t c, char **out, size_t *room)
{
	unsigned char b[4];
	size_t n;
	if (c >= 0xd800 && c < 0xe000)
		c = '?'; /* a lone surrogate has no UTF-8 */
	if (c < 0x80) {
		b[0] = (unsigned char)c;
		n = 1;
	} else if (c < 0x800) {
		b[0] = (unsigned char)(0xc0 | c >> 6);
		b[1] = (unsigned char)(0x80 | (c & 0x3f));
		n = 2;
	} else if (c < 0x10000) {
		b[0] = (unsigned char)(0xe0 | c >> 12);
		b[1] = (unsigned char)(0x80 | ((c >> 6) & 0x3f));
		b[2] = (unsigned char)(0x80 | (c & 0x3f));
		n = 3;
	} else if (c < 0x110000) {
		b[0] = (unsigned char)(0xf0 | c >> 18);
		b[1] = (unsigned char)(0x80 | ((c >> 12) & 0x3f));
		b[2] = (unsigned char)(0x80 | ((c >> 6) & 0x3f));
		b[3] = (unsigned char)(0x80 | (c & 0x3f));
		n = 4;
	} else {
		b[0] = '?';
		n = 1;
	}
	if (n > *room)
		return false;
	memcpy(*out, b, n);
	*out += n;
	*room -= n;
	return true;
}

/* At most this many characters of a file name or a function name (faulthandler's own cap). */
#define MAX_CHARS 500

/* A str object as UTF-8 into out (at most cap bytes, no terminator); "?" when it is no str or
 * cannot be read. Returns the length. One read where the characters follow the header (the
 * common, compact case) and are few. */
static size_t read_text(struct reader *r, uintptr_t obj, char *out, size_t cap)
{
	const struct p2pg_pyoffsets *o = &py.o;
	unsigned char chars[512];
	uint32_t state;
	uint64_t length, data;
	if (cap == 0)
		return 0;
	size_t have = (obj & 7) ? 0 : mem_read_some(r, obj, chars, sizeof(chars));
	if (!type_is(chars, have, py.unicode_type) || o->unicode_state + 4 > have ||
	    o->unicode_length + 8 > have)
		goto unknown;
	memcpy(&state, chars + o->unicode_state, 4);
	memcpy(&length, chars + o->unicode_length, 8);
	/* PyASCIIObject.state: interned (2 bits), kind (3), compact, ascii. */
	unsigned kind = (state >> 2) & 7, compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
	if (kind != 1 && kind != 2 && kind != 4)
		goto unknown;
	/* Compact: the characters follow PyASCIIObject (ASCII) or PyCompactUnicodeObject, which is
	 * PyUnicodeObject without its data pointer; otherwise that pointer says where they are. */
	uint64_t pointer_at = o->unicode_size - 8;
	if (compact)
		data = obj + (ascii ? o->unicode_ascii_size : pointer_at);
	else if (pointer_at + 8 <= have)
		memcpy(&data, chars + pointer_at, 8);
	else
		goto unknown;
	if (length > MAX_CHARS)
		length = MAX_CHARS;
	/* What the header's read brought of the characters, if anything. */
	size_t start = data >= obj && data - obj < have ? (size_t)(data - obj) : have;
	size_t ready = (have - start) / kind;
	size_t done = 0;
	char *p = out;
	size_t room = cap;
	while (done < length) {
		const unsigned char *c = chars + start;
		size_t take = ready;
		if (take == 0) {
			take = length - done;
			if (take * kind > sizeof(chars))
				take = sizeof(chars) / kind;
			if (!mem_read(r, (uintptr_t)data + done * kind, chars, take * kind))
				goto unknown;
			c = chars;
		}
		if (take > length - done)
			take = length - done;
		for (size_t k = 0; k < take; k++) {
			uint32_t u = kind == 1 ? c[k]
				     : kind == 2
					 ? (uint32_t)c[2 * k] | (uint32_t)c[2 * k + 1] << 8
					 : (uint32_t)c[4 * k] | (uint32_t)c[4 * k + 1] << 8 |
					       (uint32_t)c[4 * k + 2] << 16 |
					       (uint32_t)c[4 * k + 3] << 24;
			if (!put_utf8(u, &p, &room))
				return (size_t)(p - out);
		}
		done += take;
		ready = 0;
	}
	return (size_t)(p - out);
unknown:
	out[0] = '?';
	return 1;
}

/* The location table, a byte at a time through a buffer. */
struct table {
	struct reader *r;
	uintptr_t data;
	uint64_t size, at; /* bytes in the table, the next one's index */
	unsigned char buf[512];
	uint64_t buf_start, buf_len;
};

/* The byte at index i, or -1. */
static int table_byte(struct table *t, uint64_t i)
{
	if (i >= t->size)
		return -1;
	if (i < t->buf_start || i >= t->buf_start + t->buf_len) {
		uint64_t n = t->size - i < sizeof(t->buf) ? t->size - i : sizeof(t->buf);
		if (!mem_read(t->r, t->data + (uintptr_t)i, t->buf, (size_t)n))
			return -1;
		t->buf_start = i;
		t->buf_len = n;
	}
	return t->buf[i - t->buf_start];
}

/* A varint of the table (6 bits a byte, least significant first, bit 6 says more); -1 if cut. */
static long table_varint(struct table *t)
{
	int b = table_byte(t, t->at++);
	if (b < 0)
		return -1;
	unsigned long value = (unsigned long)b & 63;
	for (unsigned shift = 6; b & 64; shift += 6) {
		if (shift > 30 || (b = table_byte(t, t->at++)) < 0)
			return -1;
		value |= ((unsigned long)b & 63) << shift;
	}
	return (long)value;
}

/*
 * The line of the instruction at byte offset addr, as PyCode_Addr2Line computes it from
 * co_linetable (Objects/locations.md, InternalDocs/code_objects.md): entries of a first byte with
 * bit 7 set (bits 3-6 the kind, bits 0-2 the code units covered minus one) and continuation
 * bytes; the line is a running delta from co_firstlineno. -1: no line.
 */
static long line_of(struct reader *r, uintptr_t linetable, long firstlineno, uint64_t addr)
{
	struct table t = {.r = r, .buf_start = 1, .buf_len = 0};
	/* The header and the table's first bytes in one read. */
	unsigned char head[sizeof(t.buf)];
	size_t have = (linetable & 7) ? 0 : mem_read_some(r, linetable, head, sizeof(head));
	if (!type_is(head, have, py.bytes_type) || py.o.bytes_size + 8 > have)
		return -1;
	memcpy(&t.size, head + py.o.bytes_size, 8);
	/* A table this long (a function of some hundred thousand lines) is not read through on a
	 * signal stack: the line is unknown. */
	if (t.size > (1u << 20))
		return -1;
	t.data = linetable + py.o.bytes_data;
	if (py.o.bytes_data < have) {
		t.buf_start = 0;
		t.buf_len = have - py.o.bytes_data;
		if (t.buf_len > t.size)
			t.buf_len = t.size;
		memcpy(t.buf, head + py.o.bytes_data, (size_t)t.buf_len);
	}
	long line = firstlineno, found = -1;
	uint64_t end = 0;
	while (end <= addr) {
		int first = table_byte(&t, t.at++);
		if (first < 0 || !(first & 0x80))
			return -1;
		int kind = (first >> 3) & 15;
		long delta = 0;
		if (kind == 13 || kind == 14) { /* no column, long form: a signed varint first */
			long v = table_varint(&t);
			if (v < 0)
				return -1;
			delta = v & 1 ? -(v >> 1) : v >> 1;
		} else if (kind >= 10 && kind <= 12) { /* one-line forms */
			delta = kind - 10;
		}
		line += delta;
		found = kind == 15 ? -1 : line; /* 15: no location */
		end += ((uint64_t)(first & 7) + 1) * 2;
		int next;
		while ((next = table_byte(&t, t.at)) >= 0 && !(next & 0x80))
			t.at++;
	}
	return found;
}

/* Appends decimal n (or "???" for a negative one, as faulthandler writes an unknown line). */
static void put_number(long n, char **out, size_t *room)
{
	char digits[24];
	size_t k = 0;
	if (n < 0) {
		memcpy(digits, "???", 3);
		k = 3;
	} else {
		do
			digits[sizeof(digits) - 1 - k++] = (char)('0' + n % 10);
		while ((n /= 10) > 0);
		memmove(digits, digits + sizeof(digits) - k, k);
	}
	if (k > *room)
		k = *room;
	memcpy(*out, digits, k);
	*out += k;
	*room -= k;
}

/* Where the last frame's texts went, by the objects they came from: a recursion's frames share
 * their code object, and a module's functions their file name (one str for the whole module). */
struct last_code {
	uintptr_t code, filename;
	const char *file, *name;
	size_t file_len, name_len;
};

/* A text of the code object: copied from the previous frame's line when the code is the same. */
static size_t code_text(struct reader *r, uintptr_t obj, const char *seen, size_t seen_len,
			char *out, size_t cap)
{
	if (seen && seen_len <= cap) {
		memcpy(out, seen, seen_len);
		return seen_len;
	}
	return read_text(r, obj, out, cap);
}

/* One frame's line "file:LINE in name\n" into out (cap bytes): its length, 0 when the frame runs
 * no Python code, -1 when the line does not fit. */
static long frame_line(struct reader *r, uintptr_t executable, uintptr_t instr_ptr, char *out,
		       size_t cap, struct last_code *last)
{
	const struct p2pg_pyoffsets *o = &py.o;
	unsigned char code[MAX_CODE_READ];
	if (!executable || (executable & 7) ||
	    !mem_read(r, executable, code, (size_t)o->code_read) ||
	    !type_is(code, (size_t)o->code_read, py.code_type))
		return 0;
	uint64_t filename, name, linetable, units;
	int32_t firstlineno;
	memcpy(&filename, code + o->code_filename, 8);
	memcpy(&name, code + o->code_name, 8);
	memcpy(&linetable, code + o->code_linetable, 8);
	memcpy(&firstlineno, code + o->code_firstlineno, 4);
	memcpy(&units, code + o->var_size, 8);
	/* The instruction: an index into the code units that follow the code object's header,
	 * two bytes each; before them (a frame not yet started), the first line. */
	uintptr_t first = executable + o->code_adaptive;
	long line;
	if (instr_ptr < first)
		line = firstlineno;
	else if ((instr_ptr - first) / 2 >= units)
		line = -1;
	else
		line = line_of(r, (uintptr_t)linetable, firstlineno,
			       (instr_ptr - first) & ~(uintptr_t)1);
	/* A text cut short by the room left would not be a whole line: -1 then. */
	bool same = last->code == executable;
	char *p = out;
	size_t room = cap;
	size_t n = code_text(r, (uintptr_t)filename, last->filename == filename ? last->file : NULL,
			     last->file_len, p, room);
	const char *file = p;
	size_t file_len = n;
	p += n;
	room -= n;
	if (room < 1)
		return -1;
	*p++ = ':';
	room--;
	put_number(line, &p, &room);
	if (room < 4)
		return -1;
	memcpy(p, " in ", 4);
	p += 4;
	room -= 4;
	n = code_text(r, (uintptr_t)name, same ? last->name : NULL, last->name_len, p, room);
	*last = (struct last_code){executable, (uintptr_t)filename, file, p, file_len, n};
	p += n;
	room -= n;
	if (room < 1)
		return -1;
	*p++ = '\n';
	return (long)(p - out);
}

/* Frames visited at most, counting those that are skipped: a loop in a damaged chain ends. */
#define MAX_VISITED 4096

size_t p2pg_pyoffsets_stack(char *buf, size_t len, int max_frames)
{
	if (!buf || len == 0)
		return 0;
	buf[0] = '\0';
	if (!atomic_load_explicit(&py_ready, memory_order_acquire) || !py.is_initialized())
		return 0;
	void *tstate = py.thread_state();
	if (!tstate)
		return 0; /* a thread the interpreter does not know */
	int saved_errno = errno;
	const struct p2pg_pyoffsets *o = &py.o;
	struct reader r = {.pid = (pid_t)syscall(SYS_getpid), .fds = {-1, -1}};
	size_t pos = 0;
	uint64_t frame = 0;
	struct last_code last = {0};
	read_u64(&r, (uintptr_t)tstate + o->tstate_current_frame, &frame);
	for (int visited = 0, frames = 0; frame && visited < MAX_VISITED && frames < max_frames;
	     visited++) {
		unsigned char f[MAX_FRAME_READ];
		if ((frame & 7) || !mem_read(&r, (uintptr_t)frame, f, (size_t)o->frame_read))
			break;
		uint64_t previous, executable, instr_ptr;
		memcpy(&previous, f + o->frame_previous, 8);
		memcpy(&executable, f + o->frame_executable, 8);
		memcpy(&instr_ptr, f + o->frame_instr_ptr, 8);
		int owner = (signed char)f[o->frame_owner];
		if (owner != o->owner_cstack && owner != o->owner_interpreter) {
			long n = frame_line(&r, (uintptr_t)(executable & ~(uint64_t)o->tag_mask),
					    (uintptr_t)instr_ptr, buf + pos, len - 1 - pos, &last);
			if (n < 0)
				break; /* whole lines only */
			pos += (size_t)n;
			frames += n > 0;
		}
		frame = previous;
	}
	buf[pos] = '\0';
	if (r.fds[0] >= 0) {
		close(r.fds[0]);
		close(r.fds[1]);
	}
	errno = saved_errno;
	return pos;
}
