# SPDX-License-Identifier: MIT
"""p2pg_python_stack from inside a library loaded with ctypes.

ctypes.PyDLL keeps the GIL during the call; ctypes.CDLL releases it (as PyTorch does around CUDA
calls). Where the interpreter exports its signal-safe traceback writer (3.8-3.12) the stack names
this script's frames either way, and the crash handler's signal-safe read gives the same; where it
does not (3.13, 3.14) the stack is read only with the GIL held, and is empty with CDLL.
Usage: pystack_test.py path/to/libdiagtest.so
"""
import ctypes
import sys
import threading

failures = 0
WRITER = any(hasattr(ctypes.pythonapi, name) for name in ("_Py_DumpTraceback", "PyUnstable_DumpTraceback"))


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

    print("traceback writer: %s" % ("exported" if WRITER else "not exported"))
    with_gil = lines
    n, text = Model().forward(ctypes.CDLL(path))
    if WRITER:
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
