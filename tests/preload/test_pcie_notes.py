"""The PCIe evidence reaches the stored diagnosis: `p2pguard topo` against simulated GPUs whose P2P
returns wrong data records a failure row whose evidence carries pcie_acs_redirect (read from this
machine's sysfs: the simulated bus ids 0000:10:00.0 and 0000:11:00.0 may or may not exist here, and
the ACS registers need root), and whose diagnosis (the rule's root cause) carries the rule's note
for exactly that value. The values themselves, over fake sysfs trees, are tested by
tests/diagnosis/test_evidence_pcie.c."""
import json
from harness import *

NOTES = {
    "yes": "ACS redirects peer traffic on bridge ",
    "no": "No bridge between the two GPUs redirects peer traffic",
    "unknown": "Whether ACS redirects peer traffic between these GPUs could not be read",
}

db = tempdb()
proc = subprocess.run([CLI, "topo", "--db", db, "--bytes", "65536"], capture_output=True, text=True,
                      env=environment(preload=False, SIMCUDA_P2P_CORRUPT="0-1"), timeout=120)
equal(proc.returncode, 1, "topo, P2P corrupt: exit 1 (%s)" % proc.stderr.strip()[-300:])
rows = query(db, "SELECT rule_id, diagnosis, evidence FROM failures ORDER BY device")
equal([r[0] for r in rows], ["p2p/copy-returns-wrong-data"] * 2, "a wrong-data row per direction")
for rule_id, root_cause, evidence in rows:
    facts = json.loads(evidence)
    value = facts.get("pcie_acs_redirect")
    check(value in NOTES, "the evidence says whether ACS redirects (%r)" % value)
    check(value in NOTES and NOTES[value] in root_cause
          and sum(note in root_cause for note in NOTES.values()) == 1,
          "the diagnosis carries the note for pcie_acs_redirect=%s and no other" % value)
    check(root_cause.startswith("The guard's probe copied a known pattern"),
          "the rule's own root cause comes first")
    if value == "yes":
        check(facts.get("pcie_acs_bridge", "") in root_cause, "the redirecting bridge is named")
done()
