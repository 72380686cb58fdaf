/* SPDX-License-Identifier: MIT */
/* The drainer's look at NCCL's operations in flight (nccl_watch.h). */
#include "nccl_watch.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cleanup.h"
#include "clock.h"
#include "nccl_codes.h"

#define WATCH_MAX     512 /* operations looked at a pass; the oldest slots come first */
#define PEERS_LOOKED  64  /* a collective's peers asked one by one */
#define EVIDENCE_SIZE 2048

static const char *kind_name(uint32_t flags)
{
	return (flags & P2PG_NCCL_F_P2P) ? "p2p" : (flags & P2PG_NCCL_F_CE) ? "ce" : "coll";
}

static int exec(sqlite3 *db, const char *sql)
{
	int rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
	return rc == SQLITE_OK ? 0 : rc == SQLITE_BUSY ? -EBUSY : -EIO;
}

/* The key every row of the operation shares. */
static void bind_key(sqlite3_stmt *st, int base, int64_t process_id,
		     const struct p2pg_nccl_inflight *e)
{
	sqlite3_bind_int64(st, base, process_id);
	sqlite3_bind_int(st, base + 1, e->comm_serial);
	sqlite3_bind_text(st, base + 2, kind_name(e->flags), -1, SQLITE_STATIC);
	sqlite3_bind_text(st, base + 3, p2pg_nccl_func_name(e->func), -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, base + 4, (int64_t)e->seq);
}

/* Its row, as 'running' or (final) 'unreported'. Returns 1 when one was written. */
static int write_row(sqlite3 *db, int64_t process_id, const struct p2pg_nccl_inflight *e,
		     bool final)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (final) {
		/* A row the drainer wrote earlier ends as unreported; else a new one. */
		if (sqlite3_prepare_v2(
			db,
			"UPDATE nccl_ops SET state = 'unreported' WHERE process_id = "
			"?1 AND comm_serial = ?2 AND kind = ?3 AND func = ?4 AND op_seq "
			"= ?5 AND state = 'running'",
			-1, &st, NULL) != SQLITE_OK)
			return -EIO;
		bind_key(st, 1, process_id, e);
		if (sqlite3_step(st) != SQLITE_DONE)
			return -EIO;
		if (sqlite3_changes(db) > 0)
			return 1;
		sqlite3_finalize(st);
		st = NULL;
	}
	unsigned dtype = P2PG_NCCL_F_DTYPE(e->flags);
	size_t size = p2pg_nccl_dtype_size(dtype);
	bool p2p = e->flags & P2PG_NCCL_F_P2P;
	if (sqlite3_prepare_v2(
		db,
		"INSERT OR IGNORE INTO nccl_ops (process_id, comm_serial, kind, func, "
		"op_seq, thread_id, peer, root, count, datatype, bytes, channels, "
		"channels_done, algorithm, protocol, state, started_ns) VALUES "
		"(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17)",
		-1, &st, NULL) != SQLITE_OK)
		return -EIO;
	bind_key(st, 1, process_id, e);
	sqlite3_bind_int64(st, 6, e->tid);
	sqlite3_bind_int(st, p2p ? 7 : 8, e->value);
	if (e->flags & P2PG_NCCL_F_SIZE_UNKNOWN) {
		sqlite3_bind_int64(st, 9, (int64_t)e->bytes);
	} else {
		if (size)
			sqlite3_bind_int64(st, 9, (int64_t)(e->bytes / size));
		sqlite3_bind_int64(st, 11, (int64_t)e->bytes);
	}
	if (dtype)
		sqlite3_bind_text(st, 10, p2pg_nccl_dtype_name(dtype), -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 12, (int)P2PG_NCCL_F_CHANNELS(e->flags));
	sqlite3_bind_int(st, 13, (int)P2PG_NCCL_F_CHANNELS_DONE(e->flags));
	if (e->algo_proto & 15)
		sqlite3_bind_text(st, 14, p2pg_nccl_algo_name(e->algo_proto & 15), -1,
				  SQLITE_STATIC);
	if (e->algo_proto >> 4)
		sqlite3_bind_text(st, 15, p2pg_nccl_proto_name(e->algo_proto >> 4), -1,
				  SQLITE_STATIC);
	sqlite3_bind_text(st, 16, final ? "unreported" : "running", -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 17, (int64_t)e->started_ns);
	if (sqlite3_step(st) != SQLITE_DONE)
		return -EIO;
	return sqlite3_changes(db) > 0;
}

struct comm_info {
	char hash[24];
	int rank, nranks;
};

static bool comm_info(sqlite3 *db, int64_t process_id, uint16_t serial, struct comm_info *c)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(db,
			       "SELECT comm_hash, rank, nranks FROM nccl_comms WHERE process_id = "
			       "?1 AND comm_serial = ?2",
			       -1, &st, NULL) != SQLITE_OK)
		return false;
	sqlite3_bind_int64(st, 1, process_id);
	sqlite3_bind_int(st, 2, serial);
	if (sqlite3_step(st) != SQLITE_ROW || sqlite3_column_type(st, 1) == SQLITE_NULL)
		return false;
	snprintf(c->hash, sizeof(c->hash), "%s", (const char *)sqlite3_column_text(st, 0));
	c->rank = sqlite3_column_int(st, 1);
	c->nranks = sqlite3_column_int(st, 2);
	return true;
}

enum peer_state {
	PEER_WAITING,	/* in the same operation, unfinished too */
	PEER_AHEAD,	/* finished it */
	PEER_UNKNOWN,	/* not in this database */
	PEER_ELSEWHERE, /* alive, not in this operation */
	PEER_GONE,	/* its process or its communicator ended */
};

static const char *const peer_state_names[] = {"waiting", "ahead", "unknown", "elsewhere", "gone"};

/* Whether a process of this machine still runs: a pid that is gone says so for sure. */
static bool process_gone(int pid, const char *boot_id, const char *our_boot_id)
{
	if (!boot_id || !our_boot_id || strcmp(boot_id, our_boot_id) != 0 || pid <= 0 ||
	    pid == getpid())
		return false;
	return kill(pid, 0) < 0 && errno == ESRCH;
}

static enum peer_state peer_state(sqlite3 *db, const struct comm_info *c, int peer,
				  const struct p2pg_nccl_inflight *e, int rank,
				  const char *our_boot_id)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *q = NULL, *op = NULL;
	if (sqlite3_prepare_v2(
		db,
		"SELECT c.process_id, c.comm_serial, c.finalized_ns IS NOT NULL, p.pid, p.boot_id, "
		"p.recovered, EXISTS (SELECT 1 FROM crashes k WHERE k.process_id = p.id) FROM "
		"nccl_comms c JOIN processes p ON p.id = c.process_id WHERE c.comm_hash = ?1 AND "
		"c.rank = ?2 ORDER BY c.started_ns DESC LIMIT 1",
		-1, &q, NULL) != SQLITE_OK)
		return PEER_UNKNOWN;
	sqlite3_bind_text(q, 1, c->hash, -1, SQLITE_STATIC);
	sqlite3_bind_int(q, 2, peer);
	if (sqlite3_step(q) != SQLITE_ROW)
		return PEER_UNKNOWN;
	int64_t process_id = sqlite3_column_int64(q, 0);
	int serial = sqlite3_column_int(q, 1);
	if (sqlite3_column_int(q, 2) || sqlite3_column_int(q, 5) || sqlite3_column_int(q, 6) ||
	    process_gone(sqlite3_column_int(q, 3), (const char *)sqlite3_column_text(q, 4),
			 our_boot_id))
		return PEER_GONE;
	bool p2p = e->flags & P2PG_NCCL_F_P2P;
	if (p2p) {
		/* Its counterpart: a receive from this rank for a send, a send for a receive. */
		unsigned other =
		    e->func == P2PG_NCCL_FUNC_SEND ? P2PG_NCCL_FUNC_RECV : P2PG_NCCL_FUNC_SEND;
		if (sqlite3_prepare_v2(
			db,
			"SELECT state FROM nccl_ops WHERE process_id = ?1 AND "
			"comm_serial = ?2 AND kind = 'p2p' AND func = ?3 AND peer = ?4 "
			"AND state = 'running' LIMIT 1",
			-1, &op, NULL) != SQLITE_OK)
			return PEER_UNKNOWN;
		sqlite3_bind_text(op, 3, p2pg_nccl_func_name(other), -1, SQLITE_STATIC);
		sqlite3_bind_int(op, 4, rank);
	} else {
		if (sqlite3_prepare_v2(
			db,
			"SELECT state FROM nccl_ops WHERE process_id = ?1 AND "
			"comm_serial = ?2 AND kind = ?3 AND func = ?4 AND op_seq = ?5 "
			"ORDER BY state = 'running' DESC LIMIT 1",
			-1, &op, NULL) != SQLITE_OK)
			return PEER_UNKNOWN;
		sqlite3_bind_text(op, 3, kind_name(e->flags), -1, SQLITE_STATIC);
		sqlite3_bind_text(op, 4, p2pg_nccl_func_name(e->func), -1, SQLITE_STATIC);
		sqlite3_bind_int64(op, 5, (int64_t)e->seq);
	}
	sqlite3_bind_int64(op, 1, process_id);
	sqlite3_bind_int(op, 2, serial);
	if (sqlite3_step(op) != SQLITE_ROW)
		return PEER_ELSEWHERE;
	const char *st = (const char *)sqlite3_column_text(op, 0);
	if (st && strcmp(st, "running") == 0)
		return PEER_WAITING;
	if (st && strcmp(st, "done") == 0)
		return PEER_AHEAD;
	return PEER_GONE; /* its end unreported: the peer's communicator ended */
}

/* Appends to buf at *pos, never past len. */
static void append(char *buf, size_t len, size_t *pos, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void append(char *buf, size_t len, size_t *pos, const char *fmt, ...)
{
	if (*pos >= len)
		return;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf + *pos, len - *pos, fmt, ap);
	va_end(ap);
	if (n > 0)
		*pos += (size_t)n < len - *pos ? (size_t)n : len - *pos - 1;
}

/* Where the operation's peers are, as a JSON object appended to buf ({"1": "waiting", ...}), and
 * the worst of them: one gone or elsewhere explains the hang; all waiting in the same operation
 * points at the path between them. */
static enum peer_state survey_peers(sqlite3 *db, const struct comm_info *c,
				    const struct p2pg_nccl_inflight *e, const char *boot_id,
				    char *buf, size_t len, size_t *pos)
{
	bool p2p = e->flags & P2PG_NCCL_F_P2P;
	int counts[5] = {0};
	append(buf, len, pos, "{");
	int looked = 0;
	for (int q = p2p ? e->value : 0;
	     p2p ? looked == 0 : (q < c->nranks && looked < PEERS_LOOKED); q++) {
		if (!p2p && q == c->rank)
			continue;
		enum peer_state s = peer_state(db, c, q, e, c->rank, boot_id);
		counts[s]++;
		append(buf, len, pos, "%s\"%d\": \"%s\"", looked ? ", " : "", q,
		       peer_state_names[s]);
		looked++;
	}
	append(buf, len, pos, "}");
	return counts[PEER_GONE]	? PEER_GONE
	       : counts[PEER_ELSEWHERE] ? PEER_ELSEWHERE
	       : counts[PEER_UNKNOWN]	? PEER_UNKNOWN
	       : counts[PEER_AHEAD]	? PEER_AHEAD
	       : looked			? PEER_WAITING
					: PEER_UNKNOWN;
}

#define RESURVEYED_MAX 32

/* Ranks reach a hang at different times: a row another rank of this communicator wrote while a
 * peer was not in the database yet (its process still starting, its spool not drained) or not in
 * the operation yet (a collective's late rank, a receive not posted yet) is looked at again now
 * that this rank's rows are in, so that the hang reads the same whichever rank timed out first.
 * A row changes only when what it finds now differs and is known; its evidence keeps the peers as
 * first seen and gains "peers_later". */
static int resurvey_earlier_stalls(sqlite3 *db, const struct p2pg_nccl_watch_pass *pass,
				   const char *comm_hash, int our_rank)
{
	struct {
		int64_t id, seq;
		struct comm_info c;
		int peer;
		char kind[8], func[24];
		char state[16];
	} rows[RESURVEYED_MAX];
	int n = 0;
	{
		_cleanup_sqlite_stmt_ sqlite3_stmt *q = NULL;
		if (sqlite3_prepare_v2(
			db,
			"SELECT id, rank, nranks, kind, func, op_seq, peer, peer_state "
			"FROM nccl_stalls WHERE comm_hash = ?1 AND rank != ?2 AND "
			"peer_state IN ('unknown', 'elsewhere') LIMIT ?3",
			-1, &q, NULL) != SQLITE_OK)
			return -EIO;
		sqlite3_bind_text(q, 1, comm_hash, -1, SQLITE_STATIC);
		sqlite3_bind_int(q, 2, our_rank);
		sqlite3_bind_int(q, 3, RESURVEYED_MAX);
		while (n < RESURVEYED_MAX && sqlite3_step(q) == SQLITE_ROW) {
			rows[n].id = sqlite3_column_int64(q, 0);
			snprintf(rows[n].c.hash, sizeof(rows[n].c.hash), "%s", comm_hash);
			rows[n].c.rank = sqlite3_column_int(q, 1);
			rows[n].c.nranks = sqlite3_column_int(q, 2);
			const unsigned char *kind = sqlite3_column_text(q, 3);
			const unsigned char *func = sqlite3_column_text(q, 4);
			snprintf(rows[n].kind, sizeof(rows[n].kind), "%s",
				 kind ? (const char *)kind : "");
			snprintf(rows[n].func, sizeof(rows[n].func), "%s",
				 func ? (const char *)func : "");
			rows[n].seq = sqlite3_column_int64(q, 5);
			rows[n].peer = sqlite3_column_int(q, 6);
			const unsigned char *state = sqlite3_column_text(q, 7);
			snprintf(rows[n].state, sizeof(rows[n].state), "%s",
				 state ? (const char *)state : "");
			n++;
		}
	}
	for (int k = 0; k < n; k++) {
		struct p2pg_nccl_inflight e = {
		    .seq = (uint64_t)rows[k].seq,
		    .value = rows[k].peer,
		    .func = (uint8_t)p2pg_nccl_func_code(rows[k].func),
		    .flags = strcmp(rows[k].kind, "p2p") == 0  ? P2PG_NCCL_F_P2P
			     : strcmp(rows[k].kind, "ce") == 0 ? P2PG_NCCL_F_CE
							       : 0};
		char later[EVIDENCE_SIZE / 2];
		size_t pos = 0;
		append(later, sizeof(later), &pos, "found later by rank %d: ", our_rank);
		enum peer_state worst =
		    survey_peers(db, &rows[k].c, &e, pass->boot_id, later, sizeof(later), &pos);
		const char *state = peer_state_names[worst];
		if (worst == PEER_UNKNOWN || strcmp(state, rows[k].state) == 0)
			continue;
		const char *rule_id = NULL, *root_cause = NULL, *advice = NULL;
		if (!pass->diagnosis || !pass->diagnosis(pass->rules_dir, rows[k].func, state,
							 &rule_id, &root_cause, &advice))
			rule_id = root_cause = advice = NULL;
		_cleanup_sqlite_stmt_ sqlite3_stmt *u = NULL;
		if (sqlite3_prepare_v2(
			db,
			"UPDATE nccl_stalls SET peer_state = ?1, rule_id = coalesce(?2, rule_id), "
			"diagnosis = coalesce(?3, diagnosis), advice = coalesce(?4, advice), "
			"evidence = CASE WHEN json_valid(evidence) THEN json_set(evidence, "
			"'$.peer_state', ?1, '$.peers_later', ?5) ELSE evidence END WHERE id = ?6",
			-1, &u, NULL) != SQLITE_OK)
			return -EIO;
		sqlite3_bind_text(u, 1, state, -1, SQLITE_STATIC);
		if (rule_id)
			sqlite3_bind_text(u, 2, rule_id, -1, SQLITE_STATIC);
		if (root_cause)
			sqlite3_bind_text(u, 3, root_cause, -1, SQLITE_STATIC);
		if (advice)
			sqlite3_bind_text(u, 4, advice, -1, SQLITE_STATIC);
		sqlite3_bind_text(u, 5, later, -1, SQLITE_TRANSIENT);
		sqlite3_bind_int64(u, 6, rows[k].id);
		if (sqlite3_step(u) != SQLITE_DONE)
			return -EIO;
	}
	return 0;
}

static int write_stall(sqlite3 *db, const struct p2pg_nccl_watch_pass *pass,
		       const struct p2pg_nccl_inflight *e, const struct p2pg_nccl_inflight *all,
		       size_t n, uint64_t now)
{
	struct comm_info c = {"", -1, 0};
	bool known = comm_info(db, pass->process_id, e->comm_serial, &c);
	bool p2p = e->flags & P2PG_NCCL_F_P2P;
	char evidence[EVIDENCE_SIZE];
	size_t pos = 0;
	int queued = 0;
	for (size_t k = 0; k < n; k++)
		queued += all[k].comm_serial == e->comm_serial && all[k].started_ns > e->started_ns;
	append(evidence, sizeof(evidence), &pos,
	       "{\"stall_s\": %u, \"waited_s\": %.1f, \"comm_hash\": \"%s\", \"rank\": %d, "
	       "\"nranks\": %d, \"kind\": \"%s\", \"op\": \"%s\", \"seq\": %llu, \"bytes\": %llu, "
	       "\"channels\": %u, \"channels_done\": %u, \"ops_queued_after\": %d",
	       pass->stall_s, (double)(now - e->running_ns) / 1e9, c.hash, c.rank, c.nranks,
	       kind_name(e->flags), p2pg_nccl_func_name(e->func), (unsigned long long)e->seq,
	       (unsigned long long)e->bytes, P2PG_NCCL_F_CHANNELS(e->flags),
	       P2PG_NCCL_F_CHANNELS_DONE(e->flags), queued);
	enum peer_state worst = PEER_UNKNOWN;
	if (known) {
		append(evidence, sizeof(evidence), &pos, ", \"peers\": ");
		worst = survey_peers(db, &c, e, pass->boot_id, evidence, sizeof(evidence), &pos);
	}
	const char *state = peer_state_names[worst];
	append(evidence, sizeof(evidence), &pos, ", \"peer_state\": \"%s\"}", state);

	const char *rule_id = NULL, *root_cause = NULL, *advice = NULL;
	if (!pass->diagnosis || !pass->diagnosis(pass->rules_dir, p2pg_nccl_func_name(e->func),
						 state, &rule_id, &root_cause, &advice)) {
		rule_id = NULL;
		root_cause = "An NCCL operation's kernel has run this long without finishing: it "
			     "waits for data from its peers that does not arrive.";
		advice = NULL;
	}
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(
		db,
		"INSERT OR IGNORE INTO nccl_stalls (process_id, comm_serial, kind, func, op_seq, "
		"op_id, "
		"comm_hash, rank, nranks, peer, bytes, started_ns, running_ns, waited_ns, "
		"peer_state, evidence, rule_id, diagnosis, advice) VALUES (?1,?2,?3,?4,?5,(SELECT "
		"id FROM nccl_ops WHERE process_id = ?1 AND comm_serial = ?2 AND kind = ?3 AND "
		"func "
		"= ?4 AND op_seq = ?5 AND state = "
		"'running'),?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,"
		"?17,?18)",
		-1, &st, NULL) != SQLITE_OK)
		return -EIO;
	bind_key(st, 1, pass->process_id, e);
	if (known) {
		sqlite3_bind_text(st, 6, c.hash, -1, SQLITE_TRANSIENT);
		sqlite3_bind_int(st, 7, c.rank);
		sqlite3_bind_int(st, 8, c.nranks);
	}
	if (p2p)
		sqlite3_bind_int(st, 9, e->value);
	if (!(e->flags & P2PG_NCCL_F_SIZE_UNKNOWN))
		sqlite3_bind_int64(st, 10, (int64_t)e->bytes);
	sqlite3_bind_int64(st, 11, (int64_t)e->started_ns);
	sqlite3_bind_int64(st, 12, (int64_t)e->running_ns);
	sqlite3_bind_int64(st, 13, (int64_t)(now - e->running_ns));
	sqlite3_bind_text(st, 14, state, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 15, evidence, -1, SQLITE_TRANSIENT);
	if (rule_id)
		sqlite3_bind_text(st, 16, rule_id, -1, SQLITE_STATIC);
	if (root_cause)
		sqlite3_bind_text(st, 17, root_cause, -1, SQLITE_STATIC);
	if (advice)
		sqlite3_bind_text(st, 18, advice, -1, SQLITE_STATIC);
	if (sqlite3_step(st) != SQLITE_DONE)
		return -EIO;
	int written = sqlite3_changes(db) > 0;
	if (known) {
		int rc = resurvey_earlier_stalls(db, pass, c.hash, c.rank);
		if (rc < 0)
			return rc;
	}
	return written;
}

int p2pg_nccl_watch_run(sqlite3 *db, const struct p2pg_nccl_watch *w,
			const struct p2pg_nccl_watch_pass *pass)
{
	static struct p2pg_nccl_inflight ops[WATCH_MAX]; /* the drainer's alone */
	uint64_t now = p2pg_realtime_ns();
	uint64_t stall_ns = (uint64_t)pass->stall_s * 1000000000ull;
	uint64_t early = stall_ns / 4 > 250000000ull ? stall_ns / 4 : 250000000ull;
	size_t n = w->scan(ops, WATCH_MAX,
			   pass->final	 ? UINT64_MAX
			   : now > early ? now - early
					 : 0);
	uint32_t marks[WATCH_MAX];
	bool any = false;
	for (size_t k = 0; k < n; k++) {
		marks[k] = 0;
		if (pass->final || !(ops[k].marks & P2PG_NCCL_MARK_ROW))
			marks[k] |= P2PG_NCCL_MARK_ROW;
		if (!pass->final && !(ops[k].marks & P2PG_NCCL_MARK_STALL) && ops[k].running_ns &&
		    now > ops[k].running_ns && now - ops[k].running_ns >= stall_ns)
			marks[k] |= P2PG_NCCL_MARK_STALL;
		any |= marks[k] != 0;
	}
	if (!any)
		return 0;
	int rc = exec(db, "BEGIN IMMEDIATE");
	if (rc < 0)
		return rc;
	int written = 0;
	/* Every row first: a stall's diagnosis reads the others, of this process too. */
	for (size_t k = 0; k < n; k++) {
		if (!(marks[k] & P2PG_NCCL_MARK_ROW))
			continue;
		if ((rc = write_row(db, pass->process_id, &ops[k], pass->final)) < 0)
			goto fail;
		written += rc;
	}
	for (size_t k = 0; k < n; k++) {
		if (!(marks[k] & P2PG_NCCL_MARK_STALL))
			continue;
		if ((rc = write_stall(db, pass, &ops[k], ops, n, now)) < 0)
			goto fail;
		written += rc;
	}
	if ((rc = exec(db, "COMMIT")) < 0)
		goto fail;
	for (size_t k = 0; k < n; k++)
		if (marks[k])
			w->mark(ops[k].slot, ops[k].gen, marks[k]);
	return written;
fail:
	exec(db, "ROLLBACK");
	return rc;
}
