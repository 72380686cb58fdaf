#!/usr/bin/env python3
"""Every relative link of the documentation leads somewhere.

    scripts/check-doc-links.py [ROOT]

Reads README.md, docs/*.md, src/README.md and rules/README.md under ROOT (default: the repository
this script is in). Each Markdown link or image whose target is not a URL must name a file or
folder that exists, relative to the document; a `#anchor` (alone, or after a .md file) must be a
heading of that document as GitHub names it: lower case, punctuation other than `-` and `_`
dropped, spaces as `-`, a repeated heading suffixed `-1`, `-2`, ... Code (fenced blocks and `inline
spans`) is not read for links. Every docs/*.md must also be linked from README.md, so that no page
is out of a reader's reach. Prints `file:line: ...` for each broken link and each page the README
does not link, and exits 1 if there is one (test `doc-links`, suite `style`).
"""
import glob
import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
DOCS = ["README.md", "src/README.md", "rules/README.md"] + sorted(
    os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))

LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^()\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ID = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def text_lines(path):
    """(line number, text) outside fenced code, with inline code spans blanked."""
    fenced = False
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if FENCE.match(line):
                fenced = not fenced
                continue
            if not fenced:
                yield n, line


def slug(heading):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = text.replace("`", "")
    text = re.sub(r"<[^>]+>", "", text)
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


_anchors = {}


def anchors(path):
    if path not in _anchors:
        seen, found = {}, set()
        for _, line in text_lines(path):
            for a in HTML_ID.findall(line):
                found.add(a)
            m = HEADING.match(line)
            if not m:
                continue
            s = slug(m.group(2))
            if s in seen:
                seen[s] += 1
                s = "%s-%d" % (s, seen[s])
            else:
                seen[s] = 0
            found.add(s)
        _anchors[path] = found
    return _anchors[path]


def check(doc, linked):
    """Broken links of doc; adds every file it links to the set linked."""
    path = os.path.join(ROOT, doc)
    errors = []
    for n, line in text_lines(path):
        line = re.sub(r"(`+)(?:(?!\1).)+?\1", lambda m: "x" * len(m.group(0)), line)
        for m in LINK.finditer(line):
            target = m.group(1)
            if SCHEME.match(target):
                continue
            file_part, _, anchor = target.partition("#")
            dest = path if not file_part else os.path.normpath(
                os.path.join(os.path.dirname(path), file_part))
            if not os.path.exists(dest):
                errors.append("%s:%d: %s: no such file or folder" % (doc, n, target))
                continue
            linked.add(os.path.relpath(dest, ROOT))
            if anchor and dest.endswith(".md") and anchor not in anchors(dest):
                errors.append("%s:%d: %s: %s has no heading #%s" %
                              (doc, n, target, os.path.relpath(dest, ROOT), anchor))
    return errors


def main():
    errors = []
    from_readme = set()
    for doc in DOCS:
        if os.path.exists(os.path.join(ROOT, doc)):
            errors += check(doc, from_readme if doc == "README.md" else set())
    for doc in DOCS:
        if doc.startswith("docs" + os.sep) and doc not in from_readme:
            errors.append("README.md: does not link %s" % doc)
    for e in errors:
        print(e)
    print("%d documents, %d broken links" % (len(DOCS), len(errors)))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
