#!/usr/bin/env python3
"""Makes the fuzz-spool seeds again from real spools (after a spool layout change, which leaves the
old seeds damaged headers that the import refuses).

    scripts/make-spool-seeds.py BUILD_DIR [OUTPUT_DIR]   (default tests/fuzz/corpus/spool)

Each seed is the spool a process of the simulated CUDA's test programs left, under the preload,
while another connection held its database's write lock (so every record stayed in the spool):
rt_peer copier SIGKILLed, rt_peer crash, xproc_peer's IPC owner and opener and its cuMem owner and
importer. scripts/spool-seed.py turns each into the fuzz target's patch form. The target's own
`template` seed is left as it is.
"""
import glob
import os
import sqlite3
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)
BUILD = os.path.abspath(sys.argv[1])
OUTPUT = os.path.abspath(sys.argv[2]) if len(sys.argv) > 2 else os.path.join(SOURCE, "tests/fuzz/corpus/spool")
os.environ.update(P2PG_BUILD_ROOT=BUILD, P2PG_SOURCE_ROOT=SOURCE,
                  P2PG_FAKE_NVML_DIR=os.path.join(BUILD, "tests/diagnosis/fakenvml"))
sys.path.insert(0, os.path.join(SOURCE, "tests/preload"))
from harness import *  # noqa: E402,F401,F403


_holders = []


def locked_db():
    """A new database whose write lock another connection holds until this script ends."""
    db = tempdb()
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    _holders.append(holder)
    return db


def take(db, name):
    """The one spool db's processes left, as seed `name`."""
    spools = glob.glob(db + ".spool/*" + spool_suffix())
    if len(spools) != 1:
        raise SystemExit("%s: %d spools, not 1" % (name, len(spools)))
    subprocess.run([sys.executable, os.path.join(HERE, "spool-seed.py"), spools[0], os.path.join(OUTPUT, name)],
                   check=True)
    print("%s: %d bytes" % (name, os.path.getsize(os.path.join(OUTPUT, name))))


def spool_suffix():
    with open(os.path.join(SOURCE, "include/p2pguard/spool.h")) as f:
        return re.search(r'#define P2PG_SPOOL_SUFFIX\s+"([^"]+)"', f.read()).group(1)


def sim_env():
    return dict(LD_LIBRARY_PATH=os.environ["P2PG_FAKE_NVML_DIR"] + ":" + SIM)


db = locked_db()
counts = db + ".counts"
proc = subprocess.Popen([program("rt_peer"), "copier", counts, "2"], env=environment(db),
                        stdout=subprocess.PIPE, text=True)
proc.stdout.readline()  # READY
wait_for_copies(counts, 2)
proc.kill()
proc.wait()
take(db, "copier-sigkill")

db = locked_db()
run([program("rt_peer"), "crash"], db=db, check=False)
take(db, "crash-sigsegv")

owner_db, open_db = locked_db(), locked_db()
owner = subprocess.Popen([program("xproc_peer"), "ipc-owner", "0"], env=environment(owner_db, **sim_env()),
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
handle = owner.stdout.readline().split()[1]
run([program("xproc_peer"), "ipc-open", "1", handle, "not-a-handle"], db=open_db, **sim_env())
owner.stdin.close()
owner.wait()
take(owner_db, "ipc-owner")
take(open_db, "ipc-open")

owner_db, import_db = locked_db(), locked_db()
sock = os.path.join(tempfolder(), "s")
owner = subprocess.Popen([program("xproc_peer"), "vmm-owner", "0", sock], env=environment(owner_db, **sim_env()),
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
while owner.stdout.readline().strip() not in ("listening", ""):
    pass
run([program("xproc_peer"), "vmm-import", "1", sock], db=import_db, **sim_env())
owner.stdin.close()
owner.wait()
take(owner_db, "vmm-owner")
take(import_db, "vmm-import")
done()
