# SPDX-License-Identifier: MIT
"""p2pg_python_stack from inside a library loaded with ctypes.

ctypes.PyDLL keeps the GIL during the call, so the stack must name this script's frames;
ctypes.CDLL releases it (as PyTorch does around CUDA calls), so the stack must be empty.
Usage: pystack_test.py path/to/libdiagtest.so
"""
import ctypes
import sys
import threading

failures = 0


def check(ok, what, text=""):
    global failures
    print(("ok - " if ok else "not ok - ") + what)
    if not ok:
        failures += 1
        print("--- output:\n" + text + "---")


def stack_from(lib):
    fn = lib.diagtest_python_stack
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


def inner(lib):
    return stack_from(lib)  # MARK-inner


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

    n, text = Model().forward(ctypes.CDLL(path))
    check(n == 0 and text == "", "GIL released (ctypes.CDLL): no stack", text)

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
    check(len(text.splitlines()) == 32, "at most 32 frames", text)

    print("%d failure(s)" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
