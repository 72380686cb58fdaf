"""JSON that a strict parser reads (issue 22, Low): bytes that are not UTF-8 in what the JSON holds (a
program's arguments, a pasted log line) are written as U+FFFD, in `report --json`, `trace` and
`explain --json` (they were copied as they were, and strict parsers refused the whole output)."""
import json
import os
from harness import *

BAD = "\udcff\udcfeok"  # the bytes ff fe, as Python passes them through os.fsencode
db = tempdb()
run([program("rt_peer"), "basic", BAD], db=db)
raw = scalar(db, "SELECT CAST(cmdline AS BLOB) FROM processes")
check(b"\xff\xfe" in raw, "the database keeps the program's arguments as they were (%r)" % raw[-12:])


def strict(data, what):
    try:
        return json.loads(data.decode("utf-8", errors="strict"))
    except (UnicodeDecodeError, ValueError) as e:
        check(False, "%s: a strict parser reads it (%s)" % (what, e))
        return None


def command(*args):
    return subprocess.run([CLI] + list(args), capture_output=True, env=environment(preload=False), timeout=60)


rep = command("report", "--json", db)
equal(rep.returncode, 0, "report --json exits 0")
doc = strict(rep.stdout, "report --json")
if doc is not None:
    check("\ufffd\ufffdok" in json.dumps(doc, ensure_ascii=False), "report --json: the bytes are U+FFFD")

out = os.path.join(os.path.dirname(db), "trace.json")
tr = command("trace", db, "-o", out)
equal(tr.returncode, 0, "trace exits 0")
with open(out, "rb") as f:
    doc = strict(f.read(), "trace")
if doc is not None:
    check("\ufffd\ufffdok" in json.dumps(doc, ensure_ascii=False), "trace: the bytes are U+FFFD")

line = os.fsencode("peer access is not supported between these two devices \udcff\udcc0\udcaf")
ex = subprocess.run([CLI, "explain", "--json", line], capture_output=True, env=environment(preload=False), timeout=60)
equal(ex.returncode, 0, "explain --json exits 0")
doc = strict(ex.stdout, "explain --json")
check(doc is not None and "\ufffd" in json.dumps(doc, ensure_ascii=False), "explain --json: the bytes are U+FFFD")

# Valid UTF-8, from one to four bytes a character, goes through as it is.
db = tempdb()
run([program("rt_peer"), "basic", "é€𝄞"], db=db)
doc = strict(command("report", "--json", db).stdout, "report --json, valid UTF-8")
check(doc is not None and "é€𝄞" in json.dumps(doc, ensure_ascii=False), "valid UTF-8 is kept")
done()
