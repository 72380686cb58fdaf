"""Overload: 4 threads copying in a tight loop fill their rings faster than the drainer empties
them on a small machine (here made certain on any machine: another connection holds the database's
write lock until every thread has made more calls than its ring holds). Killed with SIGKILL at
random moments, with the lock held or after, then recovered: every call that
returned is a row or is counted in transfer_overflow (rows + folded == returned, up to the one call
the kill can cut between being recorded and being counted by the program), every failing call
among the flood has its row (failures are never folded) and, up to the spool's 128 failure slots
waiting at once, its failures entry, no record is dropped,
none is doubled, and peer_totals and `p2pguard report` add up to the same calls and bytes."""
import os
import random
import sqlite3
import time
from harness import *

RING = 65536  # records per thread ring (include/p2pguard/spool.h)


def read_counts(path):
    """rt_peer's published calls returned and thread ids, per thread."""
    with open(path, "rb") as f:
        raw = f.read()
    returned = [int.from_bytes(raw[8 * k:8 * k + 8], "little", signed=True) for k in range(threads)]
    tids = [int.from_bytes(raw[512 + 4 * k:512 + 4 * k + 4], "little") for k in range(threads)]
    failed = [int.from_bytes(raw[768 + 8 * k:768 + 8 * k + 8], "little", signed=True) for k in range(threads)]
    return returned, tids, failed


runs = int(os.environ.get("P2PG_OVERLOAD_RUNS", "6"))
threads = 4
random.seed(int(os.environ.get("P2PG_SEED", "1")))
bad = 0
folded_total = 0
for n in range(runs):
    db = tempdb()
    counts = db + ".counts"
    # Another connection holds the write lock (as another rank's import does) until every thread
    # has made more calls than its ring holds: the rings overflow however fast the machine is.
    lock = sqlite3.connect(db, isolation_level=None)
    lock.execute("BEGIN IMMEDIATE")
    proc = subprocess.Popen([program("rt_peer"), "flood", counts, str(threads)],
                            env=environment(db), stdout=subprocess.PIPE, text=True)
    proc.stdout.readline()  # READY
    deadline = time.monotonic() + 60
    while min(read_counts(counts)[0]) <= RING and time.monotonic() < deadline:
        time.sleep(0.01)
    killed_locked = n % 3 == 2  # killed while the drainer still waits: recover imports it all
    if not killed_locked:
        lock.execute("ROLLBACK")
        time.sleep(random.uniform(0.05, 1.5))
    proc.kill()
    proc.wait()
    lock.close()
    returned, tids, failed = read_counts(counts)
    recover = subprocess.run([CLI, "recover", db], capture_output=True, text=True,
                             env=environment(preload=False))
    problems = []
    if recover.returncode != 0:
        problems.append("recover exited %d: %s" % (recover.returncode, recover.stderr.strip()))
    if scalar(db, "PRAGMA integrity_check") != "ok":
        problems.append("integrity_check failed")
    dup = scalar(db, "SELECT count(*) FROM (SELECT thread_serial, seq FROM transfers GROUP BY 1, 2 HAVING count(*) > 1)")
    if dup:
        problems.append("%d duplicated (thread_serial, seq)" % dup)
    dropped = scalar(db, "SELECT sum(records_dropped) FROM processes")
    if dropped != 0:
        problems.append("records_dropped = %s" % dropped)
    rows_all = folded_all = failed_all = 0
    for tid, want, want_failed in zip(tids, returned, failed):
        if tid == 0:
            problems.append("a copier thread never started")
            continue
        rows = scalar(db, "SELECT count(*) FROM transfers WHERE thread_id = ?", tid)
        folded = scalar(db, "SELECT coalesce(sum(count), 0) FROM transfer_overflow WHERE thread_id = ?", tid)
        failed_rows = scalar(db, "SELECT count(*) FROM transfers WHERE thread_id = ? AND status != 0", tid)
        rows_all += rows
        folded_all += folded
        failed_all += failed_rows
        # The program's failing copies (one in 32768, the second at the 65536th call, past the
        # ring's room for successes) come while the ring is full: each has its row all the same.
        if not (want_failed <= failed_rows <= want_failed + 1):
            problems.append("thread %d: %d calls failed, %d failed rows" % (tid, want_failed, failed_rows))
        if not (want <= rows + folded <= want + 1):
            problems.append("thread %d: program saw %d returns, log has %d rows + %d folded"
                            % (tid, want, rows, folded))
    # Each failure's diagnosis waits in one of the spool's 128 failure slots until imported: with
    # the drainer starved that long, the 129th has no failures entry (only its transfers row).
    # A SIGKILL between a failed copy's record and its failure entry (each thread's last call, at
    # most) leaves the row without its entry.
    failure_rows = scalar(db, "SELECT count(*) FROM failures")
    if not min(failed_all, 128) - len(tids) <= failure_rows <= failed_all:
        problems.append("%d failures entries for %d failed rows" % (failure_rows, failed_all))
    calls, total_bytes, totals_failed, totals_folded = query(
        db, "SELECT sum(calls), sum(bytes), sum(failures), sum(folded) FROM peer_totals "
            "WHERE src_device = 0 AND dst_device = 1")[0]
    want_bytes = 256 * (rows_all - failed_all + folded_all) + (256 + (1 << 20)) * failed_all
    if (calls, total_bytes, totals_failed, totals_folded) != (rows_all + folded_all, want_bytes, failed_all, folded_all):
        problems.append("peer_totals 0->1: %s calls, %s bytes, %s failed, %s folded; rows %d + folded %d, %d failed"
                        % (calls, total_bytes, totals_failed, totals_folded, rows_all, folded_all, failed_all))
    report = subprocess.run([CLI, "report", db], capture_output=True, text=True, env=environment(preload=False))
    lines = [l.split() for l in report.stdout.splitlines() if l.split()[:1] == ["0->1"]]
    reported = sum(int(l[2].replace(",", "")) for l in lines)  # pair, path, calls, ...
    if reported != rows_all + folded_all:
        problems.append("p2pguard report counts %d calls for 0->1, not %d" % (reported, rows_all + folded_all))
    if folded_all and "%s of the calls found their thread's ring full" % format(folded_all, ",") not in \
            " ".join(report.stdout.split()):
        problems.append("p2pguard report does not say how many calls were folded")
    folded_total += folded_all
    print("# run %d%s: %d returned, %d rows (%d failed), %d folded"
          % (n, " (killed with the lock held)" if killed_locked else "", sum(returned), rows_all, failed_all,
             folded_all))
    if folded_all == 0:
        problems.append("no call was folded although every thread made more calls than its ring holds")
    if problems:
        bad += 1
        print("# run %d: %s" % (n, "; ".join(problems)))
    os.remove(counts)
equal(bad, 0, "%d SIGKILL runs under overload: rows + folded == calls returned per thread, nothing dropped, "
              "no duplicate, peer_totals and report exact" % runs)
check(folded_total > 0, "the rings overflowed in these runs (%d calls folded), so folding was exercised" % folded_total)
done()
