/* SPDX-License-Identifier: MIT */
/*
 * client.c - libhugepool's connection: connect and hello, the blocking request/reply exchange,
 * disconnect, and the error texts. The socket is blocking and close-on-exec; every message
 * goes through proto_send/proto_recv (src/common/proto.c), which check sizes and fd counts.
 * Whatever answers on the socket may lie (a user's program on a path it was given): every fd it
 * sends is checked here (client_check_fd) before it is mapped, read or written, and every
 * count, size and error code before it is used, so a lie is -EPROTO and never a crash.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "client.h"
#include "util.h"

/* Why the last hp_connect of this thread failed: there is no connection to keep it in. */
static __thread char connect_error[PROTO_TEXT_MAX + 1];

void client_set_error(hp_conn *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->last_error, sizeof(c->last_error), fmt, ap);
	va_end(ap);
}

/* An eventfd, as /proc names it (without /proc: an anonymous inode, which has no file type). */
static bool is_eventfd(int fd, const struct stat *st)
{
	static const char want[] = "anon_inode:[eventfd]";
	char path[40], link[sizeof(want)];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, link, sizeof(link));
	if (n < 0)
		return errno == ENOENT && (st->st_mode & S_IFMT) == 0;
	return (size_t)n == sizeof(want) - 1 && memcmp(link, want, sizeof(want) - 1) == 0;
}

int client_check_fd(hp_conn *c, int fd, enum client_fd_kind kind, uint64_t min_size, const char *what)
{
	struct stat st;
	const char *why = NULL;
	int fl, seals;

	if (fstat(fd, &st) < 0 || (fl = fcntl(fd, F_GETFL)) < 0)
		why = "that is not an open file";
	else if (kind == CLIENT_FD_EVENTFD)
		why = !(fl & O_NONBLOCK) || !is_eventfd(fd, &st) ? "that is not a non-blocking eventfd" : NULL;
	else if (!S_ISREG(st.st_mode))
		why = "that is not a regular file";
	else if (kind == CLIENT_FD_MEMORY && ((seals = fcntl(fd, F_GET_SEALS)) < 0 || !(seals & F_SEAL_SHRINK)))
		why = "that is not a memfd sealed against shrinking";
	else if (kind == CLIENT_FD_RW_FILE && ((fl & O_ACCMODE) != O_RDWR || (fl & O_APPEND)))
		why = "that is not open read-write";
	else if ((uint64_t)st.st_size < min_size) {
		/* a mapping past the end of a file faults (SIGBUS) where it is touched */
		client_set_error(c, "the daemon sent %s of %" PRIu64 " bytes where it announced %" PRIu64, what,
				 (uint64_t)st.st_size, min_size);
		return -EPROTO;
	}
	if (why) {
		client_set_error(c, "the daemon sent %s %s", what, why);
		return -EPROTO;
	}
	return 0;
}

int client_send(hp_conn *c, enum proto_type type, const void *payload, uint32_t len)
{
	int r;

	c->last_error[0] = '\0';
	r = proto_send(c->fd, type, payload, len, NULL, 0);
	if (r == -EPIPE)
		client_set_error(c, "the daemon closed the connection");
	/* one error for "the daemon went away", whether it shows on sending or on receiving */
	return r == -EPIPE ? -ECONNRESET : r;
}

int client_recv(hp_conn *c, struct proto_hdr *ret_hdr, void **ret_payload, int *fds, unsigned maxfds)
{
	int dummy[PROTO_MAX_FDS];
	void *payload = NULL;
	int r;

	r = proto_recv(c->fd, ret_hdr, &payload, fds ? fds : dummy, fds ? maxfds : 0);
	if (r < 0) {
		client_set_error(c, "%s", r == -ECONNRESET ? "the daemon closed the connection"
							   : "malformed message from the daemon");
		return r;
	}
	if (ret_hdr->type == PROTO_RESULT) {
		const struct proto_result *res = payload;

		if (res->text_len > ret_hdr->len - sizeof(*res) || !ERRNO_VALID(res->err)) {
			client_set_error(c, "malformed result from the daemon (error %" PRId32 ")", res->err);
			free(payload);
			return -EPROTO;
		}
		snprintf(c->last_error, sizeof(c->last_error), "%.*s", (int)res->text_len, (const char *)(res + 1));
		r = res->err;
		free(payload);
		*ret_payload = NULL;
		return r;
	}
	*ret_payload = payload;
	return 1;
}

int client_simple_request(hp_conn *c, enum proto_type type, const void *payload, uint32_t len)
{
	struct proto_hdr h;
	void *reply = NULL;
	int r = client_send(c, type, payload, len);

	if (r < 0)
		return r;
	r = client_recv(c, &h, &reply, NULL, 0);
	if (r == 1) {
		free(reply);
		return -EPROTO;
	}
	return r;
}

int client_call_fds(hp_conn *c, enum proto_type type, const void *req, uint32_t len, enum proto_type reply,
		    void **ret_payload, int *fds, unsigned nfds)
{
	struct proto_hdr h;
	void *payload = NULL;
	int r;

	for (unsigned i = 0; i < nfds; i++)
		fds[i] = -1;
	r = client_send(c, type, req, len);
	if (r < 0)
		return r;
	r = client_recv(c, &h, &payload, fds, nfds);
	if (r < 0)
		return r;
	if (r == 0 || h.type != reply || h.nfds != nfds) {
		for (unsigned i = 0; i < nfds; i++)
			if (fds[i] >= 0) {
				close(fds[i]);
				fds[i] = -1;
			}
		free(payload);
		return -EPROTO;
	}
	*ret_payload = payload;
	return 0;
}

int hp_connect(const char *path, hp_conn **ret)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct proto_hello hello = { 0 };
	struct proto_hdr h;
	_cleanup_free_ void *payload = NULL;
	hp_conn *c;
	int r, send_err;

	if (!ret)
		return -EINVAL;
	if (!path)
		path = getenv("HUGEPOOL_SOCKET");
	if (!path || !*path)
		path = HP_DEFAULT_SOCKET;
	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, strlen(path));
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0) {
		r = -errno;
		snprintf(connect_error, sizeof(connect_error), "cannot create a socket: %s", strerror(-r));
		goto fail_quiet;
	}
	if (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		r = -errno;
		snprintf(connect_error, sizeof(connect_error), "cannot connect to '%s': %s%s", path, strerror(-r),
			 r == -ENOENT || r == -ECONNREFUSED ? " (is hugepoold running?)" : "");
		goto fail_quiet;
	}
	proto_set_name(hello.name, sizeof(hello.name), program_invocation_short_name);
	/* a refusing daemon may have answered and closed already: read its reason even so */
	send_err = client_send(c, PROTO_HELLO, &hello, sizeof(hello));
	r = client_recv(c, &h, &payload, NULL, 0);
	if (r == 0 || (r == 1 && h.type != PROTO_WELCOME))
		r = -EPROTO;
	if (r < 0) {
		if (send_err < 0 && r == -ECONNRESET)
			r = send_err;
		goto fail;
	}
	c->page_size = ((const struct proto_welcome *)payload)->page_size;
	connect_error[0] = '\0';
	*ret = c;
	return 0;
fail:
	/* keep the daemon's reason (a limit, a version) beyond c's life */
	snprintf(connect_error, sizeof(connect_error), "%s", c->last_error[0] ? c->last_error : strerror(-r));
fail_quiet:
	if (c->fd >= 0)
		close(c->fd);
	free(c);
	return r;
}

void hp_disconnect(hp_conn *c)
{
	if (!c)
		return;
	/* closing the socket ends the leases in the daemon; the mappings are ours to undo */
	for (size_t i = 0; i < c->nmaps; i++)
		munmap(c->maps[i].addr, c->maps[i].size);
	/* a stream still open would write its counters here: leave the page to it (misuse) */
	if (c->counters && !c->spill_streams)
		munmap(c->counters, sizeof(*c->counters));
	close(c->fd);
	free(c->maps);
	free(c);
}

const char *hp_last_error(const hp_conn *c)
{
	return c ? c->last_error : connect_error;
}

const char *hp_strerror(int err)
{
	static const struct {
		int err;
		const char *text;
	} texts[] = {
		{ -ENOENT, "no such buffer class or journal, or (from hp_connect) no socket at that path" },
		{ -ECONNREFUSED, "hugepoold is not running (connection refused)" },
		{ -EACCES, "not allowed to connect to hugepoold (socket permissions)" },
		{ -EUSERS, "hugepoold refuses more connections (per-uid or global connection limit)" },
		{ -EPROTONOSUPPORT, "hugepoold speaks another protocol version" },
		{ -EPROTO, "protocol error between libhugepool and hugepoold" },
		{ -ECONNRESET, "hugepoold closed the connection" },
		{ -E2BIG, "more buffers asked than the class has" },
		{ -EAGAIN, "the buffers are not free now" },
		{ -ETIMEDOUT, "timed out (buffers not free in time, or journal records not durable in time)" },
		{ -EDQUOT, "a limit of hugepoold would be exceeded (leased bytes per uid, or spill bytes or files)" },
		{ -EINVAL, "invalid argument" },
		{ -ENOMEM, "out of memory" },
		{ -EBUSY, "another request is in progress on this connection" },
		{ -ENAMETOOLONG, "socket path too long" },
		{ -ESTALE, "the journal records were recycled while being read" },
		{ -EUCLEAN, "a journal segment is damaged before the durable end" },
		{ -EMSGSIZE, "record or group too large for the journal" },
	};

	if (err == 0)
		return "success";
	for (size_t i = 0; i < ARRAY_SIZE(texts); i++)
		if (texts[i].err == err)
			return texts[i].text;
	/* strerror's buffer is static but its texts for errno values are constant in glibc */
	return err < 0 && ERRNO_VALID(err) ? strerror(-err) : "unknown error";
}
