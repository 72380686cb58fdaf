"""The outputs a user reaches for: trace (checked against the trace-event format's schema),
metrics (checked by promtool and by the Prometheus client library's parser), merge, report --json,
explain --json, and the import of dead spools by every command that reads a database."""
import os
import sys

from harness import *

# The validators are Debian packages (python3-jsonschema, python3-prometheus-client).
use_system_python("jsonschema", "prometheus_client.parser")
import jsonschema
import prometheus_client.parser

import json
import re
import shutil
import signal
import sqlite3
import urllib.request


work = os.path.dirname(tempdb())
db = tempdb()
# Rank 3 copies and fails twice the same way (one group of two); rank 5 on "another host" below.
cli("run", "--db", db, "--", program("rt_peer"), "basic", RANK="3")
cli("run", "--db", db, "--", program("rt_peer"), "errors", RANK="3")
cli("run", "--db", db, "--", program("rt_peer"), "errors", RANK="3")
# A process that died without `run` or `recover`: its spool waits beside the database.
proc = run([program("rt_peer"), "crash"], db=db, check=False)
check(proc.returncode == -signal.SIGSEGV, "the crashing program died of SIGSEGV")

# --- report --json: the spool is imported first, failures grouped, processes counted ---------
proc = cli("report", "--json", db)
equal(proc.returncode, 0, "report --json: exit 0 (%s)" % proc.stderr.strip())
rep = json.loads(proc.stdout)
equal(rep["summary"]["crashes"], 1, "report --json: the dead process's crash, imported first")
equal(scalar(db, "SELECT count(*) FROM crashes"), 1, "the spool is in the database now")
equal(rep["summary"]["processes_guarded"], 4, "report --json: four guarded processes")
groups = {(f["api"], f["status"], f["device"], f["peer_device"]): f for f in rep["failures"]}
g = groups.get(("cudaDeviceEnablePeerAccess", 704, 0, 1))
check(g is not None and g["count"] == 2 and g["processes"] == 2 and g["first_ns"] <= g["last_ns"],
      "report --json: the same failure twice is one group of 2 with first and last time (%s)" % g)
equal(len(rep["failures"]), scalar(db, "SELECT count(*) FROM failures") // 2,
      "report --json: every failure of the second run falls into a group of the first")
check(all(f["rule_id"] and f["diagnosis"] and f["advice"] for f in rep["failures"]),
      "report --json: each group has its rule, diagnosis and advice")
equal(rep["stalls"], [], "report --json: no stall rows, an empty list")
# A database written by a guard older than stall detection has no stalls table: null, not an error.
old = os.path.join(work, "old.db")
shutil.copy(db, old)
with sqlite3.connect(old) as c:
    c.execute("DROP TABLE stalls")
proc = cli("report", "--json", old)
equal(proc.returncode, 0, "report --json on an older database: exit 0 (%s)" % proc.stderr.strip())
check(json.loads(proc.stdout)["stalls"] is None, "report --json: stalls null when the database has no stalls table")
check(any(b["path"] == "p2p" and b["p50_gbps"] > 0 for b in rep["bandwidth"]), "report --json: bandwidth per pair and path")

# A process that made no peer call: a processes row and nothing else (as the guard writes from
# its first cuInit); and a stalls table and a crash Python stack, as newer guards write them.
con = sqlite3.connect(db)
con.execute("INSERT INTO processes (pid, hostname, rank, cmdline, started_ns, mode, boot_id) "
            "VALUES (4242, 'idle-host', 7, 'python train.py', 1700000000000000000, 'observe', 'b00t')")
con.execute("INSERT INTO stalls (process_id, transfer_id, api, src_device, dst_device, bytes, stream, waited_ns, "
            "diagnosis, started_ns) SELECT process_id, id, 'cudaMemcpyPeerAsync', 0, 1, 4096, 0, 31000000000, "
            "'P2P copy never completed', started_ns FROM transfers ORDER BY id LIMIT 1")
con.execute("UPDATE crashes SET python_stack = 'train.py:42 in step'")
con.commit()
con.close()
proc = cli("report", db)
words = " ".join(proc.stdout.split())  # wherever the processes line was wrapped
check("processes: 5 guarded on 2 hosts (4 on vm, 1 on idle-host)" in words and "1 made no peer call" in words,
      "report: guarded processes per host and those without a peer call (%s)" % proc.stdout.splitlines()[1:3])
check("2 times in 2 processes" in proc.stdout and "first " in proc.stdout, "report: identical failures grouped with a count")
check("python: train.py:42 in step" in proc.stdout, "report: a crash's Python stack when the column exists")
check("stalls" in proc.stdout and "1 copy, the longest seen waiting 31.0 s" in proc.stdout,
      "report: stalls when the table exists (%s)" % proc.stdout[proc.stdout.find("stalls"):])
rep = json.loads(cli("report", "--json", db).stdout)
equal(rep["summary"]["processes_without_peer_calls"], 1, "report --json: one process without a peer call")
check(rep["stalls"] and rep["stalls"][0]["waited_ns"] == 31000000000, "report --json: the stall row")
check(rep["crashes"][0].get("python_stack") == "train.py:42 in step", "report --json: the crash's Python stack")

# --- trace ------------------------------------------------------------------------------------
out = os.path.join(work, "trace.json")
proc = cli("trace", db, "-o", out)
equal(proc.returncode, 0, "trace: exit 0 (%s)" % proc.stderr.strip())
trace = json.load(open(out))
schema = json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "trace_event.schema.json")))
try:
    jsonschema.validate(trace, schema)
    check(True, "trace: valid against the trace-event format's schema")
except jsonschema.ValidationError as e:
    check(False, "trace: valid against the trace-event format's schema: %s at %s" % (e.message, list(e.path)))
events = trace["traceEvents"]
names = [e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"]
equal(len(names), 5, "trace: a process per guarded process")
check(any(n.startswith("rank 3 pid") for n in names), "trace: the rank in the process name (%s)" % names)
owner = {}
equal([(e["tid"], e["pid"]) for e in events if owner.setdefault(e["tid"], e["pid"]) != e["pid"]], [],
      "trace: no thread id under two processes (importers key threads by tid)")
slices = [e for e in events if e["ph"] == "X"]
equal(len(slices), scalar(db, "SELECT count(*) FROM transfers WHERE started_ns IS NOT NULL"), "trace: a slice per transfer")
check(all({"bytes", "path", "timing"} <= set(e["args"]) for e in slices), "trace: bytes, path and timing in each slice's args")
gpu = scalar(db, "SELECT count(*) FROM transfers WHERE gpu_ns > 0")
equal(sum(e["args"]["timing"] == "gpu" for e in slices), gpu, "trace: GPU-timed slices marked gpu, the rest host")
row = query(db, "SELECT id, gpu_ns, bytes FROM transfers WHERE gpu_ns > 0 LIMIT 1")[0]
s = next(e for e in slices if e["args"]["transfer_id"] == row[0])
check(abs(s["dur"] - row[1] / 1000.0) < 0.002 and abs(s["args"]["GB/s"] - row[2] / row[1]) < 0.001,
      "trace: a slice lasts its GPU time and carries its GB/s")
tracks = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
check(all((e["pid"], e["tid"]) in tracks and "GPU %d->%d" % (e["args"]["src_device"], e["args"]["dst_device"]) in tracks[(e["pid"], e["tid"])]
          for e in slices), "trace: each slice on a named stream/pair track")
# Slices of one track nest or follow each other (what the importers require).
by_track = {}
for e in slices:
    by_track.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
ok = True
for spans in by_track.values():
    spans.sort()
    for (a0, a1), (b0, b1) in zip(spans, spans[1:]):
        ok &= b0 >= a1 - 1e-3 or b1 <= a1 + 1e-3
check(ok, "trace: slices of a track never overlap without nesting")
instants = [e for e in events if e["ph"] == "i"]
equal(sum(e["cat"] == "failure" for e in instants), scalar(db, "SELECT count(*) FROM failures"), "trace: an instant per failure")
check(any(e["cat"] == "crash" and "SIGSEGV" in e["name"] or "Segmentation" in e["name"] for e in instants), "trace: the crash")
check(any(e["cat"] == "stall" and e["args"].get("waited_ns") == 31000000000 for e in instants), "trace: the stall")
# The trace says how many of its copies have a copy time, as the rows have it (a synchronous
# copy's gpu_ns is its call's time; an untimed copy's slice is its enqueue).
other = trace["otherData"]
counts = query(db, "SELECT sum(status = 0 AND gpu_ns > 0 AND instr(api, 'Async') > 0), "
                   "sum(status = 0 AND gpu_ns > 0 AND instr(api, 'Async') = 0), "
                   "sum(status = 0 AND coalesce(gpu_ns, 0) <= 0), sum(status != 0) "
                   "FROM transfers WHERE started_ns IS NOT NULL")[0]
equal(tuple(other.get(k) for k in ("copies_gpu_timed", "copies_synchronous", "copies_untimed", "copies_failed")),
      counts, "trace: otherData counts the GPU-timed, synchronous, untimed and failed copies as the rows do")
# (Whether a small asynchronous copy is GPU-timed depends on the sampling's clock: the copy of the
# database below makes sure of an untimed and a failed one.)
check(counts[0] >= 1 and counts[1] >= 2, "trace: the run has GPU-timed and synchronous copies (%s)" % (counts,))
equal(sum(counts), len(slices), "trace: those counts are its slices")
equal(sum(e["args"]["timing"] == "host" and e["args"]["status"] == 0 for e in slices), other.get("copies_untimed"),
      "trace: the untimed count is the successful slices of host time")
check("copies_means" in other and other.get("calls_in_transfer_overflow") == 0,
      "trace: what the counts mean, beside the overflow's count")
# On a copy of the database: a copy that lost its GPU time and a failed one, calls folded into
# overflow; and a filter counts only what it leaves.
changed = os.path.join(work, "changed.db")
with sqlite3.connect(db) as src, sqlite3.connect(changed) as dst:
    src.backup(dst)
con = sqlite3.connect(changed)
con.execute("UPDATE transfers SET gpu_ns = NULL WHERE id = (SELECT min(id) FROM transfers WHERE status = 0 "
            "AND gpu_ns > 0 AND instr(api, 'Async') > 0)")
con.execute("UPDATE transfers SET status = 1, gpu_ns = NULL WHERE id = (SELECT min(id) FROM transfers WHERE status = 0 "
            "AND gpu_ns > 0 AND instr(api, 'Async') = 0)")
con.execute("INSERT INTO transfer_overflow (process_id, thread_serial, thread_id, api, src_device, dst_device, path, "
            "status, size_bucket, count, bytes, host_ns_total) SELECT process_id, 1, 1, 'cudaMemcpyPeerAsync', 0, 1, "
            "'p2p', 0, 12, 9, 9 * 4096, 9000 FROM transfers LIMIT 1")
con.commit()
con.close()
whole = json.loads(cli("trace", changed).stdout)["otherData"]
equal(tuple(whole.get(k) for k in ("copies_gpu_timed", "copies_synchronous", "copies_untimed", "copies_failed",
                                   "calls_in_transfer_overflow")),
      (counts[0] - 1, counts[1] - 1, counts[2] + 1, counts[3] + 1, 9),
      "trace: a copy without its GPU time counts as untimed, a failed one as failed; the overflow apart")
first = query(changed, "SELECT status != 0, status = 0 AND coalesce(gpu_ns, 0) <= 0, status = 0 AND gpu_ns > 0 AND "
                       "instr(api, 'Async') = 0 FROM transfers WHERE started_ns IS NOT NULL ORDER BY started_ns, id "
                       "LIMIT 3")
limited = json.loads(cli("trace", changed, "--limit", "3").stdout)["otherData"]
equal((limited.get("copies_failed"), limited.get("copies_untimed"), limited.get("copies_synchronous"),
       limited.get("copies_gpu_timed")),
      (sum(r[0] for r in first), sum(r[1] for r in first), sum(r[2] for r in first),
       3 - sum(r[0] + r[1] + r[2] for r in first)), "trace --limit 3: only its three slices counted")
proc = cli("trace", db)
check(proc.returncode == 0 and json.loads(proc.stdout)["traceEvents"], "trace: to standard output without -o")

# --- metrics ----------------------------------------------------------------------------------
proc = cli("metrics", db)
equal(proc.returncode, 0, "metrics: exit 0")
text = proc.stdout
promtool = shutil.which("promtool")
check(promtool is not None, "promtool is installed (scripts/install-deps.sh: prometheus)")
if promtool:
    pt = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
    equal((pt.returncode, pt.stdout + pt.stderr), (0, ""), "metrics: promtool check metrics finds nothing")
fams = {f.name: f for f in prometheus_client.parser.text_string_to_metric_families(text)}
for name in ("p2pguard_peer_copies", "p2pguard_peer_copy_bytes", "p2pguard_peer_copy_seconds", "p2pguard_failures",
             "p2pguard_crashes", "p2pguard_stalls", "p2pguard_records_dropped", "p2pguard_probe_verdicts"):
    check(name in fams and fams[name].type == "counter", "metrics: %s is a counter" % name)
want = scalar(db, "SELECT sum(bytes) FROM transfers WHERE src_device = 0 AND dst_device = 1 AND path = 'p2p'")
got = sum(s.value for s in fams["p2pguard_peer_copy_bytes"].samples
          if s.labels.get("src") == "0" and s.labels.get("dst") == "1" and s.labels.get("path") == "p2p")
equal(got, want, "metrics: p2pguard_peer_copy_bytes_total{src=\"0\",dst=\"1\",path=\"p2p\"} is the database's sum")
rules = {s.labels["rule"]: s.value for s in fams["p2pguard_failures"].samples}
equal(rules.get("cuda/peer-access-already-enabled"), 2.0, "metrics: failures by rule")
equal(sum(s.value for s in fams["p2pguard_crashes"].samples), 1.0, "metrics: the crash")
equal(sum(s.value for s in fams["p2pguard_stalls"].samples), 1.0, "metrics: the stall")
prom = os.path.join(work, "p2pguard.prom")
equal(cli("metrics", db, "-o", prom).returncode, 0, "metrics -o: exit 0")
equal(open(prom).read(), text, "metrics -o: the same text, for the textfile collector")

server = subprocess.Popen([CLI, "metrics", db, "--listen", "127.0.0.1:0"], stderr=subprocess.PIPE, text=True,
                          env=environment(preload=False))
try:
    line = server.stderr.readline()
    m = re.search(r"http://127\.0\.0\.1:(\d+)/metrics", line)
    check(m is not None, "metrics --listen: says where it serves (%s)" % line.strip())
    if m:
        with urllib.request.urlopen("http://127.0.0.1:%s/metrics" % m.group(1), timeout=10) as r:
            body = r.read().decode()
            check(r.headers["Content-Type"].startswith("text/plain; version=0.0.4"), "metrics --listen: the exposition's content type")
        scraped = {f.name for f in prometheus_client.parser.text_string_to_metric_families(body)}
        check("p2pguard_peer_copy_bytes" in scraped, "metrics --listen: a scrape parses")
finally:
    server.terminate()
    server.wait(timeout=10)

# --- merge ------------------------------------------------------------------------------------
other = tempdb("other.db")
cli("run", "--db", other, "--", program("rt_peer"), "basic", RANK="5")
con = sqlite3.connect(other)
con.execute("UPDATE processes SET hostname = 'node-b'")
con.commit()
con.close()
merged = os.path.join(work, "merged.db")
proc = cli("merge", merged, db, other)
equal(proc.returncode, 0, "merge: exit 0 (%s)" % proc.stderr.strip())
counts = "SELECT (SELECT count(*) FROM processes), (SELECT count(*) FROM transfers), (SELECT count(*) FROM failures), " \
         "(SELECT count(*) FROM crashes), (SELECT count(*) FROM peer_access), (SELECT count(*) FROM stalls)"
a, b, m = query(db, counts)[0], query(other, counts.replace(", (SELECT count(*) FROM stalls)", ", 0"))[0], query(merged, counts)[0]
equal(m, tuple(x + y for x, y in zip(a, b)), "merge: every row of both databases")
proc = cli("merge", merged, db, other)
equal((proc.returncode, query(merged, counts)[0]), (0, m), "merge again: nothing added")
check("0 new" in proc.stdout, "merge again: says nothing was new (%s)" % proc.stdout.strip())
# A later copy of a live database: one more row of a process already merged comes in, alone.
con = sqlite3.connect(other)
con.execute("INSERT INTO transfers (process_id, thread_id, api, src_device, dst_device, bytes, path, status, "
            "started_ns, host_ns, thread_serial, seq) SELECT process_id, thread_id, api, src_device, dst_device, "
            "bytes, path, status, started_ns + 1, host_ns, thread_serial, seq + 100000 FROM transfers LIMIT 1")
con.commit()
con.close()
proc = cli("merge", merged, other)
equal((proc.returncode, scalar(merged, "SELECT count(*) FROM transfers")), (0, m[1] + 1), "merge of a grown input: only its new row")
m = query(merged, counts)[0]
equal(query(merged, "SELECT hostname, rank FROM processes WHERE hostname = 'node-b'"), [("node-b", 5)], "merge: hostname and rank kept")
per = "SELECT p.pid, p.started_ns, (SELECT count(*) FROM transfers t WHERE t.process_id = p.id), " \
      "(SELECT count(*) FROM failures f WHERE f.process_id = p.id) FROM processes p ORDER BY 1, 2"
equal(sorted(query(merged, per)), sorted(query(db, per) + query(other, per)), "merge: each process keeps its own rows (re-keyed)")
equal(scalar(merged, "SELECT python_stack FROM crashes"), "train.py:42 in step", "merge: columns a newer guard added come along")
equal(cli("report", "--json", merged).returncode, 0, "report reads the merged database")
proc = cli("merge", merged, merged)
equal(proc.returncode, 2, "merge: the output as an input is refused")

# Summary-mode databases: their buckets come along once.
sumdb = tempdb("summary.db")
cli("run", "--db", sumdb, "--record", "summary", "--", program("rt_peer"), "basic")
merged2 = os.path.join(work, "merged2.db")
totals = "SELECT count(*), sum(count), sum(bytes) FROM transfer_summary"
want = query(sumdb, totals)[0]
check(want[0] > 0, "a summary-mode run has summary rows (%s)" % (want,))
cli("merge", merged2, sumdb)
cli("merge", merged2, sumdb)
equal(query(merged2, totals)[0], want, "merge twice of a summary-mode database: its buckets once")
fams = {f.name: f for f in prometheus_client.parser.text_string_to_metric_families(cli("metrics", merged2).stdout)}
equal(sum(s.value for s in fams["p2pguard_peer_copies"].samples), want[1], "metrics count summary-mode copies")

# --- explain --json ---------------------------------------------------------------------------
proc = cli("explain", "--json", "RuntimeError: CUDA error: peer access is not supported between these two devices")
ex = json.loads(proc.stdout)
check(proc.returncode == 0 and ex["matches"] and ex["matches"][0]["id"] == "pytorch/cuda-error-peer-access-not-supported" and "root_cause" in json.dumps(ex["matches"][0]["rule"]),
      "explain --json: the rules, best first, each with its whole entry")
proc = cli("explain", "--json", "nothing like an error")
check(proc.returncode == 1 and json.loads(proc.stdout)["matches"] == [], "explain --json: no match is an empty list, exit 1")

# --- --help, unknown options, missing databases ------------------------------------------------
for cmd in ("run", "report", "recover", "trace", "metrics", "merge", "explain", "rules"):
    proc = cli(cmd, "--help")
    check(proc.returncode == 0 and "usage" in proc.stdout.lower(), "%s --help: usage on stdout, exit 0" % cmd)
for cmd in ("run", "report", "recover", "trace", "metrics", "merge", "explain"):
    proc = cli(cmd, "--frobnicate")
    check(proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1 and "--frobnicate" in proc.stderr,
          "%s --frobnicate: one line, exit 2 (%r)" % (cmd, proc.stderr))
missing = os.path.join(work, "missing.db")
for args in (["report"], ["report", "--json"], ["trace"], ["metrics"]):
    proc = cli(*(args + [missing]))
    check(proc.returncode == 2 and proc.stderr.strip() == "p2pguard: no database at " + missing and not os.path.exists(missing),
          "%s on a missing database: one line, exit 2, nothing created (%r)" % (" ".join(args), proc.stderr))
proc = cli("merge", merged, missing)
check(proc.returncode == 2 and "no database at" in proc.stderr, "merge with a missing input: one line, exit 2")

# A database another process holds locked: the dead spool cannot be imported now. One line, the
# report of what the database holds, and the next command imports it.
busy = tempdb("busy.db")
cli("run", "--db", busy, "--", program("rt_peer"), "basic")
# Locked before the crash: its handler's own import (which puts a crash row in at once) cannot
# happen either, so the crash stays in the dead process's spool.
holder = sqlite3.connect(busy, isolation_level=None)
holder.execute("BEGIN IMMEDIATE")
run([program("rt_peer"), "crash"], db=busy, check=False)
proc = cli("report", "--json", busy)
lines = proc.stderr.strip().splitlines()
check(proc.returncode == 0 and len(lines) == 1 and "could not import" in lines[0] and "busy.db.spool" in lines[0],
      "report on a locked database: one line says the spool could not be imported (%r)" % proc.stderr)
equal(json.loads(proc.stdout)["summary"]["crashes"], 0, "report on a locked database: what it holds")
holder.execute("ROLLBACK")
holder.close()
proc = cli("report", "--json", busy)
equal((proc.returncode, json.loads(proc.stdout)["summary"]["crashes"]), (0, 1), "the next report imports the spool")
# Probe verdicts: `topo` on a pair whose P2P delivers wrong data.
probed = tempdb("probed.db")
proc = cli("topo", "--db", probed, "--bytes", str(1 << 20), SIMCUDA_P2P_CORRUPT="0-1")
equal(proc.returncode, 1, "topo on a lying pair: exit 1")
verdicts = [e for e in json.loads(cli("trace", probed).stdout)["traceEvents"] if e["ph"] == "i" and e["cat"] == "probe"]
equal(sorted(e["name"] for e in verdicts), ["probe 0->1: wrong_data", "probe 1->0: wrong_data"], "trace: probe verdicts as instants")
fams = {f.name: f for f in prometheus_client.parser.text_string_to_metric_families(cli("metrics", probed).stdout)}
equal(sorted((s.labels["src"], s.labels["dst"], s.labels["verdict"], s.value) for s in fams["p2pguard_probe_verdicts"].samples),
      [("0", "1", "wrong_data", 1.0), ("1", "0", "wrong_data", 1.0)], "metrics: probe verdicts by pair")
rep = json.loads(cli("report", "--json", probed).stdout)
equal([(f["probe"], f["count"], f["pairs"]) for f in rep["failures"]], [("wrong_data", 2, [[0, 1], [1, 0]])],
      "report --json: the probe's verdict, both directions in one group")
done()
