"""The table in which guarded exporters note their legacy IPC handles' GPUs for the importers
(src/guard/ipc_owners.h) when it is full: a spool folder kept across jobs fills it with handles of
processes that have ended, and a new exporter takes their slots, so its importer still names the
owner; a table full of live processes' handles leaves the new handle's owner unknown, and the
exporter says so once on stderr. P2PGUARD_TEST=ipc-owners-small makes the table 16 slots, so that
a first exporter fills it with 20 handles."""
import subprocess

from harness import *

SMALL = {"P2PGUARD_TEST": "ipc-owners-small"}


def start_owner(db, handles, device=0, **env):
    """xproc_peer ipc-owner with `handles` buffers on device; it holds them until stdin closes."""
    owner = subprocess.Popen([program("xproc_peer"), "ipc-owner"] + [str(device)] * handles,
                             env=environment(db, **env), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    lines = [owner.stdout.readline().split() for _ in range(handles)]
    check(all(l and l[0] == "cudaIpcGetMemHandle=0" for l in lines), "the owner made its %d handles" % handles)
    return owner, [l[1] for l in lines]


def finish(owner):
    owner.stdin.close()
    err = owner.stderr.read()
    owner.wait()
    return [l for l in err.splitlines() if l.strip()]


def open_rows(db, process):
    return query(db, "SELECT accessor_device, owner_device, is_peer FROM peer_mappings "
                     "WHERE event = 'import' AND status = 0 AND process_id = ?", process)


def newest_process(db):
    return scalar(db, "SELECT max(process_id) FROM peer_mappings WHERE event = 'import'")


# ---- a table full of an ended job's handles ----
db = tempdb()
earlier, _ = start_owner(db, 20, **SMALL)
said = finish(earlier)
equal(len([l for l in said if "full of live processes' handles" in l]), 1,
      "20 handles in 16 slots: the first exporter says once that its last handles found none (%s)" % said)

owner, handles = start_owner(db, 1)
opener = run([program("xproc_peer"), "ipc-open", "1"] + handles, db=db)
said = finish(owner)
check("data=1" in opener.stdout, "ended job's table: the importer reads the owner's data (%s)" % opener.stdout.split())
equal(open_rows(db, newest_process(db)), [(1, 0, 1)],
      "ended job's table: device 0's memory opened on device 1 names its owner, a peer mapping")
equal(query(db, "SELECT src_device, dst_device, path FROM transfers"), [(0, 1, "p2p")],
      "ended job's table: the copy out of the mapping is a peer copy from device 0")
equal(said, [], "ended job's table: the new exporter says nothing (its handle found a slot)")

# ---- a table full of a live process's handles ----
db = tempdb()
holder, _ = start_owner(db, 20, **SMALL)
owner, handles = start_owner(db, 1)
opener = run([program("xproc_peer"), "ipc-open", "1"] + handles, db=db)
said = finish(owner)
finish(holder)
check("data=1" in opener.stdout, "live table: the importer reads the owner's data (%s)" % opener.stdout.split())
equal(open_rows(db, newest_process(db)), [(1, None, None)],
      "live table: the open names no owner (every slot near the handle's is a live process's)")
equal(len([l for l in said if "p2pguard" in l and "full of live processes' handles" in l]), 1,
      "live table: the exporter says once that the table is full (%s)" % said)

# ---- a small table that is not full: an exporter's several handles each name the owner ----
db = tempdb()
owner, handles = start_owner(db, 3, **SMALL)
opener = run([program("xproc_peer"), "ipc-open", "1"] + handles, db=db)
finish(owner)
equal(open_rows(db, newest_process(db)), [(1, 0, 1)] * 3, "three handles of one exporter each name the owner")

done()
