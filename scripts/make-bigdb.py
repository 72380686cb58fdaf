#!/usr/bin/env python3
"""Builds a large p2pguard database the way a real cluster job would fill one, for measuring and
testing the outputs (report, report --html, trace, metrics) at scale.

    scripts/make-bigdb.py OUT.db [--rows 1000000] [--gpus 8] [--processes 100] [--per-host 8]
                          [--seed-db DB] [--no-devices] [--nccl-rows N] [--no-mappings] [--seed N]

How it is built: direct SQL inserts into the schema of src/record/schema.sql (plus the columns
src/record/store_open.c adds to older databases, and the `devices` table of the physical-identity
work), in one transaction. The shape is that of a job of `--processes` ranks, `--per-host` per node,
each seeing `--gpus` GPUs in two PCIe groups of half the GPUs (pairs within a group do P2P, pairs
across the groups have no P2P: their enables fail with 217 and their copies take the driver's
path); a tenth of the ranks run in `staged` mode. Copies are mostly asynchronous, sized by powers
of two from 4 KiB to 64 MiB, GPU-timed as the default sampling does it (every copy of 1 MiB or
more, one small copy in eight), synchronous ones carrying their call time as GPU time; bandwidth
follows size (a fixed latency plus bytes over the link's rate). Each rank also has its
peer-access calls, its failed enables (one failure row per failing pair), a few identical crashes,
stalls, overflow aggregates and summary-mode buckets.

NCCL (--nccl-rows, a quarter of --rows by default; 0: none), as the guard's profiler plugin records
a job of data, tensor and pipeline parallelism: each rank's communicators in nccl_comms (the world,
its host's ranks, the two-rank group of its GPU and the next one), and its operations in nccl_ops,
step after step: the world's gradient all-reduces, reduce-scatters and all-gathers over the network,
its host's all-reduces over NVLink, the two-rank group's all-reduces, and the pipeline's sends and
receives to the same GPU of the next and the previous host. GPU time follows size and link (one
two-rank pair and one pipeline link are slow, as a pair rerouted through the root complex is); one
operation in fifty has no GPU time. The summary-mode ranks fold their operations into
nccl_op_summary, three ranks overflow into nccl_op_overflow, two ranks hang in an all-reduce
(nccl_stalls, their operations 'running') and the crashed ranks leave one operation unreported.

Cross-process mappings (--no-mappings: none), as the guard records a job whose NCCL maps its peers'
buffers with cuMem (NCCL >= 2.19, its default) and whose ranks share tensors through PyTorch's CUDA
IPC: at each communicator's start, every rank imports, maps and is given access to a buffer of the
peer it sends to, per channel, on every P2P link of its host (the world ring's next rank, 16
channels; the host's ring, 24; its two-rank group's other GPU, 8; none across the PCIe groups, where
NCCL uses shared memory, and none for staged ranks, where the guard sets NCCL_P2P_DISABLE), the
owner exporting each one (cuMemExportToShareableHandle) and counting its own maps; the unmaps and
releases come at the communicators' end, except in the crashed ranks and the last host's (their
program never destroyed its communicators): those stay live. Every rank also opens four weight
buckets of its two-rank group's other GPU with cudaIpcOpenMemHandle at each of twelve
synchronisations, closing them before the next; its owner exports them. PyTorch's expandable
segments make each rank's own-device maps by the ten thousand (mapping_counts). One rank's import
fails with 101 (its CUDA_VISIBLE_DEVICES hides the owner GPU) and one rank's IPC open with 201 (a
container), each with its failures row.

The text of failures and crashes (diagnosis, advice, evidence, stacks) and the rules table come
from --seed-db when given: a database written by the guard on the simulated CUDA (scripts/
bench-outputs.sh makes one from `rt_peer errors` and `rt_peer crash`), so those rows are real
rows, multiplied and spread over ranks and pairs. Without it they are short stand-ins.
"""
import argparse
import os
import random
import sqlite3
import sys

SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEVICES_SQL = """CREATE TABLE IF NOT EXISTS devices (process_id INTEGER NOT NULL, ordinal INTEGER
  NOT NULL, uuid TEXT, pci_bus_id TEXT, name TEXT, physical_index INTEGER,
  PRIMARY KEY (process_id, ordinal))"""
# Columns that store_open.c adds to databases made before them.
ADDED = [("crashes", "python_stack", "TEXT"), ("processes", "records_invalid", "INTEGER NOT NULL DEFAULT 0"),
         ("processes", "run_id", "TEXT")]
BUS = ["18", "2A", "3A", "5D", "9A", "AB", "BA", "DB"]
ASYNC_APIS = [("cudaMemcpyAsync", 70), ("cudaMemcpyPeerAsync", 15), ("cuMemcpyDtoDAsync_v2", 5)]
SYNC_APIS = [("cudaMemcpyPeer", 7), ("cudaMemcpy", 3)]


def gpu_identity(host, ordinal):
    """The UUID and PCI bus id of a host's GPU, the same in every table."""
    u = random.Random(host * 1000 + ordinal)
    uuid = "GPU-%08x-%04x-%04x-%04x-%012x" % (u.getrandbits(32), u.getrandbits(16), u.getrandbits(16),
                                             u.getrandbits(16), u.getrandbits(48))
    bus = "00000000:%s:00.0" % (BUS[ordinal] if ordinal < len(BUS) else "%02X" % (0x10 + ordinal))
    return uuid, bus


def seed_texts(path):
    """Failure and crash texts by kind from a guard-written database, and its rules table."""
    texts = {"fail": {}, "crash": {}, "rules": []}
    if not path:
        return texts
    con = sqlite3.connect(path)
    for status, rule, diag, advice, bt, ev in con.execute(
            "SELECT status, rule_id, diagnosis, advice, backtrace, evidence FROM failures"):
        texts["fail"].setdefault(status, (rule, diag, advice, bt, ev))
    for sig, bt in con.execute("SELECT signal, backtrace FROM crashes"):
        texts["crash"].setdefault(sig, bt)
    texts["rules"] = con.execute("SELECT * FROM rules").fetchall()
    # What a rule says, for failures whose seed row was diagnosed by another rule.
    for rid, cause, advice in con.execute("SELECT id, root_cause, advice FROM rules"):
        texts.setdefault("rule_text", {})[rid] = (cause, advice)
    con.close()
    return texts


def nccl(con, procs, a, rnd, t0, span, total):
    """NCCL's communicators and operations of the job (see the module's text); returns the number
    of operations, rows or folded."""
    P, G, per = len(procs), a.gpus, a.per_host
    host_of = lambda r: r // per
    hashes = random.Random(a.seed + 7)
    world = "%016x" % hashes.getrandbits(64)
    node_hash = {h: "%016x" % hashes.getrandbits(64) for h in range(P // per + 1)}
    pair_hash = {r: "%016x" % hashes.getrandbits(64) for r in range(0, P, 2)}
    slow_pair = (3 * per + 2) if 3 * per + 3 < P else None  # its two-rank group's GPUs: a slow path
    slow_link = 5 * per + 4 if 6 * per + 4 < P else None    # its pipeline sends to the next host: slow
    stuck = {20, 21} if P > 21 and host_of(20) == host_of(21) else set()
    crashed = {p["rank"] for p in procs if p["recovered"]}
    comm_rows, op_rows, summary, overflow, stall_rows = [], [], {}, {}, []
    ops_total = 0

    def comm_list(r):
        out = [(0, world, "default_pg", r, P, (P + per - 1) // per)]
        h = host_of(r)
        on_host = min(per, P - h * per)
        if on_host > 1:
            out.append((1, node_hash[h], "tp_node%03d" % (h + 1), r - h * per, on_host, 1))
        mate = r ^ 1
        if mate < P and host_of(mate) == h:
            out.append((2, pair_hash[r & ~1], "pair_%d_%d" % (r & ~1, r | 1), r & 1, 2, 1))
        return out

    def gbps(kind, r, peer=None):
        if kind == "world":
            return 21.0
        if kind == "node":
            return 160.0
        if kind == "pair":
            return 14.0 if slow_pair is not None and r & ~1 == slow_pair else 190.0
        # pipeline over the network
        return 4.5 if slow_link is not None and (r, peer) == (slow_link, slow_link + per) else 23.0

    per_rank = max(1, total // max(1, P))
    for p in procs:
        r, pid = p["rank"], p["pid"]
        comms = comm_list(r)
        for serial, h, name, crank, n, nodes in comms:
            uuid, bus = gpu_identity(host_of(r), p["local"])
            comm_rows.append([p["id"], serial, h, name, crank, n, nodes, p["local"], uuid, bus, p["host"], 5, None,
                              pid, p["started"] + 2 * 10**9, None if r in crashed else p["started"] + span + 5 * 10**9,
                              0, 0, 17 if r == 3 else 0])
        cidx = {c[1]: i for i, c in enumerate(comm_rows[-len(comms):], len(comm_rows) - len(comms))}
        step_ops = [("world", "AllReduce", 25 << 20), ("world", "AllReduce", 25 << 20),
                    ("world", "ReduceScatter", 8 << 20), ("world", "AllGather", 8 << 20)]
        if 1 in cidx:
            step_ops += [("node", "AllReduce", 8 << 20)] * 4
        if 2 in cidx:
            step_ops += [("pair", "AllReduce", 4 << 20)] * 2
        for peer in (r + per, r - per):
            if 0 <= peer < P:
                step_ops += [("pipe", "Send", 16 << 20, peer), ("pipe", "Recv", 16 << 20, peer)]
        steps = max(1, per_rank // len(step_ops))
        period = span // (steps + 1)
        seqs, serial_seq = {}, 0
        t = p["started"] + 3 * 10**9
        folded = p["record"] == "summary"
        for s in range(steps):
            t = p["started"] + 3 * 10**9 + s * period
            for op in step_ops:
                kind, func, size = op[:3]
                peer = op[3] if len(op) > 3 else None
                comm = {"world": 0, "pipe": 0, "node": 1, "pair": 2}[kind]
                size += rnd.randrange(size // 16) if kind == "world" and rnd.random() < 0.5 else 0
                rate = gbps(kind, r, peer if func == "Send" else None) * rnd.uniform(0.85, 1.1)
                if func == "Recv" and slow_link is not None and (peer, r) == (slow_link, slow_link + per):
                    rate = gbps(kind, peer, r) * rnd.uniform(0.85, 1.1)
                gpu = int(8000 + size / rate)
                host = gpu + rnd.randrange(15000, 90000)
                key = (comm, func)
                seq = seqs.get(key, 0)
                seqs[key] = seq + 1
                p2p = func in ("Send", "Recv")
                ops_total += 1
                if folded:
                    bkey = (p["id"], comm, "p2p" if p2p else "coll", func, peer if p2p else -1, size.bit_length() - 1)
                    b = summary.setdefault(bkey, [0, 0, 0, 0, 0])
                    b[0] += 1
                    b[1] += size
                    b[2] += host
                    b[3] += gpu
                    b[4] += 1
                    t += host
                    continue
                if r in (11, 12, 13) and s % 10 == 9:
                    okey = (p["id"], 7, comm, func, peer if p2p else -1, "" if p2p else "RING",
                            "" if p2p else "SIMPLE", size.bit_length() - 1)
                    o = overflow.setdefault(okey, [0, 0, 0])
                    o[0] += 1
                    o[1] += size
                    o[2] += host
                    t += host
                    continue
                timed = rnd.randrange(50) != 0
                channels = {"world": 16, "node": 24, "pair": 8, "pipe": 4}[kind]
                algo = None if p2p else ("TREE" if kind == "world" and func == "AllReduce" and s % 2 else "RING")
                proto = None if p2p else ("LL128" if kind == "node" else "SIMPLE")
                op_rows.append([p["id"], comm, pid + 100, "p2p" if p2p else "coll", func,
                                serial_seq if p2p else seq, peer, None if p2p else 0, size // 2, "ncclBfloat16", size,
                                channels, channels, algo, proto, "done", t, t + host, host, gpu if timed else None,
                                7, serial_seq])
                serial_seq += 1
                comm_rows[cidx[comm]][16] += 1
                t += host + rnd.randrange(2000, 20000)
        if r in crashed or r in stuck:
            comm = 2 if r in stuck and 2 in cidx else 0
            seq = seqs.get((comm, "AllReduce"), 0)
            op_rows.append([p["id"], comm, pid + 100, "coll", "AllReduce", seq, None, 0, 2 << 20, "ncclBfloat16", 4 << 20,
                            8, 0, "RING", "SIMPLE", "running" if r in stuck else "unreported", t, None, None, None,
                            7, serial_seq])
            if r in crashed:
                comm_rows[cidx[comm]][17] += 1
            else:
                stall_rows.append((p["id"], comm, pair_hash[r & ~1], r & 1, 2, "AllReduce", seq, t, t + 40000,
                                   31 * 10**9))
    con.executemany("INSERT INTO nccl_comms VALUES (%s)" % ",".join("?" * 19), comm_rows)
    con.executemany("INSERT INTO nccl_ops (process_id, comm_serial, thread_id, kind, func, op_seq, peer, root, "
                    "count, datatype, bytes, channels, channels_done, algorithm, protocol, state, started_ns, "
                    "ended_ns, host_ns, gpu_ns, thread_serial, seq) VALUES (%s)" % ",".join("?" * 22), op_rows)
    con.executemany("INSERT INTO nccl_op_summary VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                    [k + tuple(v) for k, v in summary.items()])
    con.executemany("INSERT INTO nccl_op_overflow VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                    [k + tuple(v) for k, v in overflow.items()])
    for pid_, comm, h, crank, n, func, seq, started, running, waited in stall_rows:
        op = con.execute("SELECT id FROM nccl_ops WHERE process_id = ? AND comm_serial = ? AND state = 'running'",
                         (pid_, comm)).fetchone()
        evidence = '{"comm_hash": "%s", "stall_s": 30, "peers": {"%d": "waiting"}, "channels": 8, ' \
                   '"channels_done": 0}' % (h, 1 - crank)
        con.execute("INSERT INTO nccl_stalls (process_id, op_id, comm_serial, comm_hash, rank, nranks, kind, func, "
                    "op_seq, peer, bytes, started_ns, running_ns, waited_ns, peer_state, evidence, rule_id, "
                    "diagnosis, advice) VALUES (?,?,?,?,?,?,'coll',?,?,NULL,?,?,?,?,'waiting',?,"
                    "'nccl/all-ranks-stuck-in-operation',?,?)",
                    (pid_, op[0] if op else None, comm, h, crank, n, func, seq, 4 << 20, started, running, waited,
                     evidence, "Every rank of the communicator waits inside the same operation: the path "
                     "between their GPUs does not deliver (most often ACS or the IOMMU rerouting P2P).",
                     "Run once with NCCL_P2P_DISABLE=1 to confirm; then disable ACS on the bridges."))
    return ops_total


def mappings(con, procs, a, rnd, span, fail_text):
    """The job's cross-process mappings (see the module's text); returns the number of rows."""
    P, G, per = len(procs), a.gpus, a.per_host
    half = max(1, G // 2)
    host_of = lambda r: r // per
    crashed = {p["rank"] for p in procs if p["recovered"]}
    last_host = host_of(P - 1)
    rows, counts, failures = [], {}, []
    MiB = 1 << 20
    state = {p["id"]: [0, 0] for p in procs}  # next mapping id, next seq

    def row(p, api, event, t, status=0, accessor=None, owner=None, cross=1, size=0, address=None,
            handle="posix_fd", flags=0, mapping=None, host_ns=None, ended=None, ended_by=None):
        st = state[p["id"]]
        st[1] += 1
        is_peer = None if accessor is None or owner is None else int(accessor != owner)
        rows.append((p["id"], p["pid"], api, event, status, accessor, owner, is_peer, cross, size, address,
                     handle, flags, mapping, t, host_ns or rnd.randrange(1500, 9000), ended, ended_by, 0, st[1]))

    def new_id(p):
        state[p["id"]][0] += 1
        return state[p["id"]][0]

    def count(p, api, device, calls, nbytes):
        c = counts.setdefault((p["id"], api, device), [0, 0])
        c[0] += calls
        c[1] += nbytes

    def p2p(r, peer):
        if not (0 <= peer < P) or peer == r or host_of(peer) != host_of(r):
            return False
        ga, gb = procs[r]["local"] % G, procs[peer]["local"] % G
        return ga // half == gb // half and "staged" not in (procs[r]["mode"], procs[peer]["mode"])

    def first_rank(start, ok):
        return next((r for r in list(range(start, P)) + list(range(start)) if ok(r)), None)

    # the ranks that fail (57 and 66 in a job of 100 ranks, the like in a smaller one)
    import_fails = first_rank(57 if P > 57 else P * 4 // 7, lambda r: p2p(r, r + 1))
    open_fails = first_rank(66 if P > 66 else P * 2 // 3, lambda r: (r ^ 1) < P and host_of(r ^ 1) == host_of(r))
    for p in procs:
        r, g = p["rank"], p["local"] % G
        h = host_of(r)
        on_host = min(per, P - h * per)
        links = []
        if g + 1 < on_host:
            links += [(r + 1, c, "world") for c in range(16)]
        if on_host > 1:
            links += [(h * per + (g + 1) % on_host, c, "node") for c in range(24)]
        mate = r ^ 1
        if mate < P and host_of(mate) == h:
            links += [(mate, c, "pair") for c in range(8)]
        t = p["started"] + 2 * 10**9 + rnd.randrange(10**6)
        end = p["started"] + span + 5 * 10**9
        keep = r in crashed or h == last_host
        size = 4 * MiB + 512 * 1024
        for peer, channel, comm in links:
            if not p2p(r, peer):
                continue
            owner = procs[peer]
            og = owner["local"] % G
            # the owner: its buffer made, mapped and given to its own device (counted), exported
            row(owner, "cuMemExportToShareableHandle", "export", t - 40000, owner=og, cross=0)
            count(owner, "cuMemMap", og, 1, size)
            count(owner, "cuMemSetAccess", og, 1, size)
            if not (owner["rank"] in crashed or host_of(owner["rank"]) == last_host):
                count(owner, "cuMemUnmap", og, 1, size)
                count(owner, "cuMemRelease", og, 1, 0)
            if r == import_fails and comm == "world" and channel == 0:
                row(p, "cuMemImportFromShareableHandle", "import", t, status=101, owner=None)
                rule, diag, adv, bt, ev = fail_text(101, "ipc/import-from-device-not-visible", "101 import")
                failures.append((p["id"], p["pid"], "cuMemImportFromShareableHandle",
                                 "ptr=0x0 size=0 handle=0x0 fd=71 type=posix_fd flags=0 owner=-1 accessor=-1", 101,
                                 "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal", g, -1, rule, diag, adv, bt,
                                 "nccl/transport/p2p.cc:ncclP2pImportShareableBuffer\ntrain.py:30 in init", ev,
                                 "passed", t))
                t += 20000
                continue
            handle_id, range_id = new_id(p), new_id(p)
            address = 0x7f2000000000 + (state[p["id"]][0] << 24)
            unmap, release = end + channel * 30000, end + channel * 30000 + 9000
            e = (None, None) if keep else (release, "cuMemRelease")
            u = (None, None) if keep else (unmap, "cuMemUnmap")
            row(p, "cuMemImportFromShareableHandle", "import", t, owner=og, mapping=handle_id, ended=e[0], ended_by=e[1])
            row(p, "cuMemMap", "map", t + 6000, owner=og, size=size, address=address, mapping=range_id,
                ended=u[0], ended_by=u[1])
            row(p, "cuMemSetAccess", "access", t + 9000, accessor=g, owner=og, size=size, address=address, flags=3,
                mapping=range_id, ended=u[0], ended_by=u[1])
            if not keep:
                row(p, "cuMemUnmap", "end", unmap, accessor=g, owner=og, size=size, address=address, mapping=range_id)
                row(p, "cuMemRelease", "end", release, owner=og, mapping=handle_id)
            t += 20000 + rnd.randrange(5000)
        # PyTorch's CUDA IPC: the two-rank group's other GPU shares its weight buckets.
        if mate < P and host_of(mate) == h:
            owner = procs[mate]
            og = owner["local"] % G
            for sync in range(12):
                ts = p["started"] + 10 * 10**9 + sync * (span // 13)
                for bucket in range(4):
                    size = 256 * MiB
                    row(owner, "cudaIpcGetMemHandle", "export", ts - 10**6, owner=og, cross=0, size=size,
                        address=0x7f4000000000 + bucket * size, handle="ipc")
                    if r == open_fails and sync == 3 and bucket == 0:
                        row(p, "cudaIpcOpenMemHandle", "import", ts, status=201, accessor=g, handle="ipc", flags=1)
                        rule, diag, adv, bt, ev = fail_text(201, "ipc/open-between-containers", "201 IPC open")
                        failures.append((p["id"], p["pid"], "cudaIpcOpenMemHandle",
                                         "ptr=0x0 size=0 handle=0x0 fd=-1 type=ipc flags=1 owner=-1 accessor=%d" % g,
                                         201, "cudaErrorInvalidContext", "invalid device context", g, -1, rule, diag,
                                         adv, bt, "torch/multiprocessing/reductions.py:161 in rebuild_cuda_tensor\n"
                                         "rollout.py:52 in sync_weights", ev, "passed", ts))
                        continue
                    mid = new_id(p)
                    close = ts + 4 * 10**9 + bucket * 10**6
                    keep_open = keep and sync == 11
                    row(p, "cudaIpcOpenMemHandle", "import", ts + bucket * 50000, accessor=g, owner=og, size=size,
                        address=0x7f6000000000 + bucket * size, handle="ipc", flags=1, mapping=mid,
                        ended=None if keep_open else close, ended_by=None if keep_open else "cudaIpcCloseMemHandle")
                    if not keep_open:
                        row(p, "cudaIpcCloseMemHandle", "end", close, accessor=g, owner=og, size=size,
                            address=0x7f6000000000 + bucket * size, handle="ipc", mapping=mid)
        # PyTorch's expandable segments: its own device's pages, by the ten thousand.
        count(p, "cuMemMap", g, 20000, 20000 * 2 * MiB)
        count(p, "cuMemSetAccess", g, 20000, 20000 * 2 * MiB)
        count(p, "cuMemUnmap", g, 4000, 4000 * 2 * MiB)
        count(p, "cuMemRelease", g, 4000, 0)
    con.executemany("INSERT INTO peer_mappings (process_id, thread_id, api, event, status, accessor_device, "
                    "owner_device, is_peer, cross_process, bytes, address, handle_type, flags, mapping_id, "
                    "started_ns, host_ns, ended_ns, ended_by, thread_serial, seq) VALUES (%s)" % ",".join("?" * 20),
                    rows)
    con.executemany("INSERT INTO mapping_counts VALUES (?,?,?,?,?)", [k + tuple(v) for k, v in counts.items()])
    con.executemany("INSERT INTO failures (process_id, thread_id, api, args, status, error_name, error_string, "
                    "device, peer_device, rule_id, diagnosis, advice, backtrace, python_stack, evidence, action, "
                    "started_ns) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", failures)
    return len(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--rows", type=int, default=1000000)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--processes", type=int, default=100)
    ap.add_argument("--per-host", type=int, default=8)
    ap.add_argument("--seed-db")
    ap.add_argument("--no-devices", action="store_true", help="an older database: no devices table")
    ap.add_argument("--nccl-rows", type=int, default=None, help="NCCL operations in all (default: rows / 4)")
    ap.add_argument("--no-mappings", action="store_true", help="no cross-process mappings")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rnd = random.Random(a.seed)
    texts = seed_texts(a.seed_db)
    if os.path.exists(a.out):
        os.unlink(a.out)
    con = sqlite3.connect(a.out, isolation_level=None)
    con.execute("PRAGMA page_size=16384")
    con.execute("PRAGMA journal_mode=WAL")
    con.executescript(open(os.path.join(SOURCE, "src/record/schema.sql")).read())
    for table, column, kind in ADDED:
        if column not in [r[1] for r in con.execute("PRAGMA table_info(%s)" % table)]:
            con.execute("ALTER TABLE %s ADD COLUMN %s %s" % (table, column, kind))
    if not a.no_devices:
        con.execute(DEVICES_SQL)
    con.execute("BEGIN")
    if texts["rules"]:
        con.executemany("INSERT OR IGNORE INTO rules VALUES (%s)" % ",".join("?" * len(texts["rules"][0])),
                        texts["rules"])

    G, P = a.gpus, a.processes
    half = max(1, G // 2)
    group = lambda d: d // half if G > 1 else 0
    pairs = [(s, d) for s in range(G) for d in range(G) if s != d]
    cross = [(s, d) for s, d in pairs if group(s) != group(d)]
    t0 = 1795500000 * 10**9
    span = 3600 * 10**9
    hosts = (P + a.per_host - 1) // a.per_host
    procs = []
    for r in range(P):
        host = r // a.per_host
        mode = "staged" if r % 10 == 9 else "observe"
        record = "summary" if r in (5, 6) else "all"
        procs.append(dict(id=r + 1, pid=20000 + rnd.randrange(40000), host="gpu-node-%03d" % (host + 1), rank=r,
                          local=r % a.per_host, started=t0 + rnd.randrange(10**9), mode=mode, record=record,
                          boot="boot-%04d" % host, recovered=1 if r in (17, 42) else 0,
                          dropped=1234 if r == 42 else 0))
    con.executemany(
        "INSERT INTO processes (id, pid, hostname, rank, local_rank, cmdline, started_ns, mode, guard_version, "
        "driver_version, boot_id, records_dropped, recovered) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
        [(p["id"], p["pid"], p["host"], p["rank"], p["local"], "python train.py --config llama-70b.yaml",
          p["started"], p["mode"], "0.2.0", 13000, p["boot"], p["dropped"], p["recovered"]) for p in procs])
    if not a.no_devices:
        rows = []
        for p in procs:
            host = p["rank"] // a.per_host
            for o in range(G):
                uuid, bus = gpu_identity(host, o)
                rows.append((p["id"], o, uuid, bus, "NVIDIA H100 80GB HBM3", o))
        con.executemany("INSERT INTO devices VALUES (?,?,?,?,?,?)", rows)

    # Peer access: every rank asks every pair, then enables the ones that can.
    pa = []
    for p in procs:
        t = p["started"] + 10**9
        for s, d in pairs:
            can = 0 if (s, d) in cross or p["mode"] == "staged" else 1
            pa.append((p["id"], p["pid"], "cudaDeviceCanAccessPeer", s, d, 0, 0, t, can,
                       "staged" if p["mode"] == "staged" else None))
            t += 1000
            if p["mode"] != "staged":
                pa.append((p["id"], p["pid"], "cudaDeviceEnablePeerAccess", s, d, 0, 217 if (s, d) in cross else 0,
                           t, None, None))
                t += 1000
    con.executemany("INSERT INTO peer_access (process_id, thread_id, api, device, peer_device, flags, status, "
                    "started_ns, result, action) VALUES (?,?,?,?,?,?,?,?,?,?)", pa)

    # Failures: the cross-group enables (217) in every observing rank, a second enable (704) in a
    # few, and two probe verdicts.
    def fail_text(status, rule, what):
        if status in texts["fail"]:
            seed = texts["fail"][status]
            if seed[0] == rule or rule not in texts.get("rule_text", {}):
                return seed
            cause, advice = texts["rule_text"][rule]
            return (rule, cause, advice) + seed[3:]
        return (rule, "%s: the driver said no (stand-in diagnosis)." % what,
                "Stand-in advice for %s." % what, "#0 train.so+0x1234 enable_peers+0x10\n#1 python3+0x5678", "{}")

    frows = []
    for p in procs:
        if p["mode"] == "staged":
            continue
        t = p["started"] + 2 * 10**9
        for s, d in cross:
            rule, diag, adv, bt, ev = fail_text(217, "cuda/peer-access-across-cpu-sockets", "217 across sockets")
            frows.append((p["id"], p["pid"], "cudaDeviceEnablePeerAccess", "peerDevice=%d flags=0" % d, 217,
                          "cudaErrorPeerAccessUnsupported", "peer access is not supported between these two devices",
                          s, d, rule, diag, adv, bt, "distributed.py:%d in enable_peers\ntrain.py:88 in main" % (40 + s % 2),
                          ev, "passed", t))
            t += 5000
        if p["rank"] % 16 == 3:
            rule, diag, adv, bt, ev = fail_text(704, "cuda/peer-access-already-enabled", "704")
            frows.append((p["id"], p["pid"], "cudaDeviceEnablePeerAccess", "peerDevice=1 flags=0", 704,
                          "cudaErrorPeerAccessAlreadyEnabled", "peer access is already enabled", 0, 1, rule, diag,
                          adv, bt, "train.py:90 in main", ev, "passed", t))
    con.executemany("INSERT INTO failures (process_id, thread_id, api, args, status, error_name, error_string, "
                    "device, peer_device, rule_id, diagnosis, advice, backtrace, python_stack, evidence, action, "
                    "started_ns) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", frows)
    if P > 1 and G > 1:
        con.execute("INSERT INTO failures (process_id, api, args, status, device, peer_device, rule_id, diagnosis, "
                    "advice, evidence, action, started_ns) VALUES (1, 'p2pguard_probe', 'p2pguard topo: p2p WRONG "
                    "DATA at 21.0 GB/s, staged 18.0 GB/s', 0, 0, 1, 'p2p/copy-returns-wrong-data', 'P2P between "
                    "the pair delivers wrong data.', 'Run the pair staged.', '{\"p2p_probe\": \"wrong_data\"}', "
                    "'passed', ?)", (t0 + 5 * 10**9,))

    # Crashes: six ranks die in the same place, one elsewhere.
    bt11 = texts["crash"].get(11) or "#0 libtrain.so+0x3ec0 crash_here+0x0\n#1 libtrain.so+0x3032 step+0xd02\n#2 python3+0x2724a"
    for r in [7, 15, 23, 31, 39, 47][: max(0, P - 1)]:
        p = procs[r % P]
        addr_shift = "\n".join(l.replace("+0x", "+0x%x" % (r % 7), 1) if k == 0 else l
                               for k, l in enumerate(bt11.splitlines()))
        con.execute("INSERT INTO crashes (process_id, thread_id, signal, backtrace, started_ns, python_stack) "
                    "VALUES (?,?,?,?,?,?)", (p["id"], p["pid"], 11, addr_shift, p["started"] + span // 2 + r,
                                             "train.py:120 in step\ntrain.py:200 in main"))
    if P > 2:
        con.execute("INSERT INTO crashes (process_id, thread_id, signal, backtrace, started_ns) VALUES (?,?,6,?,?)",
                    (procs[2]["id"], procs[2]["pid"], "#0 libc.so.6+0x8ae3c __pthread_kill_implementation+0x10c\n"
                     "#1 libc.so.6+0x3cfb2 raise+0x12\n#2 libc.so.6+0x27472 abort+0xd3", procs[2]["started"] + span))

    # Transfers.
    apis = ASYNC_APIS + SYNC_APIS
    api_names = [x for x, w in apis]
    api_weights = [w for x, w in apis]
    sync = {x for x, w in SYNC_APIS}
    same = [pr for pr in pairs if pr not in cross] or pairs
    per_proc = a.rows // P
    rows = []
    row_id = 0
    buckets = {}
    for p in procs:
        n = per_proc + (1 if p["rank"] < a.rows % P else 0)
        t = p["started"] + 3 * 10**9
        step = span // max(1, n)
        serial = {}
        for k in range(n):
            s, d = rnd.choice(same) if rnd.random() < 0.9 else rnd.choice(pairs)
            api = rnd.choices(api_names, api_weights)[0]
            size = 1 << rnd.randrange(12, 27)
            size += rnd.randrange(size // 8 + 1) if rnd.random() < 0.3 else 0
            if p["mode"] == "staged":
                path, rate = "staged", 18.0
            elif (s, d) in cross:
                path, rate = "driver", 11.0
            else:
                path, rate = "p2p", 45.0
            copy_ns = int(6000 + size / (rate * rnd.uniform(0.85, 1.1)))
            is_sync = api in sync
            host_ns = copy_ns if is_sync else rnd.randrange(1800, 9000)
            timed = is_sync or size >= (1 << 20) or rnd.random() < 0.125
            gpu_ns = copy_ns if timed else None
            thread = p["pid"] + (k % 3)
            sq = serial.get(thread, 0)
            serial[thread] = sq + 1
            t += step
            if p["record"] == "summary":
                # Summary mode: every call in its bucket, a row only for an outlier (1 in 100).
                key = (p["id"], api, s, d, path, size.bit_length() - 1)
                b = buckets.setdefault(key, [0, 0, 0])
                b[0] += 1
                b[1] += size
                b[2] += host_ns
                if k % 100:
                    continue
            row_id += 1
            rows.append((row_id, p["id"], thread, api, s, d, size, 0x7f0000 + 16 * (k % 4), path, 0,
                         t + rnd.randrange(step // 2 + 1), host_ns, gpu_ns, k % 3, sq))
            if len(rows) >= 50000:
                con.executemany("INSERT INTO transfers VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
                rows = []
    con.executemany("INSERT INTO transfers VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)

    # Summary-mode ranks: their buckets, which count their outliers' rows too.
    con.executemany("INSERT INTO transfer_summary VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                    [k + (v[0], v[1], 0, v[2], "[]") for k, v in buckets.items()])
    # Overflow: three ranks whose rings filled up.
    for r in (11, 12, 13):
        if r < P:
            for s, d in same[:4]:
                con.execute("INSERT INTO transfer_overflow VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                            (procs[r]["id"], 0, procs[r]["pid"], "cudaMemcpyAsync", s, d, "p2p", 0, 12, 5000,
                             5000 * 4096, 5000 * 2500))
    # Stalls: one pair hung in two ranks.
    for r in (21, 22):
        if r < P and G > 1:
            tid = con.execute("SELECT id, started_ns, bytes, stream FROM transfers WHERE process_id = ? AND "
                              "src_device = 0 AND dst_device = 1 LIMIT 1", (procs[r]["id"],)).fetchone()
            if tid:
                con.execute("INSERT INTO stalls (process_id, transfer_id, thread_id, api, src_device, dst_device, "
                            "bytes, stream, path, started_ns, waited_ns, evidence, rule_id, diagnosis, advice) "
                            "VALUES (?,?,?,'cudaMemcpyAsync',0,1,?,?,'p2p',?,31000000000,'{}',"
                            "'p2p/copy-never-completes','A P2P copy never completed.','Run the pair staged.')",
                            (procs[r]["id"], tid[0], procs[r]["pid"], tid[2], tid[3], tid[1]))
    nccl_rows = a.rows // 4 if a.nccl_rows is None else a.nccl_rows
    nccl_ops = nccl(con, procs, a, rnd, t0, span, nccl_rows) if nccl_rows > 0 else 0
    mapped = 0 if a.no_mappings else mappings(con, procs, a, rnd, span, fail_text)
    con.execute("COMMIT")
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    print("%s: %d transfers, %d NCCL operations, %d mapping rows, %d processes on %d hosts, %d GPUs each" %
          (a.out, a.rows, nccl_ops, mapped, P, hosts, G))


if __name__ == "__main__":
    sys.exit(main())
