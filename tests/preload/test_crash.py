"""SIGSEGV after a copy: the process still dies of SIGSEGV, and the log has the copy and a crash
row whose backtrace names the faulting function, as soon as the process is gone (the drainer's
final import); `p2pguard recover` then adds nothing."""
import signal
from harness import *

db = tempdb()
proc = run([program("rt_peer"), "crash"], db=db, check=False)
equal(proc.returncode, -signal.SIGSEGV, "the program ends with SIGSEGV, as without the guard")
equal(scalar(db, "SELECT count(*) FROM crashes"), 1, "the crash row is there before any recover")
equal(scalar(db, "SELECT count(*) FROM transfers"), 1, "and so is the copy before it")
recover = subprocess.run([CLI, "recover", db], capture_output=True, text=True, env=environment(preload=False))
equal(recover.returncode, 0, "p2pguard recover succeeds")
check("recovered 1 spool file" in recover.stdout, "recover imported the dead process's spool (%s)" % recover.stdout.strip())
equal(scalar(db, "SELECT count(*) FROM transfers"), 1, "the copy before the crash is there")
rows = query(db, "SELECT signal, backtrace FROM crashes")
equal(len(rows), 1, "one crash row")
if rows:
    equal(rows[0][0], signal.SIGSEGV, "signal recorded")
    first = rows[0][1].splitlines()[0] if rows[0][1] else ""
    check("crash_here" in first, "the crash backtrace starts in crash_here (%s)" % first)
    check("main" in rows[0][1], "and reaches main")
again = subprocess.run([CLI, "recover", db], capture_output=True, text=True, env=environment(preload=False))
equal(scalar(db, "SELECT count(*) FROM crashes"), 1, "recovering twice adds nothing")

# With a handler of the program's own (as Python's faulthandler installs), that handler still runs.
db2 = tempdb()
proc = run(["python3", "-X", "faulthandler", "-c",
            "import ctypes; ctypes.string_at(0)"], db=db2, check=False)
equal(proc.returncode, -signal.SIGSEGV, "python still dies of SIGSEGV")
check("Fatal Python error" in proc.stderr, "Python's faulthandler still reports")
done()
