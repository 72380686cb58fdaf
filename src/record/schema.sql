-- p2pguard database schema (a public contract: docs/database.md documents it; changes bump user_version,
-- P2PG_SCHEMA_VERSION in store.h, and add their migration to store_open.c).
-- 2: processes.records_invalid, crashes.python_stack, stalls, transfer_overflow, peer_totals.
PRAGMA user_version = 2;

CREATE TABLE IF NOT EXISTS processes (
  id INTEGER PRIMARY KEY,
  pid INTEGER NOT NULL,
  hostname TEXT,
  rank INTEGER,
  local_rank INTEGER,
  cmdline TEXT,
  started_ns INTEGER NOT NULL,
  mode TEXT,
  guard_version TEXT,
  driver_version INTEGER,
  boot_id TEXT NOT NULL,
  records_dropped INTEGER NOT NULL DEFAULT 0,
  recovered INTEGER NOT NULL DEFAULT 0,
  records_invalid INTEGER NOT NULL DEFAULT 0, -- damaged spool records skipped by the import
  UNIQUE (boot_id, pid, started_ns)
);

CREATE TABLE IF NOT EXISTS transfers (
  id INTEGER PRIMARY KEY,
  process_id INTEGER NOT NULL REFERENCES processes(id),
  thread_id INTEGER,
  api TEXT NOT NULL,
  src_device INTEGER,
  dst_device INTEGER,
  bytes INTEGER,
  stream INTEGER,
  path TEXT,
  status INTEGER,
  started_ns INTEGER,
  host_ns INTEGER,
  gpu_ns INTEGER,
  thread_serial INTEGER,
  seq INTEGER
);

CREATE TABLE IF NOT EXISTS peer_access (
  id INTEGER PRIMARY KEY,
  process_id INTEGER NOT NULL REFERENCES processes(id),
  thread_id INTEGER,
  api TEXT NOT NULL,
  device INTEGER,
  peer_device INTEGER,
  flags INTEGER,
  status INTEGER,
  started_ns INTEGER,
  result INTEGER,
  action TEXT,
  thread_serial INTEGER,
  seq INTEGER
);

CREATE TABLE IF NOT EXISTS failures (
  id INTEGER PRIMARY KEY,
  process_id INTEGER NOT NULL REFERENCES processes(id),
  thread_id INTEGER,
  api TEXT,
  args TEXT,
  status INTEGER,
  error_name TEXT,
  error_string TEXT,
  device INTEGER,
  peer_device INTEGER,
  rule_id TEXT,
  diagnosis TEXT,
  advice TEXT,
  backtrace TEXT,
  python_stack TEXT,
  evidence TEXT,
  action TEXT,
  started_ns INTEGER,
  thread_serial INTEGER,
  seq INTEGER,
  UNIQUE (process_id, thread_serial, seq)
);

CREATE TABLE IF NOT EXISTS crashes (
  id INTEGER PRIMARY KEY,
  process_id INTEGER NOT NULL REFERENCES processes(id),
  thread_id INTEGER,
  signal INTEGER,
  backtrace TEXT,
  started_ns INTEGER,
  python_stack TEXT,  -- added after 0.1 (older databases get it by ALTER TABLE on open)
  UNIQUE (process_id, thread_id, started_ns)
);

-- How far each thread ring of each process has been imported; written in the same transaction as
-- the rows, so an import that is repeated after a crash starts exactly where the last one ended.
CREATE TABLE IF NOT EXISTS spool_progress (
  process_id INTEGER NOT NULL,
  thread_serial INTEGER NOT NULL,
  imported INTEGER NOT NULL,
  PRIMARY KEY (process_id, thread_serial)
) WITHOUT ROWID;

-- P2PGUARD_RECORD=summary: one row per process, pair, api, path and size bucket.
CREATE TABLE IF NOT EXISTS transfer_summary (
  process_id INTEGER NOT NULL,
  api TEXT NOT NULL,
  src_device INTEGER NOT NULL,
  dst_device INTEGER NOT NULL,
  path TEXT NOT NULL,
  size_bucket INTEGER NOT NULL,     -- floor(log2(bytes)); bytes in [2^b, 2^(b+1))
  count INTEGER NOT NULL,
  bytes INTEGER NOT NULL,
  failures INTEGER NOT NULL,
  host_ns_total INTEGER NOT NULL,
  host_ns_hist TEXT NOT NULL,       -- JSON array: counts per power-of-two bucket of host_ns
  PRIMARY KEY (process_id, api, src_device, dst_device, path, size_bucket)
) WITHOUT ROWID;

-- A GPU-timed peer copy still unfinished after P2PGUARD_STALL_S, one row per copy, written by the
-- drainer while the program waits (so a job killed in its hang leaves the reason behind).
CREATE TABLE IF NOT EXISTS stalls (
  id INTEGER PRIMARY KEY,
  process_id INTEGER NOT NULL REFERENCES processes(id),
  transfer_id INTEGER NOT NULL UNIQUE REFERENCES transfers(id),
  thread_id INTEGER,
  api TEXT,
  src_device INTEGER,
  dst_device INTEGER,
  bytes INTEGER,
  stream INTEGER,
  path TEXT,
  started_ns INTEGER,
  waited_ns INTEGER,
  evidence TEXT,
  rule_id TEXT,
  diagnosis TEXT,
  advice TEXT
);

-- Successful transfers that found their thread's ring full: no row each, but counted here per
-- thread, pair, api, path, status and size bucket (imported in the same transaction as the rows).
CREATE TABLE IF NOT EXISTS transfer_overflow (
  process_id INTEGER NOT NULL,
  thread_serial INTEGER NOT NULL,
  thread_id INTEGER,
  api TEXT NOT NULL,
  src_device INTEGER NOT NULL,
  dst_device INTEGER NOT NULL,
  path TEXT NOT NULL,
  status INTEGER NOT NULL,
  size_bucket INTEGER NOT NULL,     -- floor(log2(bytes)); bytes in [2^b, 2^(b+1)); 0 for 0 and 1
  count INTEGER NOT NULL,
  bytes INTEGER NOT NULL,
  host_ns_total INTEGER NOT NULL,
  PRIMARY KEY (process_id, thread_serial, api, src_device, dst_device, path, status, size_bucket)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS rules (
  id TEXT PRIMARY KEY,
  title TEXT,
  error_codes TEXT,
  root_cause TEXT,
  advice TEXT,
  doc_url TEXT,
  confidence REAL,
  json TEXT
);


-- Bandwidth per pair and path, only from copies with a GPU time (gpu_ns, from timing events or
-- CUPTI), asynchronous or synchronous: a synchronous call between device memory returns before its
-- copy ends (CUDA says so, and on an H200 a 1 GiB cudaMemcpyPeer returned after 16 us of its
-- 519), so no host_ns is a copy time. A copy without gpu_ns is counted in `untimed` and never
-- divided. Databases written before 0.2.0 hold synchronous copies whose gpu_ns is the call's
-- duration. count = gpu_timed + synchronous (the copies the percentiles are computed from); bytes are
-- theirs. Successful rows of transfers only (transfer_overflow and transfer_summary hold no times).
-- Databases made before 0.2 had a view that divided by the enqueue time: store_open.c replaces it.
CREATE VIEW IF NOT EXISTS peer_bandwidth AS
WITH copies AS (
  SELECT src_device, dst_device, path, bytes, gpu_ns, instr(api, 'Async') = 0 AS synchronous
  FROM transfers
  WHERE status = 0 AND path IN ('p2p', 'driver', 'staged')
), ranked AS (
  SELECT src_device, dst_device, path, bytes, bytes * 1.0 / gpu_ns AS gbps,
         ROW_NUMBER() OVER (PARTITION BY src_device, dst_device, path ORDER BY bytes * 1.0 / gpu_ns) AS r,
         COUNT(*) OVER (PARTITION BY src_device, dst_device, path) AS n
  FROM copies
  WHERE gpu_ns > 0
), percentiles AS (
  SELECT src_device, dst_device, path, n,
         SUM(bytes) AS bytes,
         ROUND(MAX(CASE WHEN r = MAX(1, CAST(0.50 * n + 0.5 AS INTEGER)) THEN gbps END), 3) AS p50_gbps,
         ROUND(MAX(CASE WHEN r = MAX(1, CAST(0.99 * n + 0.5 AS INTEGER)) THEN gbps END), 3) AS p99_gbps
  FROM ranked
  GROUP BY src_device, dst_device, path
), counted AS (
  SELECT src_device, dst_device, path,
         SUM(COALESCE(gpu_ns, 0) > 0 AND NOT synchronous) AS gpu_timed,
         SUM(COALESCE(gpu_ns, 0) > 0 AND synchronous) AS synchronous,
         SUM(COALESCE(gpu_ns, 0) <= 0) AS untimed
  FROM copies
  GROUP BY src_device, dst_device, path
)
SELECT c.src_device, c.dst_device, c.path,
       COALESCE(p.n, 0) AS count,
       COALESCE(p.bytes, 0) AS bytes,
       p.p50_gbps, p.p99_gbps,
       c.gpu_timed, c.synchronous, c.untimed
FROM counted c LEFT JOIN percentiles p
  ON p.src_device = c.src_device AND p.dst_device = c.dst_device AND p.path = c.path;

CREATE VIEW IF NOT EXISTS failure_report AS
SELECT f.id,
       datetime(f.started_ns / 1000000000, 'unixepoch') AS time,
       p.hostname, p.pid, p.rank,
       f.api, f.status, f.error_name,
       -- A peer the call could not name (an IPC handle's owner, say) is stored as -1: '?', as
       -- `p2pguard report` prints it.
       CASE WHEN f.device >= 0 THEN f.device ELSE '?' END || '->' ||
         CASE WHEN f.peer_device >= 0 THEN f.peer_device ELSE '?' END AS pair,
       (SELECT d.uuid FROM devices d
        WHERE d.process_id = f.process_id AND d.ordinal = f.device) AS device_uuid,
       (SELECT d.uuid FROM devices d
        WHERE d.process_id = f.process_id AND d.ordinal = f.peer_device) AS peer_uuid,
       f.action,
       f.rule_id,
       f.diagnosis,
       f.advice,
       substr(f.python_stack, 1, instr(f.python_stack || char(10), char(10)) - 1) AS python_where,
       substr(f.backtrace, 1, instr(f.backtrace || char(10), char(10)) - 1) AS c_where
FROM failures f JOIN processes p ON p.id = f.process_id
ORDER BY f.started_ns;

-- Every transfer call counted once, whatever the load and the record mode: rows (or, for a process
-- recorded in summary mode, its transfer_summary, which counts its rows too) plus the overflow.
CREATE VIEW IF NOT EXISTS peer_totals AS
WITH parts AS (
  SELECT process_id, api, src_device, dst_device, path,
         1 AS calls, bytes, host_ns, status != 0 AS failures, 0 AS folded
  FROM transfers
  WHERE process_id NOT IN (SELECT process_id FROM transfer_summary)
  UNION ALL
  SELECT process_id, api, src_device, dst_device, path, count, bytes, host_ns_total, failures, 0
  FROM transfer_summary
  UNION ALL
  SELECT process_id, api, src_device, dst_device, path, count, bytes, host_ns_total, 0, count
  FROM transfer_overflow
)
SELECT process_id, src_device, dst_device, api, path,
       SUM(calls) AS calls, SUM(bytes) AS bytes, SUM(host_ns) AS host_ns,
       SUM(failures) AS failures, SUM(folded) AS folded
FROM parts
GROUP BY process_id, src_device, dst_device, api, path;

-- NCCL's communicators and operations, as NCCL's profiler plugin hands them to the guard (src/nccl/).
-- A communicator: one row per rank that a guarded process's NCCL initialised.
CREATE TABLE IF NOT EXISTS nccl_comms (
  process_id INTEGER NOT NULL REFERENCES processes(id),
  comm_serial INTEGER NOT NULL,     -- its number in the process (nccl_ops refer to it)
  comm_hash TEXT NOT NULL,          -- NCCL's commHash as 16 hex digits: the same on every rank
  comm_name TEXT,
  rank INTEGER,
  nranks INTEGER,
  nnodes INTEGER,
  device INTEGER,                   -- the rank's CUDA ordinal in its process
  uuid TEXT,                        -- GPU-xxxxxxxx-..., as nvidia-smi prints it
  pci_bus_id TEXT,
  hostname TEXT,
  profiler_version INTEGER,         -- the ncclProfiler_vN NCCL chose
  chained TEXT,                     -- the user's own profiler plugin, which the guard fed
  thread_id INTEGER,
  started_ns INTEGER,
  finalized_ns INTEGER,
  ops_recorded INTEGER,
  ops_unreported INTEGER,           -- still running when the communicator ended
  events_untracked INTEGER,         -- events that found the guard's slots full (not recorded)
  PRIMARY KEY (process_id, comm_serial)
);
CREATE INDEX IF NOT EXISTS nccl_comms_by_hash ON nccl_comms (comm_hash, rank);

-- An operation: a collective (kind coll, or ce for a copy-engine one) or a send or receive (p2p).
-- state: done; running (still unfinished when the drainer looked: its row is written early, so that
-- every rank's stall diagnosis sees where the others are, and completed when it ends); unreported
-- (NCCL never reported its end: its communicator was freed, or its process ended, first).
CREATE TABLE IF NOT EXISTS nccl_ops (
  id INTEGER PRIMARY KEY,
  process_id INTEGER NOT NULL REFERENCES processes(id),
  comm_serial INTEGER NOT NULL,
  thread_id INTEGER,
  kind TEXT NOT NULL,
  func TEXT NOT NULL,               -- AllReduce, Send, Recv, ... as NCCL names it
  op_seq INTEGER,                   -- NCCL's sequence number of a collective (the same on every
                                    -- rank); the guard's count for p2p and ce
  peer INTEGER,                     -- p2p: the other rank
  root INTEGER,                     -- collectives: the root rank NCCL gave
  count INTEGER,
  datatype TEXT,
  bytes INTEGER,                    -- count x datatype size
  channels INTEGER,
  channels_done INTEGER,
  algorithm TEXT,
  protocol TEXT,
  state TEXT NOT NULL,
  started_ns INTEGER,               -- NCCL started the operation (its enqueue)
  ended_ns INTEGER,                 -- NCCL saw its last kernel channel finish
  host_ns INTEGER,
  gpu_ns INTEGER,                   -- first channel's start to last channel's end, GPU clock
  thread_serial INTEGER,            -- the record's ring and place in it, as in transfers
  seq INTEGER
);
CREATE INDEX IF NOT EXISTS nccl_ops_by_comm ON nccl_ops (process_id, comm_serial, op_seq);
CREATE UNIQUE INDEX IF NOT EXISTS nccl_ops_running ON nccl_ops (process_id, comm_serial, kind, func, op_seq)
  WHERE state = 'running';

-- An NCCL operation whose kernel ran P2PGUARD_STALL_S without finishing, once per operation,
-- written while the program waits; peer_state says where the other ranks were (waiting in the
-- same operation, gone, elsewhere, ahead, unknown).
CREATE TABLE IF NOT EXISTS nccl_stalls (
  id INTEGER PRIMARY KEY,
  process_id INTEGER NOT NULL REFERENCES processes(id),
  op_id INTEGER REFERENCES nccl_ops(id),
  comm_serial INTEGER NOT NULL,
  comm_hash TEXT,
  rank INTEGER,
  nranks INTEGER,
  kind TEXT,
  func TEXT,
  op_seq INTEGER,
  peer INTEGER,
  bytes INTEGER,
  started_ns INTEGER,
  running_ns INTEGER,               -- its first kernel channel started
  waited_ns INTEGER,                -- since then, when the row was written
  peer_state TEXT,
  evidence TEXT,
  rule_id TEXT,
  diagnosis TEXT,
  advice TEXT,
  UNIQUE (process_id, comm_serial, kind, func, op_seq)
);

-- P2PGUARD_RECORD=summary: finished NCCL operations per communicator, function, peer and size.
CREATE TABLE IF NOT EXISTS nccl_op_summary (
  process_id INTEGER NOT NULL,
  comm_serial INTEGER NOT NULL,
  kind TEXT NOT NULL,
  func TEXT NOT NULL,
  peer INTEGER NOT NULL,            -- -1 for collectives
  size_bucket INTEGER NOT NULL,     -- floor(log2(bytes))
  count INTEGER NOT NULL,
  bytes INTEGER NOT NULL,
  host_ns_total INTEGER NOT NULL,
  gpu_ns_total INTEGER NOT NULL,
  gpu_timed INTEGER NOT NULL,       -- how many of them carried a GPU time
  PRIMARY KEY (process_id, comm_serial, kind, func, peer, size_bucket)
) WITHOUT ROWID;

-- Finished NCCL operations that found their thread's ring full: counted here, like transfer_overflow.
CREATE TABLE IF NOT EXISTS nccl_op_overflow (
  process_id INTEGER NOT NULL,
  thread_serial INTEGER NOT NULL,
  comm_serial INTEGER NOT NULL,
  func TEXT NOT NULL,
  peer INTEGER NOT NULL,            -- clamped to 16 bits; -1 for collectives
  algorithm TEXT NOT NULL,
  protocol TEXT NOT NULL,
  size_bucket INTEGER NOT NULL,
  count INTEGER NOT NULL,
  bytes INTEGER NOT NULL,
  host_ns_total INTEGER NOT NULL,
  PRIMARY KEY (process_id, thread_serial, comm_serial, func, peer, algorithm, protocol, size_bucket)
) WITHOUT ROWID;

-- Every finished NCCL operation counted once, whatever the load and the record mode.
CREATE VIEW IF NOT EXISTS nccl_totals AS
WITH parts AS (
  SELECT process_id, comm_serial, kind, func, 1 AS ops, bytes, host_ns, gpu_ns,
         gpu_ns IS NOT NULL AS gpu_timed, 0 AS folded
  FROM nccl_ops WHERE state = 'done'
  UNION ALL
  SELECT process_id, comm_serial, kind, func, count, bytes, host_ns_total, gpu_ns_total, gpu_timed, 0
  FROM nccl_op_summary
  UNION ALL
  SELECT process_id, comm_serial, CASE WHEN func IN ('Send', 'Recv') THEN 'p2p' ELSE 'coll' END,
         func, count, bytes, host_ns_total, NULL, 0, count
  FROM nccl_op_overflow
)
SELECT p.process_id, p.comm_serial, c.comm_hash, c.rank, c.nranks, p.kind, p.func,
       SUM(p.ops) AS ops, SUM(p.bytes) AS bytes, SUM(p.host_ns) AS host_ns,
       SUM(p.gpu_ns) AS gpu_ns, SUM(p.gpu_timed) AS gpu_timed, SUM(p.folded) AS folded
FROM parts p LEFT JOIN nccl_comms c ON c.process_id = p.process_id AND c.comm_serial = p.comm_serial
GROUP BY p.process_id, p.comm_serial, p.kind, p.func;

-- NCCL's traffic per device pair: ranks joined across processes by comm_hash. A send counts from
-- rank to peer, a receive from peer to rank; both sides of one transfer name the same bytes, so
-- bytes is the larger of what the senders and the receivers recorded. NCCL does not tell the ring
-- or tree order of a collective: only a two-rank communicator's collectives are given a pair
-- (kind coll; bytes then sums the operations' sizes, not the bytes on the wire).
CREATE VIEW IF NOT EXISTS nccl_pair_traffic AS
WITH ops AS (
  SELECT c.comm_hash, c.nranks, c.rank, o.kind, o.func, o.peer, o.bytes, o.gpu_ns
  FROM nccl_ops o JOIN nccl_comms c ON c.process_id = o.process_id AND c.comm_serial = o.comm_serial
  WHERE o.state = 'done'
), directed AS (
  SELECT comm_hash, rank AS src_rank, peer AS dst_rank, 'p2p' AS kind, 1 AS sends, 0 AS recvs,
         bytes AS sent, 0 AS received, gpu_ns FROM ops WHERE func = 'Send'
  UNION ALL
  SELECT comm_hash, peer, rank, 'p2p', 0, 1, 0, bytes, gpu_ns FROM ops WHERE func = 'Recv'
  UNION ALL
  SELECT comm_hash, rank, 1 - rank, 'coll', 1, 0, bytes, 0, gpu_ns
  FROM ops WHERE kind IN ('coll', 'ce') AND nranks = 2 AND rank IN (0, 1)
), pairs AS (
  SELECT comm_hash, src_rank, dst_rank, kind, SUM(sends) AS sends, SUM(recvs) AS recvs,
         SUM(sent) AS sent, SUM(received) AS received,
         SUM(CASE WHEN gpu_ns > 0 THEN sent + received END) AS timed_bytes,
         SUM(CASE WHEN gpu_ns > 0 THEN gpu_ns END) AS gpu_ns
  FROM directed GROUP BY 1, 2, 3, 4
), ranks AS (
  SELECT comm_hash, rank, hostname, device, uuid, pci_bus_id, MAX(started_ns)
  FROM nccl_comms GROUP BY comm_hash, rank
)
SELECT p.comm_hash, p.kind, p.src_rank, s.hostname AS src_host, s.device AS src_device,
       s.uuid AS src_uuid, p.dst_rank, d.hostname AS dst_host, d.device AS dst_device,
       d.uuid AS dst_uuid, p.sends, p.recvs, MAX(p.sent, p.received) AS bytes, p.gpu_ns,
       ROUND(p.timed_bytes * 1.0 / p.gpu_ns, 3) AS gpu_gbps
FROM pairs p
LEFT JOIN ranks s ON s.comm_hash = p.comm_hash AND s.rank = p.src_rank
LEFT JOIN ranks d ON d.comm_hash = p.comm_hash AND d.rank = p.dst_rank;

-- Each process's devices as it numbered them (CUDA_VISIBLE_DEVICES renumbers per process) and the
-- physical GPU behind each ordinal: its UUID as nvidia-smi prints it (GPU-...), its PCI bus id as
-- NVML prints it (00000000:1B:00.0), its name, and nvidia-smi's index (NULL without NVML).
CREATE TABLE IF NOT EXISTS devices (
  process_id INTEGER NOT NULL,
  ordinal INTEGER NOT NULL,
  uuid TEXT,
  pci_bus_id TEXT,
  name TEXT,
  physical_index INTEGER,
  PRIMARY KEY (process_id, ordinal)
);

-- Cross-process and VMM mappings (src/record/mapping_record.h): a row for every call that makes,
-- grants or ends access to memory across a process or a device -- CUDA IPC (get, open, close),
-- cuMem export, import, map, cuMemSetAccess, unmap and release -- and for every failed one. A
-- mapping_id links a mapping to the call that ends it: that call's start is copied into the
-- mapping's ended_ns when both are imported, in either order.
CREATE TABLE IF NOT EXISTS peer_mappings (
  id INTEGER PRIMARY KEY,
  process_id INTEGER NOT NULL REFERENCES processes(id),
  thread_id INTEGER,
  api TEXT NOT NULL,
  event TEXT NOT NULL,            -- export, import, map, access, end; unref: a close that dropped one
                                  -- reference of a handle opened twice (the mapping lives on)
  status INTEGER,
  accessor_device INTEGER,        -- the device that gains access; NULL: none (export, import, map)
  owner_device INTEGER,           -- the device whose memory it is; NULL: unknown
  is_peer INTEGER,                -- owner_device != accessor_device; NULL when either is NULL
  cross_process INTEGER NOT NULL, -- the memory is another process's (opened or imported here)
  bytes INTEGER,
  address INTEGER,                -- the mapping's device address, where there is one
  handle_type TEXT,               -- ipc (legacy CUDA IPC), posix_fd, fabric; NULL: none
  flags INTEGER,                  -- the call's flags: 1 = cudaIpcMemLazyEnablePeerAccess on an IPC
                                  -- open; 1 read, 3 read-write on cuMemSetAccess
  mapping_id INTEGER,             -- process-unique; an end row carries the id of what it ends
  started_ns INTEGER,
  host_ns INTEGER,
  ended_ns INTEGER,               -- the start of the unmap/close/release that ended it; NULL: live
                                  -- at the process's end, or ended unseen
  ended_by TEXT,                  -- that call
  thread_serial INTEGER,
  seq INTEGER
);
CREATE INDEX IF NOT EXISTS peer_mappings_by_id ON peer_mappings (process_id, mapping_id);

-- A process's own mappings of its own device's memory (PyTorch's expandable segments make them by
-- the thousand): counted per call and device, not rowed. Successful calls only: failures have rows.
CREATE TABLE IF NOT EXISTS mapping_counts (
  process_id INTEGER NOT NULL,
  api TEXT NOT NULL,
  device INTEGER NOT NULL,        -- the memory's device; -1 unknown
  calls INTEGER NOT NULL,
  bytes INTEGER NOT NULL,
  PRIMARY KEY (process_id, api, device)
) WITHOUT ROWID;

-- Peer mappings as a person reads them: which process, which pair, how long it lived.
CREATE VIEW IF NOT EXISTS mapping_report AS
SELECT m.id,
       datetime(m.started_ns / 1000000000, 'unixepoch') AS time,
       p.pid, p.rank,
       m.api, m.event, m.status,
       COALESCE(m.owner_device, '?') || '->' || COALESCE(m.accessor_device, '-') AS pair,
       m.is_peer, m.cross_process, m.handle_type, m.bytes,
       CASE WHEN m.ended_ns IS NOT NULL THEN ROUND((m.ended_ns - m.started_ns) / 1e6, 3) END
         AS lived_ms,
       m.ended_by
FROM peer_mappings m JOIN processes p ON p.id = m.process_id
ORDER BY m.started_ns;

-- NCCL's traffic per device pair with its bandwidth: the sibling of peer_bandwidth, which keeps to
-- the guard's copies (an NCCL operation is not a copy: its GPU time runs from its kernel's first
-- channel's start to its last channel's end, waiting for the peer included, and its two ends are
-- ranks of different processes, often on different hosts). A pair is two physical GPUs, each named
-- by its host, its index (nvidia-smi's where the devices table knows it, else the rank's CUDA
-- ordinal) and its UUID, found by joining the ranks' nccl_comms rows across processes by
-- comm_hash, over every communicator. A send counts from its rank to its peer, a receive from its
-- peer to its rank; both sides of one transfer name the same operation, so each pair counts the
-- side that recorded more of them (on a tie the one with more GPU times, then the senders), rows,
-- summary buckets and overflow alike. Collectives have a pair only in two-rank communicators (kind coll, from each rank to the
-- other: NCCL does not tell the ring or tree order of bigger ones), their GB/s the operation's size
-- over its GPU time. p50 and p99 come from the counted side's rows with a GPU time (gpu_timed);
-- untimed are the others (no GPU time, or no row of their own), counted and never divided. An end
-- whose rank no process in this database recorded is NULL (p2pguard merge joins hosts' databases).
CREATE VIEW IF NOT EXISTS nccl_pair_bandwidth AS
WITH ends AS (
  SELECT c.comm_hash, c.rank, coalesce(c.hostname, p.hostname) AS host,
         coalesce(d.physical_index, c.device) AS gpu, c.uuid, MAX(c.started_ns)
  FROM nccl_comms c LEFT JOIN processes p ON p.id = c.process_id
  LEFT JOIN devices d ON d.process_id = c.process_id AND d.ordinal = c.device
  GROUP BY c.comm_hash, c.rank
), parts AS (
  SELECT o.process_id, o.comm_serial, o.kind, o.func, o.peer, 1 AS ops, o.bytes, o.gpu_ns
  FROM nccl_ops o WHERE o.state = 'done'
  UNION ALL
  SELECT process_id, comm_serial, kind, func, peer, count, bytes, NULL FROM nccl_op_summary
  UNION ALL
  SELECT process_id, comm_serial, CASE WHEN func IN ('Send', 'Recv') THEN 'p2p' ELSE 'coll' END,
         func, peer, count, bytes, NULL
  FROM nccl_op_overflow
), sides AS (
  SELECT c.comm_hash, c.rank AS src_rank, x.peer AS dst_rank, 'p2p' AS kind, 0 AS side, x.ops,
         x.bytes, x.gpu_ns
  FROM parts x JOIN nccl_comms c ON c.process_id = x.process_id AND c.comm_serial = x.comm_serial
  WHERE x.func = 'Send'
  UNION ALL
  SELECT c.comm_hash, x.peer, c.rank, 'p2p', 1, x.ops, x.bytes, x.gpu_ns
  FROM parts x JOIN nccl_comms c ON c.process_id = x.process_id AND c.comm_serial = x.comm_serial
  WHERE x.func = 'Recv'
  UNION ALL
  SELECT c.comm_hash, c.rank, 1 - c.rank, 'coll', 0, x.ops, x.bytes, x.gpu_ns
  FROM parts x JOIN nccl_comms c ON c.process_id = x.process_id AND c.comm_serial = x.comm_serial
  WHERE x.kind IN ('coll', 'ce') AND c.nranks = 2 AND c.rank IN (0, 1)
), located AS MATERIALIZED (
  SELECT s.host AS src_host, s.gpu AS src_gpu, s.uuid AS src_uuid, d.host AS dst_host,
         d.gpu AS dst_gpu, d.uuid AS dst_uuid, x.kind, x.side, x.ops, x.bytes, x.gpu_ns
  FROM sides x
  LEFT JOIN ends s ON s.comm_hash = x.comm_hash AND s.rank = x.src_rank
  LEFT JOIN ends d ON d.comm_hash = x.comm_hash AND d.rank = x.dst_rank
), counted AS MATERIALIZED (
  SELECT src_host, src_gpu, src_uuid, dst_host, dst_gpu, dst_uuid, kind, side,
         SUM(ops) AS ops, SUM(bytes) AS bytes,
         SUM(CASE WHEN gpu_ns > 0 THEN 1 ELSE 0 END) AS gpu_timed
  FROM located GROUP BY 1, 2, 3, 4, 5, 6, 7, 8
), chosen AS MATERIALIZED (
  SELECT * FROM counted c
  WHERE NOT EXISTS (
    SELECT 1 FROM counted o
    WHERE o.src_host IS c.src_host AND o.src_gpu IS c.src_gpu AND o.src_uuid IS c.src_uuid
      AND o.dst_host IS c.dst_host AND o.dst_gpu IS c.dst_gpu AND o.dst_uuid IS c.dst_uuid
      AND o.kind = c.kind AND o.side != c.side
      AND (o.ops > c.ops OR (o.ops = c.ops AND (o.gpu_timed > c.gpu_timed
           OR (o.gpu_timed = c.gpu_timed AND o.side < c.side)))))
), ranked AS (
  SELECT l.src_host, l.src_gpu, l.src_uuid, l.dst_host, l.dst_gpu, l.dst_uuid, l.kind,
         l.bytes * 1.0 / l.gpu_ns AS gbps,
         ROW_NUMBER() OVER (w ORDER BY l.bytes * 1.0 / l.gpu_ns) AS r, COUNT(*) OVER w AS n
  FROM located l JOIN chosen c
    ON l.src_host IS c.src_host AND l.src_gpu IS c.src_gpu AND l.src_uuid IS c.src_uuid
   AND l.dst_host IS c.dst_host AND l.dst_gpu IS c.dst_gpu AND l.dst_uuid IS c.dst_uuid
   AND l.kind = c.kind AND l.side = c.side
  WHERE l.gpu_ns > 0
  WINDOW w AS (PARTITION BY l.src_host, l.src_gpu, l.src_uuid, l.dst_host, l.dst_gpu, l.dst_uuid,
                            l.kind)
), percentiles AS (
  SELECT src_host, src_gpu, src_uuid, dst_host, dst_gpu, dst_uuid, kind,
         ROUND(MAX(CASE WHEN r = MAX(1, CAST(0.50 * n + 0.5 AS INTEGER)) THEN gbps END), 3) AS p50_gbps,
         ROUND(MAX(CASE WHEN r = MAX(1, CAST(0.99 * n + 0.5 AS INTEGER)) THEN gbps END), 3) AS p99_gbps
  FROM ranked GROUP BY 1, 2, 3, 4, 5, 6, 7
)
SELECT c.src_host, c.src_gpu, c.src_uuid, c.dst_host, c.dst_gpu, c.dst_uuid, c.kind,
       c.ops, c.bytes, c.gpu_timed, c.ops - c.gpu_timed AS untimed, p.p50_gbps, p.p99_gbps
FROM chosen c LEFT JOIN percentiles p
  ON p.src_host IS c.src_host AND p.src_gpu IS c.src_gpu AND p.src_uuid IS c.src_uuid
 AND p.dst_host IS c.dst_host AND p.dst_gpu IS c.dst_gpu AND p.dst_uuid IS c.dst_uuid
 AND p.kind = c.kind;

-- Cross-process and VMM mappings per device pair: owner -> accessor, whose memory -> the GPU
-- given access to it, each GPU named as nccl_pair_bandwidth names them (the host, nvidia-smi's
-- index where the devices table knows it, else the process's CUDA ordinal, and the UUID). Both
-- ends are ordinals of the process that made the mapping, so both are on its host. A mapping here
-- is a grant of access: an IPC open (the device it was opened on gains the memory) or a
-- cuMemSetAccess for a device (not one that takes access away); a cuMem import or map is the way
-- there, with no device yet. opened: such rows; closed: those whose close or unmap was seen
-- (ended_ns); live: the others, still mapped when the process's records end; failed: every failed
-- mapping call, its pair as far as it is known (NULL unknown). ranks, pids: of the processes that
-- made the mappings; exported_by_ranks, exported_by_pids: of the processes on the host that
-- exported memory of the owner GPU (cudaIpcGetMemHandle, cuMemExportToShareableHandle), since a
-- handle does not say who made it.
CREATE VIEW IF NOT EXISTS mapping_pairs AS
WITH grants AS MATERIALIZED (
  SELECT m.process_id, p.hostname AS host, p.rank, p.pid,
         coalesce(o.physical_index, m.owner_device) AS owner_gpu, o.uuid AS owner_uuid,
         o.pci_bus_id AS owner_pci_bus_id,
         coalesce(a.physical_index, m.accessor_device) AS accessor_gpu, a.uuid AS accessor_uuid,
         a.pci_bus_id AS accessor_pci_bus_id,
         (m.status = 0 AND m.accessor_device IS NOT NULL AND (m.event = 'import' OR
          (m.event = 'access' AND m.flags != 0))) AS opened,
         m.status, m.started_ns, m.ended_ns, m.bytes, m.cross_process, m.handle_type
  FROM peer_mappings m JOIN processes p ON p.id = m.process_id
  LEFT JOIN devices o ON o.process_id = m.process_id AND o.ordinal = m.owner_device
  LEFT JOIN devices a ON a.process_id = m.process_id AND a.ordinal = m.accessor_device
  WHERE m.status != 0 OR (m.accessor_device IS NOT NULL AND (m.event = 'import' OR
        (m.event = 'access' AND m.flags != 0)))
), exporters AS MATERIALIZED (
  SELECT p.hostname AS host, coalesce(d.physical_index, e.owner_device) AS gpu, d.uuid,
         group_concat(DISTINCT p.rank) AS ranks, group_concat(DISTINCT p.pid) AS pids
  FROM peer_mappings e JOIN processes p ON p.id = e.process_id
  LEFT JOIN devices d ON d.process_id = e.process_id AND d.ordinal = e.owner_device
  WHERE e.event = 'export' AND e.status = 0 AND e.owner_device IS NOT NULL
  GROUP BY 1, 2, 3
)
SELECT g.host, g.owner_gpu, g.owner_uuid, max(g.owner_pci_bus_id) AS owner_pci_bus_id,
       g.accessor_gpu, g.accessor_uuid, max(g.accessor_pci_bus_id) AS accessor_pci_bus_id,
       count(DISTINCT g.process_id) AS processes, group_concat(DISTINCT g.rank) AS ranks,
       group_concat(DISTINCT g.pid) AS pids, max(x.ranks) AS exported_by_ranks,
       max(x.pids) AS exported_by_pids,
       sum(g.opened) AS opened, sum(g.opened AND g.ended_ns IS NOT NULL) AS closed,
       sum(g.opened AND g.ended_ns IS NULL) AS live,
       coalesce(sum(CASE WHEN g.opened THEN g.bytes END), 0) AS bytes,
       sum(g.opened AND g.cross_process) AS cross_process, sum(g.status != 0) AS failed,
       group_concat(DISTINCT coalesce(g.handle_type, 'none')) AS handle_types,
       ROUND(avg(CASE WHEN g.opened AND g.ended_ns IS NOT NULL
                      THEN (g.ended_ns - g.started_ns) / 1e6 END), 3) AS avg_lived_ms
FROM grants g
LEFT JOIN exporters x ON x.host IS g.host AND x.gpu IS g.owner_gpu AND x.uuid IS g.owner_uuid
GROUP BY g.host, g.owner_gpu, g.owner_uuid, g.accessor_gpu, g.accessor_uuid;
