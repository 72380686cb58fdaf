#!/usr/bin/env python3
"""The rooms of src/README.md: no file includes a header of a room above its own.

Each file's room is its folder under src/ when that folder is a room (the target layout), and
otherwise the room src/README.md assigns it (the flat src/core/ of today, until the move). The
upward includes that the move will break are listed in KNOWN; the test fails on any other, and on
a KNOWN entry that has gone (so the list only shrinks).
"""
import os
import re
import sys

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
SRC = os.path.join(ROOT, "src")

LEVEL = {"util": 0, "stage": 1, "record": 1, "diagnose": 2, "guard": 3, "preload": 4, "cli": 4}
# Same-level rooms that must not use each other, and the CLI's exceptions.
FORBIDDEN = {("stage", "record"), ("record", "stage"), ("cli", "preload"), ("cli", "guard"),
             ("preload", "cli")}

# Where the files of today's flat src/core/ go (src/README.md); by base name without extension.
ROOM_OF = {
    "guard": "guard",
    "staged": "stage", "probe": "stage",
    "recorder": "record", "spool": "record", "store": "record", "timing": "record",
    "cupti_timing": "record", "gpu_match": "record", "schema": "record",
    "failure": "diagnose", "evidence": "diagnose", "evidence-private": "diagnose",
    "pystack": "diagnose", "crash": "diagnose", "facts": "diagnose",
    "rules": "diagnose", "rules_load": "diagnose", "rules_validate": "diagnose",
    "rules_match": "diagnose", "rules_db": "diagnose", "rules-private": "diagnose",
    "rules-builtin": "diagnose", "json": "diagnose",
    "backtrace": "util", "driver": "util", "settings": "util", "notice": "util", "api": "util", "cleanup": "util",
    "clock": "util", "reentry": "util",
    # The public headers, by the room that implements them.
    "p2pguard/facts": "diagnose", "p2pguard/rules": "diagnose", "p2pguard/spool": "record",
}

# Upward includes of today, each to be broken by the move (layout plan, step 2).
KNOWN = set()


def room_of(path):
    rel = os.path.relpath(path, SRC).split(os.sep)
    if rel[0] in LEVEL:
        return rel[0]
    base = os.path.splitext(rel[-1])[0]
    return ROOM_OF.get(base)


def header_room(name, including_dir):
    if name.startswith("p2pguard/"):
        return ROOM_OF.get(os.path.splitext(name)[0])
    # Bare names: the including file's own folder first, then any folder under src/.
    if os.path.exists(os.path.join(including_dir, name)):
        return room_of(os.path.join(including_dir, name))
    for folder, _, files in os.walk(SRC):
        if name in files:
            return room_of(os.path.join(folder, name))
    return None  # a generated or system header


def main():
    problems, seen = [], set()
    for folder, _, files in os.walk(SRC):
        for f in sorted(files):
            if not f.endswith((".c", ".h")):
                continue
            path = os.path.join(folder, f)
            room = room_of(path)
            if room is None:
                problems.append("%s: not in any room (add it to src/README.md and this test)"
                                % os.path.relpath(path, ROOT))
                continue
            with open(path, encoding="utf-8") as fh:
                for n, line in enumerate(fh, 1):
                    m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                    if not m:
                        continue
                    target = header_room(m.group(1), folder)
                    if target is None or target == room:
                        continue
                    up = LEVEL[target] > LEVEL[room] or (room, target) in FORBIDDEN
                    if not up:
                        continue
                    if (f, m.group(1)) in KNOWN:
                        seen.add((f, m.group(1)))
                        continue
                    problems.append("%s:%d: %s/ includes %s of %s/" % (
                        os.path.relpath(path, ROOT), n, room, m.group(1), target))
    for f, h in sorted(KNOWN - seen):
        problems.append("tests/layout.py: %s no longer includes %s: drop it from KNOWN" % (f, h))
    for p in problems:
        print("not ok - " + p)
    if not problems:
        print("ok - no room includes a header of a room above it (%d known exceptions)"
              % len(KNOWN))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
