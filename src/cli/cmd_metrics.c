/* SPDX-License-Identifier: MIT */
/*
 * p2pguard metrics: the database as Prometheus text exposition (format 0.0.4), for node_exporter's
 * textfile collector or, with --listen, for a scrape of /metrics. Counters only: a fleet's
 * Prometheus aggregates across nodes and takes rates.
 */
#include <errno.h>
#include <netdb.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "cleanup.h"
#include "cli.h"
#include "dbread.h"
#include "safe_path.h"

/* A label value: backslash, double quote and newline escaped, as the format wants. */
static void label(FILE *out, const char *name, const char *value, bool first)
{
	fprintf(out, "%s%s=\"", first ? "" : ",", name);
	for (const char *p = value ? value : ""; *p; p++) {
		if (*p == '\\' || *p == '"')
			fputc('\\', out);
		if (*p == '\n')
			fputs("\\n", out);
		else
			fputc(*p, out);
	}
	fputc('"', out);
}

static void family(FILE *out, const char *name, const char *type, const char *help)
{
	fprintf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/*
 * One sample per row of sql: the first nlabels columns are the labels (names in labels[]), the
 * last one the value.
 */
static void samples(FILE *out, sqlite3 *db, const char *name, const char *sql,
		    const char *const *labels, int nlabels)
{
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		return;
	while (sqlite3_step(st) == SQLITE_ROW) {
		fputs(name, out);
		if (nlabels) {
			fputc('{', out);
			for (int k = 0; k < nlabels; k++)
				label(out, labels[k], p2pg_cli_col(st, k), k == 0);
			fputc('}', out);
		}
		if (sqlite3_column_type(st, nlabels) == SQLITE_INTEGER)
			fprintf(out, " %lld\n", sqlite3_column_int64(st, nlabels));
		else
			fprintf(out, " %.9g\n", sqlite3_column_double(st, nlabels));
	}
}

/* A counter family and its samples: every family here but the stalls' (whose query depends on the
 * database's age) is one query. */
static void counter(FILE *out, sqlite3 *db, const char *name, const char *help, const char *sql,
		    const char *const *labels, int nlabels)
{
	family(out, name, "counter", help);
	samples(out, db, name, sql, labels, nlabels);
}

/* Every way a copy is recorded: a row each (record=all), summary buckets (record=summary; that
 * process's rows are its failures and outliers, already in the buckets), and the overflow
 * aggregates of calls that found their ring full (no row of their own). */
#define COPIES_ROWS_AND_SUMMARY                                                                 \
	"WITH copies AS (SELECT p.hostname AS host, t.src_device AS src, t.dst_device AS dst, " \
	"coalesce(t.path, 'unknown') AS path, 1 AS n, coalesce(t.bytes, 0) AS bytes, "          \
	"coalesce(t.gpu_ns, t.host_ns, 0) AS ns, t.status != 0 AS failed "                      \
	"FROM transfers t JOIN processes p ON p.id = t.process_id "                             \
	"WHERE t.process_id NOT IN (SELECT process_id FROM transfer_summary) "                  \
	"UNION ALL SELECT p.hostname, s.src_device, s.dst_device, s.path, s.count, s.bytes, "   \
	"s.host_ns_total, s.failures FROM transfer_summary s JOIN processes p ON p.id = "       \
	"s.process_id"
#define COPIES_OVERFLOW                                                                        \
	" UNION ALL SELECT p.hostname, o.src_device, o.dst_device, o.path, o.count, o.bytes, " \
	"o.host_ns_total, o.status != 0 FROM transfer_overflow o JOIN processes p ON p.id = "  \
	"o.process_id"
#define COPIES_SUM                                                                         \
	") SELECT host, src, dst, path, sum(n) AS n, sum(bytes) AS bytes, sum(ns) AS ns, " \
	"sum(failed) AS failed FROM copies GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4"

static int write_metrics(sqlite3 *db, FILE *out)
{
	static const char *const pair[] = {"hostname", "src", "dst", "path"};
	static const char *const host[] = {"hostname"};

	/* One pass over the copies for the four families that count them (temporary tables live
	 * apart from the read-only database). */
	char *err = NULL;
	/* A database older than the overflow aggregates has no such table. */
	const char *sql =
	    p2pg_cli_has_table(db, "transfer_overflow")
		? "CREATE TEMP TABLE IF NOT EXISTS pairs AS " COPIES_ROWS_AND_SUMMARY
		      COPIES_OVERFLOW COPIES_SUM
		: "CREATE TEMP TABLE IF NOT EXISTS pairs AS " COPIES_ROWS_AND_SUMMARY COPIES_SUM;
	if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
		fprintf(stderr, "p2pguard metrics: cannot count the copies: %s\n",
			err ? err : sqlite3_errmsg(db));
		sqlite3_free(err);
		return -EIO;
	}

	counter(out, db, "p2pguard_peer_copies_total",
		"Cross-device copy calls the guard recorded, by device pair and path.",
		"SELECT host, src, dst, path, n FROM temp.pairs", pair, 4);
	counter(out, db, "p2pguard_peer_copy_bytes_total",
		"Bytes of the cross-device copy calls, by device pair and path.",
		"SELECT host, src, dst, path, bytes FROM temp.pairs", pair, 4);
	counter(out, db, "p2pguard_peer_copy_seconds_total",
		"Time of the cross-device copies (GPU time where measured, host time otherwise).",
		"SELECT host, src, dst, path, ns / 1e9 FROM temp.pairs", pair, 4);
	counter(out, db, "p2pguard_peer_copy_failures_total",
		"Cross-device copy calls that returned an error, by device pair and path.",
		"SELECT host, src, dst, path, failed FROM temp.pairs", pair, 4);

	static const char *const rule[] = {"hostname", "api", "rule", "error"};
	counter(out, db, "p2pguard_failures_total",
		"Failed peer calls and probe findings, by API, knowledge-base rule and error.",
		"SELECT p.hostname, f.api, coalesce(f.rule_id, 'none'), coalesce(f.error_name, "
		"f.status), count(*) FROM failures f JOIN processes p ON p.id = f.process_id "
		"GROUP BY 1, 2, 3, 4",
		rule, 4);

	static const char *const verdict[] = {"hostname", "src", "dst", "verdict"};
	counter(out, db, "p2pguard_probe_verdicts_total",
		"Health-probe findings other than ok, by device pair and verdict.",
		"SELECT p.hostname, f.device, f.peer_device, json_extract(f.evidence, "
		"'$.p2p_probe'), count(*) FROM failures f JOIN processes p ON p.id = f.process_id "
		"WHERE json_valid(f.evidence) AND json_extract(f.evidence, '$.p2p_probe') IS NOT "
		"NULL GROUP BY 1, 2, 3, 4",
		verdict, 4);

	static const char *const sig[] = {"hostname", "signal"};
	counter(out, db, "p2pguard_crashes_total",
		"Guarded processes that died of a fatal signal, by signal number.",
		"SELECT p.hostname, c.signal, count(*) FROM crashes c JOIN processes p ON p.id = "
		"c.process_id GROUP BY 1, 2",
		sig, 2);

	family(out, "p2pguard_stalls_total", "counter",
	       "Peer copies still unfinished past P2PGUARD_STALL_S, by device pair.");
	if (p2pg_cli_has_table(db, "stalls") && p2pg_cli_has_column(db, "stalls", "src_device") &&
	    p2pg_cli_has_column(db, "stalls", "dst_device")) {
		static const char *const spair[] = {"hostname", "src", "dst"};
		samples(out, db, "p2pguard_stalls_total",
			"SELECT p.hostname, s.src_device, s.dst_device, count(*) FROM stalls s "
			"JOIN processes p ON p.id = s.process_id GROUP BY 1, 2, 3",
			spair, 3);
	} else if (p2pg_cli_has_table(db, "stalls")) {
		samples(out, db, "p2pguard_stalls_total",
			"SELECT p.hostname, count(*) FROM stalls s JOIN processes p ON p.id = "
			"s.process_id GROUP BY 1",
			host, 1);
	}

	counter(out, db, "p2pguard_records_dropped_total",
		"Records lost because a thread's ring was full.",
		"SELECT hostname, sum(records_dropped) FROM processes GROUP BY 1", host, 1);
	counter(out, db, "p2pguard_processes_total", "Guarded processes recorded.",
		"SELECT hostname, count(*) FROM processes GROUP BY 1", host, 1);
	counter(out, db, "p2pguard_processes_without_peer_calls_total",
		"Guarded processes that made no peer call (no transfer, peer access or failure).",
		"SELECT hostname, sum(NOT EXISTS (SELECT 1 FROM transfers t WHERE t.process_id = "
		"p.id) AND NOT EXISTS (SELECT 1 FROM transfer_summary s WHERE s.process_id = p.id) "
		"AND NOT EXISTS (SELECT 1 FROM peer_access a WHERE a.process_id = p.id) AND NOT "
		"EXISTS (SELECT 1 FROM failures f WHERE f.process_id = p.id)) FROM processes p "
		"GROUP BY 1",
		host, 1);
	return 0;
}

/* The exposition for one scrape or one file, from the database as it is now. */
static char *render(const char *db_path, size_t *len)
{
	_cleanup_sqlite_ sqlite3 *db = NULL;
	if (p2pg_cli_open_read(db_path, &db) < 0)
		return NULL;
	char *buf = NULL;
	FILE *mem = open_memstream(&buf, len);
	if (!mem)
		return NULL;
	int r = write_metrics(db, mem);
	if (fclose(mem) != 0 || r < 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

static volatile sig_atomic_t stop;

static void on_stop(int sig)
{
	(void)sig;
	stop = 1;
}

/* A small HTTP/1.0 server: GET /metrics, one request per connection, one at a time. */
static int serve(const char *db_path, const char *addr)
{
	char host[256];
	const char *colon = strrchr(addr, ':');
	const char *port = colon ? colon + 1 : addr;
	size_t hl = colon ? (size_t)(colon - addr) : 0;
	if (hl >= sizeof(host) || !*port) {
		fprintf(stderr, "p2pguard metrics: --listen wants HOST:PORT, got %s\n", addr);
		return 2;
	}
	memcpy(host, addr, hl);
	host[hl] = '\0';
	if (host[0] == '[' && hl > 1 && host[hl - 1] == ']') {
		memmove(host, host + 1, hl - 2);
		host[hl - 2] = '\0';
	}
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
	/* No host: loopback only. The database says a lot about a machine; exposing it beyond
	 * the node is the operator's choice, made by naming the address. */
	int r = getaddrinfo(*host ? host : "127.0.0.1", port, &hints, &ai);
	if (r != 0) {
		fprintf(stderr, "p2pguard metrics: cannot listen on %s: %s\n", addr,
			gai_strerror(r));
		return 2;
	}
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 16) < 0) {
		fprintf(stderr, "p2pguard metrics: cannot listen on %s: %s\n", addr,
			strerror(errno));
		freeaddrinfo(ai);
		if (fd >= 0)
			close(fd);
		return 2;
	}
	freeaddrinfo(ai);
	struct sockaddr_storage bound;
	socklen_t blen = sizeof(bound);
	char bhost[128] = "?", bport[16] = "?";
	if (getsockname(fd, (struct sockaddr *)&bound, &blen) == 0)
		getnameinfo((struct sockaddr *)&bound, blen, bhost, sizeof(bhost), bport,
			    sizeof(bport), NI_NUMERICHOST | NI_NUMERICSERV);
	fprintf(stderr, "p2pguard metrics: serving http://%s:%s/metrics from %s\n", bhost, bport,
		db_path);
	signal(SIGPIPE, SIG_IGN);
	struct sigaction sa = {.sa_handler = on_stop};
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	while (!stop) {
		int c = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0)
			continue;
		struct timeval tv = {.tv_sec = 5};
		setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		char req[2048];
		ssize_t n = recv(c, req, sizeof(req) - 1, 0);
		req[n > 0 ? n : 0] = '\0';
		char head[256];
		size_t len = 0;
		char *body = NULL;
		const char *status = "404 Not Found";
		if (strncmp(req, "GET /metrics ", 13) == 0 ||
		    strncmp(req, "GET /metrics?", 13) == 0) {
			body = render(db_path, &len);
			status = body ? "200 OK" : "500 Internal Server Error";
		}
		int hlen =
		    snprintf(head, sizeof(head),
			     "HTTP/1.0 %s\r\nContent-Type: text/plain; version=0.0.4; "
			     "charset=utf-8\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
			     status, len);
		if (send(c, head, (size_t)hlen, MSG_NOSIGNAL) == hlen && body)
			for (size_t off = 0; off < len;) {
				ssize_t w = send(c, body + off, len - off, MSG_NOSIGNAL);
				if (w <= 0)
					break;
				off += (size_t)w;
			}
		free(body);
		close(c);
	}
	close(fd);
	return 0;
}

static void usage(FILE *out)
{
	fputs("usage: p2pguard metrics [DATABASE] [-o FILE] [--listen [HOST:]PORT]\n"
	      "\n"
	      "Prints the database as Prometheus text exposition: copies, bytes and seconds per\n"
	      "device pair and path, failures by rule, probe verdicts, crashes, stalls, dropped\n"
	      "records. -o FILE writes it atomically (node_exporter's textfile collector reads\n"
	      "*.prom files); --listen serves GET /metrics, read afresh at each scrape (HOST\n"
	      "defaults to 127.0.0.1).\n",
	      out);
}

int p2pg_cmd_metrics(int argc, char **argv)
{
	const char *db_arg = NULL, *out_path = NULL, *listen_addr = NULL;
	for (int k = 1; k < argc; k++) {
		if (strcmp(argv[k], "--help") == 0 || strcmp(argv[k], "-h") == 0) {
			usage(stdout);
			return 0;
		} else if (strcmp(argv[k], "-o") == 0 || strcmp(argv[k], "--listen") == 0) {
			if (k + 1 == argc) {
				fprintf(stderr, "p2pguard metrics: %s needs a value\n", argv[k]);
				return 2;
			}
			*(argv[k][1] == 'o' ? &out_path : &listen_addr) = argv[k + 1];
			k++;
		} else if (argv[k][0] == '-') {
			return p2pg_cli_unknown_option("metrics", argv[k]);
		} else if (db_arg) {
			fprintf(stderr, "p2pguard metrics: one database only\n");
			return 2;
		} else {
			db_arg = argv[k];
		}
	}
	const char *db_path = p2pg_cli_db_path(db_arg);
	size_t len = 0;
	_cleanup_free_ char *text = render(db_path, &len);
	if (!text)
		return 2;
	if (listen_addr)
		return serve(db_path, listen_addr);
	if (!out_path) {
		fwrite(text, 1, len, stdout);
		return 0;
	}
	/* Written beside under an unguessable name and renamed: the collector never reads half a
	 * file, and no link another user planted is followed (safe_path.h). */
	char why[256];
	if (p2pg_replace_file(out_path, text, len, why, sizeof(why)) < 0) {
		fprintf(stderr, "p2pguard metrics: cannot write %s: %s\n", out_path, why);
		return 2;
	}
	return 0;
}
