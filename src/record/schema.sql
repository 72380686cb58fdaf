-- p2pguard database schema (a public contract: README.md documents it; changes bump user_version,
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


CREATE VIEW IF NOT EXISTS peer_bandwidth AS
WITH timed AS (
  SELECT src_device, dst_device, path, bytes,
         COALESCE(gpu_ns, host_ns) AS ns,
         bytes * 1.0 / COALESCE(gpu_ns, host_ns) AS gbps
  FROM transfers
  WHERE status = 0 AND path IN ('p2p', 'driver', 'staged') AND COALESCE(gpu_ns, host_ns) > 0
), ranked AS (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY src_device, dst_device, path ORDER BY gbps) AS r,
         COUNT(*) OVER (PARTITION BY src_device, dst_device, path) AS n
  FROM timed
)
SELECT src_device, dst_device, path,
       n AS count,
       SUM(bytes) AS bytes,
       ROUND(MAX(CASE WHEN r = MAX(1, CAST(0.50 * n + 0.5 AS INTEGER)) THEN gbps END), 3) AS p50_gbps,
       ROUND(MAX(CASE WHEN r = MAX(1, CAST(0.99 * n + 0.5 AS INTEGER)) THEN gbps END), 3) AS p99_gbps
FROM ranked
GROUP BY src_device, dst_device, path;

CREATE VIEW IF NOT EXISTS failure_report AS
SELECT f.id,
       datetime(f.started_ns / 1000000000, 'unixepoch') AS time,
       p.pid, p.rank,
       f.api, f.status, f.error_name,
       f.device || '->' || f.peer_device AS pair,
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
