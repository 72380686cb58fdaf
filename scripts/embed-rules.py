#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Compiles the shipped rule files into a C table (src/diagnose/rules-builtin.h).

    embed-rules.py --root RULES_DIR --output OUT.c FILE.json...
    embed-rules.py --root RULES_DIR --check FILE.json...

Each FILE must lie below RULES_DIR; the table keeps its path relative to RULES_DIR and its bytes
unchanged, so line numbers in messages about a builtin rule are the file's own. meson cannot glob,
so rules/meson.build lists the files by hand: every run also checks that no *.json file below
RULES_DIR is missing from that list, and fails naming it (with --check, that is all it does).
Standard library only: the build must not need anything beyond Python 3.
"""

import argparse
import json
import os
import sys

DEPTH_MAX = 64  # P2PG_JSON_MAX_DEPTH
LONG_LONG = (-(2**63), 2**63 - 1)


class NotChecked(ValueError):
    pass


def reject_duplicates(pairs):
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise NotChecked("duplicate key")
    return dict(pairs)


def check_int(text):
    if not LONG_LONG[0] <= int(text) <= LONG_LONG[1]:
        raise NotChecked("integer out of range")
    return int(text)


def check_real(text):
    if float(text) in (float("inf"), float("-inf")):
        raise NotChecked("real number overflow")
    return float(text)


def reject_constant(name):
    raise NotChecked(name + " is not JSON")


def check_tree(value, depth):
    """Nesting, NULs and lone surrogates (which json.loads lets through from \\u escapes)."""
    if isinstance(value, (dict, list)):
        if depth == DEPTH_MAX:
            raise NotChecked("nesting too deep")
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            if isinstance(key, str):
                check_tree(key, depth + 1)
            check_tree(item, depth + 1)
    elif isinstance(value, str):
        if "\0" in value:
            raise NotChecked("NUL in a string")
        value.encode("utf-8")  # a lone surrogate cannot be encoded


def count_values(value):
    """JSON values in the tree, keys not counted: what json_value_lines() counts in the text, so
    that the C reader of checked text need not count them again (json.h)."""
    if isinstance(value, dict):
        return 1 + sum(count_values(item) for item in value.values())
    if isinstance(value, list):
        return 1 + sum(count_values(item) for item in value)
    return 1


def checked_values(data):
    """The number of values in data when the C reader for checked text may read it
    (json_checked.c), else 0: everything jansson would refuse, the checks here refuse too. A file
    that fails is still compiled in, marked unchecked, so that the loader's strict reader reports
    what is wrong with it."""
    try:
        text = data.decode("utf-8")
        if text.startswith("\ufeff"):
            text = text[1:]
        value = json.loads(text, object_pairs_hook=reject_duplicates,
                           parse_int=check_int, parse_float=check_real,
                           parse_constant=reject_constant)
        check_tree(value, 0)
    except (ValueError, UnicodeError, RecursionError):
        return 0
    return count_values(value)


def c_string_lines(data):
    """The bytes as C string literals, one per source line, so the generated file stays
    readable and diffable."""
    out = []
    line = []
    for byte in data:
        if byte == 0x5C:
            line.append("\\\\")
        elif byte == 0x22:
            line.append('\\"')
        elif byte == 0x0A:
            line.append("\\n")
            out.append('"' + "".join(line) + '"')
            line = []
        elif 0x20 <= byte < 0x7F and byte != 0x3F:
            # '?' is escaped so that no trigraph can form.
            line.append(chr(byte))
        else:
            # Octal escapes take at most three digits, so one never swallows a following digit.
            line.append("\\%03o" % byte)
    if line or not out:
        out.append('"' + "".join(line) + '"')
    return out


def on_disk(root):
    found = set()
    for directory, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in files:
            if name.endswith(".json") and not name.startswith("."):
                found.add(os.path.relpath(os.path.join(directory, name), root))
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True, help="the rules folder")
    parser.add_argument("--output", help="the C file to write")
    parser.add_argument("--check", action="store_true",
                        help="only check that every rule file is listed")
    parser.add_argument("files", nargs="*")
    args = parser.parse_args()

    root = os.path.realpath(args.root)
    listed = {}
    for name in args.files:
        path = os.path.realpath(name)
        rel = os.path.relpath(path, root)
        if rel.startswith(".." + os.sep) or not rel.endswith(".json"):
            sys.exit("embed-rules.py: %s is not a .json file below %s" % (name, args.root))
        listed[rel] = path

    missing = sorted(on_disk(root) - set(listed))
    if missing:
        for rel in missing:
            sys.stderr.write("embed-rules.py: rules/%s is not listed in rules/meson.build\n" % rel)
        sys.exit(1)
    if args.check:
        return
    if not args.output:
        sys.exit("embed-rules.py: --output is required unless --check is given")

    parts = [
        "/* Generated by scripts/embed-rules.py from the rules/ folder; do not edit. */\n",
        '#include "rules-builtin.h"\n\n',
        "const struct p2pg_builtin_rule p2pg_builtin_rules[] = {\n",
    ]
    for rel in sorted(listed):
        with open(listed[rel], "rb") as f:
            data = f.read()
        parts.append("\t{\n\t\t\"%s\",\n" % rel.replace(os.sep, "/"))
        for literal in c_string_lines(data):
            parts.append("\t\t%s\n" % literal)
        values = checked_values(data)
        parts.append("\t\t,%d, %s, %d,\n\t},\n" % (len(data), "true" if values else "false", values))
    if not listed:
        # An empty initializer list is not C11.
        parts.append("\t{0},\n")
    parts.append("};\n\n")
    parts.append("const size_t p2pg_builtin_rule_count = %d;\n" % len(listed))

    with open(args.output, "w", encoding="utf-8") as f:
        f.write("".join(parts))


if __name__ == "__main__":
    main()
