"""Stream-ordered pools shared between processes, through the real database: the conformance
program that shares a cudaMallocAsync pool (the pool exported as a POSIX descriptor, a pointer's
export data, the import of both in a second process, its device given access) runs under the guard,
unchanged, and leaves a peer_mappings row for each export, import and grant, each call once
although the runtime reaches the driver's; the fabric pool's refused export (cudaErrorNotPermitted
without an IMEX channel, as measured on an H200) is a failure row that names the IMEX rule."""
import os
import re
from harness import *

POOL = os.path.join(BUILD, "tests/conformance/conformance_rt_pool_ipc")
MiB = 1 << 20
strip = lambda text: re.sub(r"[0-9][0-9.]*", "N", text)

db = tempdb()
bare = run([POOL], preload=False)
proc = run([POOL], db=db)
check(strip(proc.stdout) == strip(bare.stdout), "the same %d check lines with and without the guard" % bare.stdout.count("\n"))
check("# PASS" in proc.stdout, "its checks pass under the guard")

rows = query(db, "SELECT process_id, api, event, status, owner_device, accessor_device, cross_process, bytes, handle_type "
                 "FROM peer_mappings WHERE api LIKE '%MemPool%' ORDER BY started_ns")
owner = scalar(db, "SELECT process_id FROM peer_mappings WHERE api = 'cudaMemPoolExportPointer' AND status = 0")
importer = scalar(db, "SELECT process_id FROM peer_mappings WHERE api = 'cudaMemPoolImportPointer' AND status = 0")
check(owner and importer and owner != importer, "the owner's and the importer's rows are two processes (%s, %s)" % (owner, importer))
equal([r[1:] for r in rows if r[0] == owner],
      [("cudaMemPoolExportToShareableHandle", "export", 800, None, None, 0, 0, "fabric"),
       ("cudaMemPoolExportToShareableHandle", "export", 0, None, None, 0, 0, "posix_fd"),
       ("cudaMemPoolExportPointer", "export", 0, 0, None, 0, MiB, None)],
      "owner: the refused fabric export, the pool's export and the pointer's (device 0, 1 MiB), once each")
equal([r[1:] for r in rows if r[0] == importer],
      [("cudaMemPoolImportFromShareableHandle", "import", 0, None, 1, 1, 0, "posix_fd"),
       ("cudaMemPoolSetAccess", "access", 0, None, 1, 0, 0, None),
       ("cudaMemPoolImportPointer", "import", 0, None, 1, 1, MiB, None)],
      "importer: the pool's import on device 1, device 1's grant, the pointer's import (1 MiB)")
equal(scalar(db, "SELECT count(*) FROM peer_mappings WHERE api LIKE 'cuMemPool%'"), 0,
      "the runtime's calls into the driver are not recorded a second time")

failures = query(db, "SELECT api, status, rule_id FROM failures WHERE api LIKE '%MemPool%'")
equal(failures, [("cudaMemPoolExportToShareableHandle", 800, "ipc/fabric-handle-no-imex-channel")],
      "the refused fabric export is a failure row diagnosed by the IMEX rule")

report = cli("report", db)
check("cudaMemPoolExportToShareableHandle" in report.stdout, "report: names the pool's export")

# One device: the importer shares device 0 and grants nothing.
db1 = tempdb("one.db")
proc = run([POOL], db=db1, SIMCUDA_DEVICES="1")
check("# PASS" in proc.stdout, "one device: its checks pass under the guard")
equal(query(db1, "SELECT api, owner_device, accessor_device FROM peer_mappings WHERE api LIKE 'cudaMemPoolImport%' AND status = 0 "
                 "ORDER BY started_ns"),
      [("cudaMemPoolImportFromShareableHandle", None, 0), ("cudaMemPoolImportPointer", 0, 0)],
      "one device: the imported pointer's device is its owner's (the process sees one device)")
done()
