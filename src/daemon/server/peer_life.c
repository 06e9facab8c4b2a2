/* SPDX-License-Identifier: MIT */
/*
 * peer_life.c - a connection's life, from its making to its end (server_internal.h says how the
 * server's files divide the work): peer_new makes a peer of an admitted connection (counted,
 * polled, attached to the lease table), with the rights its credentials give (peer_set_creds), or
 * unverified when a previous life's record vouches for it until peer_verify reads the socket's
 * own; peer_keep puts its socket in the fd store with a record so that a restart goes on serving
 * it; peer_kill marks it dead (logged once, rate-limited) wherever a fault is found, and
 * peer_destroy, at the end of the loop turn that killed it, lets go of everything it held
 * (leases, journal writers, spill files, queued fds, its fd-store copy and record).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "closer.h"
#include "fdstore.h"
#include "log.h"
#include "server_internal.h"
#include "util.h"

/* Who the client on p's socket is (cred, and its groups from the socket): what it may do. */
static void peer_set_creds(struct server *s, struct peer *p, const struct ucred *cred)
{
	access_creds_free(&p->creds);
	access_creds_get(p->fd, cred, &p->creds);
	p->admin = access_is_daemon(&p->creds) || (s->have_admin_gid && access_in_group(&p->creds, s->admin_gid));
	p->sees_all = p->admin || (s->have_monitor_gid && access_in_group(&p->creds, s->monitor_gid));
	/* not admitted by the mode: only the ACL entry of monitor_group can have let it in */
	p->status_only = !p->admin && !access_mode_admits(&p->creds, s->cfg->socket_mode, s->socket_gid);
}

/*
 * A peer for connection fd of cred, admitted (server_admit): counted, polled, attached to the
 * lease table. NULL when it could not be set up (it is closed then).
 */
struct peer *peer_new(struct server *s, int fd, const struct ucred *cred, uint64_t connected_rt, bool verified)
{
	struct peer *p = calloc(1, sizeof(*p));
	char text[PROTO_TEXT_MAX];
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP };
	int r;

	if (!p) {
		log_error("Failed to set up a new connection: out of memory");
		server_unadmitted_close(s, fd, cred->uid);
		return NULL;
	}
	p->fd = fd;
	p->srv = s;
	p->id = ++s->next_id;
	p->warm_slot = -1;
	p->version = PROTO_VERSION; /* until its hello says which */
	p->connected_rt = connected_rt;
	p->owner.pid = cred->pid;
	p->owner.uid = cred->uid;
	p->owner.gid = cred->gid;
	p->unverified = !verified;
	if (verified)
		peer_set_creds(s, p, cred);
	else /* what the record says, and no more rights than any client until peer_verify */
		p->creds = (struct access_creds){ .uid = cred->uid, .gid = cred->gid };
	spill_owner_init(s->spill, &p->spill, cred->uid, cred->pid);
	TAILQ_INSERT_TAIL(&s->peers, p, link);
	s->npeers++;
	s->connections_total++;
	ev.data.ptr = p;
	if (epoll_ctl(s->epoll_fd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		peer_kill(p, "epoll_ctl failed: %m");
		return NULL;
	}
	r = lease_owner_attach(s->leases, &p->owner, cred->uid, cred->gid, cred->pid, text, sizeof(text));
	if (r < 0) {
		peer_kill(p, "%s", text);
		return NULL;
	}
	p->attached = true;
	return p;
}

int peer_verify(struct peer *p)
{
	struct ucred cred;
	socklen_t len = sizeof(cred), il = sizeof(int);
	int type = 0;

	if (!p->unverified)
		return 0;
	if (getsockopt(p->fd, SOL_SOCKET, SO_TYPE, &type, &il) < 0 || type != SOCK_STREAM ||
	    getsockopt(p->fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.uid != p->owner.uid ||
	    cred.gid != p->owner.gid || cred.pid != p->owner.pid) {
		peer_kill(p, "its socket is not the connection the previous life of the daemon recorded");
		return -EBADF;
	}
	p->unverified = false;
	peer_set_creds(p->srv, p, &cred);
	return 0;
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

void peer_kill(struct peer *p, const char *fmt, ...)
{
	static struct log_ratelimit rl = LOG_RATELIMIT(5, 20);
	char why[256];
	va_list ap;

	if (p->dead)
		return;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	log_msg_ratelimited(&rl, LOG_WARNING, "Closing connection %u (pid %d, uid %u, \"%s\"): %s", p->id,
			    (int)p->owner.pid, (unsigned)p->owner.uid, p->name, why);
	peer_mark_dead(p);
}

void peer_mark_dead(struct peer *p)
{
	if (!p->dead)
		p->srv->ndead++;
	p->dead = true;
}

void peer_destroy(struct server *s, struct peer *p)
{
	static struct log_ratelimit rl = LOG_RATELIMIT(10, 5);

	if (p->dead)
		s->ndead--;
	if (p->warm_slot >= 0 && !s->sealed) {
		char name[WARM_NAME_MAX];

		/* the service manager's copy would keep the connection open for the client */
		warm_name(WARM_NAME_CONN, p->conn_id, name);
		fdstore_remove(name);
		warm_conn_release(s->warm, p->warm_slot);
	}
	if (p->attached) {
		unsigned held = p->owner.nleases;

		lease_owner_detach(s->leases, &p->owner);
		/* a life handing over to the next one lets go of its view only: the client keeps
		 * its connection and its leases, so nothing was closed or released to log */
		if (held && !(s->sealed && (s->takeover || s->reexec)))
			log_msg_ratelimited(&rl, LOG_INFO, "Connection %u (pid %d, uid %u, \"%s\") closed; released its %u leases",
					    p->id, (int)p->owner.pid, (unsigned)p->owner.uid, p->name, held);
	}
	for (unsigned i = 0; i < p->nwriters; i++)
		journal_writer_close(p->writers[i].w);
	spill_owner_release(s->spill, &p->spill);
	peer_drop_queue(p);
	access_creds_free(&p->creds);
	TAILQ_REMOVE(&s->peers, p, link);
	s->npeers--;
	epoll_ctl(s->epoll_fd, EPOLL_CTL_DEL, p->fd, NULL);
	if (s->fds_refused)
		close(p->fd);
	else /* fds may be in flight in it: closing it would release them here (closer.h) */
		closer_add(&p->fd, 1, p->owner.uid);
	free(p->in_payload);
	free(p->out);
	free(p->ofds);
	free(p);
}
