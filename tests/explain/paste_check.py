#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A line reaches explain through whatever carried it to the user; the answer must be the one the
program's own line gets. Each line of the explain sets is explained as written and as four
carriers deliver it, and the rules listed (--json "matches", in order) must be the same:

  terminal   an 80-column terminal that cut the line, its colour codes, Windows' ends of line;
  web        a web page's source: single quotes as &#39;, double quotes typographic, spaces as
             no-break spaces;
  container  Docker's json-file log: each line a JSON record, its colour codes escaped inside;
  markdown   a Markdown editor's escapes (custom\_all\_reduce), the line as inline code.

    paste_check.py P2PGUARD EXPLAIN_BATCH SET.jsonl...

The texts run through explain_batch (the command's own function in one process, batch.py), and 40
of them, at random, through the command itself, whose answers must be the same.

P2PG_EXPLAIN_SAMPLE=N checks one text in N (the sanitizer pass; score.py says how they are chosen).
"""
import json
import sys

from batch import check_against_command, explain_many
from score import load

ESC = "\x1b"


def cut(line, width):
    pieces = []
    while len(line) > width:
        pieces.append(line[:width])
        line = line[width:]
    return pieces + [line]


def terminal(text):
    lines = ["\n".join(cut(line, 80)) for line in text.split("\n")]
    coloured = [f"{ESC}[1;31m{line}{ESC}[0m" if line.strip() else line for line in lines]
    return "\r\n".join(coloured) + "\r\n"


def web(text):
    out, opening = [], True
    for c in text.replace("'", "&#39;").replace(" ", "\u00a0"):
        if c == '"':
            c, opening = ("\u201c" if opening else "\u201d"), not opening
        out.append(c)
    return "".join(out)


def container(text):
    return "\n".join(json.dumps({"log": f"{ESC}[33m{line}{ESC}[0m\n", "stream": "stderr",
                                 "time": "2026-01-12T10:11:12.000000001Z"})
                     for line in text.split("\n")) + "\n"


def markdown(text):
    return "\n".join(f"`{line}`" if line.strip() and "`" not in line else line
                     for line in text.replace("_", "\\_").replace("*", "\\*").split("\n"))


CARRIERS = {"terminal": terminal, "web": web, "container": container, "markdown": markdown}


def rules_listed(answer):
    status, out = answer
    if status not in (0, 1):
        return f"exit {status}"
    return [m["id"] for m in json.loads(out)["matches"]]


def main():
    p2pguard, batch, sets = sys.argv[1], sys.argv[2], sys.argv[3:]
    texts = [row["text"] for name in sets for row in load(name)]
    # A text whose own words look like a carrier's marks is not a test of the carrier.
    texts = [t for t in texts if "&#" not in t and ESC not in t and "\u00a0" not in t]

    names = list(CARRIERS)
    cases = [("json", t) for t in texts]
    cases += [("json", CARRIERS[name](t)) for t in texts for name in names]
    answers = explain_many(batch, cases)
    plain = [rules_listed(a) for a in answers[:len(texts)]]
    bad = []
    for k, text in enumerate(texts):
        for j, name in enumerate(names):
            got = rules_listed(answers[len(texts) + k * len(names) + j])
            if got != plain[k]:
                bad.append((name, text, plain[k], got))
    unlike = check_against_command(p2pguard, cases, answers)
    for mode, text in unlike[:10]:
        print(f"explain_batch and the command differ: {text[:120]!r}")
    for name, text, plain, got in bad[:10]:
        print(f"{name}: {text[:120]!r}\n  as written: {plain[:3]}\n  carried:    {got[:3]}")
    for name in CARRIERS:
        n = sum(1 for d in bad if d[0] == name)
        print(f"{name:9}: {len(texts) - n} of {len(texts)} texts explained as written")
    print(f"{len(unlike)} of 40 texts checked against the command differ")
    return 1 if bad or unlike else 0


if __name__ == "__main__":
    sys.exit(main())
