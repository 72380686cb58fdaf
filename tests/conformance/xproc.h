/* Two processes for the cross-process conformance programs: the owner starts the importer as a
 * new image of the same program (a child forked after cuInit could make no CUDA call), joined by
 * a Unix socket pair; messages are whole datagrams, file descriptors travel with SCM_RIGHTS.
 * Header-only, like tap.h. The owner prints only before it sends and after it receives, so the
 * two processes' lines come in one order. */
#ifndef CONFORMANCE_XPROC_H
#define CONFORMANCE_XPROC_H

#include <fcntl.h>
#include <stdbool.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tap.h"

extern char **environ;

/* Starts "PROGRAM --importer FD" with one end of a socket pair; returns the other end (-1 on
 * failure, reported). */
static inline int xproc_spawn_importer(pid_t *ret_pid)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) < 0) {
		check(0, "socketpair");
		return -1;
	}
	fcntl(sv[0], F_SETFD, FD_CLOEXEC);
	char fd_arg[16];
	snprintf(fd_arg, sizeof(fd_arg), "%d", sv[1]);
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0) {
		check(0, "readlink /proc/self/exe");
		return -1;
	}
	exe[n] = '\0';
	char *argv[] = {exe, "--importer", fd_arg, NULL};
	fflush(stdout);
	if (posix_spawn(ret_pid, exe, NULL, NULL, argv, environ) != 0) {
		check(0, "start the importer process");
		return -1;
	}
	close(sv[1]);
	return sv[0];
}

/* The importer's exit status, as one check line. */
static inline void xproc_wait_importer(pid_t pid)
{
	int status = 0;
	waitpid(pid, &status, 0);
	check(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the importer process passed");
}

static inline int xproc_send(int sock, const void *data, size_t len, int fd)
{
	struct iovec iov = {(void *)data, len};
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} control;
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
	if (fd >= 0) {
		memset(&control, 0, sizeof(control));
		msg.msg_control = control.buf;
		msg.msg_controllen = sizeof(control.buf);
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	return sendmsg(sock, &msg, 0) == (ssize_t)len ? 0 : -1;
}

/* Receives one message of exactly len bytes; *ret_fd gets a passed descriptor, or -1. */
static inline int xproc_recv(int sock, void *data, size_t len, int *ret_fd)
{
	struct iovec iov = {data, len};
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} control;
	struct msghdr msg = {.msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = control.buf,
			     .msg_controllen = sizeof(control.buf)};
	ssize_t n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
	if (ret_fd) {
		*ret_fd = -1;
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
		if (n > 0 && c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
			memcpy(ret_fd, CMSG_DATA(c), sizeof(int));
	}
	return n == (ssize_t)len ? 0 : -1;
}

/* A one-word step of the protocol ("written", "done", ...). */
static inline void xproc_say(int sock, const char *word)
{
	char buf[16] = {0};
	snprintf(buf, sizeof(buf), "%s", word);
	xproc_send(sock, buf, sizeof(buf), -1);
}

static inline bool xproc_hear(int sock, const char *word)
{
	char buf[16] = {0};
	return xproc_recv(sock, buf, sizeof(buf), NULL) == 0 && strcmp(buf, word) == 0;
}

static inline void xproc_fill(unsigned char *p, size_t n, unsigned seed)
{
	for (size_t k = 0; k < n; k++)
		p[k] = (unsigned char)(k * 7 + seed);
}

static inline bool xproc_matches(const unsigned char *p, size_t n, unsigned seed)
{
	for (size_t k = 0; k < n; k++)
		if (p[k] != (unsigned char)(k * 7 + seed))
			return false;
	return true;
}

/* A cross-process program's main: "PROGRAM --importer FD" runs the importer's side; otherwise
 * the owner's side runs with the importer started beside it, and the importer's exit status is
 * the last check. */
static inline int xproc_main(int argc, char **argv, int (*owner)(int sock),
			     int (*importer)(int sock))
{
	if (argc == 3 && strcmp(argv[1], "--importer") == 0)
		return importer(atoi(argv[2]));
	pid_t pid;
	int sock = xproc_spawn_importer(&pid);
	if (sock < 0)
		return tap_finish();
	owner(sock);
	xproc_wait_importer(pid);
	return tap_finish();
}

#endif
