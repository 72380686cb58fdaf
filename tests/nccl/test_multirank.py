"""Four ranks in four processes, one database: a ring all-reduce and each rank's sends to the next
rank (and receives from the previous one). The ranks find each other by the communicator's hash,
so the traffic appears per device pair although no process knows the others."""
from ncclsim import *

db = tempdb()
HASH = "0123456789abcdef"
procs = []
for rank in range(4):
    args = ["--rank", rank, "--nranks", 4, "--comm", HASH, "--device", rank]
    procs.append(sim_start(args + ["allreduce", 10, 1 << 20], db=db, SIMCUDA_DEVICES=4))
for p in procs:
    out, err = p.communicate(timeout=120)
    check(p.returncode == 0, "rank process exited cleanly (%s)" % err.strip())
procs = []
for rank in range(4):
    args = ["--rank", rank, "--nranks", 4, "--comm", "fedcba9876543210", "--device", rank]
    procs.append(sim_start(args + ["sendrecv", 3, 65536, (rank + 1) % 4, (rank + 3) % 4], db=db,
                           SIMCUDA_DEVICES=4))
for p in procs:
    out, err = p.communicate(timeout=120)
    check(p.returncode == 0, "rank process exited cleanly (%s)" % err.strip())

comms = query(db, "SELECT comm_hash, rank, device, uuid FROM nccl_comms WHERE comm_hash = ? "
                  "ORDER BY rank", HASH)
equal([(c[1], c[2]) for c in comms], [(0, 0), (1, 1), (2, 2), (3, 3)],
      "four ranks of one communicator, each on its device")
equal(len({c[3] for c in comms}), 4, "four GPUs by UUID")
equal(scalar(db, "SELECT count(DISTINCT process_id) FROM nccl_comms WHERE comm_hash = ?", HASH), 4,
      "from four processes")
seqs = query(db, "SELECT o.op_seq, count(DISTINCT c.rank) FROM nccl_ops o JOIN nccl_comms c USING "
                 "(process_id, comm_serial) WHERE c.comm_hash = ? GROUP BY o.op_seq", HASH)
equal(seqs, [(k, 4) for k in range(10)], "each all-reduce's sequence number on all four ranks")

pairs = query(db, "SELECT src_rank, dst_rank, src_device, dst_device, sends, recvs, bytes FROM "
                  "nccl_pair_traffic WHERE comm_hash = 'fedcba9876543210' ORDER BY 1, 2")
ring = sorted([(r, (r + 1) % 4) for r in range(4)] + [(r, (r + 3) % 4) for r in range(4)])
equal([(p[0], p[1]) for p in pairs], ring, "each rank's sends to its neighbours, as pairs")
check(all(p[2] == p[0] and p[3] == p[1] for p in pairs),
      "the pairs' devices come from the other process's communicator row")
check(all(p[4] == 3 and p[5] == 3 and p[6] == 3 * 65536 for p in pairs),
      "both sides of each transfer recorded, its bytes counted once")
equal(scalar(db, "SELECT count(*) FROM nccl_pair_traffic WHERE comm_hash = ?", HASH), 0,
      "a four-rank all-reduce gets no pair: NCCL does not say its ring order")

# Two hosts write two databases; `p2pguard merge` joins them and the pairs are whole again.
a, b, merged = tempdb(), tempdb(), tempdb()
procs = []
for rank in range(4):
    args = ["--rank", rank, "--nranks", 4, "--comm", "00000000000000bb", "--device", rank]
    procs.append(sim_start(args + ["sendrecv", 2, 4096, (rank + 1) % 4, (rank + 3) % 4],
                           db=a if rank < 2 else b, SIMCUDA_DEVICES=4))
for p in procs:
    p.communicate(timeout=120)
out = cli("merge", merged, a, b)
equal(out.returncode, 0, "p2pguard merge of the two databases (%s)" % out.stderr.strip())
equal(scalar(a, "SELECT count(*) FROM nccl_pair_traffic WHERE src_device IS NOT NULL AND "
                "dst_device IS NOT NULL"), 2, "one database alone knows the devices of 2 of 8 pairs")
equal(scalar(merged, "SELECT count(*) FROM nccl_pair_traffic WHERE src_device IS NOT NULL AND "
                     "dst_device IS NOT NULL AND sends = 2 AND recvs = 2"), 8,
      "merged: all 8 directed pairs, both sides and both devices")
done()
