# SPDX-License-Identifier: MIT
"""The Python interpreters installed here, for the pystack tests: one line per working interpreter,
"VERSION PATH" (VERSION as 3.13, or 3.13t for a free-threaded build), then one line per version of
3.8-3.14 (and the free-threaded 3.13t, 3.14t) not found, "missing VERSION WHERE-LOOKED". Looks on
PATH (pyenv's shims of inactive versions fail to start and are left out), in pyenv's versions
folder ($PYENV_ROOT, else ~/.pyenv) and in /usr/bin and /usr/local/bin. Installs nothing."""
import glob
import os
import shutil
import subprocess

WANTED = ["3.%d" % minor for minor in range(8, 15)] + ["3.13t", "3.14t"]
PROBE = ("import os, sys, sysconfig; print('%d.%d%s' % (sys.version_info[0], sys.version_info[1], "
         "'t' if sysconfig.get_config_var('Py_GIL_DISABLED') else ''), os.path.realpath(sys.executable))")

candidates = []
for name in ["python3"] + ["python" + v for v in WANTED]:
    found = shutil.which(name)
    if found:
        candidates.append(found)
pyenv = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
for pattern in (os.path.join(pyenv, "versions", "*", "bin", "python3*"), "/usr/bin/python3*",
                "/usr/local/bin/python3*"):
    candidates += sorted(glob.glob(pattern))

seen = {}
for path in candidates:
    if path.endswith("-config") or not os.access(path, os.X_OK):
        continue
    try:
        out = subprocess.run([path, "-c", PROBE], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        continue
    if out.returncode != 0 or not out.stdout.strip():
        continue
    version, real = out.stdout.split(None, 1)
    real = real.strip()
    if version in WANTED and real not in seen:
        seen[real] = version
        print(version, path)
versions = set(seen.values())
for version in WANTED:
    if version not in versions:
        print("missing", version, "PATH, %s/versions, /usr/bin, /usr/local/bin" % pyenv)
