"""Physical identity: every guarded process has a `devices` row per ordinal it sees, naming the GPU
behind it as nvidia-smi and NVML do (UUID, PCI bus id, name, nvidia-smi's index), so rows of
processes that CUDA_VISIBLE_DEVICES numbered differently, or of several nodes after `merge`, can
be joined by GPU. `failure_report` names the host and the failing devices' UUIDs. The devices
travel through the spool: a SIGKILLed process whose database was locked still has them after
`p2pguard recover`. The simulated machine's devices have stable UUIDs and PCI bus ids; the fake
NVML (tests/diagnosis/fakenvml) knows its first two, at indices 0 and 1."""
import glob
import os
import re
import signal
import socket
import sqlite3
import time

from harness import *

FAKE_NVML = os.environ["P2PG_FAKE_NVML_DIR"]
WITH_NVML = FAKE_NVML + ":" + SIM
UUID = re.compile(r"^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
PCI = re.compile(r"^[0-9A-F]{8}:[0-9A-F]{2}:[0-9A-F]{2}\.[0-7]$")


def devices(db):
    return query(db, "SELECT ordinal, uuid, pci_bus_id, name, physical_index FROM devices "
                     "ORDER BY process_id, ordinal")


def run_copies(db, **extra):
    extra.setdefault("LD_LIBRARY_PATH", WITH_NVML)
    return run([program("exit_copies"), "peer", "5"], db=db, SIMCUDA_DEVICES="3", **extra)


# Three devices, NVML knowing two of them.
db = tempdb()
run_copies(db)
rows = devices(db)
equal([r[0] for r in rows], [0, 1, 2], "a row per ordinal the process sees")
check(all(UUID.match(r[1] or "") for r in rows), "UUIDs as nvidia-smi prints them (%s)" % [r[1] for r in rows])
check(len({r[1] for r in rows}) == 3, "three different UUIDs")
equal([r[2] for r in rows], ["00000000:10:00.0", "00000000:11:00.0", "00000000:12:00.0"],
      "PCI bus ids as NVML prints them")
check(all(PCI.match(r[2]) for r in rows), "the PCI bus id format (8 hex digits of domain, upper case)")
equal([r[3] for r in rows], ["SimCUDA H200 sim #0", "SimCUDA H200 sim #1", "SimCUDA H200 sim #2"],
      "names")
equal([r[4] for r in rows], [0, 1, None], "nvidia-smi's index from NVML; NULL for a GPU NVML does not know")
by_pci = {r[2]: r[1] for r in rows}


def gpus_line(db):
    """The report's GPUs line, unwrapped."""
    out = cli("report", db).stdout
    start = out.find("GPUs: ")
    if start < 0:
        return ""
    lines = out[start:].splitlines()
    text = lines[0]
    for more in lines[1:]:
        if not more.startswith("    "):  # wrapped lines are indented (no --verbose: no GPU lines)
            break
        text += " " + more.strip()
    return " ".join(text.split())


# The report compares ordinals with nvidia-smi's index only where the index is known.
line = gpus_line(db)
check("differ" not in line and "nvidia-smi's index is unknown for 1 of 3 device ordinals" in line,
      "report: ordinals equal to their known index differ from nothing, the unknown one is said (%s)" % line)

# No NVML at all: the identity is there, the index is not.
db = tempdb()
run_copies(db, LD_LIBRARY_PATH=SIM)
rows = devices(db)
equal([(r[1], r[4]) for r in rows], [(by_pci[r[2]], None) for r in rows],
      "without NVML: the same UUIDs, physical_index NULL")
line = gpus_line(db)
check("differ" not in line and "nvidia-smi's index is unknown for 3 of 3 device ordinals" in line,
      "report without NVML: no ordinal said to differ from an index nobody knows (%s)" % line)

# CUDA_VISIBLE_DEVICES renumbers: the ordinals differ, the GPUs do not.
db = tempdb()
run_copies(db, CUDA_VISIBLE_DEVICES="2,0")
rows = devices(db)
equal([(r[0], r[2], r[4]) for r in rows], [(0, "00000000:12:00.0", None), (1, "00000000:10:00.0", 0)],
      "CUDA_VISIBLE_DEVICES=2,0: ordinal 0 is the machine's device 2, ordinal 1 its device 0")
equal([r[1] for r in rows], [by_pci["00000000:12:00.0"], by_pci["00000000:10:00.0"]],
      "CUDA_VISIBLE_DEVICES=2,0: each ordinal keeps its GPU's UUID")
line = gpus_line(db)
check("; 1 device ordinal differs from nvidia-smi's index" in line and
      "nvidia-smi's index is unknown for 1 of 2 device ordinals" in line,
      "report, CUDA_VISIBLE_DEVICES=2,0: the known index that differs counted, the unknown one apart (%s)" % line)
db = tempdb()
run_copies(db, CUDA_VISIBLE_DEVICES=by_pci["00000000:11:00.0"] + ",0")
rows = devices(db)
equal([(r[0], r[1], r[4]) for r in rows], [(0, by_pci["00000000:11:00.0"], 1), (1, by_pci["00000000:10:00.0"], 0)],
      "CUDA_VISIBLE_DEVICES by UUID: ordinal 0 is that GPU, nvidia-smi's index 1")

# failure_report: which host, which GPUs.
db = tempdb()
run([program("rt_peer"), "errors"], db=db, LD_LIBRARY_PATH=WITH_NVML, CUDA_VISIBLE_DEVICES="1,0")
report = query(db, "SELECT hostname, rank, pair, device_uuid, peer_uuid FROM failure_report "
                   "WHERE pair = '0->1'")
check(report, "failure_report has the failures of the pair 0->1")
check(all(r[0] == socket.gethostname() for r in report), "failure_report names the host (%s)" % report[:1])
check(all(r[3] == by_pci["00000000:11:00.0"] and r[4] == by_pci["00000000:10:00.0"] for r in report),
      "failure_report names the failing GPUs by UUID: ordinal 0 of this process is the machine's "
      "device 1 (%s)" % report[:1])
unknown = query(db, "SELECT pair, device_uuid, peer_uuid FROM failure_report WHERE pair LIKE '%->7'")
check(unknown and all(r[2] is None for r in unknown), "an ordinal the process does not have: no UUID (%s)" % unknown[:1])

# An older database (0.1's processes table, schema 1): failure_report without these columns, no
# devices table. Opened by this guard, the view is brought up to date and the table made.
db = tempdb()
con = sqlite3.connect(db)
con.executescript("""
PRAGMA user_version = 1;
CREATE TABLE processes (id INTEGER PRIMARY KEY, pid INTEGER NOT NULL, hostname TEXT, rank INTEGER,
  local_rank INTEGER, cmdline TEXT, started_ns INTEGER NOT NULL, mode TEXT, guard_version TEXT,
  driver_version INTEGER, boot_id TEXT NOT NULL, records_dropped INTEGER NOT NULL DEFAULT 0,
  recovered INTEGER NOT NULL DEFAULT 0, UNIQUE (boot_id, pid, started_ns));
CREATE TABLE failures (id INTEGER PRIMARY KEY, process_id INTEGER, started_ns INTEGER, api TEXT,
  status INTEGER, error_name TEXT, device INTEGER, peer_device INTEGER, action TEXT, rule_id TEXT,
  diagnosis TEXT, advice TEXT, python_stack TEXT, backtrace TEXT);
CREATE VIEW IF NOT EXISTS failure_report AS
SELECT f.id, p.pid, p.rank, f.api FROM failures f JOIN processes p ON p.id = f.process_id;
""")
con.close()
proc = run([program("exit_copies"), "peer", "5"], db=db, check=False, LD_LIBRARY_PATH=WITH_NVML)
columns = [r[1] for r in query(db, "PRAGMA table_info(failure_report)")]
check({"hostname", "device_uuid", "peer_uuid"} <= set(columns),
      "an older database's failure_report gains hostname and the UUIDs (%s)" % columns)

# SIGKILL with the database locked the whole time: the devices wait in the spool, and recovery
# brings them in with the process's records.
db = tempdb()
run_copies(db)  # makes the database
lock = sqlite3.connect(db, timeout=0, isolation_level=None)
lock.execute("BEGIN EXCLUSIVE")
counts = db + ".counts"
env = environment(db, LD_LIBRARY_PATH=WITH_NVML, SIMCUDA_DEVICES="3", CUDA_VISIBLE_DEVICES="1,2")
proc = subprocess.Popen([program("rt_peer"), "copier", counts, "1"], env=env, stdout=subprocess.PIPE,
                        text=True)
proc.stdout.readline()  # READY
wait_for_copies(counts, 1)


def spool_holds(pid, text, timeout=20.0):
    """The drainer's spool-only loop writes the devices within about 50 ms of the driver's start,
    later on a loaded machine: wait until process pid's spool ("<pid>-<start>.spool6") holds
    text, then a moment for the record's publication, which follows its fields at once."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for path in glob.glob("%s.spool/%d-*" % (db, pid)):
            try:
                with open(path, "rb") as f:
                    if text in f.read():
                        time.sleep(0.2)
                        return True
            except OSError:
                pass
        time.sleep(0.05)
    return False


check(spool_holds(proc.pid, by_pci["00000000:12:00.0"].encode()),
      "the killed process's devices reached its spool while the database was locked")
proc.send_signal(signal.SIGKILL)
proc.wait()
lock.execute("ROLLBACK")
lock.close()
out = cli("recover", db)
equal(out.returncode, 0, "recover of the killed process (%s)" % out.stderr.strip())
killed = query(db, "SELECT d.ordinal, d.uuid, d.physical_index FROM devices d JOIN processes p "
                   "ON p.id = d.process_id WHERE p.recovered = 1")
equal(killed, [(0, by_pci["00000000:11:00.0"], 1), (1, by_pci["00000000:12:00.0"], None)],
      "a process SIGKILLed while its database was locked still has its devices after recover")

# merge keeps them, re-keyed to the merged processes, and adds nothing the second time.
a, b = tempdb("a.db"), tempdb("b.db")
run_copies(a, CUDA_VISIBLE_DEVICES="0,1")
run_copies(b, CUDA_VISIBLE_DEVICES="1,0")
out = tempdb("merged.db")
for attempt in range(2):
    r = cli("merge", out, a, b)
    equal(r.returncode, 0, "merge %d (%s)" % (attempt + 1, r.stderr.strip()))
merged = query(out, "SELECT p.pid, d.ordinal, d.uuid FROM devices d JOIN processes p ON p.id = d.process_id "
                    "ORDER BY p.id, d.ordinal")
want = ([(scalar(a, "SELECT pid FROM processes"),) + r[:2] for r in query(a, "SELECT ordinal, uuid FROM devices ORDER BY ordinal")] +
        [(scalar(b, "SELECT pid FROM processes"),) + r[:2] for r in query(b, "SELECT ordinal, uuid FROM devices ORDER BY ordinal")])
equal(merged, want, "merge keeps every process's devices, twice merged, once there")
same = query(out, "SELECT count(DISTINCT d.ordinal) FROM devices d GROUP BY d.uuid")
equal(same, [(2,), (2,)], "after merge, each GPU (by UUID) is ordinal 0 in one process and 1 in the other")

# A driver that refuses the identity calls: the program runs on, the row keeps what it has.
db = tempdb()
proc = run_copies(db, SIMCUDA_FAIL="cuDeviceGetUuid:CUDA_ERROR_UNKNOWN,cuDeviceGetPCIBusId:CUDA_ERROR_UNKNOWN")
equal(proc.stdout.strip(), "EXPECT transfers=5", "identity calls failing: the program unharmed")
equal([(r[1], r[2], r[4]) for r in devices(db)], [(None, None, None)] * 3,
      "identity calls failing: no UUID, no PCI bus id, so no NVML index either")
done()
