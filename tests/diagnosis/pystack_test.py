# SPDX-License-Identifier: MIT
"""p2pg_python_stack from inside a library loaded with ctypes.

ctypes.PyDLL keeps the GIL during the call; ctypes.CDLL releases it (as PyTorch does around CUDA
calls). Where the interpreter exports its signal-safe traceback writer (3.8-3.12), or publishes the
debug offsets the guard walks its frames by (3.13, 3.14, not free-threaded), the stack names this
script's frames either way, and the crash handler's signal-safe read gives the same; elsewhere (a
free-threaded build) the stack is read only with the GIL held, and is empty with CDLL. Every
stack is compared with the traceback module's own.
Usage: pystack_test.py path/to/libdiagtest.so
"""
import ctypes
import os
import sys
import sysconfig
import tempfile
import threading
import traceback

failures = 0
WRITER = any(hasattr(ctypes.pythonapi, name) for name in ("_Py_DumpTraceback", "PyUnstable_DumpTraceback"))
FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
OFFSETS = not WRITER and sys.version_info[:2] in ((3, 13), (3, 14)) and not FREE_THREADED
NO_GIL = WRITER or OFFSETS


def check(ok, what, text=""):
    global failures
    print(("ok - " if ok else "not ok - ") + what)
    if not ok:
        failures += 1
        print("--- output:\n" + text + "---")


def stack_from(lib, function="diagtest_python_stack"):
    fn = getattr(lib, function)
    fn.restype = ctypes.c_size_t
    fn.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    buf = ctypes.create_string_buffer(8192)
    n = fn(buf, len(buf))
    return n, buf.value.decode()


def line_of(marker):
    with open(__file__) as f:
        for number, line in enumerate(f, 1):
            if marker in line and "line_of" not in line:
                return number
    raise AssertionError(marker)


def inner(lib, function="diagtest_python_stack"):
    return stack_from(lib, function)  # MARK-inner


def outer(lib):
    return inner(lib)  # MARK-outer


class Model:
    def forward(self, lib):
        return outer(lib)  # MARK-forward


def main():
    path = sys.argv[1]
    # The path as Python records it (absolute for the main script since 3.9), which the stack
    # must reproduce unchanged.
    script = inner.__code__.co_filename

    n, text = Model().forward(ctypes.PyDLL(path))
    lines = text.splitlines()
    print("python %d.%d" % sys.version_info[:2])
    check(n == len(text.encode()), "returned length matches the text", text)
    check(len(lines) >= 4 and lines[0].endswith(" in stack_from"),
          "innermost frame first", text)
    expected = [
        "%s:%d in inner" % (script, line_of("MARK-inner")),
        "%s:%d in outer" % (script, line_of("MARK-outer")),
        "%s:%d in forward" % (script, line_of("MARK-forward")),
    ]
    check(lines[1:4] == expected, "frames name the script's lines: " + ", ".join(expected), text)
    check(lines[-1].endswith(" in <module>"), "outermost frame is the module", text)

    print("traceback writer: %s; debug offsets walk: %s; free-threaded: %s"
          % ("exported" if WRITER else "not exported", "yes" if OFFSETS else "no",
             "yes" if FREE_THREADED else "no"))
    with_gil = lines
    n, text = Model().forward(ctypes.CDLL(path))
    if NO_GIL:
        # Only main()'s line differs (the call is made from another line of it).
        released = text.splitlines()
        check(released[:4] == with_gil[:4] and len(released) == len(with_gil) and
              released[-1] == with_gil[-1], "GIL released (ctypes.CDLL): the same stack", text)
        n, text = inner(ctypes.CDLL(path), "diagtest_python_stack_signal_safe")
        check(text.splitlines()[1] == expected[0] and text.splitlines()[-1].endswith(" in <module>"),
              "the signal-safe read, GIL released: the same frames", text)
    else:
        check(n == 0 and text == "", "GIL released (ctypes.CDLL), no writer: no stack", text)
        n, text = inner(ctypes.CDLL(path), "diagtest_python_stack_signal_safe")
        check(n == 0 and text == "", "no writer: the signal-safe read gives nothing", text)

    # The traceback module's own view of the same frames: every frame above the call, its file,
    # line and function, whatever reads them.
    def against_traceback(lib):
        here = ["%s:%d in %s" % (f.filename, f.lineno, f.name)
                for f in reversed(traceback.extract_stack(sys._getframe(0)))]
        n, text = stack_from(lib)  # MARK-against
        got = text.splitlines()
        here[0] = "%s:%d in against_traceback" % (script, line_of("MARK-against"))
        return got[1:], here

    for kind in (["PyDLL", "CDLL"] if NO_GIL else ["PyDLL"]):
        got, want = against_traceback(getattr(ctypes, kind)(path))
        check(got == want, "%s: every frame as the traceback module sees it (%d frames)" % (kind, len(want)),
              "\n".join(got) + "\n--- traceback:\n" + "\n".join(want) + "\n")

    # Frames the walk by the debug offsets must read right where a writer would escape or fail:
    # names that are not ASCII (kept as UTF-8, where faulthandler's writer escapes them), a line
    # far from the function's first (a long-form entry of the location table), a generator's
    # frame.
    if OFFSETS:
        folder = tempfile.mkdtemp()
        odd = os.path.join(folder, "ünï-名前.py")
        source = ("def fünktion_名(lib, stack_from):\n"
                  + "    # filler\n" * 3000
                  + "    return stack_from(lib)\n"
                  "def gen(lib, stack_from):\n"
                  "    yield stack_from(lib)\n")
        with open(odd, "w", encoding="utf-8") as f:
            f.write(source)
        namespace = {}
        exec(compile(source, odd, "exec"), namespace)
        for kind in ("PyDLL", "CDLL"):
            lib = getattr(ctypes, kind)(path)
            n, text = namespace["fünktion_名"](lib, stack_from)
            lines = text.splitlines()
            check(len(lines) > 1 and lines[1] == "%s:3002 in fünktion_名" % odd,
                  "%s: a file and a function named in UTF-8, line 3002 of them" % kind, text)
            n, text = next(namespace["gen"](lib, stack_from))
            lines = text.splitlines()
            check(len(lines) > 1 and lines[1] == "%s:3004 in gen" % odd,
                  "%s: a generator's frame" % kind, text)

    # The writer's text turned into ours: quotes in a file name, an unknown line, a cut-off line.
    convert = ctypes.CDLL(path).diagtest_python_stack_convert
    convert.restype = ctypes.c_size_t
    convert.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    raw = (b'Stack (most recent call first):\n'
           b'  File "/a/b c.py", line 12 in forward\n'
           b'  File "/odd/", line 3.py", line 7 in <lambda>\n'
           b'  File "gen.py", line ??? in <genexpr>\n'
           b'  <no Python frame>\n'
           b'  File "cut.py", line 9 in ma')
    buf = ctypes.create_string_buffer(raw, len(raw) + 1)
    n = convert(buf, len(raw))
    want = '/a/b c.py:12 in forward\n/odd/", line 3.py:7 in <lambda>\ngen.py:??? in <genexpr>\n'
    check(buf.raw[:n].decode() == want, "the writer's lines in our format, whole lines only",
          buf.raw[:n].decode())

    # An exception pending in C when the stack is read is still pending afterwards (PyDLL
    # raises it), and one being handled in Python is untouched.
    lib = ctypes.PyDLL(path)
    fn = lib.diagtest_python_stack_with_error
    fn.restype = ctypes.c_size_t
    fn.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    buf = ctypes.create_string_buffer(8192)
    try:
        fn(buf, len(buf))
        check(False, "pending exception kept (none raised)")
    except RuntimeError as exc:
        text = buf.value.decode()
        check(str(exc) == "kept" and " in main" in text, "pending exception kept", text)
    try:
        raise KeyError("handled")
    except KeyError as exc:
        n, text = inner(ctypes.PyDLL(path))
        check(sys.exc_info()[1] is exc and n > 0, "exception being handled left intact", text)

    # Another thread holding the GIL gets its own stack.
    result = {}

    def worker():
        result["stack"] = inner(ctypes.PyDLL(path))

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    n, text = result["stack"]
    check(" in worker" in text and " in forward" not in text, "a thread's own stack", text)

    # Deep recursion stops at the frame limit.
    def deep(k):
        return deep(k - 1) if k else inner(ctypes.PyDLL(path))

    n, text = deep(100)
    check(len(text.splitlines()) == 64, "at most 64 frames", text)
    check(text.splitlines()[0].endswith(" in stack_from"), "the innermost ones", text)

    print("%d failure(s)" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
