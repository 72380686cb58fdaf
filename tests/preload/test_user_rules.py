"""P2PGUARD_RULES: a site's own knowledge-base entry takes over where it is more specific, a broken
entry costs one stderr line and the other rules still load, and the rules land in the database."""
import json
import os
from harness import *

folder = tempfolder()
site = {
    "id": "site/disable-in-cleanup",
    "signature": "our cleanup disables peers it never enabled",
    "root_cause": "The site's teardown hook disables every pair; harmless, and known.",
    "codes": [705],
    "match": {"api": ["cudaDeviceDisablePeerAccess"], "status": [705], "facts": {"device": 1, "peer_device": 0}},
    "workarounds": [{"action": "Ignore", "how": "Known and harmless in our jobs.", "success_rate": 1.0}],
    "confidence": 0.99,
    "examples": {"matches": [{"api": "cudaDeviceDisablePeerAccess", "status": 705, "facts": {"device": 1, "peer_device": 0}}],
                 "near_misses": [{"api": "cudaDeviceDisablePeerAccess", "status": 705, "facts": {"device": 0, "peer_device": 1}}]},
}
os.makedirs(os.path.join(folder, "site"))
with open(os.path.join(folder, "site", "disable-in-cleanup.json"), "w") as f:
    json.dump(site, f, indent=2)
with open(os.path.join(folder, "site", "broken.json"), "w") as f:
    f.write('{\n  "id": "site/broken",\n  "codes": [705\n}\n')

bare = run([program("rt_peer"), "errors"], preload=False)
db = tempdb()
proc = run([program("rt_peer"), "errors"], db=db, P2PGUARD_RULES=folder)
equal(proc.stdout, bare.stdout, "the program is unharmed by a broken rule file")
lines = proc.stderr.splitlines()
equal(len(lines), 1, "one stderr line for the broken entry")
check(lines and "broken.json" in lines[0] and ":" in lines[0], "it names the file and line (%s)" % (lines[0] if lines else ""))
equal(scalar(db, "SELECT rule_id FROM failures WHERE status = 705"), "site/disable-in-cleanup",
      "the site's more specific entry diagnoses the 705")
equal(scalar(db, "SELECT rule_id FROM failures WHERE status = 217"), "cuda/peer-access-to-own-device",
      "the built-in rules still diagnose the rest")
check(scalar(db, "SELECT count(*) FROM rules") >= 38, "the rules table holds the built-in and the site's entries")
equal(scalar(db, "SELECT count(*) FROM failures f JOIN rules r ON r.id = f.rule_id"),
      scalar(db, "SELECT count(*) FROM failures"), "every failure joins to its full entry")

# The rule set is written once per database, not by every process that opens it (each rank of a
# job would write its 1.5 MiB again): a second run of the same set leaves the rows as they were
# (a rewrite replaces each row under a new rowid); another set (here the built-in one alone) adds
# its own.
rows = lambda: query(db, "SELECT id, rowid FROM rules ORDER BY id")
sets = lambda: scalar(db, "SELECT count(*) FROM rule_sets")
before = rows()
run([program("rt_peer"), "errors"], db=db, P2PGUARD_RULES=folder)
check(rows() == before, "the same set again: no rule rewritten (%d rows)" % len(before))
equal(sets(), 1, "one set written")
run([program("rt_peer"), "errors"], db=db)
equal(sets(), 2, "the built-in set alone is another set: written once")
equal(scalar(db, "SELECT count(*) FROM rules WHERE id = 'site/disable-in-cleanup'"), 1,
      "the site's entry stays in the table")
after = rows()
run([program("rt_peer"), "errors"], db=db)
check(rows() == after, "the built-in set again: no rule rewritten (%d rows)" % len(after))
query(db, "DELETE FROM rules WHERE id LIKE 'cuda/%'")
run([program("rt_peer"), "errors"], db=db)
check(scalar(db, "SELECT count(*) FROM rules WHERE id = 'cuda/peer-access-to-own-device'") == 1,
      "rules deleted from the table are written again by the next process")
done()
