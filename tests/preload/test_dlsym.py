"""dlsym interposed: other libraries' RTLD_NEXT lookups keep working, other lookups are untouched."""
from harness import *

bare = run([program("next_user")], preload=False)
guarded = run([program("next_user")], db=tempdb(), check=False)
equal(guarded.returncode, 0, "an interposing library's dlsym(RTLD_NEXT) still finds the next getpid")
equal(guarded.stdout, bare.stdout, "same answer with and without the guard (%s)" % bare.stdout.strip())
done()
