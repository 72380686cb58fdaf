"""NCCL's operations in the database, one row each: collectives with NCCL's sequence number,
algorithm, protocol and channels, sends and receives with their peer, bytes as count x datatype
size, host times from start to the last kernel channel's end, GPU time from the channels'
globaltimer stamps; groups and two communicators; a device pair per point-to-point transfer."""
from ncclsim import *

db = tempdb()
sim(["--device", 1, "allreduce", 20, 1 << 20], db=db, SIMCUDA_DEVICES=2)
rows = query(db, "SELECT kind, func, op_seq, count, datatype, bytes, channels, channels_done, "
                 "algorithm, protocol, state, root FROM nccl_ops ORDER BY op_seq")
equal(len(rows), 20, "20 all-reduces, 20 rows")
equal(rows[0], ("coll", "AllReduce", 0, 262144, "ncclFloat32", 1 << 20, 2, 2, "RING", "SIMPLE",
                "done", 0), "a row says what NCCL said of the collective")
equal([r[2] for r in rows], list(range(20)), "NCCL's sequence numbers, in order")
times = query(db, "SELECT started_ns, ended_ns, host_ns, gpu_ns FROM nccl_ops")
check(all(e >= s and h == e - s for s, e, h, g in times), "ended_ns - started_ns = host_ns")
check(all(g is not None and 20000 <= g <= h for s, e, h, g in times),
      "GPU time from the channels' stamps: at least the simulated 20 us, at most the host's")
comm = query(db, "SELECT comm_hash, rank, nranks, device, uuid, pci_bus_id, hostname, "
                 "finalized_ns IS NOT NULL, ops_recorded, ops_unreported, events_untracked "
                 "FROM nccl_comms")
equal(len(comm), 1, "one communicator")
h, rank, nranks, device, uuid, pci, host, finalized, recorded, unreported, untracked = comm[0]
equal((h, rank, nranks, device), ("5eedc0ffee000001", 0, 1, 1),
      "its hash (16 hex digits), rank, size and the CUDA device current when NCCL made it")
check(uuid.startswith("GPU-") and len(uuid) == 40, "the GPU's UUID as nvidia-smi prints it (%s)" % uuid)
check(pci is not None and len(pci) == 16 and pci.startswith("0000"), "the PCI bus id, NVML's form (%s)" % pci)
check(host == os.uname().nodename, "the host name")
equal((finalized, recorded, unreported, untracked), (1, 20, 0, 0),
      "its finalize: 20 operations recorded, none unreported or untracked")

# A rank sending to itself (the world-size-1 case NCCL runs on one GPU): pairs per device.
db = tempdb()
sim(["sendrecv", 5, 8192, 0], db=db)
rows = query(db, "SELECT func, peer, bytes, count(*) FROM nccl_ops GROUP BY func ORDER BY func")
equal(rows, [("Recv", 0, 8192, 5), ("Send", 0, 8192, 5)], "sends and receives with peer and bytes")
equal(scalar(db, "SELECT count(DISTINCT op_seq) FROM nccl_ops"), 10,
      "the guard numbers a communicator's point-to-point operations")
pair = query(db, "SELECT kind, src_rank, dst_rank, src_device, dst_device, sends, recvs, bytes, "
                 "gpu_gbps > 0 FROM nccl_pair_traffic")
equal(pair, [("p2p", 0, 0, 0, 0, 5, 5, 40960, 1)],
      "nccl_pair_traffic: the pair 0->0 with both sides' counts and GPU GB/s")

# Overlapping groups: all operations of a group are tasks of one launch, a nested group adds to
# the outer one.
db = tempdb()
sim(["--nranks", 2, "mixed", 4], db=db)
rows = dict(query(db, "SELECT func, count(*) FROM nccl_ops GROUP BY func"))
equal(rows, {"AllReduce": 4, "Broadcast": 4, "Send": 4, "Recv": 4, "ReduceScatter": 4,
             "AllGather": 4}, "every operation of the groups recorded")
equal(query(db, "SELECT DISTINCT peer FROM nccl_ops WHERE kind = 'p2p' ORDER BY 1"), [(1,)],
      "peers from the descriptors")
equal(scalar(db, "SELECT count(*) FROM nccl_ops WHERE state != 'done' OR gpu_ns IS NULL"), 0,
      "all done, all GPU-timed")

# Two communicators, their operations interleaved.
db = tempdb()
sim(["twocomms", 6], db=db)
rows = query(db, "SELECT c.comm_hash, o.func, count(*) FROM nccl_ops o JOIN nccl_comms c USING "
                 "(process_id, comm_serial) GROUP BY 1, 2 ORDER BY 1")
equal(rows, [("5eedc0ffee000001", "AllReduce", 6), ("5eedc0ffee000002", "AllGather", 6)],
      "each operation under its own communicator")
equal(scalar(db, "SELECT count(*) FROM nccl_comms WHERE finalized_ns IS NOT NULL"), 2,
      "both finalized")
totals = query(db, "SELECT func, ops, bytes, gpu_timed FROM nccl_totals ORDER BY func")
equal(totals, [("AllGather", 6, 6 * 4096, 6), ("AllReduce", 6, 6 * 65536, 6)],
      "nccl_totals counts each once")

# The report: an NCCL section, in text and JSON.
out = cli("report", db)
check(out.returncode == 0 and "NCCL" in out.stdout and "AllReduce" in out.stdout,
      "p2pguard report has an NCCL section (%s)" % out.stderr.strip())
out = cli("report", "--json", db)
doc = json.loads(out.stdout)
check("nccl" in doc and len(doc["nccl"]["communicators"]) == 2,
      "p2pguard report --json has the communicators under nccl")
done()
