"""The preload offers its core to NCCL (NCCL_PROFILER_PLUGIN=<folder of libp2pguard.so>/
libp2pguard-core.so) however LD_PRELOAD names it: by absolute path (read from LD_PRELOAD, no
lookup), among other libraries split by ':' or ' ', by a relative path (made absolute), or through
a link of another name in another folder (found where the dynamic linker loaded it from). A child
that inherits the offer keeps it as it is."""
import os
import shutil
from harness import *

core = os.path.join(os.path.dirname(LIB), "libp2pguard-core.so")
first = ":".join(SANITIZER_PRELOAD)  # the sanitizer's runtime stays first where there is one


def offered(preload, cwd=None, **extra):
    env = environment(**extra)
    env["LD_PRELOAD"] = (first + ":" if first else "") + preload
    env.pop("NCCL_PROFILER_PLUGIN", None)
    for key, value in extra.items():
        env[key] = value
    proc = subprocess.run(["/usr/bin/env"], env=env, cwd=cwd, capture_output=True, text=True)
    check(proc.returncode == 0 and proc.stderr == "", "env runs under LD_PRELOAD=%s (%r)" % (preload, proc.stderr))
    values = [l.split("=", 1)[1] for l in proc.stdout.splitlines() if l.startswith("NCCL_PROFILER_PLUGIN=")]
    return values[0] if len(values) == 1 else values


equal(offered(LIB), core, "an absolute path: the core beside it")
equal(offered("libc.so.6:" + LIB), core, "after another library, split by ':'")
equal(offered(LIB + " libc.so.6"), core, "before another, split by ' '")
folder = tempfolder()
relative = os.path.relpath(LIB, folder)
equal(offered(relative, cwd=folder), core, "a relative path, made absolute")
linked = os.path.join(folder, "guard.so")
os.symlink(LIB, linked)
os.symlink(core, os.path.join(folder, "libp2pguard-core.so"))
equal(offered(linked), os.path.join(folder, "libp2pguard-core.so"),
      "a link of another name: the core beside the name the dynamic linker loaded")
equal(offered(LIB, NCCL_PROFILER_PLUGIN=core), core, "an inherited offer stays as it is")
equal(offered(LIB, NCCL_PROFILER_PLUGIN="none"), "none", "the user's none stays")
done()
