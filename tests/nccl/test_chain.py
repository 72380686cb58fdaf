"""The user's own profiler plugin keeps working under the guard: NCCL loads the guard, and the guard
feeds the plugin the user named (NCCL_PROFILER_PLUGIN, by name or path) exactly what NCCL would
have fed it alone: the events of its own activation mask, in the interface version it speaks, with
its own handles as parents. A test plugin counts what it gets; its counts under the guard must equal
its counts when the simulated NCCL loads it directly. Meanwhile the guard records as usual."""
from ncclsim import *

COUNT = os.path.join(PLUGINS, "libnccl-profiler-count.so")
ALL = (1 << 15) - 1


def view(plugin, nccl, mask, guarded, scenario=("mixed", 3)):
    db = tempdb()
    out = os.path.join(os.path.dirname(db), "counts.jsonl")
    extra = {"NCCL_PROFILER_PLUGIN": plugin, "COUNT_OUT": out}
    if mask is not None:
        extra["COUNT_MASK"] = mask
    proc = sim(["--nccl", nccl, "--nranks", 2] + list(scenario), db=db, preload=guarded, **extra)
    return proc, counts(out), db


def comparable(c):
    return {k: c[k] for k in ("version", "comm", "rank", "nranks", "name", "bad_parent", "foreign",
                              "kernel_timestamps", "float_bytes", "started", "stopped", "recorded")}


cases = [
    ("count", "2.28", None, "the v5 plugin by name, NCCL 2.28"),
    ("count", "2.28", ALL, "every event type it can ask for"),
    ("count", "2.28", 1 << 6, "kernel channels only (NCCL still gives it their parents)"),
    ("count", "2.28", (1 << 5) | (1 << 6), "the proxy thread's control events and kernel channels"),
    ("count", "2.30", None, "NCCL 2.30 loads the guard as v6, the guard feeds v5"),
    ("countv4", "2.28", None, "a v4-only plugin: NCCL's events mapped down to v4"),
    ("countv4", "2.28", ALL, "a v4-only plugin asking for everything"),
    ("countv4", "2.27", None, "NCCL 2.27: v4 on both sides"),
    (COUNT, "2.28", None, "the plugin by its path"),
    ("countv3", "2.26", None, "NCCL 2.26 (v3): the guard only forwards, as NCCL gave it"),
    ("countv3", "2.28", None, "a v3-only plugin under NCCL 2.28: mapped down to v3"),
]
for plugin, nccl, mask, what in cases:
    _, bare, _ = view(plugin, nccl, mask, guarded=False)
    proc, guarded, db = view(plugin, nccl, mask, guarded=True)
    check(len(bare) == 1 and sum(bare[0]["started"].values()) > 0,
          "%s: the plugin alone sees events (%s)" % (what, bare))
    equal([comparable(c) for c in guarded], [comparable(c) for c in bare],
          "%s: it sees under the guard exactly what it sees alone" % what)
    check(all(c["bad_parent"] == 0 and c["foreign"] == 0 for c in guarded),
          "%s: every parent and handle it got back is its own" % what)
    if nccl == "2.26":
        # v3 names no communicator at init: the guard records nothing, it only feeds the plugin
        check(not os.path.exists(db) or scalar(db, "SELECT count(*) FROM sqlite_master WHERE "
                                                   "name = 'nccl_ops'") == 0
              or scalar(db, "SELECT count(*) FROM nccl_ops") == 0, "%s: nothing recorded" % what)
        continue
    equal(scalar(db, "SELECT count(*) FROM nccl_ops WHERE state = 'done'"), 18,
          "%s: and the guard recorded the 18 operations" % what)
    name = {"countv4": "CountV4 (v4)", "countv3": "CountV3 (v3)"}.get(plugin, "Count (v5)")
    chained = scalar(db, "SELECT chained FROM nccl_comms") or ""
    check(chained.startswith(name), "%s: the communicator's row names it (%s)" % (what, chained))

# A child process (exec under the guard) still feeds the user's plugin: the guard kept it in
# P2PGUARD_NCCL_CHAIN when it pointed NCCL_PROFILER_PLUGIN at itself.
db = tempdb()
out = os.path.join(os.path.dirname(db), "counts.jsonl")
env = sim_env(db, NCCL_PROFILER_PLUGIN="count", COUNT_OUT=out)
proc = subprocess.run(["sh", "-c", 'exec "$0" --nranks 2 mixed 2', SIMNCCL], env=env,
                      capture_output=True, text=True, timeout=60)
check(proc.returncode == 0 and "loaded p2pguard" in proc.stderr,
      "a child loads the guard (%s)" % proc.stderr.strip())
got = counts(out)
check(len(got) == 1 and got[0]["started"]["2"] == 8 and got[0]["bad_parent"] == 0,
      "and the guard feeds the user's plugin there too (%s)" % got)

# A plugin that cannot be loaded: one line, and the guard records on (NCCL alone would have run
# without any plugin).
db = tempdb()
proc = sim(["sendrecv", 2, 4096, 0], db=db, NCCL_PROFILER_PLUGIN="nosuchplugin")
check("p2pguard: NCCL_PROFILER_PLUGIN=nosuchplugin: cannot load it" in proc.stderr,
      "a plugin that cannot be loaded is one clear line (%s)" % proc.stderr.strip())
equal(scalar(db, "SELECT count(*) FROM nccl_ops"), 4, "and the guard still records")
equal(scalar(db, "SELECT chained FROM nccl_comms"), None, "with nothing chained")

# The guard named as the user's plugin (its own path): nothing to feed, no loop.
db = tempdb()
proc = sim(["sendrecv", 2, 4096, 0], db=db, NCCL_PROFILER_PLUGIN=LIB)
equal(scalar(db, "SELECT count(*) FROM nccl_ops"), 4, "the guard's own path as the user's plugin: recorded once")
equal(scalar(db, "SELECT chained FROM nccl_comms"), None, "and not fed to itself")
done()
