"""Where the records go (issue 22, item 6 and Low): a relative P2PGUARD_DB is the one in the folder
the program starts in, however it changes folder later (rows were split over two databases, with a
false "replaced" line and a spool left behind); ":memory:" and SQLite URIs are refused with one
line instead of losing everything in silence; RANK is read as a decimal rank or not at all
(RANK=0x10 was stored as 0)."""
import glob
import os
from harness import *

# Peer calls through the simulated runtime, before and after a chdir.
script = """
import ctypes, os, sys, time
rt = ctypes.CDLL("libcudart.so.13")
v = ctypes.c_int()
rt.cudaDeviceCanAccessPeer(ctypes.byref(v), 0, 1)
time.sleep(0.2)  # the drainer has opened the database by now
os.chdir(sys.argv[1])
time.sleep(0.2)  # ... and looked at the path again
for _ in range(3):
    rt.cudaDeviceCanAccessPeer(ctypes.byref(v), 1, 0)
print("ok")
"""


def lines(stderr):
    return [l for l in stderr.splitlines() if l.startswith("p2pguard:")]


def python(args, cwd, **env):
    return subprocess.run([sys.executable, "-c", script] + args, cwd=cwd, env=environment(**env),
                          capture_output=True, text=True, timeout=60)


start, elsewhere = tempfolder(), tempfolder()
proc = python([elsewhere], start, P2PGUARD_DB="p2pguard.db")
equal(proc.returncode, 0, "relative database, chdir: the program exits 0")
equal(lines(proc.stderr), [], "relative database, chdir: nothing said (no 'deleted or replaced')")
db = os.path.join(start, "p2pguard.db")
equal(scalar(db, "SELECT count(*) FROM peer_access"), 4, "relative database, chdir: every call is in the start folder's database")
equal(scalar(db, "SELECT recovered FROM processes"), 0, "relative database, chdir: the clean exit is not 'recovered'")
check(not os.path.exists(os.path.join(elsewhere, "p2pguard.db")), "relative database, chdir: no second database")
equal(glob.glob(os.path.join(start, "p2pguard.db.spool", "*.spool*")), [], "relative database, chdir: no spool left")

# The default (unset) is relative too.
start, elsewhere = tempfolder(), tempfolder()
proc = python([elsewhere], start, P2PGUARD_DB=None)
equal(scalar(os.path.join(start, "p2pguard.db"), "SELECT count(*) FROM peer_access"), 4,
      "default database, chdir: every call in the start folder's p2pguard.db")

# ":memory:" and URIs: one line, the default file is used.
for value in (":memory:", "file::memory:?cache=shared", "file:elsewhere.db?mode=memory"):
    start = tempfolder()
    proc = python([start], start, P2PGUARD_DB=value)
    said = lines(proc.stderr)
    equal(proc.returncode, 0, "P2PGUARD_DB=%s: the program exits 0" % value)
    equal(len(said), 1, "P2PGUARD_DB=%s: one line (%s)" % (value, said))
    check(said and "P2PGUARD_DB=" + value in said[0] and "p2pguard.db" in said[0], "P2PGUARD_DB=%s: it says what is used instead" % value)
    equal(scalar(os.path.join(start, "p2pguard.db"), "SELECT count(*) FROM peer_access"), 4,
          "P2PGUARD_DB=%s: the records are in p2pguard.db" % value)

# RANK: decimal or nothing.
for value, want, said_lines in (("7", 7, 0), ("0x10", None, 1), ("-1", None, 1), ("12abc", None, 1), ("010", 10, 0)):
    start = tempfolder()
    proc = python([start], start, P2PGUARD_DB="p2pguard.db", RANK=value, LOCAL_RANK="3")
    said = lines(proc.stderr)
    equal(len(said), said_lines, "RANK=%s: %d line(s) (%s)" % (value, said_lines, said))
    equal(scalar(os.path.join(start, "p2pguard.db"), "SELECT rank FROM processes"), want, "RANK=%s: stored as %s" % (value, want))
    equal(scalar(os.path.join(start, "p2pguard.db"), "SELECT local_rank FROM processes"), 3, "LOCAL_RANK=3: stored")
done()
