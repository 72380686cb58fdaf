#!/usr/bin/env python3
"""Writes a C source that holds a text file as a NUL-terminated string: embed-file.py SYMBOL IN OUT."""
import sys

symbol, source, output = sys.argv[1:4]
data = open(source, "rb").read()
body = ",".join(str(b) for b in data)
with open(output, "w") as out:
    out.write("/* Generated from %s by scripts/embed-file.py; do not edit. */\n" % source.split("/")[-1])
    out.write("const char %s[] __attribute__((visibility(\"hidden\"))) = {%s,0};\n" % (symbol, body))
