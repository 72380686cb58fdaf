"""The outputs on a cluster job's database (scripts/make-bigdb.py: 8 GPUs, 24 ranks on 3 hosts, the
same enable failing on 32 pairs in every rank, crashes in one place), as a person reads them: report
grouped across pairs, ranks and hosts, wrapped text, progress; `run` reporting only its own
processes; trace filters and clocks; metrics labels and the server under idle connections."""
import os
import pty
import select
import socket
import sys

from harness import *

use_system_python("prometheus_client.parser")
import prometheus_client.parser

import json
import re
import shutil
import sqlite3
import time
import urllib.request

work = tempfolder()
big = os.path.join(work, "job.db")
subprocess.run([sys.executable, os.path.join(SOURCE, "scripts/make-bigdb.py"), big, "--rows", "40000",
                "--processes", "24", "--per-host", "8"], check=True, capture_output=True)

# ---- report: grouped, numbered, wrapped ------------------------------------------------------
proc = cli("report", big)
equal(proc.returncode, 0, "report: exit 0 (%s)" % proc.stderr.strip())
out = proc.stdout
check(all(len(l) <= 100 for l in out.splitlines()), "report: every line within 100 columns (wrapped, not cut)")
words = " ".join(out.split())  # the text as words, wherever a line was wrapped
check("24 guarded on 3 hosts (8 each on gpu-node-[001-003]), ranks 0-23" in words,
      "report: processes counted per host, ranks as a range")
check("mode observe 22, staged 2" in words, "report: processes counted per mode")
pids = [str(p) for (p,) in query(big, "SELECT pid FROM processes")]
check(not any(re.search(r"\b%s\b" % p, out) for p in pids), "report: no pid listed without --verbose")
verbose = cli("report", "--verbose", big).stdout
check(all(re.search(r"\b%s\b" % p, verbose) for p in pids), "report --verbose: every pid")
long_lines = [l for l in verbose.splitlines() if len(l) > 100]
equal(long_lines, [], "report --verbose: every line within 100 columns")
gpu_lines = " ".join(l.strip() for l in verbose[verbose.find("\nGPUs: "):].split("\n\n")[0].splitlines()[1:])
uuid, bus = query(big, "SELECT d.uuid, d.pci_bus_id FROM devices d JOIN processes p ON p.id = d.process_id "
                       "WHERE p.hostname = 'gpu-node-001' AND d.ordinal = 0")[0]
check(("gpu-node-001 GPU 0 %s %s (NVIDIA H100 80GB HBM3, 8 processes)" % (uuid, bus)) in gpu_lines,
      "report --verbose: each physical GPU, wrapped at words, never cut")

# A host short of ranks shows in the per-host counts; many different counts are summed up.
uneven = os.path.join(work, "uneven.db")
subprocess.run([sys.executable, os.path.join(SOURCE, "scripts/make-bigdb.py"), uneven, "--rows", "2000",
                "--processes", "20", "--per-host", "8"], check=True, capture_output=True)
text = " ".join(cli("report", uneven).stdout.split())
check("20 guarded on 3 hosts (8 each on gpu-node-[001-002], 4 on gpu-node-003), ranks 0-19" in text,
      "report: a host with fewer processes than the others is named with its count (%s)"
      % text[text.find("processes:"):][:120])
with sqlite3.connect(uneven) as c:  # hosts of 1, 2, 3, 4, 4, 6 processes
    hosts = [h for n, h in ((1, "a"), (2, "b"), (3, "c"), (4, "d"), (4, "e"), (6, "f")) for _ in range(n)]
    for rank, host in enumerate(hosts):
        c.execute("UPDATE processes SET hostname = ? WHERE rank = ?", ("node-" + host, rank))
text = " ".join(cli("report", uneven).stdout.split())
check("20 guarded on 6 hosts (6 on node-f, 4 each on node-d,node-e, 3 on node-c, and 2 more hosts with 1-2 "
      "each), ranks 0-19" in text, "report: past four counts, the hosts with the fewest summed up (%s)"
      % text[text.find("processes:"):][:160])
groups = re.findall(r"^  (\d+)\. (\S+) -> (\d+)", out, re.M)
failures = [g for g in groups if g[1] != "p2pguard_probe" or True]
numbers = [int(g[0]) for g in groups]
check(numbers[:3] == [1, 2, 3], "report: failure groups numbered 1, 2, 3 in order (%s)" % numbers)
block = out[out.find("  1. cudaDeviceEnablePeerAccess -> 217"):]
check("704 times in 22 processes" in " ".join(" ".join(block.splitlines()[:2]).split()),
      "report: the 217 on 32 pairs in 22 ranks is one group of 704")
on = " ".join(l.strip() for l in block.splitlines()[2:4])
check("pairs 0-3->4-7; 4-7->0-3 (32)" in on and "hosts gpu-node-[001-003] (3)" in on and
      "ranks 0-8,10-18,20-23 (22)" in on, "report: the group's pairs, ranks and hosts as ranges (%s)" % on)
# The diagnosis is wrapped, never cut: joined again, the words are the database's.
why = scalar(big, "SELECT diagnosis FROM failures WHERE status = 217 LIMIT 1")
lines = block.splitlines()
start = next(k for k, l in enumerate(lines) if l.strip().startswith("why:"))
text = lines[start].split("why:", 1)[1]
for l in lines[start + 1:]:
    if not l.startswith(" " * 13) or l.strip().startswith("do:"):
        break
    text += " " + l.strip()
equal(text.split(), why.split(), "report: the diagnosis in full, wrapped at words")
check("crashes (grouped by signal and top frames)" in out and "6 crashes in 3 processes" in out and
      "ranks 7,15,23" in out, "report: the same crash in three ranks is one group")
check("2 copies, the longest seen waiting 31.0 s" in out, "report: stalls grouped")
folded = scalar(big, "SELECT sum(count) FROM transfer_overflow")
check(("%s of the calls found their thread's ring full" % format(folded, ",")) in out,
      "report: the overflow totals (%d)" % folded)
check("without a copy time" in out and "not divided" in out, "report: says what bandwidth is computed from")

# JSON: the same groups, lists in full.
rep = json.loads(cli("report", "--json", big).stdout)
g = rep["failures"][0]
equal((g["group"], g["count"], len(g["pairs"]), g["pairs_text"], g["ranks_text"], g["hosts_text"]),
      (1, 704, 32, "0-3->4-7; 4-7->0-3", "0-8,10-18,20-23", "gpu-node-[001-003]"), "report --json: the group")
equal(rep["summary"]["transfer_calls"]["folded"], folded, "report --json: the overflow totals in the summary")
equal(rep["summary"]["transfer_calls"]["calls"], scalar(big, "SELECT sum(calls) FROM peer_totals"),
      "report --json: calls as peer_totals counts them")
equal((rep["crash_groups"][0]["count"], rep["crash_groups"][0]["processes"]), (6, 3), "report --json: crash groups")
check(rep["devices"] and rep["devices"][0]["uuid"].startswith("GPU-"), "report --json: the devices table")
untimed = sum(b["untimed"] for b in rep["bandwidth"])
equal(untimed, rep["summary"]["transfer_calls"]["untimed"], "report --json: untimed copies counted per pair and in all")

# An older database: no devices table, no run_id column. Every output still works.
old = os.path.join(work, "old.db")
subprocess.run([sys.executable, os.path.join(SOURCE, "scripts/make-bigdb.py"), old, "--rows", "2000",
                "--processes", "4", "--no-devices"], check=True, capture_output=True)
with sqlite3.connect(old) as c:
    c.execute("ALTER TABLE processes DROP COLUMN run_id")
for args in (["report"], ["report", "--json"], ["report", "--html", os.path.join(work, "old.html")], ["trace"],
             ["metrics"]):
    proc = cli(*(args + [old]))
    equal((proc.returncode, proc.stderr), (0, ""), "%s on a database without the devices table" % " ".join(args))

# Progress: after P2PGUARD_PROGRESS_MS (1000 by default); into a pipe one line per stage.
proc = cli("report", big, P2PGUARD_PROGRESS_MS="0")
check("p2pguard report: reading transfers" in proc.stderr and "\r" not in proc.stderr,
      "report: progress on stderr, a line per stage when not a terminal (%r)" % proc.stderr[:200])
equal(cli("report", big).stderr, "", "report: no progress within the first second")
master, slave = pty.openpty()
p = subprocess.Popen([CLI, "report", big], stdout=subprocess.DEVNULL, stderr=slave,
                     env=environment(preload=False, P2PGUARD_PROGRESS_MS="0"))
os.close(slave)
p.wait(timeout=60)
seen = b""
while select.select([master], [], [], 0.2)[0]:
    try:
        chunk = os.read(master, 4096)
    except OSError:
        break
    if not chunk:
        break
    seen += chunk
os.close(master)
check(seen.startswith(b"\r\x1b[Kp2pguard report: reading transfers") and seen.endswith(b"\r\x1b[K") and b"\n" not in seen,
      "report: on a terminal, progress redrawn on one line and cleared (%r)" % seen[:80])

# ---- run: only its own processes -------------------------------------------------------------
db = tempdb()
first = cli("run", "--db", db, "--", program("rt_peer"), "errors")
pid, run_id = query(db, "SELECT pid, run_id FROM processes")[0]
check("processes: 1 guarded on 1 host" in first.stdout and ("pid %d" % pid) not in first.stdout and
      "(its pid and command line: p2pguard report --verbose)" in first.stdout,
      "run: the report of its one process gives no pid, and says where it is (%s)" % first.stdout[:300])
one = cli("report", "--verbose", "--run", run_id, db).stdout
check(re.search(r"\bpid %d\b.*rt_peer errors" % pid, one), "report --verbose: the one process's pid and command line")
for bad in ("xyz", run_id.upper(), run_id + "0"):
    proc = cli("report", "--run", bad, db)
    check(proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1 and "16 hex digits" in proc.stderr
          and not proc.stdout, "report --run %s: not a run id, one line, exit 2 (%s)" % (bad, proc.stderr.strip()))
proc = cli("run", "--db", db, "--", "sh", "-c", "%s basic && %s basic" % (program("rt_peer"), program("rt_peer")))
equal(proc.returncode, 0, "run: a shell running two guarded programs")
check("processes: 2 guarded" in proc.stdout and "failures (grouped" not in proc.stdout,
      "run: reports the two processes of its tree, not the older run's failures (%s)" % proc.stdout[:300])
runs = query(db, "SELECT run_id, count(*) FROM processes GROUP BY 1 ORDER BY 2")
check(len(runs) == 2 and runs[1][1] == 2 and all(r[0] and re.fullmatch(r"[0-9a-f]{16}", r[0]) for r in runs),
      "run: each run's processes carry its run id (%s)" % runs)
check(("(the processes of run %s)" % runs[1][0]) in proc.stdout, "run: says which run it reports")
whole = cli("report", db).stdout
check("processes: 3 guarded" in whole and "failures (grouped" in whole, "report: the whole database still has everything")
equal(cli("report", "--run", runs[0][0], db).stdout.count("1. cudaDeviceEnablePeerAccess -> 217"), 1,
      "report --run: one run's processes")
for args, accepted in ((["--mode", "bogus"], "(accepted: observe, fallback, staged)"),
                       (["--pairs", "0-x"], "(accepted: all, or device pairs such as 0-1,2-3)"),
                       (["--record", "some"], "(accepted: all, summary)")):
    proc = cli("run", "--db", db, *args, "--", program("rt_peer"), "basic")
    check(proc.returncode == 2 and "EXPECT" not in proc.stdout,
          "run %s: refused before the program runs, exit 2" % " ".join(args))
    variable = "P2PGUARD_" + args[0][2:].upper()
    equal(proc.stderr, "p2pguard run: %s refused: %s=%s is %s %s\n"
          % (args[0], variable, args[1], "not a mode" if args[0] == "--mode" else "not understood", accepted),
          "run %s: one line says the value is refused and what is accepted, not what the guard would use" % " ".join(args))
proc = cli("run", "--help")
check(proc.returncode == 0 and all(w in proc.stdout for w in ("--mode", "--pairs", "--record", "--quiet", "run id",
                                                             "exit status")), "run --help: every option explained")

# ---- trace: filters and clocks ----------------------------------------------------------------
def trace(*args):
    proc = cli("trace", big, *args)
    equal(proc.returncode, 0, "trace %s: exit 0 (%s)" % (" ".join(args), proc.stderr.strip()))
    return json.loads(proc.stdout)


t = trace("--rank", "0-1,5")
names = sorted(e["args"]["name"].split(" pid")[0] for e in t["traceEvents"] if e["name"] == "process_name")
equal(names, ["rank 0", "rank 1", "rank 5"], "trace --rank: only those ranks")
slices = [e for e in t["traceEvents"] if e["ph"] == "X" and e["cat"] == "transfer"]
equal(len(slices), scalar(big, "SELECT count(*) FROM transfers t JOIN processes p ON p.id = t.process_id "
                               "WHERE p.rank IN (0, 1, 5)"), "trace --rank: their transfers")
equal(len([e for e in t["traceEvents"] if e["ph"] == "X" and e["cat"] == "nccl"]),
      scalar(big, "SELECT count(*) FROM nccl_ops o JOIN processes p ON p.id = o.process_id "
                  "WHERE p.rank IN (0, 1, 5) AND o.state = 'done'"), "trace --rank: their NCCL operations")
t = trace("--host", "gpu-node-002")
equal({e["args"]["name"].split("@")[1].split()[0] for e in t["traceEvents"] if e["name"] == "process_name"},
      {"gpu-node-002"}, "trace --host")
pid = scalar(big, "SELECT pid FROM processes WHERE rank = 3")
t = trace("--pid", str(pid))
equal(len([e for e in t["traceEvents"] if e["name"] == "process_name"]), 1, "trace --pid")
limited = trace("--limit", "100")["traceEvents"]
equal([len([e for e in limited if e["ph"] == "X" and e["cat"] == c]) for c in ("transfer", "nccl")], [100, 100],
      "trace --limit 100: the first 100 transfers and the first 100 NCCL operations")
first = scalar(big, "SELECT min(started_ns) FROM processes")
t = trace("--from", "+600", "--to", "+1200")
# (an NCCL slice drawn later than it started, when every lane was busy, keeps its start in args)
starts = [e["args"].get("started_ns", e["ts"] * 1000 + t["baseTimeNanoseconds"]) for e in t["traceEvents"]
          if e["ph"] == "X"]
check(starts and all(first + 600e9 - 1e3 <= s < first + 1200e9 + 1e3 for s in starts),
      "trace --from/--to: only what started in the window (%d slices)" % len(starts))
# Kineto's clock: microseconds from the start of the three-month interval of the Unix clock.
t = trace("--rank", "0")
base = t["baseTimeNanoseconds"]
equal(base, first // (7889238 * 10**9) * 7889238 * 10**9, "trace: baseTimeNanoseconds as Kineto computes it")
row = query(big, "SELECT t.id, t.started_ns FROM transfers t JOIN processes p ON p.id = t.process_id "
                 "WHERE p.rank = 0 LIMIT 1")[0]
s = next(e for e in t["traceEvents"] if e["ph"] == "X" and e["args"]["transfer_id"] == row[0])
equal(round(s["ts"] * 1000) + base, row[1], "trace: ts + baseTimeNanoseconds is the Unix time, to the ns")
t = trace("--rank", "0", "--clock", "unix")
s = next(e for e in t["traceEvents"] if e["ph"] == "X" and e["args"]["transfer_id"] == row[0])
check(t["baseTimeNanoseconds"] == 0 and abs(s["ts"] * 1000 - row[1]) < 1000, "trace --clock unix: Unix microseconds")
whole = trace()
equal(whole["otherData"]["calls_in_transfer_overflow"], folded, "trace: the overflow totals in otherData")
check(any("copy calls in transfer_overflow" in e["args"].get("labels", "") for e in whole["traceEvents"]
          if e["name"] == "process_labels"), "trace: and in the labels of the processes that overflowed")
instants = [e for e in whole["traceEvents"] if e["ph"] == "i"]
equal(sum(e["cat"] in ("failure", "probe") for e in instants), scalar(big, "SELECT count(*) FROM failures"),
      "trace: every failure an instant")
equal(sum(e["cat"] == "stall" for e in instants), 2, "trace: the stalls as instants")
tracks = [e["args"]["name"] for e in trace("--rank", "0")["traceEvents"] if e["name"] == "thread_name"]
check(any(re.search(r"GPU 0->1 \(GPU-[0-9a-f]{8} 00000000:18:00\.0 -> GPU-[0-9a-f]{8} 00000000:2A:00\.0\)", n)
          for n in tracks), "trace: tracks named by the physical GPUs (%s)" % tracks[:3])
for args in (["--rank", "x"], ["--from", "yesterday"], ["--limit", "0"], ["--clock", "gps"]):
    proc = cli("trace", big, *args)
    check(proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, "trace %s: one line, exit 2" % " ".join(args))

# ---- metrics: labels, and a server that no idle client holds up ------------------------------
text = cli("metrics", big).stdout
fams = {f.name: f for f in prometheus_client.parser.text_string_to_metric_families(text)}
sample = fams["p2pguard_peer_copies"].samples[0]
check({"Hostname", "rank", "src", "dst", "path", "gpu", "UUID", "pci_bus_id", "peer_gpu", "peer_UUID",
       "peer_pci_bus_id"} <= set(sample.labels), "metrics: rank and dcgm-exporter's GPU labels (%s)" % sample.labels)
spelt = sorted({l for f in fams.values() for s in f.samples for l in s.labels if l.lower().endswith("hostname")})
equal(spelt, ["Hostname", "peer_Hostname"], "metrics: the host label spelt as dcgm-exporter spells it, in every family")
# A join with dcgm-exporter's own series on (Hostname, UUID), evaluated by Prometheus's engine
# (promtool test rules): a GPU series of dcgm-exporter's per (host, GPU) of the job, labelled as it
# labels them, brings its modelName to our copy bytes; each host's sum is ours.
gpus = query(big, "SELECT DISTINCT p.hostname, d.uuid, d.pci_bus_id, d.physical_index FROM devices d "
                  "JOIN processes p ON p.id = d.process_id")
dcgm = ['DCGM_FI_DEV_SM_CLOCK{gpu="%d",UUID="%s",pci_bus_id="%s",device="nvidia%d",'
        'modelName="NVIDIA H100 80GB HBM3",Hostname="%s"}' % (i, u, b, i, h) for h, u, b, i in gpus]
ours = [l.rsplit(" ", 1) for l in text.splitlines() if l.startswith("p2pguard_peer_copy_bytes_total{")]
want = {}
for s in fams["p2pguard_peer_copy_bytes"].samples:
    if s.labels.get("UUID") and s.labels.get("Hostname"):
        want[s.labels["Hostname"]] = want.get(s.labels["Hostname"], 0) + s.value
check(len(want) == 3, "metrics: copy bytes on a known GPU on each of the 3 hosts (%s)" % sorted(want))
promtool = shutil.which("promtool")
check(promtool is not None, "promtool is installed (scripts/install-deps.sh: prometheus)")
if promtool:
    spec = {"rule_files": [], "tests": [{
        "interval": "1m",
        "input_series": [{"series": x, "values": "1980x2"} for x in dcgm] +
                        [{"series": x, "values": "%s+0x2" % v} for x, v in ours],
        "promql_expr_test": [{
            "expr": "sum by (Hostname, modelName) (p2pguard_peer_copy_bytes_total * on (Hostname, UUID) "
                    "group_left (modelName) (0 * DCGM_FI_DEV_SM_CLOCK + 1))",
            "eval_time": "1m",
            "exp_samples": [{"labels": '{Hostname="%s",modelName="NVIDIA H100 80GB HBM3"}' % h, "value": v}
                            for h, v in sorted(want.items())]}]}]}
    path = os.path.join(work, "join.yml")
    with open(path, "w") as f:
        json.dump(spec, f)  # JSON is YAML
    pt = subprocess.run([promtool, "test", "rules", path], capture_output=True, text=True)
    check(pt.returncode == 0 and want,
          "metrics: a PromQL join on (Hostname, UUID) with dcgm-exporter's series finds every host's copies (%s)"
          % (pt.stdout + pt.stderr).strip()[-600:])
total = lambda name: sum(s.value for s in fams[name].samples)
equal(total("p2pguard_peer_copies_folded"), folded, "metrics: the overflow totals")
equal(total("p2pguard_peer_copies_untimed"), rep["summary"]["transfer_calls"]["untimed"], "metrics: untimed copies")
equal(total("p2pguard_peer_copies_timed"),
      rep["summary"]["transfer_calls"]["gpu_timed"] + rep["summary"]["transfer_calls"]["synchronous"],
      "metrics: timed copies")
check(abs(total("p2pguard_peer_copy_seconds") - scalar(big, "SELECT sum(gpu_ns) FROM transfers WHERE status = 0 "
                                                          "AND gpu_ns > 0") / 1e9) < 1e-3,
      "metrics: copy seconds of the timed copies only")

def metrics_refused(*args):
    """The command's exit status and stderr, or None when it went on serving (past 10 s)."""
    try:
        proc = subprocess.run([CLI, "metrics", big] + list(args), capture_output=True, text=True, timeout=10,
                              env=environment(preload=False))
        return proc.returncode, proc.stderr
    except subprocess.TimeoutExpired:
        return None, "still serving"


# A port is decimal digits: strtol alone would take " 80", "+80", "-0".
for port in ("99999", "-1", "http", "host:", " 80", "+80", "-0", "127.0.0.1:+9464", "0x50", "123456"):
    rc, err = metrics_refused("--listen", port)
    check(rc == 2 and len(err.strip().splitlines()) == 1 and "decimal digits from 0 to 65535" in err,
          "metrics --listen %r: refused, one line, exit 2 (%s)" % (port, err.strip()))
# A server writes no file: -o beside --listen is a usage error, not silently dropped.
prom = os.path.join(work, "both.prom")
rc, err = metrics_refused("-o", prom, "--listen", "127.0.0.1:0")
check(rc == 2 and len(err.strip().splitlines()) == 1 and "not both" in err and not os.path.exists(prom),
      "metrics -o FILE --listen: a usage error, one line, exit 2, no file (%s)" % err.strip())
server = subprocess.Popen([CLI, "metrics", big, "--listen", "127.0.0.1:0"], stderr=subprocess.PIPE, text=True,
                          env=environment(preload=False))
try:
    m = re.search(r"http://127\.0\.0\.1:(\d+)/metrics", server.stderr.readline())
    port = int(m.group(1))
    idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(3)]
    half = socket.create_connection(("127.0.0.1", port))
    half.sendall(b"GET /metrics HTTP/1.1\r\n")  # a request never finished
    t0 = time.monotonic()
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as r:
        body = r.read().decode()
    took = time.monotonic() - t0
    check(took < 2 and "p2pguard_peer_copies_total" in body,
          "metrics --listen: a scrape answered in %.2f s beside three idle and one half-sent connections" % took)
    req = urllib.request.Request("http://127.0.0.1:%d/metrics" % port, data=b"x", method="POST")
    try:
        urllib.request.urlopen(req, timeout=10)
        check(False, "metrics --listen: POST refused")
    except urllib.error.HTTPError as e:
        equal((e.code, e.headers.get("Allow")), (405, "GET, HEAD"), "metrics --listen: POST gets 405 with Allow")
    try:
        urllib.request.urlopen("http://127.0.0.1:%d/other" % port, timeout=10)
    except urllib.error.HTTPError as e:
        equal(e.code, 404, "metrics --listen: another path gets 404")
    # The idle connections are closed by the server after its read deadline (5 s).
    idle[0].settimeout(10)
    t0 = time.monotonic()
    check(idle[0].recv(1) == b"" and 3 < time.monotonic() - t0 + 0.5 < 9, "metrics --listen: an idle client is let go after its deadline")
    for s in idle + [half]:
        s.close()
finally:
    server.terminate()
    server.wait(timeout=10)
equal(server.returncode, 0, "metrics --listen: SIGTERM ends it cleanly")
done()
