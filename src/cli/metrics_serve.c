/* SPDX-License-Identifier: MIT */
/*
 * metrics --listen: a small HTTP server for Prometheus' scrapes. One thread, every connection
 * non-blocking under poll(): a client that connects and says nothing, or reads its answer
 * slowly, holds only its own slot until its deadline, never another scrape. GET (and HEAD)
 * /metrics renders the database as it is at that moment; other methods get 405, other paths 404.
 */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "metrics.h"

#define MAX_CLIENTS	 64
#define REQUEST_MAX	 8192
#define READ_TIMEOUT_MS	 5000  /* to send a whole request */
#define WRITE_TIMEOUT_MS 30000 /* to take a whole answer */

struct client {
	int fd;
	char req[REQUEST_MAX];
	size_t len;
	char *out; /* the answer, once the request is complete */
	size_t out_len, out_off;
	uint64_t deadline_ms;
};

static volatile sig_atomic_t stop;

static void on_stop(int sig)
{
	(void)sig;
	stop = 1;
}

static uint64_t now_ms(void)
{
	return p2pg_now_ns() / 1000000;
}

int p2pg_metrics_parse_listen(const char *addr, struct p2pg_listen *ret)
{
	const char *colon = strrchr(addr, ':');
	const char *port = colon ? colon + 1 : addr;
	size_t hl = colon ? (size_t)(colon - addr) : 0;
	/* Digits only, at most as many as 65535 has: strtol alone takes " 80", "+80" or "-0" for a
	 * port. */
	size_t digits = strspn(port, "0123456789");
	long p = digits > 0 && digits <= 5 && !port[digits] ? strtol(port, NULL, 10) : -1;
	if (p < 0 || p > 65535 || hl >= sizeof(ret->host)) {
		fprintf(
		    stderr,
		    "p2pguard metrics: --listen wants [HOST:]PORT with PORT in decimal digits from "
		    "0 to 65535, got %s\n",
		    addr);
		return -EINVAL;
	}
	memcpy(ret->host, addr, hl);
	ret->host[hl] = '\0';
	if (ret->host[0] == '[' && hl > 1 && ret->host[hl - 1] == ']') {
		memmove(ret->host, ret->host + 1, hl - 2);
		ret->host[hl - 2] = '\0';
	}
	snprintf(ret->port, sizeof(ret->port), "%ld", p);
	return 0;
}

static char *answer(const char *status, const char *extra, const char *type, const char *body,
		    size_t body_len, bool head, size_t *ret_len)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	if (!f)
		return NULL;
	fprintf(f,
		"HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%sConnection: "
		"close\r\n\r\n",
		status, type, body_len, extra);
	if (!head && body_len)
		fwrite(body, 1, body_len, f);
	if (fclose(f) != 0) {
		free(out);
		return NULL;
	}
	*ret_len = len;
	return out;
}

/* The answer to a complete request. */
static void respond(struct client *c, const char *db_path)
{
	static const char plain[] = "text/plain; charset=utf-8";
	char method[16] = "", target[512] = "";
	c->req[c->len] = '\0';
	bool parsed = sscanf(c->req, "%15s %511s HTTP/", method, target) == 2;
	bool head = strcmp(method, "HEAD") == 0;
	if (!parsed) {
		static const char msg[] = "bad request\n";
		c->out =
		    answer("400 Bad Request", "", plain, msg, sizeof(msg) - 1, false, &c->out_len);
	} else if (!head && strcmp(method, "GET") != 0) {
		static const char msg[] = "only GET and HEAD\n";
		c->out = answer("405 Method Not Allowed", "Allow: GET, HEAD\r\n", plain, msg,
				sizeof(msg) - 1, head, &c->out_len);
	} else if (strcmp(target, "/metrics") == 0 || strncmp(target, "/metrics?", 9) == 0) {
		size_t len = 0;
		char *body = p2pg_metrics_render(db_path, &len);
		if (body)
			c->out = answer("200 OK", "", "text/plain; version=0.0.4; charset=utf-8",
					body, len, head, &c->out_len);
		else
			c->out = answer("500 Internal Server Error", "", plain, "", 0, head,
					&c->out_len);
		free(body);
	} else {
		static const char msg[] = "not found: the metrics are at /metrics\n";
		c->out =
		    answer("404 Not Found", "", plain, msg, sizeof(msg) - 1, head, &c->out_len);
	}
	c->out_off = 0;
	c->deadline_ms = now_ms() + WRITE_TIMEOUT_MS;
}

static bool request_complete(const struct client *c)
{
	return memmem(c->req, c->len, "\r\n\r\n", 4) || memmem(c->req, c->len, "\n\n", 2);
}

static void drop(struct client *clients, int *n, int k)
{
	close(clients[k].fd);
	free(clients[k].out);
	clients[k] = clients[--*n];
}

static int listen_on(const struct p2pg_listen *where, char *bound, size_t bound_len)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
	/* No host: loopback only. The database says a lot about a machine; exposing it beyond
	 * the node is the operator's choice, made by naming the address. */
	int r = getaddrinfo(where->host[0] ? where->host : "127.0.0.1", where->port, &hints, &ai);
	if (r != 0) {
		fprintf(stderr, "p2pguard metrics: cannot listen on %s:%s: %s\n", where->host,
			where->port, gai_strerror(r));
		return -1;
	}
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int one = 1;
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 64) < 0) {
		fprintf(stderr, "p2pguard metrics: cannot listen on %s:%s: %s\n",
			where->host[0] ? where->host : "127.0.0.1", where->port, strerror(errno));
		freeaddrinfo(ai);
		if (fd >= 0)
			close(fd);
		return -1;
	}
	freeaddrinfo(ai);
	struct sockaddr_storage sa;
	socklen_t len = sizeof(sa);
	char host[128] = "?", port[16] = "?";
	if (getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
		getnameinfo((struct sockaddr *)&sa, len, host, sizeof(host), port, sizeof(port),
			    NI_NUMERICHOST | NI_NUMERICSERV);
	snprintf(bound, bound_len, strchr(host, ':') ? "[%s]:%s" : "%s:%s", host, port);
	return fd;
}

int p2pg_metrics_serve(const char *db_path, const struct p2pg_listen *where)
{
	char bound[160];
	int lfd = listen_on(where, bound, sizeof(bound));
	if (lfd < 0)
		return 2;
	fprintf(stderr, "p2pguard metrics: serving http://%s/metrics from %s\n", bound, db_path);
	signal(SIGPIPE, SIG_IGN);
	struct sigaction sa = {.sa_handler = on_stop};
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	static struct client clients[MAX_CLIENTS];
	int n = 0;
	while (!stop) {
		struct pollfd pfd[MAX_CLIENTS + 1];
		uint64_t now = now_ms(), next = now + 1000;
		pfd[0] = (struct pollfd){.fd = lfd, .events = POLLIN};
		for (int k = 0; k < n; k++) {
			pfd[k + 1] = (struct pollfd){.fd = clients[k].fd,
						     .events = clients[k].out ? POLLOUT : POLLIN};
			if (clients[k].deadline_ms < next)
				next = clients[k].deadline_ms;
		}
		int p = poll(pfd, (nfds_t)n + 1, next > now ? (int)(next - now) : 0);
		if (p < 0 && errno != EINTR)
			break;
		now = now_ms();
		/* Clients first, from the last (a dropped one is replaced by the last). */
		for (int k = n - 1; k >= 0; k--) {
			struct client *c = &clients[k];
			short ev = pfd[k + 1].revents;
			if (p > 0 && (ev & (POLLERR | POLLNVAL))) {
				drop(clients, &n, k);
				continue;
			}
			if (p > 0 && !c->out && (ev & (POLLIN | POLLHUP))) {
				ssize_t r =
				    recv(c->fd, c->req + c->len, sizeof(c->req) - 1 - c->len, 0);
				if (r <= 0 && !(r < 0 && (errno == EAGAIN || errno == EINTR))) {
					drop(clients, &n, k);
					continue;
				}
				if (r > 0)
					c->len += (size_t)r;
				if (request_complete(c) || c->len == sizeof(c->req) - 1)
					respond(c, db_path);
				if (c->out == NULL && c->len == sizeof(c->req) - 1) {
					drop(clients, &n, k);
					continue;
				}
			}
			if (c->out && c->out_off < c->out_len) {
				ssize_t w =
				    send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
					 MSG_NOSIGNAL | MSG_DONTWAIT);
				if (w > 0)
					c->out_off += (size_t)w;
				else if (!(w < 0 && (errno == EAGAIN || errno == EINTR))) {
					drop(clients, &n, k);
					continue;
				}
			}
			if ((c->out && c->out_off == c->out_len) || now_ms() >= c->deadline_ms)
				drop(clients, &n, k);
		}
		if (p > 0 && (pfd[0].revents & POLLIN)) {
			for (;;) {
				int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
				if (fd < 0)
					break;
				if (n == MAX_CLIENTS) {
					/* Every slot taken (by idle clients, say): no waiting in
					 * line. */
					static const char busy[] =
					    "HTTP/1.1 503 Service Unavailable\r\nContent-Length: "
					    "0\r\nConnection: close\r\n\r\n";
					(void)send(fd, busy, sizeof(busy) - 1,
						   MSG_NOSIGNAL | MSG_DONTWAIT);
					close(fd);
					continue;
				}
				clients[n++] = (struct client){
				    .fd = fd, .deadline_ms = now_ms() + READ_TIMEOUT_MS};
			}
		}
	}
	for (int k = n - 1; k >= 0; k--)
		drop(clients, &n, k);
	close(lfd);
	return 0;
}
