"""The spool is not a way in: its folder is 0700 and its files 0600, made without following a
symbolic link; a folder or a file that another user planted, or a link, is refused with one line
and the program runs on, its output a bare run's. Tested with a second user (uid nobody, or one
made here); CI runs as root."""
import glob
import os
import pwd
import shutil
import stat
import tempfile
import time
from harness import *

if os.geteuid() != 0:
    print("1..0 # SKIP needs root to act as a second user (setpriv) and to chown; CI runs as root")
    raise SystemExit(77)

try:
    other = pwd.getpwnam("nobody")
except KeyError:
    subprocess.run(["useradd", "--system", "--no-create-home", "p2pg-other"], check=True)
    other = pwd.getpwnam("p2pg-other")
as_other = ["setpriv", "--reuid=%d" % other.pw_uid, "--regid=%d" % other.pw_gid, "--clear-groups"]


def lines(stderr):
    return [l for l in stderr.splitlines() if l.startswith("p2pguard:")]


bare = run([program("rt_peer"), "basic"], preload=False)


def same_as_bare(proc, what):
    equal(proc.stdout, bare.stdout, what + ": the program's output is a bare run's")
    equal(proc.returncode, bare.returncode, what + ": and so is its status")


# Modes: the folder 0700, the file 0600, while the process lives; the other user cannot read it.
db = tempdb()
os.chmod(os.path.dirname(db), 0o755)
proc = subprocess.Popen([program("rt_peer"), "copier", db + ".counts", "1"], env=environment(db),
                        stdout=subprocess.PIPE, text=True)
proc.stdout.readline()  # READY; the spool comes with the first copy
deadline = time.time() + 10
while not glob.glob(db + ".spool/*.spool6") and time.time() < deadline:
    time.sleep(0.01)
files = glob.glob(db + ".spool/*.spool6")
if not files:
    proc.kill()
equal(len(files), 1, "a living process has its spool file")
equal(stat.S_IMODE(os.stat(db + ".spool").st_mode), 0o700, "the spool folder is 0700")
equal(stat.S_IMODE(os.stat(files[0]).st_mode), 0o600, "the spool file is 0600")
peek = subprocess.run(as_other + ["head", "-c", "8", files[0]], capture_output=True, text=True)
check(peek.returncode != 0 and "Permission denied" in peek.stderr,
      "another user cannot read the records (%s)" % peek.stderr.strip())
proc.kill()
proc.wait()

# A folder of ours that an older guard left open to others is closed.
db = tempdb()
os.mkdir(db + ".spool", 0o775)
os.chmod(db + ".spool", 0o775)
guarded = run([program("rt_peer"), "basic"], db=db)
same_as_bare(guarded, "own 0775 folder")
equal(stat.S_IMODE(os.stat(db + ".spool").st_mode), 0o700, "our old 0775 spool folder is made 0700")
check(scalar(db, "SELECT count(*) FROM transfers") > 0, "and records go through it")

# The spool folder is a symbolic link: refused, nothing written where it points.
db = tempdb()
elsewhere = os.path.join(os.path.dirname(db), "elsewhere")
os.mkdir(elsewhere)
os.symlink(elsewhere, db + ".spool")
guarded = run([program("rt_peer"), "basic"], db=db)
same_as_bare(guarded, "symlinked folder")
said = lines(guarded.stderr)
equal(len(said), 1, "one line: %s" % said)
check(said and "symbolic link" in said[0] and "not recorded" in said[0], "it says why and what is lost")
equal(os.listdir(elsewhere), [], "nothing written where the link points")

# A folder that the other user planted in a shared, sticky folder (like /tmp) before our run.
shared = tempfile.mkdtemp(prefix="p2pg-shared-")
os.chmod(shared, 0o1777)
db = os.path.join(shared, "p2pguard.db")
subprocess.run(as_other + ["mkdir", "-m", "0777", db + ".spool"], check=True)
equal(os.stat(db + ".spool").st_uid, other.pw_uid, "the other user's folder is in place")
guarded = run([program("rt_peer"), "basic"], db=db)
same_as_bare(guarded, "planted folder")
said = lines(guarded.stderr)
equal(len(said), 1, "one line: %s" % said)
check(said and ("uid %d" % other.pw_uid) in said[0], "it names the other owner")
equal(os.listdir(db + ".spool"), [], "nothing written into the planted folder")
rec = subprocess.run([CLI, "recover", db], capture_output=True, text=True, env=environment(preload=False))
equal(rec.returncode, 0, "recover with a planted folder exits 0")
equal(len(lines(rec.stderr)), 1, "recover refuses it with one line: %s" % lines(rec.stderr))

# Files planted in our folder: the other user's spool, a link to a real spool, a FIFO.
source = tempdb()
proc = subprocess.Popen([program("rt_peer"), "copier", source + ".counts", "1"], env=environment(source),
                        stdout=subprocess.PIPE, text=True)
proc.stdout.readline()
time.sleep(0.1)
proc.kill()
proc.wait()
real = glob.glob(source + ".spool/*.spool6")[0]
db = tempdb()
folder = db + ".spool"
os.mkdir(folder, 0o700)
planted = os.path.join(folder, "100-1.spool6")
subprocess.run(["cp", "--sparse=always", real, planted], check=True)
os.chown(planted, other.pw_uid, other.pw_gid)
os.symlink(real, os.path.join(folder, "200-2.spool6"))
os.mkfifo(os.path.join(folder, "300-3.spool6"))
rec = subprocess.run([CLI, "recover", db], capture_output=True, text=True, env=environment(preload=False),
                     timeout=60)
equal(rec.returncode, 0, "recover with planted files exits 0 (no hang on the FIFO)")
said = lines(rec.stderr)
equal(len(said), 1, "one line for the planted files: %s" % said)
equal(scalar(db, "SELECT count(*) FROM transfers"), 0, "nothing of them imported")
equal(sorted(os.listdir(folder)), ["100-1.spool6", "200-2.spool6", "300-3.spool6"], "they are left alone")
check(os.path.exists(real), "the link's target is untouched")
guarded = run([program("rt_peer"), "basic"], db=db)
same_as_bare(guarded, "planted files, guarded run")
check(len(lines(guarded.stderr)) <= 1, "a guarded run says at most one line about them")
check(scalar(db, "SELECT count(*) FROM transfers") > 0, "its own records are kept")

# A crash's spool that the version before an upgrade left (another layout): recover leaves it for
# that version and says so, naming it; the database's own spools are imported as usual.
db = tempdb()
folder = db + ".spool"
os.mkdir(folder, 0o700)
with open(os.path.join(folder, "77-1.spool5"), "wb") as f:
    f.write(b"P2PGSPL5" + bytes(4088))
rec = subprocess.run([CLI, "recover", db], capture_output=True, text=True, env=environment(preload=False),
                     timeout=60)
equal(rec.returncode, 0, "recover beside another version's spool exits 0")
equal(lines(rec.stderr), ["p2pguard: %s holds 1 spool file of another p2pguard version (77-1.spool5), which this "
                          "version cannot read: that version's `p2pguard recover` imports it" % folder],
      "one line names the other version's spool")
equal(os.listdir(folder), ["77-1.spool5"], "and it is left as it was")
done()
