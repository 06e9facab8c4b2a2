/* SPDX-License-Identifier: MIT */
/*
 * notify.c - see notify.h. The socket path may be a file system path or, with a leading '@',
 * an abstract socket name (as systemd documents for NOTIFY_SOCKET).
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "notify.h"
#include "proto.h"
#include "util.h"

#define NOTIFY_FDS_MAX 253 /* SCM_MAX_FD */

static int spare_fd = -1; /* notify_open's, for the process's life; sendmsg on it is thread-safe */
static bool held; /* notify_hold: read by whichever thread sends */

void notify_hold(bool hold)
{
	__atomic_store_n(&held, hold, __ATOMIC_RELEASE);
}

int notify_open(void)
{
	const char *path = getenv("NOTIFY_SOCKET");

	if (!path || !*path)
		return 0;
	if (spare_fd < 0)
		spare_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	return spare_fd < 0 ? -errno : 1;
}

int notify_send(const char *state)
{
	return notify_send_fds(state, NULL, 0, 0);
}

int notify_send_fds(const char *state, const int *fds, unsigned nfds, int flags)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct iovec iov = { (void *)(uintptr_t)state, strlen(state) };
	struct msghdr msg = { .msg_name = &sa, .msg_iov = &iov, .msg_iovlen = 1 };
	union {
		char buf[CMSG_SPACE(sizeof(int) * NOTIFY_FDS_MAX)];
		struct cmsghdr align;
	} cbuf;
	_cleanup_close_ int fd = -1;
	size_t plen;

	if (!path || !*path || __atomic_load_n(&held, __ATOMIC_ACQUIRE))
		return 0;
	plen = strlen(path);
	if ((path[0] != '/' && path[0] != '@') || plen >= sizeof(sa.sun_path) || nfds > NOTIFY_FDS_MAX)
		return -EINVAL;
	memcpy(sa.sun_path, path, plen);
	if (sa.sun_path[0] == '@')
		sa.sun_path[0] = '\0';
	msg.msg_namelen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + plen);
	if (nfds)
		proto_put_fds(&msg, cbuf.buf, fds, nfds);
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0 && (spare_fd < 0 || (errno != EMFILE && errno != ENFILE)))
		return -errno;
	if (sendmsg(fd >= 0 ? fd : spare_fd, &msg, MSG_NOSIGNAL | flags) < 0)
		return -errno;
	return 1;
}

int notify_sendf(const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return notify_send(buf);
}
