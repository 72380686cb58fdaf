"""Cross-process mappings per device pair in every output, against real databases: one written by
the guard on the simulated CUDA (mapsim.mapping_job: legacy IPC and VMM between processes of their
own ranks, one importer numbering the GPUs otherwise through CUDA_VISIBLE_DEVICES, mappings never
closed, a failed open) and a cluster job's (scripts/make-bigdb.py: hosts of 8 GPUs, NCCL's cuMem
imports per peer and channel, PyTorch's IPC opens). The view mapping_pairs against the same figures
computed here from the raw rows, report (text and JSON), trace (the trace-event format's schema,
slices and their nesting, instants, filters) and metrics (promtool, the Prometheus client's parser,
values against the database)."""
import os
import sys

from harness import *

use_system_python("jsonschema", "prometheus_client.parser")
import jsonschema  # noqa: E402
import prometheus_client.parser  # noqa: E402

from mapsim import mapping_job  # noqa: E402

import json  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402

db = tempdb()
mapping_job(db)


def expected_pairs(db):
    """mapping_pairs computed here from peer_mappings, processes and devices."""
    dev = {(p, o): (i, u, b) for p, o, i, u, b in
           query(db, "SELECT process_id, ordinal, physical_index, uuid, pci_bus_id FROM devices")}
    pairs = {}
    exporters = {}
    for pid_, host, rank, pid, owner, accessor, event, status, flags, nbytes, ended, handle in query(
            db, "SELECT m.process_id, p.hostname, p.rank, p.pid, m.owner_device, m.accessor_device, m.event, "
                "m.status, m.flags, m.bytes, m.ended_ns, m.handle_type FROM peer_mappings m JOIN processes p "
                "ON p.id = m.process_id"):
        def gpu(o):
            i, u, b = dev.get((pid_, o), (None, None, None))
            return (None, None) if o is None else (i if i is not None else o, u)
        if event == "export" and status == 0 and owner is not None:
            exporters.setdefault((host,) + gpu(owner), set()).add(rank)
        opened = status == 0 and accessor is not None and (event == "import" or (event == "access" and flags != 0))
        if not opened and status == 0:
            continue
        key = (host,) + gpu(owner) + gpu(accessor)
        e = pairs.setdefault(key, dict(opened=0, closed=0, live=0, bytes=0, failed=0, ranks=set(), handles=set()))
        e["ranks"].add(rank)
        e["handles"].add(handle or "none")
        if opened:
            e["opened"] += 1
            e["closed"] += ended is not None
            e["live"] += ended is None
            e["bytes"] += nbytes
        else:
            e["failed"] += 1
    for key, e in pairs.items():
        e["exported_by"] = exporters.get(key[:3], set())
    return pairs


def view_pairs(db):
    got = {}
    for r in query(db, "SELECT host, owner_gpu, owner_uuid, accessor_gpu, accessor_uuid, opened, closed, live, bytes, "
                       "failed, ranks, handle_types, exported_by_ranks FROM mapping_pairs"):
        got[r[:5]] = dict(opened=r[5], closed=r[6], live=r[7], bytes=r[8], failed=r[9],
                          ranks={int(x) for x in (r[10] or "").split(",") if x},
                          handles=set((r[11] or "").split(",")),
                          exported_by={int(x) for x in (r[12] or "").split(",") if x})
    return got


def json_pairs(rep):
    got = {}
    for p in rep["mappings"]["pairs"]:
        key = (p["host"], p["owner_gpu"], p["owner_uuid"], p["accessor_gpu"], p["accessor_uuid"])
        got[key] = dict(opened=p["opened"], closed=p["closed"], live=p["live"], bytes=p["bytes"], failed=p["failed"],
                        ranks=set(p["ranks"]), handles=set(p["handle_types"]),
                        exported_by=set(p["exported_by_ranks"]))
    return got


# --- the view, against the rows ------------------------------------------------------------------
want = expected_pairs(db)
view = view_pairs(db)
for e in want.values():
    e["ranks"].discard(None)
equal(view, want, "mapping_pairs: each device pair's mappings, closes, live ones, bytes, failures and ranks as "
                  "the rows give them")
uuid = dict(query(db, "SELECT physical_index, uuid FROM devices WHERE process_id = 1"))
host = scalar(db, "SELECT hostname FROM processes LIMIT 1")
one = view.get((host, 0, uuid[0], 1, uuid[1]))
check(one and (one["opened"], one["closed"], one["live"], one["ranks"], one["exported_by"], one["handles"]) ==
      (3, 3, 0, {1, 3}, {0, 2}, {"ipc", "posix_fd"}),
      "GPU 0 -> GPU 1: rank 1's two IPC opens and rank 3's grant (its device 0, CUDA_VISIBLE_DEVICES=1,0) are one "
      "pair, all closed; exported by ranks 0 and 2 (%s)" % one)
back = view.get((host, 1, uuid[1], 0, uuid[0]))
check(back and (back["opened"], back["live"], back["ranks"]) == (2, 2, {5, 7}),
      "GPU 1 -> GPU 0: the two mappings never closed are live (%s)" % back)
failed = [k for k, e in view.items() if e["failed"]]
equal([(k[1], k[3], view[k]["failed"], view[k]["ranks"]) for k in failed], [(None, 1, 1, {8})],
      "the failed open: owner unknown, on rank 8's GPU 1")

# --- report --json ---------------------------------------------------------------------------------
proc = cli("report", "--json", db)
equal(proc.returncode, 0, "report --json: exit 0 (%s)" % proc.stderr.strip())
rep = json.loads(proc.stdout)
equal(json_pairs(rep), view, "report --json: mappings.pairs are the view's rows")
p01 = [p for p in rep["mappings"]["pairs"] if p["owner_gpu"] == 0 and p["accessor_gpu"] == 1][0]
check(p01["owner_gpu_is_nvidia_smi_index"] and p01["owner_pci_bus_id"] and p01["avg_lived_ms"] > 0 and
      len(p01["pids"]) == 2, "report --json: a pair's GPUs with NVML's index and PCI bus id, its pids, its mean life")
check("owner -> accessor" in rep["mappings"]["pair_basis"], "report --json: what a pair is, said once")

# --- report (text) ---------------------------------------------------------------------------------
text = cli("report", db).stdout
lines = text.splitlines()
at = next((k for k, l in enumerate(lines) if l.startswith("cross-process mappings: ")), 0)
head = next((k for k, l in enumerate(lines) if k > at and l.startswith("  pair ")), -1)
check(head > 0 and "by" in lines[head] and "exported by" in lines[head] and "live" in lines[head],
      "report: the pair table's header")
table = {l.split()[0]: l.split() for l in lines[head + 1:head + 4]}
check(table.get("0->1", [])[1:9] == ["ranks", "1,3", "ranks", "0,2", "3", "3", "0", "4.0"],
      "report: 0->1 mapped by ranks 1,3, exported by 0,2, 3 opened, 3 closed, 0 live, 4.0 MiB (%s)" % table.get("0->1"))
check(table.get("1->0", [])[5:8] == ["2", "0", "2"], "report: 1->0, 2 opened, 2 live (%s)" % table.get("1->0"))
check(table.get("?->1", [])[1:3] == ["rank", "8"] and table["?->1"][-1] == "1",
      "report: the failed open's pair, owner unknown, 1 failed (%s)" % table.get("?->1"))
check(re.search(r"5 opened \(IPC opens, cuMemSetAccess grants\), 3 closed, 2 live at the end", " ".join(text.split())),
      "report: the pairs' totals")
# The failed open's failure: its owner is not known (-1 in the row), which the text says as "?".
equal(query(db, "SELECT device, peer_device FROM failures WHERE api = 'cudaIpcOpenMemHandle'"), [(1, -1)],
      "the failed open's failure row: device 1, peer -1 (not known)")
block = text[text.find("cudaIpcOpenMemHandle -> 1"):]
on = next((l.split(None, 1)[1] for l in block.splitlines() if l.strip().startswith("on:")), "")
check(on.startswith("pair 1->? (1)") and "->-1" not in text, "report: the unknown owner is '?' in the failure's pair (%s)" % on)
group = next(g for g in rep["failures"] if g["api"] == "cudaIpcOpenMemHandle")
equal((group["pairs"], group["peer_device"], group["pairs_text"]), ([[1, -1]], -1, "1->?"),
      "report --json: the unknown owner stays -1 in the numbers")

# --- trace -------------------------------------------------------------------------------------------
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
base = doc["baseTimeNanoseconds"]
events = doc["traceEvents"]
names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
slices = [e for e in events if e["ph"] == "X" and e["cat"] == "mapping"]
groups = {}
for i, p, mid, start, ended, ended_by, api, owner, accessor in query(
        db, "SELECT id, process_id, mapping_id, started_ns, ended_ns, ended_by, api, owner_device, accessor_device "
            "FROM peer_mappings WHERE status = 0 AND event IN ('import', 'map', 'access') ORDER BY started_ns, id"):
    g = groups.setdefault((p, mid), dict(id=i, start=start, ended=ended, ended_by=ended_by, api=api, owner=owner,
                                         accessor=accessor))
    g["accessor"] = g["accessor"] if g["accessor"] is not None else accessor
equal(len(slices), len(groups), "trace: a slice per mapping (the rows of one mapping id are one)")
ok, live = True, 0
# a process's last moment in the trace: its rows' and its copies' ends
last = {p: t for p, t in query(db, "SELECT process_id, max(t) FROM (SELECT process_id, started_ns + host_ns AS t FROM "
                                   "peer_mappings UNION ALL SELECT process_id, started_ns + CASE WHEN gpu_ns > 0 THEN "
                                   "gpu_ns ELSE host_ns END FROM transfers) GROUP BY 1")}
for e in slices:
    g = groups[(e["pid"], e["args"]["mapping_id"])]
    ok &= abs(e["ts"] - (g["start"] - base) / 1000) < 0.002 and e["args"]["peer_mappings_id"] == g["id"]
    ok &= e["name"].startswith(g["api"] + " GPU ") and e["args"].get("owner_device") == g["owner"]
    ok &= e["args"].get("accessor_device") == g["accessor"]
    if g["ended"] is not None:
        ok &= abs(e["ts"] + e["dur"] - (g["ended"] - base) / 1000) < 0.002 and e["args"]["ended_by"] == g["ended_by"]
        ok &= "ended" not in e["args"] and not e["name"].endswith("(live)")
    else:
        live += 1
        ok &= e["name"].endswith("(live)") and "ended" in e["args"]
        ok &= abs(e["ts"] + e["dur"] - (last[e["pid"]] - base) / 1000) < 0.002
check(ok, "trace: each slice from the mapping's first call to the call that ended it, its devices and calls in args")
equal(live, scalar(db, "SELECT count(DISTINCT process_id || ':' || mapping_id) FROM peer_mappings WHERE status = 0 "
                       "AND event IN ('import', 'map', 'access') AND ended_ns IS NULL"),
      "trace: the mappings never closed run to their process's last moment, named live")
check(all(names[(e["pid"], e["tid"])].startswith("mappings") for e in slices), "trace: on the processes' mappings tracks")
spans = {}
for e in slices:
    spans.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
ok, nested = True, 0
for v in spans.values():
    v.sort(key=lambda s: (s[0], -s[1]))
    stack = []
    for s, t in v:
        while stack and stack[-1][1] <= s + 1e-3:
            stack.pop()
        if stack:
            ok &= s > stack[-1][0] and t < stack[-1][1]
            nested += 1
        stack.append((s, t))
check(ok and nested >= 1, "trace: a track's slices follow or nest strictly (%d nested: a map inside its import)" % nested)
instants = [e for e in events if e["ph"] == "i" and e["cat"] in ("mapping", "mapping_failure")]
equal(sorted((e["cat"], e["args"]["api"], e["args"]["status"]) for e in instants),
      sorted(("mapping" if s == 0 else "mapping_failure", a, s) for a, s in
             query(db, "SELECT api, status FROM peer_mappings WHERE status != 0 OR event = 'export'")),
      "trace: an instant per export and per failed call, the row in args")
owner = {}
equal([(e["tid"], e["pid"]) for e in events if owner.setdefault(e["tid"], e["pid"]) != e["pid"]], [],
      "trace: no thread id under two processes")
equal(doc["otherData"].get("mappings_without_track"), 0, "trace: every mapping on a track")
rank5 = [e for e in trace("--rank", "5")["traceEvents"] if e.get("cat", "").startswith("mapping")]
pid5 = scalar(db, "SELECT id FROM processes WHERE rank = 5")
check(rank5 and all(e["pid"] == pid5 for e in rank5), "trace --rank 5: rank 5's mappings only (%d)" % len(rank5))
all_events = [e for e in events if e.get("cat", "").startswith("mapping")]
firsts = sorted(e["ts"] for e in all_events)[:3]
limited = [e for e in trace("--limit", "3")["traceEvents"] if e.get("cat", "").startswith("mapping")]
equal(sorted(e["ts"] for e in limited), firsts, "trace --limit 3: the first 3 mapping events by start")
mid = sorted(s for s, in query(db, "SELECT started_ns FROM peer_mappings"))[12]
window = [e for e in trace("--from", "%.9f" % (mid / 1e9), "--clock", "unix")["traceEvents"]
          if e.get("cat", "").startswith("mapping")]
check(window and all(e["ts"] * 1000 >= mid - 1000 for e in window) and len(window) < len(all_events),
      "trace --from: only what started then (%d of %d)" % (len(window), len(all_events)))

# --- metrics -----------------------------------------------------------------------------------------
proc = cli("metrics", db)
equal(proc.returncode, 0, "metrics: exit 0")
promtool = shutil.which("promtool")
check(promtool is not None, "promtool is installed (scripts/install-deps.sh: prometheus)")
if promtool:
    pt = subprocess.run([promtool, "check", "metrics"], input=proc.stdout, capture_output=True, text=True)
    equal((pt.returncode, pt.stdout + pt.stderr), (0, ""), "metrics: promtool check metrics finds nothing")
fams = {f.name: f for f in prometheus_client.parser.text_string_to_metric_families(proc.stdout)}
for name, kind in (("p2pguard_peer_mappings", "counter"), ("p2pguard_peer_mappings_closed", "counter"),
                   ("p2pguard_peer_mappings_live", "gauge"), ("p2pguard_peer_mapping_bytes", "counter"),
                   ("p2pguard_peer_mapping_failures", "counter"), ("p2pguard_peer_mapping_exports", "counter"),
                   ("p2pguard_own_device_mapping_calls", "counter"), ("p2pguard_own_device_mapping_bytes", "counter")):
    check(name in fams and fams[name].type == kind, "metrics: %s is a %s" % (name, kind))
total = lambda name: sum(s.value for s in fams[name].samples)
equal((total("p2pguard_peer_mappings"), total("p2pguard_peer_mappings_closed"), total("p2pguard_peer_mappings_live"),
       total("p2pguard_peer_mapping_bytes"), total("p2pguard_peer_mapping_failures")),
      tuple(sum(e[k] for e in view.values()) for k in ("opened", "closed", "live", "bytes", "failed")),
      "metrics: mappings, closes, live ones, bytes and failed calls as mapping_pairs counts them")
pair = [s for s in fams["p2pguard_peer_mappings"].samples if s.labels["peer_UUID"] == uuid[0] and s.labels["UUID"] == uuid[1]]
check(sorted((s.labels["rank"], s.labels["owner"], s.labels["accessor"], s.labels["handle_type"], s.labels["gpu"],
              s.labels["peer_gpu"], s.value) for s in pair) ==
      [("1", "0", "1", "ipc", "1", "0", 2), ("3", "1", "0", "posix_fd", "1", "0", 1)],
      "metrics: GPU 0 -> GPU 1 by rank, each with its own ordinals, the accessor's GPU as gpu and UUID, the owner's "
      "as peer_gpu and peer_UUID (%s)" % [s.labels for s in pair])
equal(total("p2pguard_peer_mapping_exports"),
      scalar(db, "SELECT count(*) FROM peer_mappings WHERE event = 'export' AND status = 0"), "metrics: every export")
equal(total("p2pguard_own_device_mapping_calls"), scalar(db, "SELECT sum(calls) FROM mapping_counts"),
      "metrics: a process's own-device calls, counted")

# --- a cluster job's database: hosts, NCCL's cuMem imports, PyTorch's IPC ------------------------------
big = tempdb("job.db")
subprocess.run([sys.executable, os.path.join(SOURCE, "scripts/make-bigdb.py"), big, "--rows", "5000",
                "--processes", "24"], check=True, capture_output=True)
view = view_pairs(big)
want = expected_pairs(big)
for e in want.values():
    e["ranks"].discard(None)
equal(view, want, "cluster job: mapping_pairs as the rows give them (%d pairs)" % len(view))
rep = json.loads(cli("report", "--json", big).stdout)
equal(json_pairs(rep), view, "cluster job: report --json's pairs are the view's")
check(len({k[0] for k in view}) == 3 and sum(e["live"] for e in view.values()) > 0 and
      sum(e["failed"] for e in view.values()) == 2, "cluster job: pairs on 3 hosts, live mappings, 2 failed calls")
text = cli("report", big).stdout
check(re.search(r"^  gpu-node-00\d:\d->\d ", text, re.M) and "GPUs as host:index" in text,
      "cluster job: report names each pair host:owner->accessor")
proc = cli("metrics", big)
if promtool:
    pt = subprocess.run([promtool, "check", "metrics"], input=proc.stdout, capture_output=True, text=True)
    equal((pt.returncode, pt.stdout + pt.stderr), (0, ""), "cluster job: promtool check metrics finds nothing")
done()
