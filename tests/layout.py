#!/usr/bin/env python3
"""The rooms of src/README.md: no file includes a header of a room above its own.

Each file's room is its folder under src/; a file in a folder that is no room fails the test.
Headers are included by bare name (the build searches every room's folder), so each one is found
by name under src/; the public headers of include/p2pguard/ belong to the room that implements
them. An upward include that has to stay would be listed in KNOWN, with its reason; the test fails
on any other, and on a KNOWN entry that has gone (so the list only shrinks).
"""
import os
import re
import sys

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
SRC = os.path.join(ROOT, "src")

LEVEL = {"util": 0, "stage": 1, "record": 1, "diagnose": 2, "nccl": 2, "guard": 3, "preload": 4,
         "cli": 4}
# Same-level rooms that must not use each other, and the CLI's exceptions. nccl/ (NCCL's profiler
# plugin, in the core, called by NCCL through its exported structs) reaches record/ and util/, and
# no room reaches it.
FORBIDDEN = {("stage", "record"), ("record", "stage"), ("cli", "preload"), ("cli", "guard"),
             ("preload", "cli"), ("preload", "nccl"), ("nccl", "stage"), ("nccl", "diagnose"), ("diagnose", "nccl"),
             ("guard", "nccl"), ("cli", "nccl")}

# The public headers, by the room that implements them.
ROOM_OF = {"p2pguard/facts": "diagnose", "p2pguard/rules": "diagnose", "p2pguard/spool": "record"}

# Upward includes allowed for a stated reason, as (file, header): none.
KNOWN = set()


def room_of(path):
    rel = os.path.relpath(path, SRC).split(os.sep)
    return rel[0] if rel[0] in LEVEL else None


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
    # Bare names must name one header: the same name in two rooms would make the include path's
    # order decide which one a file gets.
    where = {}
    for folder, _, files in os.walk(SRC):
        for f in files:
            if f.endswith(".h"):
                where.setdefault(f, []).append(os.path.relpath(os.path.join(folder, f), ROOT))
    for name, paths in sorted(where.items()):
        if len(paths) > 1:
            problems.append("%s: one header name in several rooms (%s)" % (name, ", ".join(sorted(paths))))
    for name in sorted(os.listdir(os.path.join(ROOT, "include", "p2pguard"))):
        if os.path.splitext("p2pguard/" + name)[0] not in ROOM_OF:
            problems.append("include/p2pguard/%s: in no room (add it to ROOM_OF)" % name)
    for folder, _, files in os.walk(SRC):
        for f in sorted(files):
            if not f.endswith((".c", ".h")):
                continue
            path = os.path.join(folder, f)
            room = room_of(path)
            if room is None:
                problems.append("%s: not in any room (src/<room>/, see src/README.md)"
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
