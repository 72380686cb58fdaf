"""Links and files another user plants on the database's path or on `metrics -o FILE` (issue 22,
item 8: a link planted by uid nobody in a shared folder turned a root-owned file into a 400 KB
SQLite database; metrics wrote FILE.tmp through any link). A link is followed only when this user
or the folder's owner made it, as the kernel's protected_symlinks rule does in sticky world-writable
folders; a file another user made in a folder anyone may write is not filled. One line each, the
program runs on, the target is untouched. Run as root, with uid nobody as the other user."""
import hashlib
import os
import pwd
import stat
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


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def plant_link(target, where):
    """A symbolic link made by the other user."""
    subprocess.run(as_other + ["ln", "-s", target, where], check=True)


def shared_folder():
    """Anyone may write it, and it is not sticky: the kernel's own rule does not apply here."""
    parent = tempfolder()
    os.chmod(parent, 0o755)
    folder = os.path.join(parent, "shared")
    os.mkdir(folder)
    os.chmod(folder, 0o777)
    return folder


bare = run([program("rt_peer"), "basic"], preload=False)
want = expectations(bare.stdout)["transfers"]
secret = os.path.join(tempfolder(), "root-owned.conf")
with open(secret, "w") as f:
    f.write("root's own file\n" * 10)
os.chmod(secret, 0o644)
before = digest(secret)

# The database itself a link of the other user's.
folder = shared_folder()
db = os.path.join(folder, "p2pguard.db")
plant_link(secret, db)
proc = run([program("rt_peer"), "basic"], db=db)
equal(proc.stdout, bare.stdout, "planted link: the program's output is a bare run's")
said = lines(proc.stderr)
equal(len(said), 1, "planted link: one line (%s)" % said)
check(said and "symbolic link of uid %d" % other.pw_uid in said[0], "the line names the link's owner")
equal(digest(secret), before, "planted link: the root-owned file is untouched")

# Its -wal companion a link.
folder = shared_folder()
db = os.path.join(folder, "p2pguard.db")
plant_link(secret, db + "-wal")
proc = run([program("rt_peer"), "basic"], db=db)
equal(len(lines(proc.stderr)), 1, "planted -wal link: one line (%s)" % lines(proc.stderr))
equal(digest(secret), before, "planted -wal link: the root-owned file is untouched")

# A folder on the way a link of the other user's.
folder = shared_folder()
private = tempfolder()
plant_link(private, os.path.join(folder, "sub"))
db = os.path.join(folder, "sub", "p2pguard.db")
proc = run([program("rt_peer"), "basic"], db=db)
equal(len(lines(proc.stderr)), 1, "planted folder link: one line (%s)" % lines(proc.stderr))
equal(os.listdir(private), [], "planted folder link: nothing made where it points")

# A file the other user made in the shared folder, waiting to be filled: refused.
folder = shared_folder()
db = os.path.join(folder, "p2pguard.db")
subprocess.run(as_other + ["touch", db], check=True)
proc = run([program("rt_peer"), "basic"], db=db)
said = lines(proc.stderr)
equal(len(said), 1, "planted file: one line (%s)" % said)
check(said and "belongs to uid %d" % other.pw_uid in said[0], "the line names its owner")
equal(os.path.getsize(db), 0, "planted file: left empty")

# A link of this user's own, or of the folder's owner: followed as ever.
folder = tempfolder()
real = os.path.join(tempfolder(), "real.db")
os.symlink(real, os.path.join(folder, "p2pguard.db"))
proc = run([program("rt_peer"), "basic"], db=os.path.join(folder, "p2pguard.db"))
equal(lines(proc.stderr), [], "own link: nothing said")
equal(scalar(real, "SELECT count(*) FROM transfers"), want, "own link: the rows are in the file it points to")

# metrics -o FILE: the old temporary name a planted link, and FILE itself one.
db = os.path.join(tempfolder(), "p2pguard.db")
run([program("rt_peer"), "basic"], db=db)
folder = shared_folder()
out = os.path.join(folder, "p2pguard.prom")
plant_link(secret, out + ".tmp")
m = cli("metrics", db, "-o", out)
equal(m.returncode, 0, "metrics -o with a planted FILE.tmp: exit 0 (%s)" % m.stderr.strip())
equal(digest(secret), before, "metrics -o: the root-owned file is untouched")
check(os.path.isfile(out) and not os.path.islink(out) and "p2pguard_peer_copies_total" in open(out).read(),
      "metrics -o: FILE holds the metrics")
equal(stat.S_IMODE(os.stat(out).st_mode) & 0o444, 0o444, "metrics -o: FILE is readable by the collector")
os.remove(out)
plant_link(secret, out)
m = cli("metrics", db, "-o", out)
equal(m.returncode, 0, "metrics -o onto a planted link: exit 0")
check(not os.path.islink(out) and digest(secret) == before, "metrics -o: the link is replaced, not followed")
equal([n for n in os.listdir(folder) if n.startswith(".")], [], "metrics -o: no temporary file left")

# trace -o FILE and report --html FILE, written as streams, the same way: a planted link at FILE is
# replaced, never followed; the file is whole when it takes its name; a FIFO is written as it is.
for name, args in (("trace.json", ["trace", db, "-o"]), ("report.html", ["report", db, "--html"])):
    out = os.path.join(folder, name)
    plant_link(secret, out)
    m = cli(*(args + [out]))
    equal(m.returncode, 0, "%s onto a planted link: exit 0 (%s)" % (args[0], m.stderr.strip()))
    check(not os.path.islink(out) and digest(secret) == before,
          "%s: the link is replaced, not followed; the root-owned file is untouched" % args[0])
    check(os.path.getsize(out) > 0 and open(out).read().rstrip().endswith(("}", "</html>")),
          "%s: the file is whole" % args[0])
    equal(stat.S_IMODE(os.stat(out).st_mode) & 0o444, 0o444, "%s: the file is readable" % args[0])
    equal([n for n in os.listdir(folder) if n.startswith(".")], [], "%s: no temporary file left" % args[0])
fifo = os.path.join(tempfolder(), "trace.fifo")
os.mkfifo(fifo)
reader = subprocess.Popen(["cat", fifo], stdout=subprocess.PIPE)
m = cli("trace", db, "-o", fifo)
got = reader.communicate(timeout=30)[0]
equal(m.returncode, 0, "trace -o a FIFO: exit 0 (%s)" % m.stderr.strip())
check(got.lstrip().startswith(b"{") and stat.S_ISFIFO(os.stat(fifo).st_mode), "trace -o a FIFO: written through it, still a FIFO")
done()
