/* SPDX-License-Identifier: MIT */
/*
 * The reading of CPython's _Py_DebugOffsets (src/diagnose/pystack_offsets.c), fed images written
 * here from the two layouts (3.13: Include/internal/pycore_runtime.h of the installed 3.13.0;
 * 3.14: CPython's sources, as pystack mirrors them). What must be refused is refused: another
 * version, a free-threaded build, an offset outside its structure, a short image, no cookie.
 */
#include <stdint.h>
#include <string.h>

#include "pystack_offsets.h"
#include "tap.h"

/* Word positions in each layout (cookie = word 0). */
enum {
	W13_VERSION = 1,
	W13_FREE_THREADED = 2,
	W13_THREAD = 3 + 3 + 13,    /* size, prev, next, interp, current_frame, ... */
	W13_FRAME = W13_THREAD + 9, /* size, previous, executable, instr_ptr, localsplus, owner */
	W13_CODE = W13_FRAME + 6, /* size, filename, name, qualname, linetable, firstlineno, ... */
	W13_OBJECT = W13_CODE + 10,	/* size, ob_type */
	W13_TUPLE = W13_OBJECT + 2 + 4, /* after type_object */
	W13_BYTES = W13_TUPLE + 3 + 3 + 3 + 2 + 3,
	W13_UNICODE = W13_BYTES + 3,
	W13_WORDS = W13_UNICODE + 4,

	W14_THREAD = 3 + 3 + 16,
	W14_FRAME = W14_THREAD + 9,
	W14_CODE = W14_FRAME + 8,
	W14_OBJECT = W14_CODE + 11,
	W14_TUPLE = W14_OBJECT + 2 + 4,
	W14_BYTES = W14_TUPLE + 3 + 3 + 4 + 3 + 2 + 3, /* a set's offsets came in 3.14 */
	W14_UNICODE = W14_BYTES + 3,
	W14_WORDS = W14_UNICODE + 4,
};

/* Plausible offsets (3.13.0's own on x86-64, near enough), the current frame's marked. */
static void fill(uint64_t *w, unsigned minor, int thread, int frame, int code, int object,
		 int tuple, int bytes, int unicode)
{
	memcpy(w, "xdebugpy", 8);
	w[1] = 0x030000f0ull | (uint64_t)minor << 16;
	w[2] = 0;
	w[thread] = 300;     /* sizeof(PyThreadState) */
	w[thread + 4] = 72;  /* current_frame */
	w[frame] = 80;	     /* sizeof(_PyInterpreterFrame) */
	w[frame + 1] = 8;    /* previous */
	w[frame + 2] = 0;    /* executable */
	w[frame + 3] = 56;   /* instr_ptr */
	w[frame + 5] = 70;   /* owner */
	w[code] = 208;	     /* sizeof(PyCodeObject) */
	w[code + 1] = 112;   /* filename */
	w[code + 2] = 120;   /* name */
	w[code + 4] = 136;   /* linetable */
	w[code + 5] = 68;    /* firstlineno */
	w[code + 9] = 200;   /* co_code_adaptive */
	w[object] = 16;	     /* sizeof(PyObject) */
	w[object + 1] = 8;   /* ob_type */
	w[tuple] = 32;	     /* sizeof(PyTupleObject) */
	w[tuple + 2] = 16;   /* ob_size */
	w[bytes] = 40;	     /* sizeof(PyBytesObject) */
	w[bytes + 1] = 16;   /* ob_size */
	w[bytes + 2] = 32;   /* ob_sval */
	w[unicode] = 64;     /* sizeof(PyUnicodeObject) */
	w[unicode + 1] = 32; /* state */
	w[unicode + 2] = 16; /* length */
	w[unicode + 3] = 40; /* sizeof(PyASCIIObject) */
}

int main(void)
{
	uint64_t img[W14_WORDS + 8];
	struct p2pg_pyoffsets o;
	const char *why = "";

	memset(img, 0, sizeof(img));
	fill(img, 13, W13_THREAD, W13_FRAME, W13_CODE, W13_OBJECT, W13_TUPLE, W13_BYTES,
	     W13_UNICODE);
	int rc = p2pg_pyoffsets_parse(img, sizeof(img), &o, &why);
	CHECK(rc == 0, "3.13: accepted (%s)", rc ? why : "");
	CHECK(o.minor == 13 && o.tstate_current_frame == 72 && o.frame_owner == 70 &&
		  o.code_filename == 112 && o.code_adaptive == 200 && o.unicode_ascii_size == 40,
	      "3.13: the offsets come from 3.13's places");
	CHECK(o.owner_cstack == 3 && o.owner_interpreter == -1 && o.tag_mask == 0,
	      "3.13: frames owned by the C stack (3) are skipped; no tagged references");
	CHECK(p2pg_pyoffsets_parse(img, W13_WORDS * 8 - 1, &o, &why) < 0,
	      "3.13: an image shorter than the layout is refused (%s)", why);

	img[W13_FREE_THREADED] = 1;
	CHECK(p2pg_pyoffsets_parse(img, sizeof(img), &o, &why) < 0 && strstr(why, "free-threaded"),
	      "a free-threaded build is refused (%s)", why);
	img[W13_FREE_THREADED] = 0;

	img[W13_THREAD + 4] = 300;
	CHECK(p2pg_pyoffsets_parse(img, sizeof(img), &o, &why) < 0 && strstr(why, "bounds"),
	      "the current frame's offset outside the thread state is refused (%s)", why);
	img[W13_THREAD + 4] = 72;
	img[W13_CODE + 1] = 1 << 20;
	CHECK(p2pg_pyoffsets_parse(img, sizeof(img), &o, &why) < 0,
	      "a code object's field far outside it is refused (%s)", why);
	img[W13_CODE + 1] = 112;

	img[W13_VERSION] = 0x030c01f0; /* 3.12.1: no debug offsets of this layout */
	CHECK(p2pg_pyoffsets_parse(img, sizeof(img), &o, &why) < 0, "3.12 is refused (%s)", why);
	img[W13_VERSION] = 0x030f00a1; /* 3.15: exports its writer again; layout unknown here */
	CHECK(p2pg_pyoffsets_parse(img, sizeof(img), &o, &why) < 0, "3.15 is refused (%s)", why);
	img[W13_VERSION] = 0x030d00f0;
	memcpy(img, "xdebugpx", 8);
	CHECK(p2pg_pyoffsets_parse(img, sizeof(img), &o, &why) < 0, "no cookie, refused (%s)", why);

	memset(img, 0, sizeof(img));
	fill(img, 14, W14_THREAD, W14_FRAME, W14_CODE, W14_OBJECT, W14_TUPLE, W14_BYTES,
	     W14_UNICODE);
	rc = p2pg_pyoffsets_parse(img, sizeof(img), &o, &why);
	CHECK(rc == 0, "3.14: accepted (%s)", rc ? why : "");
	CHECK(o.minor == 14 && o.tstate_current_frame == 72 && o.frame_owner == 70 &&
		  o.code_adaptive == 200 && o.bytes_data == 32 && o.unicode_size == 64,
	      "3.14: the offsets come from 3.14's places (after its added fields)");
	CHECK(o.owner_interpreter == 3 && o.owner_cstack == 4 && o.tag_mask == 3,
	      "3.14: frames owned by the interpreter (3) and the C stack (4) are skipped; tagged "
	      "references masked");
	CHECK(p2pg_pyoffsets_parse(img, W14_WORDS * 8 - 8, &o, &why) < 0,
	      "3.14: an image shorter than its layout is refused (%s)", why);
	return TAP_DONE();
}
