#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""scripts/embed-rules.py marks a rule file checked only when the C reader for checked text may read
it: what jansson refuses but that reader does not look for (a duplicate key, bytes that are not
UTF-8, "\\u0000", an integer past a long long, a real that overflows, nesting past 64 levels, a lone
surrogate) leaves the file compiled in but unchecked, so the strict reader reports it.

    test-embed.py EMBED_RULES_PY
"""
import os
import re
import subprocess
import sys
import tempfile

CASES = {
    "good.json": (b'{"id": "x/good", "n": [1, -2.5e3, true, null], "s": "\\u00e9\\ud83d\\ude00"}\n', True),
    "bom.json": (b'\xef\xbb\xbf{"a": 1}', True),
    "deep-ok.json": (b"[" * 64 + b"]" * 64, True),
    "duplicate.json": (b'{"a": 1,\n "a": 2}', False),
    "latin1.json": (b'{"a": "caf\xe9"}', False),
    "nul.json": (b'{"a": "x\\u0000"}', False),
    "nul-key.json": (b'{"k\\u0000": 1}', False),
    "big-int.json": (b'{"a": 9223372036854775808}', False),
    "min-int.json": (b'{"a": -9223372036854775808}', True),
    "overflow.json": (b'{"a": 1.5e400}', False),
    "nan.json": (b'{"a": NaN}', False),
    "deep.json": (b"[" * 65 + b"]" * 65, False),
    "surrogate.json": (b'{"a": "\\ud800"}', False),
    "syntax.json": (b'{"a": 1', False),
    "two-boms.json": (b'\xef\xbb\xbf\xef\xbb\xbf{"a": 1}', False),
}

# Counted by hand: every value, containers included, keys not (what json_value_lines counts).
VALUES = {"good.json": 8, "bom.json": 2, "deep-ok.json": 64, "min-int.json": 2}


def main():
    embed = sys.argv[1]
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "rules")
        os.makedirs(os.path.join(root, "x"))
        paths = []
        for name, (data, _) in CASES.items():
            path = os.path.join(root, "x", name)
            with open(path, "wb") as f:
                f.write(data)
            paths.append(path)
        out = os.path.join(tmp, "rules-builtin.c")
        subprocess.run([sys.executable, embed, "--root", root, "--output", out] + paths, check=True)
        generated = open(out, encoding="utf-8").read()
        # Each entry: its path, its string literals, then ",LEN, true|false, VALUES,".
        found = re.findall(r'\{\n\t\t"x/([^"]+)",\n.*?\t\t,\d+, (true|false), (\d+),\n\t\}',
                           generated, re.S)
        entries = {name: (mark, int(values)) for name, mark, values in found}
        for name, (_, want) in CASES.items():
            got, values = entries.get(name, (None, None))
            if got != ("true" if want else "false"):
                print("%s: marked %s, want %s" % (name, got, want))
                failures += 1
            # The C reader of checked text trusts the count: values, keys not counted; 0 for
            # text it must not read.
            if values != VALUES.get(name, 0):
                print("%s: %s values, want %d" % (name, values, VALUES.get(name, 0)))
                failures += 1
    print("%d cases, %d wrong" % (len(CASES), failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
