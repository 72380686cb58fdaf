#!/usr/bin/env python3
"""The counts of shipped rules that the README and docs/ state are those of the rules/ folder.

    scripts/check-doc-rule-counts.py [ROOT]

Counts the rule files as the build does (scripts/embed-rules.py: every *.json below rules/, hidden
files and folders left out), in all and per folder, and compares each statement below of the
current knowledge base with it. Figures measured with an older set of rules say how many they were
measured with and are not statements of the current count: they are not checked. Prints
`file:line: ...` for each count that is wrong or each statement no longer found, and exits 1 if
there is one (test `doc-rule-counts`, suite `style`).
"""
import importlib.util
import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))

# (file, pattern whose group 1 is a count, the rules/ subfolder it counts, or None for all)
STATEMENTS = [
    ("README.md", r"`rules/`: (\d+) entries", None),
    ("README.md", r"(\d+) rules \(38 in 0\.1\)", None),
    ("README.md", r"; (\d+) rules; held-out score", None),
    ("README.md", r"failed ones diagnosed by (\d+) new rules", "ipc"),
    ("docs/knowledge-base.md", r"`rules/` holds (\d+) entries", None),
    ("docs/knowledge-base.md", r"corpus with the (\d+) rules", None),
    ("docs/cross-process.md", r"`rules/ipc/` holds (\d+) entries", "ipc"),
]


def rule_files():
    spec = importlib.util.spec_from_file_location("embed_rules", os.path.join(ROOT, "scripts", "embed-rules.py"))
    embed = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(embed)
    return embed.on_disk(os.path.join(ROOT, "rules"))


def main():
    files = rule_files()
    problems = []
    for doc, pattern, folder in STATEMENTS:
        want = len([f for f in files if folder is None or f.split(os.sep)[0] == folder])
        seen = False
        with open(os.path.join(ROOT, doc), encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                for m in re.finditer(pattern, line):
                    seen = True
                    if int(m.group(1)) != want:
                        problems.append("%s:%d: says %s where rules/%s holds %d rule files"
                                        % (doc, n, m.group(0), folder + "/" if folder else "", want))
        if not seen:
            problems.append("%s: no longer says /%s/ (update this script's list)" % (doc, pattern))
    for p in problems:
        print(p)
    if not problems:
        print("%d rule files; every stated count agrees" % len(files))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
