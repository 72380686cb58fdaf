"""NCCL operations whose kernel never finishes: each rank's drainer writes a nccl_stalls row while the
program hangs, with where the communicator's other ranks were (found in the same database by the
communicator's hash) and the knowledge base's diagnosis: all waiting in the same operation (the
path between the GPUs), a rank elsewhere (a desync), a rank gone, or not known; a row written
before a peer was in the database or in the operation is looked at again when that peer writes its
own, and brought up to date.
A recovery of the killed ranks' spools adds no second row and marks what still ran as unreported."""
import signal
import time
from ncclsim import *

HASH = "00000000000000aa"


def wait_rows(db, sql, n, timeout=30):
    deadline = time.monotonic() + timeout
    rows = []
    while time.monotonic() < deadline:
        try:
            rows = query(db, sql)
        except Exception:
            rows = []  # the tables may not exist yet
        if len(rows) >= n:
            break
        time.sleep(0.1)
    return rows


def stuck(db, rank, func, seq, nranks=2, hold=False, **extra):
    p = sim_start(["--rank", rank, "--nranks", nranks, "--comm", HASH, "--device", rank,
                   "stuck", func, seq] + (["hold"] if hold else []), db=db, P2PGUARD_STALL_S=1,
                  **extra)
    if hold:
        check(p.stdout.readline().strip() == "made", "rank %d: its communicator is made" % rank)
        return p
    line = p.stdout.readline()
    check(line.strip() == "ready", "rank %d: its %s's kernel runs and does not end" % (rank, func))
    return p


def kill(procs):
    for p in procs:
        p.send_signal(signal.SIGKILL)
        p.communicate(timeout=30)


STALLS = ("SELECT s.rank, s.func, s.op_seq, s.peer_state, s.rule_id, s.waited_ns, s.evidence, "
          "s.diagnosis, s.advice, o.state FROM nccl_stalls s LEFT JOIN nccl_ops o ON o.id = s.op_id "
          "ORDER BY s.rank")

# Both ranks in the same all-reduce, neither finishing: the path between them.
db = tempdb()
procs = [stuck(db, 0, "AllReduce", 7), stuck(db, 1, "AllReduce", 7)]
rows = wait_rows(db, STALLS, 2)
alive = all(p.poll() is None for p in procs)
check(alive, "both ranks still hang when their rows are written")
equal([(r[0], r[1], r[2], r[3], r[4]) for r in rows],
      [(0, "AllReduce", 7, "waiting", "nccl/all-ranks-stuck-in-operation"),
       (1, "AllReduce", 7, "waiting", "nccl/all-ranks-stuck-in-operation")],
      "a stall per rank: the same operation, the other rank waiting in it too")
if rows:
    ev = json.loads(rows[0][6])
    # Rank 0's row saw rank 1 waiting, or (rank 1 still starting on a slow machine) saw it
    # elsewhere and was brought up to date by rank 1's row.
    first_view = ev["peers"] == {"1": "waiting"} or (
        ev["peers"].get("1") in ("elsewhere", "unknown") and "peers_later" in ev)
    check(rows[0][5] >= 1e9 and ev["stall_s"] == 1 and first_view and
          ev["comm_hash"] == HASH and ev["channels"] == 2 and ev["channels_done"] == 0,
          "evidence: the threshold, the peers' states, the channels (%s)" % rows[0][6])
    check("ACS" in rows[0][7] and "NCCL_P2P_DISABLE=1" in rows[0][8],
          "diagnosis (ACS/IOMMU) and advice (NCCL_P2P_DISABLE=1 to confirm)")
    equal(rows[0][9], "running", "its nccl_ops row says it runs")
report = cli("report", db).stdout.splitlines()
check(len(report) > 1 and report[1] == "" and report[2] == "NCCL operations that did not finish",
      "p2pguard report says it first (%s)" % report[:3])
kill(procs)
rec = cli("recover", db)
equal(rec.returncode, 0, "p2pguard recover imports the killed ranks' spools")
equal(scalar(db, "SELECT count(*) FROM nccl_stalls"), 2, "still one stall row per rank")
equal(query(db, "SELECT DISTINCT state FROM nccl_ops"), [("unreported",)],
      "what ran when the ranks died is unreported")

# Rank 1 is in another collective: a desync.
db = tempdb()
procs = [stuck(db, 0, "AllReduce", 7), stuck(db, 1, "Broadcast", 0)]
rows = wait_rows(db, STALLS, 2)
kill(procs)
equal([(r[0], r[3], r[4]) for r in rows],
      [(0, "elsewhere", "nccl/ranks-out-of-step"), (1, "elsewhere", "nccl/ranks-out-of-step")],
      "each rank waits in an operation the other is not in")

# Both send, nobody receives: a point-to-point desync; a send with its receive posted: waiting.
db = tempdb()
procs = [stuck(db, 0, "Send", 0), stuck(db, 1, "Send", 0)]
rows = wait_rows(db, STALLS, 2)
kill(procs)
equal([(r[0], r[1], r[3]) for r in rows], [(0, "Send", "elsewhere"), (1, "Send", "elsewhere")],
      "two sends to each other: no receive posted, a desync")
db = tempdb()
procs = [stuck(db, 0, "Send", 0), stuck(db, 1, "Recv", 0)]
rows = wait_rows(db, STALLS, 2)
kill(procs)
equal([(r[0], r[1], r[3]) for r in rows], [(0, "Send", "waiting"), (1, "Recv", "waiting")],
      "a send and its receive, both unfinished: the path")

# Rank 1 made the communicator and left; then a rank killed while rank 0 waits.
db = tempdb()
sim(["--rank", 1, "--nranks", 2, "--comm", HASH, "--device", 1, "leave"], db=db)
procs = [stuck(db, 0, "AllReduce", 3)]
rows = wait_rows(db, STALLS, 1)
kill(procs)
equal([(r[0], r[3], r[4]) for r in rows], [(0, "gone", "nccl/peer-rank-gone")],
      "a peer that freed its communicator is gone")
db = tempdb()
procs = [stuck(db, 1, "AllReduce", 3)]
kill(procs)
procs = [stuck(db, 0, "AllReduce", 3)]
rows = wait_rows(db, STALLS, 1)
kill(procs)
equal([(r[0], r[3], r[4]) for r in rows], [(0, "gone", "nccl/peer-rank-gone")],
      "a peer whose process was killed is gone")

# Alone in the database: the peers are unknown, the general rule.
db = tempdb()
procs = [stuck(db, 0, "AllReduce", 3, nranks=4)]
rows = wait_rows(db, STALLS, 1)
kill(procs)
equal([(r[0], r[3], r[4]) for r in rows], [(0, "unknown", "nccl/operation-never-finishes")],
      "no other rank recorded: unknown")
if rows:
    ev = json.loads(rows[0][6])
    equal(ev["peers"], {"1": "unknown", "2": "unknown", "3": "unknown"}, "each peer said")

# Rank 1 arrives after rank 0's row was written: when its own row finds every rank in the
# all-reduce, rank 0's row says so too (the hang's diagnosis does not depend on which rank timed
# out first), and rank 0's evidence keeps what it first saw.
db = tempdb()
procs = [stuck(db, 0, "AllReduce", 5)]
first = wait_rows(db, STALLS, 1)
equal([(r[0], r[3]) for r in first], [(0, "unknown")], "rank 0 alone: its peer not known yet")
procs.append(stuck(db, 1, "AllReduce", 5))
rows = wait_rows(db, STALLS, 2)
kill(procs)
equal([(r[0], r[3], r[4]) for r in rows],
      [(0, "waiting", "nccl/all-ranks-stuck-in-operation"), (1, "waiting", "nccl/all-ranks-stuck-in-operation")],
      "rank 1's row finds rank 0 waiting, and rank 0's row is brought up to date")
if len(rows) == 2:
    ev = json.loads(rows[0][6])
    equal((ev["peers"], ev["peer_state"], ev.get("peers_later")),
          ({"1": "unknown"}, "waiting", 'found later by rank 1: {"1": "waiting"}'),
          "rank 0's evidence: what it saw first, and what rank 1 found")
    equal(rows[0][7], rows[1][7], "both rows give the same diagnosis")

# The same when rank 1 arrives late in another collective (a desync) or with the receive of rank
# 0's send (the path): rank 0's row, written when rank 1 was not known yet, is looked at again when
# rank 1's row is written, and says what rank 1's found.
for ops, want, rule in ((("AllReduce", 7), ("Broadcast", 0)), "elsewhere", "nccl/ranks-out-of-step"), \
                       ((("Send", 0), ("Recv", 0)), "waiting", None):
    db = tempdb()
    procs = [stuck(db, 0, *ops[0])]
    first = wait_rows(db, STALLS, 1)
    equal([(r[0], r[3]) for r in first], [(0, "unknown")], "%s: rank 0 alone, its peer not known yet" % ops[0][0])
    procs.append(stuck(db, 1, *ops[1]))
    rows = wait_rows(db, STALLS, 2)
    kill(procs)
    equal([(r[0], r[3]) for r in rows], [(0, want), (1, want)],
          "%s then %s: rank 0's row brought up to date by rank 1's (%s)" % (ops[0][0], ops[1][0], want))
    if len(rows) == 2:
        ev = json.loads(rows[0][6])
        check(ev["peers"] == {"1": "unknown"} and ev["peer_state"] == want and
              ev.get("peers_later", "").startswith("found later by rank 1: "),
              "  rank 0's evidence keeps its first view and says what was found later (%s)" % rows[0][6])
        if rule:
            equal((rows[0][4], rows[0][7]), (rows[1][4], rows[1][7]), "  both rows give the same diagnosis")

# Rank 1 is known (its communicator made) but has not posted the receive when rank 0's send row is
# written: the row says elsewhere. When rank 1's receive hangs too, rank 1's row finds rank 0
# waiting and rank 0's row becomes waiting: a send and its receive, the path.
db = tempdb()
late = stuck(db, 1, "Recv", 0, hold=True)
known = wait_rows(db, "SELECT rank FROM nccl_comms WHERE comm_hash = '%s'" % HASH, 1)
equal(known, [(1,)], "rank 1's communicator is in the database before its receive")
procs = [stuck(db, 0, "Send", 0), late]
first = wait_rows(db, STALLS, 1)
equal([(r[0], r[1], r[3]) for r in first], [(0, "Send", "elsewhere")],
      "rank 0's send: rank 1 known, its receive not posted")
late.stdin.write("go\n")
late.stdin.flush()
equal(late.stdout.readline().strip(), "ready", "rank 1 posts its receive")
rows = wait_rows(db, STALLS, 2)
kill(procs)
equal([(r[0], r[1], r[3]) for r in rows], [(0, "Send", "waiting"), (1, "Recv", "waiting")],
      "rank 0's row brought up to date when rank 1's receive hangs too")
if len(rows) == 2:
    ev = json.loads(rows[0][6])
    equal((ev["peers"], ev["peer_state"], ev.get("peers_later")),
          ({"1": "elsewhere"}, "waiting", 'found later by rank 1: {"1": "waiting"}'),
          "rank 0's evidence: what it saw first, and what rank 1 found")
    equal((rows[0][4], rows[0][7]), (rows[1][4], rows[1][7]), "both rows give the same diagnosis")

# Operations that finish leave no stall, however slow the threshold.
db = tempdb()
sim(["allreduce", 30, 1 << 20], db=db, P2PGUARD_STALL_S=1)
equal(scalar(db, "SELECT count(*) FROM nccl_stalls"), 0, "finished operations: no stall")
equal(scalar(db, "SELECT count(*) FROM nccl_ops WHERE state != 'done'"), 0, "all done")
done()
