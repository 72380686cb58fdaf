"""A database deleted while copies wait for their GPU times: the rows waiting are the old file's,
and their ids name other rows in the file that takes its place (here another process's, which ran
without timing). Their times must go nowhere rather than into those rows; the copies' rows
themselves went with the old file."""
import os
import sqlite3
import time

from harness import *

EXIT_COPIES = program("exit_copies")
N = 20

for timing in ("all", "cupti"):
    db = tempdb()
    # 20 copies of 1 MiB at 100 ns a byte: about 2 s on the simulated copy engine, so their times
    # come in after the deletion.
    proc = subprocess.Popen([EXIT_COPIES, "peer", str(N)],
                            env=environment(db, P2PGUARD_GPU_TIMING=timing, EXIT_COPIES_PAUSE="after",
                                            SIMCUDA_COPY_NS_PER_BYTE="100"),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    equal(proc.stdout.readline().strip(), "READY", "%s: the copies are enqueued" % timing)
    deadline = time.monotonic() + 30
    while True:
        try:
            if scalar(db, "SELECT count(*) FROM transfers") == N:
                break
        except sqlite3.Error:
            pass
        check(time.monotonic() < deadline, "%s: the guard wrote the %d rows" % (timing, N))
        time.sleep(0.01)
    timed_before = scalar(db, "SELECT count(gpu_ns) FROM transfers")
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(db + suffix):
            os.remove(db + suffix)
    # Another process fills the new file first, without timing: its rows take ids 1, 2, ...
    other = run([EXIT_COPIES, "peer", str(N)], db=db, P2PGUARD_GPU_TIMING="off")
    out, err = proc.communicate("go\n", timeout=60)
    equal(proc.returncode, 0, "%s: the program ends as it would bare (%s)" % (timing, err.strip()))
    rows = query(db, "SELECT p.pid, count(*), count(t.gpu_ns) FROM transfers t "
                     "JOIN processes p ON p.id = t.process_id GROUP BY p.pid")
    others = [r for r in rows if r[0] != proc.pid]
    check(len(others) == 1 and others[0][1] == N,
          "%s: the other process's %d rows are in the new file (%s)" % (timing, N, rows))
    equal(others[0][2] if others else -1, 0,
          "%s: none of them got a GPU time of the first process's copies (%d of %d were timed "
          "before the deletion)" % (timing, timed_before, N))
done()
