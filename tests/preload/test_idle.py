"""A process that inherits the preload but never touches CUDA gets nothing of the guard's: no core,
no SQLite, jansson or libunwind, no fatal-signal handlers, no spool, no database. Its first CUDA
call brings them. A preload whose core is missing costs one line, and the program runs on."""
import glob
import shutil

from harness import *

folder = tempfolder()
db = os.path.join(folder, "idle.db")
probe = program("idle_probe")

idle = run([probe], db=db)
equal(idle.stdout.strip(), "start handlers=0 core=0 libraries=", "no CUDA call: nothing loaded, no handler")
check(not os.path.exists(db), "no CUDA call: no database")
check(not glob.glob(db + ".spool/*"), "no CUDA call: no spool file")

used = run([probe, "cuda"], db=db)
lines = used.stdout.splitlines()
equal(lines[0], "start handlers=0 core=0 libraries=", "before the first CUDA call: nothing loaded")
equal(lines[1], "cuda handlers=5 core=1 libraries=sqlite,jansson,unwind,",
      "after it: the core, its libraries and the five fatal-signal handlers")
equal(scalar(db, "SELECT count(*) FROM processes"), 1, "the CUDA process has its processes row")

# The core is found beside the preload: a preload copied alone has none.
alone = os.path.join(tempfolder(), "libp2pguard.so")
shutil.copy(LIB, alone)
env = environment(db=os.path.join(folder, "alone.db"))
env["LD_PRELOAD"] = env["LD_PRELOAD"].replace(LIB, alone)
env.pop("P2PGUARD_QUIET")
bare = run([program("rt_peer"), "basic"], preload=False)
proc = subprocess.run([program("rt_peer"), "basic"], env=env, capture_output=True, text=True, timeout=120)
equal(proc.returncode, 0, "without its core the program still runs")
equal(proc.stdout, bare.stdout, "and does what it does bare")
notices = [l for l in proc.stderr.splitlines() if l.startswith("p2pguard:")]
equal(len(notices), 1, "one line says so")
check(notices and "cannot load" in notices[0] and "libp2pguard-core.so" in notices[0]
      and "passes every call through" in notices[0], "naming the library: %r" % notices[:1])
check(not os.path.exists(os.path.join(folder, "alone.db")), "and nothing is recorded")
done()
