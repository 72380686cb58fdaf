"""SIGKILL at random moments loses no record of a call that had returned, and never doubles one."""
import os
import random
import time
from harness import *

runs = int(os.environ.get("P2PG_KILL_RUNS", "200"))
random.seed(int(os.environ.get("P2PG_SEED", "1")))
bad = 0
for n in range(runs):
    db = tempdb()
    counts = db + ".counts"
    threads = 4
    proc = subprocess.Popen([program("rt_peer"), "copier", counts, str(threads)],
                            env=environment(db), stdout=subprocess.PIPE, text=True)
    proc.stdout.readline()  # READY
    time.sleep(random.uniform(0.0, 0.25))
    proc.kill()
    proc.wait()
    with open(counts, "rb") as f:
        raw = f.read()
    returned = [int.from_bytes(raw[8 * k:8 * k + 8], "little", signed=True) for k in range(threads)]
    tids = [int.from_bytes(raw[512 + 4 * k:512 + 4 * k + 4], "little") for k in range(threads)]
    subprocess.run([CLI, "recover", db], capture_output=True, env=environment(preload=False), check=True)
    ok = scalar(db, "PRAGMA integrity_check") == "ok"
    dup = scalar(db, "SELECT count(*) FROM (SELECT thread_serial, seq FROM transfers GROUP BY 1, 2 HAVING count(*) > 1)")
    ok = ok and dup == 0
    for tid, want in zip(tids, returned):
        if tid == 0:
            continue
        have = scalar(db, "SELECT count(*) FROM transfers WHERE thread_id = ?", tid)
        seqs = query(db, "SELECT min(seq), max(seq) FROM transfers WHERE thread_id = ?", tid)[0]
        contiguous = have == 0 or (seqs[1] - seqs[0] + 1 == have)
        # A call can be recorded and then killed before the program counted it: at most one more.
        if not (want <= have <= want + 1 and contiguous):
            ok = False
            print("# run %d thread %d: program saw %d returns, log has %d (seq %s)" % (n, tid, want, have, seqs))
    if not ok:
        bad += 1
    os.remove(counts)
equal(bad, 0, "%d SIGKILL runs: nothing lost up to the last returned call, no duplicate, integrity ok" % runs)
done()
