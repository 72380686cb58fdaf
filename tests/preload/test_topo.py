"""p2pguard topo against the simulated GPUs and a fake NVML: the links and affinities it reads, the
matrices it prints, its exit status, its progress, and what it records (a failure row per lying
direction, the measured bandwidth per path)."""
import json
import os
import pty
import re
import select
import signal
import time
from harness import *

FAKE_NVML = os.environ.get("P2PG_FAKE_NVML_DIR", os.path.join(BUILD, "tests/diagnosis/fakenvml"))

BYTES = 1048576


def topo(db, *args, **extra):
    return subprocess.run([CLI, "topo", "--db", db, "--bytes", str(BYTES)] + list(args), capture_output=True,
                          text=True, env=environment(preload=False, **extra), timeout=120)


def matrix(stdout):
    """{(src, dst): cell} from the 'P2P matrix' table."""
    cells = {}
    lines = stdout.splitlines()
    start = [n for n, l in enumerate(lines) if l.startswith("P2P matrix")]
    if not start:
        return cells
    for line in lines[start[0] + 2:]:
        m = re.match(r"GPU(\d+)\s+(.*)$", line)
        if not m:
            break
        for dst, cell in enumerate(m.group(2).split()):
            if cell != "X":
                cells[(int(m.group(1)), dst)] = cell
    return cells


def bandwidth(db):
    return {(r[0], r[1], r[2]): r[3:] for r in query(db, "SELECT src_device, dst_device, path, count, bytes, p50_gbps "
                                                         "FROM peer_bandwidth")}


# ---- every pair does P2P, correctly ----
# 'ok' against 'slow' is a timing judgement (best of three 1 MiB copies, P2P against staging, both
# plain memmove here): on two busy cores a preempted P2P copy can lose. Only that verdict is retried.
for attempt in range(3):
    db = tempdb()
    proc = topo(db, SIMCUDA_P2P="all")
    check(" WRONG " not in proc.stdout and " ERR " not in proc.stdout,
          "P2P all, attempt %d: no pair judged lying or broken" % (attempt + 1))
    if " SLOW " not in proc.stdout:
        break
    print("# attempt %d judged a pair slow (timing noise): %s" % (attempt + 1, matrix(proc.stdout)))
equal(proc.returncode, 0, "P2P all: exit 0")
equal(matrix(proc.stdout), {(0, 1): "OK", (1, 0): "OK"}, "P2P all: the matrix says OK")
check("recorded in " + db in proc.stdout, "P2P all: says where it recorded")
equal(scalar(db, "SELECT count(*) FROM failures"), 0, "P2P all: no failure rows")
bw = bandwidth(db)
equal(sorted(bw), [(0, 1, "p2p"), (0, 1, "staged"), (1, 0, "p2p"), (1, 0, "staged")],
      "P2P all: peer_bandwidth has both paths of both directions")
check(all(v[0] == 1 and v[1] == BYTES and v[2] > 0 for v in bw.values()),
      "P2P all: one probe copy of %d bytes per path, positive bandwidth (%s)" % (BYTES, bw))
equal(query(db, "SELECT mode FROM processes"), [("topo",)], "P2P all: the topo run is a process row of its own")
equal({r[0] for r in query(db, "SELECT DISTINCT api FROM transfers")}, {"p2pguard_probe"},
      "P2P all: the probe's rows are marked as such")
equal(scalar(db, "SELECT count(*) FROM rules"), 0, "P2P all: no finding, no rule stored")

# ---- P2P between 0 and 1 delivers wrong data ----
db = tempdb()
proc = topo(db, SIMCUDA_P2P_CORRUPT="0-1")
equal(proc.returncode, 1, "P2P corrupt: exit 1")
equal(matrix(proc.stdout), {(0, 1): "WRONG", (1, 0): "WRONG"}, "P2P corrupt: the matrix says WRONG")
check("2 pairs where P2P is claimed but lies" in proc.stdout, "P2P corrupt: and says what to do about it")
check("0->1 WRONG, 1->0 WRONG" in " ".join(proc.stdout.split()) and
      "P2PGUARD_MODE=staged P2PGUARD_PAIRS=0-1\n" in proc.stdout,
      "P2P corrupt: the hint names the bad pairs (%s)" % proc.stdout[proc.stdout.find("pairs where"):].strip())
rows = query(db, "SELECT device, peer_device, api, rule_id, status FROM failures ORDER BY device")
equal(rows, [(0, 1, "p2pguard_probe", "p2p/copy-returns-wrong-data", 0),
             (1, 0, "p2pguard_probe", "p2p/copy-returns-wrong-data", 0)],
      "P2P corrupt: a failure row per direction, rule p2p/copy-returns-wrong-data")
equal(query(db, "SELECT id FROM rules"), [("p2p/copy-returns-wrong-data",)],
      "P2P corrupt: the database holds the entry its findings name, as a guarded program's does")
check(all("WRONG DATA" in (a or "") for (a,) in query(db, "SELECT args FROM failures")),
      "P2P corrupt: each row's args say WRONG DATA")
bw = bandwidth(db)
equal(sorted(bw), [(0, 1, "p2p"), (0, 1, "staged"), (1, 0, "p2p"), (1, 0, "staged")],
      "P2P corrupt: peer_bandwidth rows for paths p2p and staged")
report = subprocess.run([CLI, "report", db], capture_output=True, text=True, env=environment(preload=False))
check("p2p/copy-returns-wrong-data" in report.stdout, "P2P corrupt: p2pguard report shows the finding")

# ---- no P2P at all ----
db = tempdb()
proc = topo(db, SIMCUDA_P2P="none")
equal(proc.returncode, 0, "P2P none: exit 0 (nothing claims P2P, nothing lies)")
equal(matrix(proc.stdout), {(0, 1): "NO", (1, 0): "NO"}, "P2P none: the matrix says NO")
equal(scalar(db, "SELECT count(*) FROM failures"), 0, "P2P none: no failure rows")
equal(sorted(bandwidth(db)), [(0, 1, "staged"), (1, 0, "staged")], "P2P none: only the staged path measured")

# ---- four GPUs, P2P within 0-1 and 2-3 only, one of them lying ----
db = tempdb()
proc = topo(db, SIMCUDA_DEVICES=4, SIMCUDA_P2P="0-1,2-3", SIMCUDA_P2P_CORRUPT="2-3")
equal(proc.returncode, 1, "four GPUs: exit 1 (2-3 lies)")
cells = matrix(proc.stdout)
equal(len(cells), 12, "four GPUs: twelve ordered pairs")
equal({k: v for k, v in cells.items() if v != "NO"},
      {(0, 1): cells.get((0, 1)), (1, 0): cells.get((1, 0)), (2, 3): "WRONG", (3, 2): "WRONG"},
      "four GPUs: only 0-1 and 2-3 can access, 2-3 lies")
check(all(cells.get(k) in ("OK", "SLOW") for k in ((0, 1), (1, 0))),
      "four GPUs: 0-1 is fine (%s, %s)" % (cells.get((0, 1)), cells.get((1, 0))))
check("P2PGUARD_PAIRS=2-3\n" in proc.stdout, "four GPUs: the hint names 2-3 only")
equal(sorted(r[:2] for r in query(db, "SELECT device, peer_device FROM failures WHERE rule_id = 'p2p/copy-returns-wrong-data'")),
      [(2, 3), (3, 2)], "four GPUs: failure rows for 2->3 and 3->2 only")

# ---- P2P between 0 and 1 never completes: the matrix goes on, the pair is marked HANG ----
db = tempdb()
t0 = time.monotonic()
proc = topo(db, SIMCUDA_DEVICES=3, SIMCUDA_P2P_HANG="0-1", P2PGUARD_PROBE_TIMEOUT_MS=300)
took = time.monotonic() - t0
equal(proc.returncode, 1, "P2P hang: exit 1 (%s)" % proc.stderr.strip()[-300:])
# The probe's own deadline ends a hung pair, not topo's kill of a silent child (15 s later): the
# args below say which, whatever the machine's speed; the wall clock only bounds the whole.
check(took < 90, "P2P hang: the whole matrix in bounded time (%.1f s, deadline 0.3 s a copy)" % took)
cells = matrix(proc.stdout)
# A healthy pair may be judged SLOW by timing noise on two busy cores (see above): OK or SLOW.
equal({k: v if v != "SLOW" else "OK" for k, v in cells.items()},
      {(0, 1): "HANG", (1, 0): "HANG", (0, 2): "OK", (2, 0): "OK", (1, 2): "OK", (2, 1): "OK"},
      "P2P hang: 0-1 marked HANG, every other pair measured (%s)" % cells)
equal(proc.stderr, "", "P2P hang: nothing on stderr when it is not a terminal (no progress lines)")
equal(query(db, "SELECT device, peer_device, rule_id FROM failures WHERE rule_id NOT LIKE '%slower%' "
                "ORDER BY device"),
      [(0, 1, "p2p/copy-never-completes"), (1, 0, "p2p/copy-never-completes")],
      "P2P hang: a failure row per direction, rule p2p/copy-never-completes")
check(all("unfinished after" in a for (a,) in query(db, "SELECT args FROM failures WHERE rule_id = "
                                                        "'p2p/copy-never-completes'")),
      "P2P hang: each row's args say the copy did not finish")
check(not any("did not answer" in a for (a,) in query(db, "SELECT args FROM failures")),
      "P2P hang: the probe's deadline ended each hung pair (no probing process had to be killed)")
equal(scalar(db, "SELECT count(*) FROM peer_bandwidth WHERE path = 'p2p' AND ((src_device = 0 AND dst_device = 1) "
                 "OR (src_device = 1 AND dst_device = 0))"), 0, "P2P hang: no P2P bandwidth read from a hung copy")

# ---- a probing process that never answers (stuck in a driver call): killed, the matrix goes on ----
# Copies slowed to ~0.1 s per MiB keep the first pair's child alive long enough to be stopped; a
# stopped process answers nothing, as one stuck in the driver would. topo waits the probe's
# deadline plus 15 s for it, kills it, and probes the next pair.
db = tempdb()
env = environment(preload=False, SIMCUDA_COPY_NS_PER_BYTE=100, P2PGUARD_PROBE_TIMEOUT_MS=3000)
t0 = time.monotonic()
# stderr is a terminal here (a pty): progress is drawn there, one line redrawn per pair.
master, slave = pty.openpty()
topo_proc = subprocess.Popen([CLI, "topo", "--json", "--db", db, "--bytes", str(BYTES)], env=env,
                             stdout=subprocess.PIPE, stderr=slave, text=True)
os.close(slave)
seen = b""
deadline = time.monotonic() + 30
while b"probing 0->1 (1/2)..." not in seen and time.monotonic() < deadline:
    if select.select([master], [], [], 0.1)[0]:
        seen += os.read(master, 4096)
stopped = []
deadline = time.monotonic() + 5
while not stopped and time.monotonic() < deadline:
    for task in os.listdir("/proc/%d/task" % topo_proc.pid):
        try:
            with open("/proc/%d/task/%s/children" % (topo_proc.pid, task)) as f:
                stopped += [int(pid) for pid in f.read().split()]
        except OSError:
            pass
    if not stopped:
        time.sleep(0.01)
for pid in stopped:
    os.kill(pid, signal.SIGSTOP)
out, _ = topo_proc.communicate(timeout=100)
took = time.monotonic() - t0
while True:
    try:
        chunk = os.read(master, 4096) if select.select([master], [], [], 0.2)[0] else b""
    except OSError:
        chunk = b""
    if not chunk:
        break
    seen += chunk
os.close(master)
check(seen.startswith(b"\r\x1b[Kprobing 0->1 (1/2)..."), "stuck child: progress redrawn on the terminal (%r)" % seen[:40])
check(b"\r\x1b[Kprobing 1->0 (2/2)..." in seen and seen.endswith(b"\r\x1b[K") and b"\n" not in seen,
      "stuck child: one line, redrawn per pair and cleared at the end (%r)" % seen)
doc = json.loads(out)
pairs = {(p["src"], p["dst"]): p for p in doc["pairs"]}
equal((pairs[(0, 1)]["verdict"], pairs[(0, 1)]["timed_out"]), ("hang", True),
      "stuck child: 0->1 is a hang, its process timed out")
check(pairs[(1, 0)]["verdict"] in ("ok", "slow") and not pairs[(1, 0)]["timed_out"],
      "stuck child: 1->0 was still probed (%s)" % pairs[(1, 0)])
check(17 <= took < 60, "stuck child: given up after the deadline plus 15 s (%.1f s)" % took)
check(all(not os.path.exists("/proc/%d" % pid) or open("/proc/%d/stat" % pid).read().split()[2] == "Z"
          for pid in stopped), "stuck child: killed")
check("(the probing process did not answer and was killed)" in
      scalar(db, "SELECT args FROM failures WHERE device = 0 AND peer_device = 1"),
      "stuck child: the failure row says so")

# ---- --json ----
db = tempdb()
proc = topo(db, "--json", SIMCUDA_DEVICES=3, SIMCUDA_P2P_HANG="0-1", P2PGUARD_PROBE_TIMEOUT_MS=300)
doc = json.loads(proc.stdout)
equal([d["index"] for d in doc["devices"]], [0, 1, 2], "--json: the devices")
pairs = {(p["src"], p["dst"]): p for p in doc["pairs"]}
equal(len(pairs), 6, "--json: every ordered pair")
equal((pairs[(0, 1)]["verdict"], pairs[(0, 1)]["can_access"], pairs[(0, 1)]["bandwidth_gbps"]["p2p"]),
      ("hang", True, None), "--json: 0->1 hangs, no P2P bandwidth")
check(pairs[(0, 2)]["verdict"] in ("ok", "slow") and pairs[(0, 2)]["bandwidth_gbps"]["p2p"] > 0 and
      pairs[(0, 2)]["bandwidth_gbps"]["staged"] > 0, "--json: 0->2 measured on both paths (%s)" % pairs[(0, 2)])
bad = {tuple(sorted(k)) for k, p in pairs.items() if p["can_access"] and p["verdict"] != "ok"}
staged = {tuple(int(x) for x in w.split("-")) for w in doc["stage_pairs"].split(",") if w}
check((0, 1) in staged and staged == bad,
      "--json: the pairs to stage, as P2PGUARD_PAIRS takes them (%r; verdicts not ok: %s)" % (doc["stage_pairs"], sorted(bad)))

# ---- eight GPUs fit 80 columns ----
db = tempdb()
proc = topo(db, SIMCUDA_DEVICES=8, P2PGUARD_PROBE_TIMEOUT_MS=2000)
equal(len(matrix(proc.stdout)), 56, "8 GPUs: 56 ordered pairs in the matrix")
wide = [l for l in proc.stdout.splitlines() if len(l) > 80]
equal(wide, [], "8 GPUs: every line fits 80 columns")

# ---- links and affinities from NVML (the fake one): as nvidia-smi topo -m names them ----
db = tempdb()
nvml_env = dict(SIMCUDA_DEVICES=4, SIMCUDA_P2P="0-1,2-3", FAKE_NVML_DEVICES=4, FAKE_NVML_NVLINK="0-1:4,2-3:2",
                FAKE_NVML_LEVEL="0-2:50,1-3:50,*:20",
                LD_LIBRARY_PATH=FAKE_NVML + ":" + environment(preload=False)["LD_LIBRARY_PATH"])
proc = topo(db, "--sweep", **nvml_env)
lines = proc.stdout.splitlines()
at = lines.index("Links (as nvidia-smi topo -m)") if "Links (as nvidia-smi topo -m)" in lines else -1
links = {}
for line in lines[at + 2:at + 6] if at >= 0 else []:
    m = re.match(r"GPU(\d)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)$", line)
    if m:
        links[int(m.group(1))] = m.groups()[1:]
equal(links, {0: ("X", "NV4", "SYS", "PXB", "0-7", "0"), 1: ("NV4", "X", "PXB", "SYS", "0-7", "0"),
              2: ("SYS", "PXB", "X", "NV2", "8-15", "1"), 3: ("PXB", "SYS", "NV2", "X", "8-15", "1")},
      "NVML: NVLink counts, PCIe levels, CPU and NUMA affinity per GPU (%s)" % lines[at:at + 6])
check("GPU-53696d43-5544-412d-6465-766963652d03" in proc.stdout, "NVML: each GPU's UUID")
sweep = [l for l in lines if re.match(r"\d->\d\s+[\d.]+", l)]
equal(len(sweep), 12, "--sweep: a line per ordered pair")
check("4K" in proc.stdout and "1M" in proc.stdout, "--sweep: sizes from 4 KiB to --bytes")
for title in ("both directions at once", "small-copy latency"):
    check(title in proc.stdout, "the %s matrix" % title)
doc = json.loads(topo(db, "--json", "--sweep", "--no-record", **nvml_env).stdout)
pairs = {(p["src"], p["dst"]): p for p in doc["pairs"]}
equal((pairs[(0, 1)]["link"]["type"], pairs[(0, 1)]["link"]["nvlinks"], pairs[(0, 2)]["link"]["type"],
       pairs[(0, 2)]["link"]["common_ancestor_level"]), ("NV4", 4, "SYS", 50), "--json: the links")
equal([(d["cpu_affinity"], d["numa_node"], d["nvidia_smi_index"]) for d in doc["devices"]],
      [("0-7", 0, 0), ("0-7", 0, 1), ("8-15", 1, 2), ("8-15", 1, 3)], "--json: CPU and NUMA affinity")
check(all(p["bandwidth_gbps"]["bidirectional"] and p["latency_us"] > 0 for p in pairs.values()),
      "--json: bidirectional bandwidth and latency for every pair")
check(all([s["bytes"] for s in p["sweep"]] == [4096, 16384, 65536, 262144, 1048576] for p in pairs.values()),
      "--json: the sweep's sizes")
check(pairs[(0, 1)]["bidirectional_over_p2p"] and not pairs[(0, 2)]["bidirectional_over_p2p"],
      "--json: P2P where the pair has it, the driver's path elsewhere")
doc = json.loads(topo(db, "--json", "--no-record", SIMCUDA_DEVICES=2, FAKE_NVML_NVLINK="switch:18",
                      LD_LIBRARY_PATH=nvml_env["LD_LIBRARY_PATH"]).stdout)
equal([(p["link"]["type"], p["link"]["nvswitch"]) for p in doc["pairs"]], [("NV18", True), ("NV18", True)],
      "NVSwitch: NV18 both ways")
doc = json.loads(topo(db, "--json", "--no-record").stdout)
equal((doc["nvml"]["available"], doc["pairs"][0]["link"]["type"]), (False, None), "no NVML: said, links unknown")
if all(p["verdict"] == "ok" for p in doc["pairs"]):
    equal(doc["stage_pairs"], "", "--json: no pair to stage when every pair is healthy")
equal(doc["nvml"]["why"], "libnvidia-ml.so.1 not found", "no NVML: the reason")
doc = json.loads(topo(db, "--json", "--no-record", SIMCUDA_DEVICES=2, FAKE_NVML_INIT_FAIL="1",
                      LD_LIBRARY_PATH=nvml_env["LD_LIBRARY_PATH"]).stdout)
equal((doc["nvml"]["available"], doc["nvml"]["why"]), (False, "nvmlInit_v2 failed (9)"),
      "an NVML that does not start: the reason, its code")

# ---- usage ----
proc = subprocess.run([CLI, "topo", "--help"], capture_output=True, text=True, env=environment(preload=False), timeout=30)
check(proc.returncode == 0 and proc.stdout.startswith("Usage: p2pguard topo") and "--sweep" in proc.stdout and
      proc.stderr == "", "topo --help: the usage on stdout, exit 0")
for args in (["--bogus"], ["extra"]):
    proc = subprocess.run([CLI, "topo"] + args, capture_output=True, text=True, env=environment(preload=False),
                          timeout=30)
    equal((proc.returncode, proc.stdout, len(proc.stderr.strip().splitlines())), (2, "", 1),
          "topo %s: one line on stderr, exit 2 (%s)" % (args[0], proc.stderr.strip()))

# ---- --no-record ----
folder = tempfolder()
proc = subprocess.run([CLI, "topo", "--no-record", "--bytes", str(BYTES)], capture_output=True, text=True,
                      env=environment(preload=False), timeout=120, cwd=folder)
check(proc.returncode in (0, 1) and "P2P matrix" in proc.stdout, "--no-record: still prints the matrix")
equal(os.listdir(folder), [], "--no-record: writes nothing")
done()
