"""NCCL's traffic in every output, against a real database written by the guard under the
simulated NCCL (ncclsim.nccl_job: a four-rank ring of sends and receives beside collectives, a
two-rank communicator's all-reduces, one rank in summary mode, two ranks stuck until their stall
rows are written, and rt_peer's copies): the view nccl_pair_bandwidth against the same figures
computed here from the raw rows, peer_bandwidth still the copies' alone, report (text and JSON),
trace (the trace-event format's schema, slices, instants, filters) and metrics (promtool, the
Prometheus client's parser, values against the database)."""
import os
import sys

sys.path.insert(0, os.path.join(os.environ["P2PG_SOURCE_ROOT"], "tests/preload"))
from harness import *  # noqa: E402,F401,F403

use_system_python("jsonschema", "prometheus_client.parser")
import jsonschema  # noqa: E402
import prometheus_client.parser  # noqa: E402

from ncclsim import *  # noqa: E402,F401,F403

import json  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402

db = tempdb()
nccl_job(db)
equal(query(db, "SELECT state, count(*) FROM nccl_ops GROUP BY 1 ORDER BY 1"),
      [("done", 77), ("unreported", 2)], "the job's operations: 77 rows done, the two stuck ones unreported")
equal(scalar(db, "SELECT sum(count) FROM nccl_op_summary"), 5, "the summary-mode rank's 5 all-reduces in buckets")
equal(scalar(db, "SELECT count(*) FROM nccl_stalls"), 2, "a stall row per stuck rank")

# --- the view, against the rows ------------------------------------------------------------------
ends = {}
for h, rank, host, gpu, uuid, started in query(
        db, "SELECT c.comm_hash, c.rank, c.hostname, coalesce(d.physical_index, c.device), c.uuid, c.started_ns "
            "FROM nccl_comms c LEFT JOIN devices d ON d.process_id = c.process_id AND d.ordinal = c.device "
            "ORDER BY c.started_ns"):
    ends[(h, rank)] = (host, gpu, uuid)
comm = {(p, s): (h, r, n) for p, s, h, r, n in
        query(db, "SELECT process_id, comm_serial, comm_hash, rank, nranks FROM nccl_comms")}
parts = [(p, s, k, f, peer, 1, b, g) for p, s, k, f, peer, b, g in
         query(db, "SELECT process_id, comm_serial, kind, func, peer, bytes, gpu_ns FROM nccl_ops WHERE state = 'done'")]
parts += [(p, s, k, f, peer, c, b, None) for p, s, k, f, peer, c, b in
          query(db, "SELECT process_id, comm_serial, kind, func, peer, count, bytes FROM nccl_op_summary")]
sides = {}
for p, s, kind, func, peer, ops, nbytes, gpu in parts:
    h, rank, nranks = comm[(p, s)]
    if func == "Send":
        key, side = (h, rank, peer, "p2p"), 0
    elif func == "Recv":
        key, side = (h, peer, rank, "p2p"), 1
    elif kind in ("coll", "ce") and nranks == 2:
        key, side = (h, rank, 1 - rank, "coll"), 0
    else:
        continue
    pair = ends.get((key[0], key[1])) + ends.get((key[0], key[2])) + (key[3],)
    e = sides.setdefault(pair, {0: [0, 0, []], 1: [0, 0, []]})[side]
    e[0] += ops
    e[1] += nbytes
    if gpu and gpu > 0:
        e[2].append(nbytes / gpu)


def nearest_rank(values, q):
    values = sorted(values)
    if not values:
        return None
    r = min(len(values), max(1, int(q * len(values) + 0.5)))
    return round(values[r - 1], 3)


want = []
for pair, by in sides.items():
    s = max((0, 1), key=lambda k: (by[k][0], len(by[k][2]), -k))
    ops, nbytes, gbps = by[s]
    want.append(pair + (ops, nbytes, len(gbps), ops - len(gbps), nearest_rank(gbps, 0.5), nearest_rank(gbps, 0.99)))
view = query(db, "SELECT src_host, src_gpu, src_uuid, dst_host, dst_gpu, dst_uuid, kind, ops, bytes, gpu_timed, "
                 "untimed, p50_gbps, p99_gbps FROM nccl_pair_bandwidth")
equal(sorted(view), sorted(want), "nccl_pair_bandwidth: each device pair's operations, bytes and GB/s as the rows give them")
equal(sorted((r[1], r[4], r[6]) for r in view),
      [(0, 1, "coll"), (0, 1, "p2p"), (1, 0, "coll"), (1, 2, "p2p"), (2, 3, "p2p"), (3, 0, "p2p")],
      "the ring's sends to the next rank, the two-rank all-reduce both ways, no pair for the 4-rank collectives")
check(all(r[7] == 3 and r[9] == 3 for r in view if r[6] == "p2p"),
      "a send and its receive are one operation: 3 a pair, not 6")
one = [r for r in view if r[6] == "coll" and r[1] == 1][0]
equal((one[7], one[9], one[10], one[11]), (5, 0, 5, None), "the summary-mode rank's all-reduces: counted, untimed, not divided")
paths = [r[0] for r in query(db, "SELECT DISTINCT path FROM peer_bandwidth")]
check(paths and set(paths) <= {"p2p", "driver", "staged"}, "peer_bandwidth keeps to the copies (%s)" % paths)
equal(scalar(db, "SELECT sum(count) + sum(untimed) FROM peer_bandwidth"),
      scalar(db, "SELECT count(*) FROM transfers WHERE status = 0 AND path IN ('p2p', 'driver', 'staged')"),
      "peer_bandwidth counts every copy and no NCCL operation")

# --- report --json --------------------------------------------------------------------------------
proc = cli("report", "--json", db)
equal(proc.returncode, 0, "report --json: exit 0 (%s)" % proc.stderr.strip())
rep = json.loads(proc.stdout)
nccl = rep["nccl"]
got = [(p["src_host"], p["src_gpu"], p["src_uuid"], p["dst_host"], p["dst_gpu"], p["dst_uuid"], p["kind"], p["ops"],
        p["bytes"], p["gpu_timed"], p["untimed"], p["p50_gbps"], p["p99_gbps"]) for p in nccl["pair_bandwidth"]]
equal(sorted(got), sorted(view), "report --json: nccl.pair_bandwidth is the view's rows")
totals = {(h, f): (o, b) for h, f, o, b in
          query(db, "SELECT comm_hash, func, sum(ops), sum(bytes) FROM nccl_totals GROUP BY 1, 2")}
ops = {(o["comm_hash"], o["func"]): (o["ops"], o["bytes"]) for o in nccl["operations"] if o["ops"]}
equal(ops, totals, "report --json: operations per communicator and function, as nccl_totals counts them")
equal((nccl["ops"], nccl["unreported"]), (scalar(db, "SELECT sum(ops) FROM nccl_totals"), 2),
      "report --json: every finished operation, and the two unreported")
equal(len(nccl["stalls"]), 2, "report --json: the stall rows")
check(any(b["path"] == "p2p" for b in rep["bandwidth"]) and all(b["path"] != "nccl" for b in rep["bandwidth"]),
      "report --json: the copies' bandwidth beside, without NCCL in it")
equal(rep["summary"]["processes_with_nccl"], 8, "report --json: 8 processes ran NCCL")

# --- report (text) -------------------------------------------------------------------------------
proc = cli("report", db)
text = proc.stdout
lines = text.splitlines()
equal(lines[2] if len(lines) > 2 else None, "NCCL operations that did not finish", "report: the hang first")
check(re.search(r"1\. comm 00000000000c33c3: AllReduce #4, 1\.0 MiB: ranks 0,1 of 2 stuck in it", text) is not None,
      "report: the two stuck ranks are one entry")
at = {name: next((k for k, l in enumerate(lines) if l.startswith(name)), -1)
      for name in ("transfers:", "NCCL traffic per device pair", "peer access calls")}
check(0 < at["transfers:"] < at["NCCL traffic per device pair"] < at["peer access calls"],
      "report: NCCL's pairs right after the copies' table (%s)" % at)
table = lines[at["NCCL traffic per device pair"]:at["peer access calls"]]
for r in view:
    p50 = "-" if r[11] is None else "%.3g" % r[11]
    line = "  %d->%d" % (r[1], r[4])
    row = [l for l in table if l.startswith(line + " ") and l.split()[1] == r[6]]
    check(len(row) == 1 and row[0].split()[2] == str(r[7]) and row[0].split()[-2] == p50,
          "report: the line of %d->%d %s: %s ops, p50 %s (%s)" % (r[1], r[4], r[6], r[7], p50, row))
check("8 made no peer call (8 of them ran NCCL, below)" in " ".join(text.split()),
      "report: processes that ran NCCL only are said so")

# --- trace ---------------------------------------------------------------------------------------
schema = json.load(open(os.path.join(SOURCE, "tests/preload/trace_event.schema.json")))


def trace(*args):
    proc = cli("trace", db, *args)
    check(proc.returncode == 0, "trace %s: exit 0 (%s)" % (" ".join(args), proc.stderr.strip()))
    doc = json.loads(proc.stdout)
    try:
        jsonschema.validate(doc, schema)
        check(True, "trace %s: valid against the trace-event format's schema" % " ".join(args))
    except jsonschema.ValidationError as e:
        check(False, "trace %s: schema: %s at %s" % (" ".join(args), e.message, list(e.path)))
    return doc


doc = trace()
events = doc["traceEvents"]
names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
slices = [e for e in events if e["ph"] == "X" and e["cat"] == "nccl"]
equal(len(slices), scalar(db, "SELECT count(*) FROM nccl_ops WHERE state = 'done'"), "trace: a slice per finished operation")
rows = {i: r for i, *r in query(db, "SELECT id, started_ns, ended_ns, gpu_ns, bytes, peer, algorithm, protocol, func "
                                    "FROM nccl_ops")}
ok = True
for e in slices:
    r = rows[e["args"]["nccl_op_id"]]
    base = doc["baseTimeNanoseconds"]
    ok &= abs(e["ts"] + e["dur"] - (r[1] - base) / 1000) < 0.002 and e["args"]["gpu_ns"] == r[2]
    ok &= abs(e["ts"] - (r[0] - base) / 1000) < 0.002 or e["args"].get("started_ns") == r[0]
    ok &= e["args"]["bytes"] == r[3]
    ok &= e["args"].get("peer") == r[4] and e["args"].get("algorithm") == r[5] and e["args"].get("protocol") == r[6]
    ok &= e["name"] == r[7] and e["args"]["timing"] == "host" and abs(e["args"]["GPU GB/s"] - r[3] / r[2]) < 0.001
check(ok, "trace: each slice from NCCL's start to its end, GPU time, bytes, peer, algorithm and protocol in args")
check(all(re.match(r"NCCL comm [0-9a-f]{16} .* rank \d/\d GPU \d", names[(e["pid"], e["tid"])]) for e in slices),
      "trace: on tracks named by communicator, rank and GPU")
spans = {}
for e in slices:
    spans.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
ok = True
for v in spans.values():
    v.sort()
    ok &= all(b0 >= a1 - 1e-3 for (a0, a1), (b0, b1) in zip(v, v[1:]))
check(ok, "trace: slices of an NCCL track never overlap (a group's operations take lanes)")
owner = {}
equal([(e["tid"], e["pid"]) for e in events if owner.setdefault(e["tid"], e["pid"]) != e["pid"]], [],
      "trace: no thread id under two processes")
unfinished = [e for e in events if e["ph"] == "i" and e["cat"] == "nccl"]
equal(sorted(e["name"] for e in unfinished), ["AllReduce (unreported: no end recorded)"] * 2,
      "trace: the two operations that never finished, as instants")
stalls = [e for e in events if e["ph"] == "i" and e["cat"] == "nccl_stall"]
check(len(stalls) == 2 and all(e["args"]["peer_state"] == "waiting" and e["args"]["rule_id"] for e in stalls),
      "trace: a stall instant per stall row, with its columns")
equal(len([e for e in events if e["ph"] == "X" and e["cat"] == "transfer"]), scalar(db, "SELECT count(*) FROM transfers"),
      "trace: the copies' slices beside")
rank1 = trace("--rank", "1")["traceEvents"]
pids = {r[0] for r in query(db, "SELECT id FROM processes WHERE rank = 1")}
n1 = scalar(db, "SELECT count(*) FROM nccl_ops WHERE state = 'done' AND process_id IN (SELECT id FROM processes WHERE rank = 1)")
got = [e for e in rank1 if e["ph"] == "X" and e["cat"] == "nccl"]
check(len(got) == n1 and all(e["pid"] in pids for e in got), "trace --rank 1: rank 1's %d operations only" % n1)
limited = [e for e in trace("--limit", "5")["traceEvents"] if e["ph"] == "X" and e["cat"] == "nccl"]
first5 = sorted(r[0] for r in rows.values())[:5]
equal(sorted(e["ts"] for e in limited), sorted(round((t - doc["baseTimeNanoseconds"]) / 1000, 3) for t in first5),
      "trace --limit 5: the first 5 operations by start")
mid = sorted(r[0] for r in rows.values())[40]
window = [e for e in trace("--from", "%.9f" % (mid / 1e9), "--clock", "unix")["traceEvents"]
          if e["ph"] == "X" and e["cat"] == "nccl"]
check(window and all(e["ts"] * 1000 >= mid - 1000 for e in window) and len(window) < len(slices),
      "trace --from: only what started then (%d of %d)" % (len(window), len(slices)))

# --- metrics -------------------------------------------------------------------------------------
proc = cli("metrics", db)
equal(proc.returncode, 0, "metrics: exit 0")
promtool = shutil.which("promtool")
check(promtool is not None, "promtool is installed (scripts/install-deps.sh: prometheus)")
if promtool:
    pt = subprocess.run([promtool, "check", "metrics"], input=proc.stdout, capture_output=True, text=True)
    equal((pt.returncode, pt.stdout + pt.stderr), (0, ""), "metrics: promtool check metrics finds nothing")
fams = {f.name: f for f in prometheus_client.parser.text_string_to_metric_families(proc.stdout)}
for name in ("p2pguard_nccl_ops", "p2pguard_nccl_bytes", "p2pguard_nccl_ops_gpu_timed", "p2pguard_nccl_gpu_timed_bytes",
             "p2pguard_nccl_gpu_seconds", "p2pguard_nccl_stalls", "p2pguard_nccl_ops_unreported"):
    check(name in fams and fams[name].type == "counter", "metrics: %s is a counter" % name)
equal(sum(s.value for s in fams["p2pguard_nccl_ops"].samples), scalar(db, "SELECT sum(ops) FROM nccl_totals"),
      "metrics: every finished operation once")
uuid = dict(query(db, "SELECT rank, uuid FROM nccl_comms WHERE comm_hash = '00000000000a11a1'"))
send = [s for s in fams["p2pguard_nccl_gpu_timed_bytes"].samples if s.labels["func"] == "Send"
        and s.labels["UUID"] == uuid[0] and s.labels["peer_UUID"] == uuid[1]]
seconds = [s for s in fams["p2pguard_nccl_gpu_seconds"].samples if s.labels["func"] == "Send"
           and s.labels["UUID"] == uuid[0] and s.labels["peer_UUID"] == uuid[1]]
want = query(db, "SELECT sum(o.bytes), sum(o.gpu_ns) FROM nccl_ops o JOIN nccl_comms c USING (process_id, comm_serial) "
                 "WHERE c.comm_hash = '00000000000a11a1' AND c.rank = 0 AND o.func = 'Send' AND o.gpu_ns > 0")[0]
check(len(send) == 1 and send[0].value == want[0] and abs(seconds[0].value - want[1] / 1e9) < 1e-9
      and send[0].labels["rank"] == "0" and send[0].labels["peer_rank"] == "1" and send[0].labels["Hostname"]
      and send[0].labels["peer_Hostname"] == send[0].labels["Hostname"],
      "metrics: rank 0's sends to rank 1 by GPU pair (UUID, peer_UUID), bytes and GPU seconds as the rows (%s)" % send)
coll = [s for s in fams["p2pguard_nccl_ops"].samples if s.labels["comm"] == "00000000000a11a1" and s.labels["kind"] == "coll"]
check(coll and all(s.labels["peer_UUID"] == "" for s in coll), "metrics: a 4-rank collective has no other end")
stalled = fams["p2pguard_nccl_stalls"].samples
check(sum(s.value for s in stalled) == 2 and all(s.labels["peer_state"] == "waiting" and
                                                 s.labels["rule"] == "nccl/all-ranks-stuck-in-operation" for s in stalled),
      "metrics: the stalls by where the other ranks were and rule")
equal(sum(s.value for s in fams["p2pguard_nccl_ops_unreported"].samples), 2, "metrics: the unreported operations")
done()
