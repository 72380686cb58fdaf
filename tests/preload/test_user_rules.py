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
equal(scalar(db, "SELECT count(*) FROM failures f JOIN rules r ON r.id = f.rule_id"),
      scalar(db, "SELECT count(*) FROM failures"), "every failure joins to its full entry")
named = lambda: {r[0] for r in query(db, "SELECT DISTINCT rule_id FROM failures")}
stored = lambda: {r[0] for r in query(db, "SELECT id FROM rules")}
equal(stored(), named(), "the rules table holds the entries the failures name, the site's among them")

# Not the whole knowledge base: each process of a job would carry megabytes of it (every rule's
# text), growing with each rule. A run without failures writes no rule.
clean = tempdb()
run([program("rt_peer"), "basic"], db=clean)
equal(scalar(clean, "SELECT count(*) FROM failures"), 0, "a clean run: no failure")
equal(scalar(clean, "SELECT count(*) FROM rules"), 0, "a clean run: no rule stored")
equal(scalar(clean, "SELECT rules FROM rule_sets"), scalar(db, "SELECT max(rules) FROM rule_sets") - 1,
      "but the set that would have diagnosed it is noted (the built-in rules, one fewer than with the site's)")

# A rule already there is never rewritten (a rewrite replaces a row under a new rowid); the set
# is noted once per database; another set (the built-in one alone) adds its own row.
rows = lambda: query(db, "SELECT id, rowid FROM rules ORDER BY id")
sets = lambda: scalar(db, "SELECT count(*) FROM rule_sets")
before = rows()
run([program("rt_peer"), "errors"], db=db, P2PGUARD_RULES=folder)
check(rows() == before, "the same failures again: no rule rewritten (%d rows)" % len(before))
equal(sets(), 1, "one set noted")
run([program("rt_peer"), "errors"], db=db)
equal(sets(), 2, "the built-in set alone is another set: noted once")
equal(scalar(db, "SELECT count(*) FROM rules WHERE id = 'site/disable-in-cleanup'"), 1,
      "the site's entry stays in the table")
after = rows()
run([program("rt_peer"), "errors"], db=db)
check(rows() == after, "the built-in set again: no rule rewritten (%d rows)" % len(after))
query(db, "DELETE FROM rules WHERE id LIKE 'cuda/%'")
run([program("rt_peer"), "basic"], db=db)
check(scalar(db, "SELECT count(*) FROM rules WHERE id = 'cuda/peer-access-to-own-device'") == 1,
      "rules deleted from the table are written again by the next process, "
      "for the failures of earlier ones")
done()
