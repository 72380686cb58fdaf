"""Failed peer calls: the caller sees exactly what it would without the guard (status and sticky
error), and each failure is one row naming the calling function and the right rule."""
from harness import *

EXPECTED_RULES = {
    "induce_own_device": "cuda/peer-access-to-own-device",
    "induce_already_enabled": "cuda/peer-access-already-enabled",
    "induce_bad_ordinal": "cuda/invalid-device-ordinal",
    "induce_not_enabled": "cuda/peer-access-not-enabled",
    "induce_bad_flags": "cuda/peer-access-flags-not-zero",
    "drv_induce_own_device": "cuda/peer-access-to-own-device",
    "drv_induce_already_enabled": "cuda/peer-access-already-enabled",
    "drv_induce_not_enabled": "cuda/peer-access-not-enabled",
    "drv_induce_bad_flags": "cuda/peer-access-flags-not-zero",
}

for args in (["rt_peer", "errors"], ["drv_peer", "procaddr", "errors"]):
    label = " ".join(args)
    db = tempdb()
    bare = run([program(args[0])] + args[1:], preload=False)
    guarded = run([program(args[0])] + args[1:], db=db)
    equal(guarded.stdout, bare.stdout, label + ": statuses and cudaGetLastError unchanged by the guard")
    exp = expectations(guarded.stdout)
    equal(scalar(db, "SELECT count(*) FROM failures"), exp["failures"], label + ": one failure row per failed call")
    cases = [l.split()[1:] for l in guarded.stdout.splitlines() if l.startswith("CASE ")]
    rows = query(db, "SELECT status, backtrace, rule_id, action, evidence, error_name, advice FROM failures ORDER BY thread_serial, seq")
    for case, row in zip([c for c in cases if not c[1].endswith("=0")], rows):
        name = case[0]
        status = int(case[1].split("=")[1])
        equal(row[0], status, "%s: status %d recorded" % (name, status))
        first = (row[1] or "").splitlines()[0] if row[1] else ""
        check(name in first, "%s: first backtrace frame names the caller (%s)" % (name, first))
        equal(row[2], EXPECTED_RULES[name], name + ": diagnosed by the right rule")
        equal(row[3], "passed", name + ": action passed")
        check(row[4] and row[4].startswith("{") and '"peer_is_self"' in row[4], name + ": evidence stored as JSON")
        check(row[5] and row[5].startswith("cudaError"), name + ": error name")
        check(row[6], name + ": advice present")

done()
