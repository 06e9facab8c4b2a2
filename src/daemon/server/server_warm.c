/* SPDX-License-Identifier: MIT */
/*
 * server_warm.c - the server's side of a warm restart (hugepoold(8), WARM RESTART; the design is
 * in docs/ARCHITECTURE.md): keeping each connection in the fd store with its record, stopping
 * for a next life (quiesce), taking over the listening socket and the connections a previous
 * life left, and the restart request that re-executes the daemon.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "fdstore.h"
#include "log.h"
#include "reexec.h"
#include "server_internal.h"
#include "util.h"

/*
 * Restart: start checking that it can happen (reexec.h) while the daemon goes on serving; the
 * answer comes when the check ends (server_restart_checked). Admins only: it pauses every client.
 */
int handle_restart(struct server *s, struct peer *p, const union proto_request *req)
{
	char text[PROTO_TEXT_MAX];
	int r;

	(void)req;
	if (p->version < 4)
		return -EPROTO; /* not a request of its protocol version */
	if (!p->admin) {
		send_result(p, -EPERM, "restarting the daemon is for root, the daemon's user and admin_group");
		return 0;
	}
	r = server_restart_check(s, p->id, text, sizeof(text));
	if (r < 0) {
		log_error("Refusing the restart asked by pid %d (uid %u): %s", (int)p->owner.pid,
			  (unsigned)p->owner.uid, text);
		send_result(p, r, text);
		return 0;
	}
	log_info("Restart asked by pid %d (uid %u): checking '%s'", (int)p->owner.pid, (unsigned)p->owner.uid,
		 reexec_path());
	p->busy = true; /* answered once the check ends */
	return 0;
}

int server_restart_check(struct server *s, unsigned peer_id, char *text, size_t len)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &s->restart_fd };
	int fd = reexec_check_start(text, len);

	if (fd < 0)
		return fd;
	if (epoll_ctl(s->epoll_fd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		reexec_check_cancel();
		snprintf(text, len, "cannot wait for the check: %s", strerror(errno));
		return -EIO;
	}
	s->restart_fd = fd;
	s->restart_peer = peer_id;
	return 0;
}

void server_restart_checked(struct server *s, uint64_t now)
{
	char text[PROTO_TEXT_MAX];
	int r = reexec_check_poll(now, text, sizeof(text));
	struct peer *p;

	if (r == -EINPROGRESS)
		return;
	s->restart_fd = -1; /* closed, and so out of the epoll set */
	TAILQ_FOREACH(p, &s->peers, link)
		if (s->restart_peer && p->id == s->restart_peer && !p->dead)
			break;
	if (r < 0) {
		log_error("Refusing the restart: %s", text);
		if (p)
			send_result(p, r, text);
		return;
	}
	log_info("Restart checked: re-executing '%s'", reexec_path());
	if (p)
		send_result(p, 0, NULL);
	s->stop = true;
	s->reexec = true;
}

/* Keep p's socket in the fd store and give it a record: a restart goes on serving it. */
void peer_keep(struct server *s, struct peer *p)
{
	char name[WARM_NAME_MAX];

	p->warm_slot = s->warm ? warm_conn_take(s->warm) : -1;
	if (p->warm_slot < 0)
		return;
	p->spill.conn_id = p->conn_id;
	warm_name(WARM_NAME_CONN, p->conn_id, name);
	if (fdstore_add(name, p->fd, FDSTORE_POLL | FDSTORE_CLIENT) < 0) {
		warm_conn_release(s->warm, p->warm_slot);
		p->warm_slot = -1;
		return;
	}
	peer_note(p, true);
}

/*
 * Does a socket's st_mode say socket_mode? Its group bits may show the mask of the ACL that lets
 * monitor_group in (access_socket_grant), which adds read-write; the ACL is set again after.
 */
static bool socket_mode_is(mode_t st_mode, mode_t socket_mode)
{
	mode_t m = st_mode & 07777;

	return (m & 07707) == (socket_mode & 07707) &&
	       ((m & 0070) == (socket_mode & 0070) || (m & 0070) == ((socket_mode | 0060) & 0070));
}

/*
 * Take over the listening socket fd the previous life left if it is a listening Unix stream
 * socket bound to the configured path, and that path is still a socket; else close it.
 * Returns fd or -1. The path must still have the configured mode and group.
 */
int warm_socket_adopt(const struct config *cfg, gid_t gid, int fd)
{
	struct sockaddr_un sa;
	socklen_t len = sizeof(sa);
	int type = 0, listening = 0, domain = 0;
	socklen_t il = sizeof(int);
	struct stat st;

	if (fd < 0)
		return -1;
	memset(&sa, 0, sizeof(sa));
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &il) == 0 && type == SOCK_STREAM &&
	    getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &il) == 0 && domain == AF_UNIX &&
	    getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &il) == 0 && listening &&
	    getsockname(fd, (struct sockaddr *)&sa, &len) == 0 && len > offsetof(struct sockaddr_un, sun_path) &&
	    strncmp(sa.sun_path, cfg->socket_path, sizeof(sa.sun_path)) == 0 &&
	    lstat(cfg->socket_path, &st) == 0 && S_ISSOCK(st.st_mode) &&
	    socket_mode_is(st.st_mode, cfg->socket_mode) && (gid == (gid_t)-1 || st.st_gid == gid)) {
		if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) == 0)
			return fd;
	}
	log_notice("The listening socket the previous life left is not '%s' (mode %04o%s%s) any more: binding anew",
		   cfg->socket_path, (unsigned)cfg->socket_mode, cfg->socket_group[0] ? ", group " : "",
		   cfg->socket_group);
	/* gone from the manager too before binding: else it would still answer at the path */
	fdstore_remove("listen");
	close(fd);
	(void)fdstore_barrier(5000);
	return -1;
}

/*
 * Serve the connection the previous life recorded in c again, if its socket came back, is the
 * same client (credentials) and its leases can all be given back; else close it.
 */
static bool adopt_conn(struct server *s, struct server_handover *h, const struct warm_conn *c)
{
	char name[WARM_NAME_MAX], text[PROTO_TEXT_MAX];
	struct ucred cred;
	socklen_t len = sizeof(cred);
	int type = 0, fd;
	socklen_t il = sizeof(type);
	struct peer *p;
	bool ok = true;
	int64_t held = 0; /* the previous life's leases of this connection, less those given back */

	warm_name(WARM_NAME_CONN, c->conn_id, name);
	fd = fdstore_take(h->fds, h->nfds, name);
	if (fd < 0)
		return false; /* the client left while the daemon was down */
	if (c->state != WARM_CONN_IDLE && c->state != WARM_CONN_WAITING) {
		fdstore_remove(name);
		close(fd);
		h->closed++;
		log_info("Closing connection of pid %d (uid %u, \"%s\"): the previous life of the daemon %s",
			 (int)c->pid, (unsigned)c->uid, c->name,
			 c->state == WARM_CONN_OTHER ? "held journal writers, or spill files it could not keep"
						     : "ended in the middle of one of its requests");
		return false;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &il) < 0 || type != SOCK_STREAM ||
	    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.uid != c->uid || cred.gid != c->gid ||
	    cred.pid != c->pid || fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0) {
		fdstore_remove(name);
		close(fd);
		h->closed++;
		return false;
	}
	if (server_admit(s, &cred, text, sizeof(text)) < 0) { /* the limits were lowered meanwhile */
		log_info("Closing connection of pid %d (uid %u, \"%s\"): %s", (int)c->pid, (unsigned)c->uid, c->name,
			 text);
		fdstore_remove(name);
		close(fd);
		h->closed++;
		return false;
	}
	p = peer_new(s, fd, &cred, c->connected_rt);
	if (!p) {
		fdstore_remove(name);
		h->closed++;
		return false;
	}
	p->conn_id = c->conn_id;
	p->welcomed = c->version != 0;
	p->version = c->version ? c->version : PROTO_VERSION;
	snprintf(p->name, sizeof(p->name), "%s", c->name);
	/* its leases: every buffer the previous life had leased to it, adopted by the pool; all of
	 * them, or the connection is closed (the pool could not take one: more retired classes than
	 * there is room for) */
	for (uint32_t i = 0; i < s->pool->nbuffers && ok; i++) {
		struct pool_buffer *b = &s->pool->buffers[i];
		const struct warm_buf *wb = b->adopted ? &h->prev->bufs[b->prev_record] : NULL;

		if (wb && wb->state == WARM_BUF_LEASED && wb->conn_id == c->conn_id) {
			ok = lease_adopt(s->leases, &p->owner, b, wb->lease_id, wb->since_rt) == 0;
			held--;
		}
	}
	for (uint32_t r = 0; r < h->prev->nbuffers; r++)
		held += h->prev->bufs[r].state == WARM_BUF_LEASED && h->prev->bufs[r].conn_id == c->conn_id;
	ok = ok && held == 0;
	/* and its spill files (with their charges) and page */
	if (ok && spill_adopt_owner(s->spill, &p->spill, c->conn_id, h->prev, h->fds, h->nfds) < 0) {
		peer_kill(p, "its spill files could not all be given back after the restart");
		fdstore_remove(name);
		h->closed++;
		return false;
	}
	if (!ok) {
		peer_kill(p, "its leases could not all be given back after the restart");
		fdstore_remove(name);
		h->closed++;
		return false;
	}
	peer_keep(s, p);
	if (c->state == WARM_CONN_WAITING) {
		/* queued again once every connection has its leases back (resume_wait) */
		snprintf(p->wait.class_name, sizeof(p->wait.class_name), "%s", c->wait_class);
		p->wait.count = c->wait_count;
		p->wait.deadline = c->wait_deadline;
		p->busy = true;
	}
	h->adopted++;
	return true;
}

/* The acquire an adopted connection waited in, queued again as it was (what is left of its time). */
static void resume_wait(struct server *s, struct peer *p)
{
	char text[PROTO_TEXT_MAX];
	uint64_t now = now_ns();
	int64_t ms = p->wait.deadline == UINT64_MAX ? -1
		     : p->wait.deadline > now	   ? (int64_t)((p->wait.deadline - now + 999999) / 1000000)
						   : 1; /* its time is up: it expires the usual way */
	int r = lease_acquire(s->leases, &p->owner, p->wait.class_name, p->wait.count, ms, now, text, sizeof(text));

	if (r < 0)
		send_result(p, r, text);
	peer_note(p, true);
}

void warm_adopt_conns(struct server *s, struct server_handover *h)
{
	struct peer *p;

	for (uint32_t i = 0; h->prev && i < h->prev->nconns; i++)
		if (h->prev->conns[i].state != WARM_CONN_FREE)
			adopt_conn(s, h, &h->prev->conns[i]);
	/* retired buffers whose holders did not come back go now, and so do their spill files */
	lease_retire_unheld(s->leases);
	spill_adopt_rest(s->spill, h->prev, h->fds, h->nfds);
	/* only now: a waiter must not be given what an adopted connection still holds */
	TAILQ_FOREACH(p, &s->peers, link)
		if (p->busy && !p->dead)
			resume_wait(s, p);
}

#define QUIESCE_NS (1000 * 1000000ull) /* what a stop waits at most for clients to read their replies */

/*
 * Stopping: send every reply still queued (a client that does not read for QUIESCE_NS has its
 * connection left BUSY: the next life closes it), write every connection's record as it is now,
 * and from here on change neither the warm state nor the fd store, so that tearing down leaves
 * both to the next life as they are.
 */
void warm_quiesce(struct server *s)
{
	uint64_t deadline = now_ns() + QUIESCE_NS;
	struct peer *p;

	/* a renewal in flight would keep its new memfd after the records are final: let it end and
	 * record what it did, before the replies go (it may grant the buffer to a waiter); a buffer
	 * still queued stays BROKEN: the next life renews it */
	recycler_halt(s->recycler);
	recycler_collect(s->recycler, svc_lease_renewed, s);
	for (;;) {
		bool pending = false;

		TAILQ_FOREACH(p, &s->peers, link) {
			if (!p->dead && p->out_len > p->out_off)
				peer_flush(p);
			pending |= !p->dead && p->out_len > p->out_off;
		}
		if (!pending || now_ns() >= deadline)
			break;
		(void)poll(NULL, 0, 5);
	}
	TAILQ_FOREACH(p, &s->peers, link)
		peer_note(p, true);
	/* a stop leaves the next life what the service manager holds: all of it (a re-execution
	 * hands the whole table over itself) */
	if (!s->reexec)
		fdstore_flush(now_ns(), true);
	s->sealed = true;
	spill_seal(s->spill);
}

void server_set_start(struct server *s, const struct proto_status_start *start)
{
	s->start = *start;
}
