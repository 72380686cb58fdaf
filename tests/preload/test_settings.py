"""Bad settings, an unwritable or corrupt database: one clear stderr line, the program runs on."""
import os
from harness import *

bare = run([program("rt_peer"), "basic"], preload=False).stdout

db = tempdb()
proc = run([program("rt_peer"), "basic"], db=db, P2PGUARD_MODE="turbo")
equal(proc.stdout, bare, "bad P2PGUARD_MODE: program unharmed")
lines = proc.stderr.splitlines()
equal(len(lines), 1, "bad P2PGUARD_MODE: one stderr line")
check(lines and "P2PGUARD_MODE=turbo" in lines[0] and "observe, fallback, staged" in lines[0],
      "the line names the variable and the accepted values (%s)" % (lines[0] if lines else ""))
equal(scalar(db, "SELECT mode FROM processes"), "observe", "the default mode is used")

# A value holding a newline or a carriage return (found by fuzz-settings) stays one line.
for value in ("tur\nbo", "\rall"):
    db = tempdb()
    proc = run([program("rt_peer"), "basic"], db=db, P2PGUARD_MODE=value)
    lines = proc.stderr.splitlines()
    check(proc.stdout == bare and len(lines) == 1 and "\r" not in proc.stderr and "P2PGUARD_MODE=" in lines[0],
          "P2PGUARD_MODE=%r: one line, program unharmed (%r)" % (value, proc.stderr))

# P2PGUARD_RUN_ID: what `p2pguard run` sets is stored; anything else is one line and no run, since
# report --run could never select it.
db = tempdb()
proc = run([program("rt_peer"), "basic"], db=db, P2PGUARD_RUN_ID="0123456789abcdef")
check(proc.stdout == bare and proc.stderr == "", "P2PGUARD_RUN_ID of 16 hex digits: silent")
equal(scalar(db, "SELECT run_id FROM processes"), "0123456789abcdef", "  stored in processes.run_id")
for value in ("job-1234", "0123456789ABCDEF", "0123456789abcdef0"):
    db = tempdb()
    proc = run([program("rt_peer"), "basic"], db=db, P2PGUARD_RUN_ID=value)
    lines = proc.stderr.splitlines()
    check(proc.stdout == bare and len(lines) == 1 and "P2PGUARD_RUN_ID=" + value in lines[0],
          "P2PGUARD_RUN_ID=%s: one line naming it, program unharmed (%r)" % (value, proc.stderr))
    equal(scalar(db, "SELECT count(*) FROM processes WHERE run_id IS NULL"), 1, "  its process, with no run")

for var, value in (("P2PGUARD_RECORD", "some"), ("P2PGUARD_PAIRS", "0-0"), ("P2PGUARD_STAGING_MB", "-3"),
                   ("P2PGUARD_GPU_TIMING", "maybe")):
    db = tempdb()
    proc = run([program("rt_peer"), "basic"], db=db, **{var: value})
    lines = proc.stderr.splitlines()
    check(proc.stdout == bare and len(lines) == 1 and var + "=" + value in lines[0],
          "%s=%s: one line naming it, program unharmed" % (var, value))

folder = tempfolder()
os.chmod(folder, 0o500)
db = os.path.join(folder, "sub", "p2pguard.db")
proc = run([program("rt_peer"), "basic"], db=db)
equal(proc.stdout, bare, "unwritable database folder: program unharmed")
lines = proc.stderr.splitlines()
check(len(lines) == 1 and "p2pguard:" in lines[0], "unwritable database folder: one line (%s)" % proc.stderr.strip())

db = tempdb()
with open(db, "wb") as f:
    f.write(b"this is not a database" * 100)
proc = run([program("rt_peer"), "basic"], db=db)
equal(proc.stdout, bare, "corrupt database: program unharmed")
lines = proc.stderr.splitlines()
check(len(lines) == 1 and "p2pguard:" in lines[0] and db in lines[0], "corrupt database: one line (%s)" % proc.stderr.strip())

db = tempdb()
proc = run([program("rt_peer"), "basic"], db=db, P2PGUARD_DISABLE="1")
equal(proc.stdout, bare, "P2PGUARD_DISABLE=1: program unharmed")
check(not os.path.exists(db), "P2PGUARD_DISABLE=1: nothing recorded")
done()
