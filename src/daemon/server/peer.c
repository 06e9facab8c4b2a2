/* SPDX-License-Identifier: MIT */
/*
 * peer.c - a connection's transport (see server_internal.h for the layout of the server).
 *
 * Input is read non-blocking into the peer until one whole message is there (header checked
 * by proto_check_header before any payload byte is read), then parsed (proto_parse_request)
 * and dispatched to its handler through a table made from proto.h's PROTO_REQUESTS. The
 * protocol is request/reply: a second request while one is outstanding, any fd sent by a
 * client, or a malformed message closes that one connection with a logged reason. Output goes
 * through a per-peer queue whose fd records make sure every message carrying fds starts its
 * own sendmsg, so the fds arrive with its header; the queue owns those fds. A peer found
 * broken while sending (possibly inside a lease callback) is only marked dead; dead peers are
 * destroyed at the end of each loop iteration (server.c), never in the middle of one.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "closer.h"
#include "log.h"
#include "server_internal.h"
#include "util.h"

/* Replies wait to be sent beyond what a peer may have queued before its input is paused. */
static bool peer_paused(const struct peer *p)
{
	return p->out_len - p->out_off > OUT_PAUSE || p->queued_fds > 0;
}

/* Poll for output while replies wait, and for input unless the peer is paused. */
static int epoll_set(struct server *s, struct peer *p)
{
	bool want_out = p->out_len > p->out_off, want_in = !peer_paused(p);
	/* paused: not even EPOLLRDHUP, which would fire without end for a peer that shut down its
	 * writing side but not its reading; a peer that is gone shows as EPOLLHUP */
	struct epoll_event ev = { .events = (want_in ? EPOLLIN | EPOLLRDHUP : 0) | (want_out ? EPOLLOUT : 0),
				  .data.ptr = p };

	if (want_out == p->want_out && want_in == !p->paused)
		return 0;
	p->want_out = want_out;
	p->paused = !want_in;
	return epoll_ctl(s->epoll_fd, EPOLL_CTL_MOD, p->fd, &ev) < 0 ? -errno : 0;
}

static void out_fds_release(struct peer *p, struct out_fds *f)
{
	for (unsigned i = 0; i < f->n; i++)
		close(f->fds[i]);
	p->queued_fds -= f->n;
	f->n = 0;
}

/* Close the fds still queued for the peer (it is going away). */
void peer_drop_queue(struct peer *p)
{
	for (size_t i = 0; i < p->nofds; i++)
		out_fds_release(p, &p->ofds[(p->ofds_head + i) % p->ofds_cap]);
}

/* Send what the queue holds until the socket is full. */
void peer_flush(struct peer *p)
{
	if (peer_verify(p) < 0)
		return;
	while (!p->dead && p->out_off < p->out_len) {
		struct out_fds *f = p->nofds ? &p->ofds[p->ofds_head] : NULL;
		size_t end = p->out_len;
		union {
			char buf[CMSG_SPACE(sizeof(int) * PROTO_MAX_FDS)];
			struct cmsghdr align;
		} cbuf;
		struct iovec iov;
		struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
		bool with_fds = f && f->at == p->out_off;
		ssize_t n;

		if (f && !with_fds)
			end = f->at; /* stop right before the message that carries fds */
		else if (with_fds && p->nofds > 1)
			end = p->ofds[(p->ofds_head + 1) % p->ofds_cap].at;
		iov = (struct iovec){ p->out + p->out_off, end - p->out_off };
		if (with_fds)
			proto_put_fds(&msg, cbuf.buf, f->fds, f->n);
		n = sendmsg(p->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			if (errno == EINTR)
				continue;
			if (errno == EPIPE || errno == ECONNRESET)
				peer_mark_dead(p); /* it left; the read side reports that */
			else
				peer_kill(p, "send failed: %m");
			return;
		}
		if (with_fds) {
			/* the fds went with the first byte: the peer has its own copies now */
			for (unsigned i = 0; i < f->n; i++)
				if (f->grants[i])
					lease_slot_delivered(f->grants[i]);
			out_fds_release(p, f);
			p->ofds_head = (p->ofds_head + 1) % p->ofds_cap;
			p->nofds--;
		}
		p->out_off += (size_t)n;
	}
	if (p->out_off == p->out_len) {
		p->out_off = p->out_len = 0;
		if (p->closing)
			peer_mark_dead(p);
	}
	if (!p->dead && epoll_set(p->srv, p) < 0)
		peer_kill(p, "epoll_ctl failed: %m");
	peer_note(p, false);
}

static int out_reserve(struct peer *p, size_t more)
{
	size_t need = p->out_len + more;

	if (need > OUT_MAX)
		return -ENOBUFS;
	if (need > p->out_cap) {
		size_t cap = MAX(need, p->out_cap ? p->out_cap * 2 : 4096);
		uint8_t *n;

		/* reclaim what was already sent before growing */
		if (p->out_off) {
			memmove(p->out, p->out + p->out_off, p->out_len - p->out_off);
			for (size_t i = 0; i < p->nofds; i++)
				p->ofds[(p->ofds_head + i) % p->ofds_cap].at -= p->out_off;
			p->out_len -= p->out_off;
			p->out_off = 0;
			if (p->out_len + more <= p->out_cap)
				return 0;
		}
		n = realloc(p->out, cap);
		if (!n)
			return -ENOMEM;
		p->out = n;
		p->out_cap = cap;
	}
	return 0;
}

/* See server_internal.h: the queue owns what it sends. */
void peer_send_fds(struct peer *p, enum proto_type type, const void *a, size_t alen, const void *b, size_t blen,
		   const int *fds, unsigned nfds, uint32_t take, struct lease_slot *const *grants)
{
	static struct log_ratelimit rl = LOG_RATELIMIT(5, 5);
	struct out_fds *f = NULL;
	struct proto_hdr h;
	unsigned own = 0;
	int mine[PROTO_MAX_FDS];

	if (p->srv->sealed) {
		/* stopping for a next life that goes on with this connection: not a word more
		 * (an acquire cancelled by the teardown is one the next life still serves) */
		for (unsigned i = 0; i < nfds; i++)
			if (take & (1u << i))
				close(fds[i]);
		return;
	}
	for (; own < nfds; own++) {
		mine[own] = take & (1u << own) ? fds[own] : fcntl(fds[own], F_DUPFD_CLOEXEC, 3);
		if (mine[own] < 0)
			break;
	}
	if (own < nfds) {
		log_msg_ratelimited(&rl, LOG_ERR, "Cannot queue a file descriptor for connection %u: %m", p->id);
		peer_kill(p, "cannot queue its reply's file descriptors");
	} else if (!p->dead && out_reserve(p, sizeof(h) + alen + blen) < 0) {
		peer_kill(p, "reply queue overflow (the client does not read its replies)");
	} else if (!p->dead && nfds && p->nofds == p->ofds_cap) {
		size_t cap = p->ofds_cap ? p->ofds_cap * 2 : 4;
		struct out_fds *n = calloc(cap, sizeof(*n));

		if (!n) {
			peer_kill(p, "out of memory");
		} else {
			for (size_t i = 0; i < p->nofds; i++)
				n[i] = p->ofds[(p->ofds_head + i) % p->ofds_cap];
			free(p->ofds);
			p->ofds = n;
			p->ofds_cap = cap;
			p->ofds_head = 0;
		}
	}
	if (p->dead) {
		for (unsigned i = 0; i < own; i++)
			close(mine[i]);
		for (unsigned i = own; i < nfds; i++)
			if (take & (1u << i))
				close(fds[i]);
		return;
	}
	if (nfds) {
		f = &p->ofds[(p->ofds_head + p->nofds) % p->ofds_cap];
		f->at = p->out_len;
		f->n = nfds;
		memcpy(f->fds, mine, sizeof(int) * nfds);
		for (unsigned i = 0; i < nfds; i++)
			f->grants[i] = grants ? grants[i] : NULL;
		p->nofds++;
		p->queued_fds += nfds;
	}
	proto_hdr_init_version(&h, p->version, type, (uint32_t)(alen + blen), nfds);
	memcpy(p->out + p->out_len, &h, sizeof(h));
	p->out_len += sizeof(h);
	if (alen)
		memcpy(p->out + p->out_len, a, alen);
	p->out_len += alen;
	if (blen)
		memcpy(p->out + p->out_len, b, blen);
	p->out_len += blen;
	peer_flush(p);
}

void peer_send(struct peer *p, enum proto_type type, const void *a, size_t alen, const void *b, size_t blen)
{
	peer_send_fds(p, type, a, alen, b, blen, NULL, 0, 0, NULL);
}

void send_result(struct peer *p, int err, const char *text)
{
	struct proto_result r = { .err = err, .text_len = text ? (uint32_t)strnlen(text, PROTO_TEXT_MAX) : 0 };

	/* answered before it is sent: once sent, the warm state may say the connection is idle */
	p->busy = false;
	peer_send(p, PROTO_RESULT, &r, sizeof(r), text, r.text_len);
}

/* --- the warm state's record -------------------------------------------------------------- */

static enum warm_conn_state peer_warm_state(const struct peer *p)
{
	if (p->nwriters || !spill_owner_kept(&p->spill))
		return WARM_CONN_OTHER; /* state the records do not hold */
	if (p->in_got || p->out_len > p->out_off || p->nofds || p->closing || p->dead)
		return WARM_CONN_BUSY;
	if (p->busy)
		return p->owner.req ? WARM_CONN_WAITING : WARM_CONN_BUSY;
	return WARM_CONN_IDLE;
}

static void note(struct peer *p, enum warm_conn_state state)
{
	struct warm_conn c = { .state = state, .conn_id = p->conn_id, .uid = p->owner.uid,
			       .gid = p->creds.gid, .pid = p->owner.pid, .version = p->welcomed ? p->version : 0,
			       .connected_rt = p->connected_rt };

	snprintf(c.name, sizeof(c.name), "%s", p->name);
	if (state == WARM_CONN_WAITING) {
		snprintf(c.wait_class, sizeof(c.wait_class), "%s", p->wait.class_name);
		c.wait_count = p->wait.count;
		c.wait_deadline = p->wait.deadline;
	}
	warm_conn_set(p->srv->warm, p->warm_slot, &c);
	p->noted = state;
}

void peer_note(struct peer *p, bool force)
{
	enum warm_conn_state state;

	if (p->warm_slot < 0 || p->srv->sealed)
		return;
	state = peer_warm_state(p);
	if (force || state != p->noted)
		note(p, state);
}

void peer_note_busy(struct peer *p)
{
	if (p->warm_slot >= 0 && !p->srv->sealed && p->noted != WARM_CONN_BUSY && p->noted != WARM_CONN_OTHER)
		note(p, WARM_CONN_BUSY);
}

/* --- dispatch ---------------------------------------------------------------------------- */

#define ANSWERS_LATER_NOW false
#define ANSWERS_LATER_LATER true
#define HANDLER_ROW(name, value, member, wire, answer, ...) \
	[PROTO_##name] = { handle_##member, ANSWERS_LATER_##answer },
/* indexed by request type; proto_check_header let only requests through */
static const struct {
	int (*fn)(struct server *s, struct peer *p, const union proto_request *req);
	bool later; /* the reply comes from a callback, after the handler returned */
} handlers[] = { PROTO_REQUESTS(HANDLER_ROW) };

static void dispatch(struct server *s, struct peer *p)
{
	static union proto_request req; /* event loop only; large (a release's 1024 ids) */
	const char *why = "not a request";
	int r;

	if (!p->welcomed && p->hdr.type != PROTO_HELLO) {
		s->protocol_errors++;
		peer_kill(p, "first message is %s, not hello", proto_type_name(p->hdr.type));
		return;
	}
	if (proto_parse_request(&p->hdr, p->in_payload, &req, &why) < 0 || p->hdr.type >= ARRAY_SIZE(handlers) ||
	    !handlers[p->hdr.type].fn) {
		s->protocol_errors++;
		peer_kill(p, "%s", why);
		return;
	}
	if (p->status_only && p->hdr.type != PROTO_HELLO && p->hdr.type != PROTO_STATUS) {
		send_result(p, -EACCES,
			    "a member of monitor_group outside the socket's group may ask for the status and nothing else");
		return;
	}
	p->busy = true;
	r = handlers[p->hdr.type].fn(s, p, &req);
	if (r < 0) {
		s->protocol_errors++;
		peer_kill(p, "unexpected %s request", proto_type_name(p->hdr.type));
	} else if (!handlers[p->hdr.type].later) {
		p->busy = false;
	}
}

/* --- input ------------------------------------------------------------------------------- */

/* Hand every fd a message brought to the closer (closer.h says why not close here), as p's uid's. */
static void close_fds_in(const struct peer *p, struct msghdr *msg)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(msg, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || c->cmsg_len < CMSG_LEN(0))
			continue;
		size_t k = MIN((c->cmsg_len - CMSG_LEN(0)) / sizeof(int), (size_t)IN_FDS_MAX);
		int fds[IN_FDS_MAX];

		memcpy(fds, CMSG_DATA(c), sizeof(int) * k);
		closer_add(fds, (unsigned)k, p->owner.uid);
	}
}

/* Read whatever is there; dispatch each complete message. */
/* reads of one connection's socket per turn of the event loop (a read may hold many requests) */
#define READS_PER_TURN 16

void peer_read(struct server *s, struct peer *p)
{
	static struct log_ratelimit ended_rl = LOG_RATELIMIT(10, 5);
	unsigned reads = 0;

	if (peer_verify(p) < 0)
		return;
	/* a paused peer's next request waits until its replies have gone (OUT_PAUSE) */
	/* once stopping, not another request: what is still unread is the next life's */
	/* and at most READS_PER_TURN reads a turn: the listener polls it again (level-triggered),
	 * and the other connections' requests are served in between */
	while (!p->dead && !s->stop && !(p->in_got == 0 && peer_paused(p)) && reads++ < READS_PER_TURN) {
		union {
			/* room for as many fds as one message can carry, so none is cut off (and
			 * closed by the kernel on this thread) */
			char buf[CMSG_SPACE(sizeof(int) * IN_FDS_MAX)];
			struct cmsghdr align;
		} cbuf;
		bool in_hdr = p->in_got < sizeof(p->hdr);
		uint8_t *dst = in_hdr ? (uint8_t *)&p->hdr + p->in_got : p->in_payload + (p->in_got - sizeof(p->hdr));
		size_t want = in_hdr ? sizeof(p->hdr) - p->in_got : sizeof(p->hdr) + p->hdr.len - p->in_got;
		struct iovec iov = { dst, want };
		struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf.buf,
				      .msg_controllen = sizeof(cbuf.buf) };
		const char *why;
		ssize_t n;

		peer_note_busy(p);
		n = recvmsg(p->fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				peer_kill(p, "receive failed: %m");
			peer_note(p, false);
			return;
		}
		if (msg.msg_controllen || (msg.msg_flags & MSG_CTRUNC)) {
			close_fds_in(p, &msg);
			s->protocol_errors++;
			peer_kill(p, "client sent file descriptors%s",
				  msg.msg_flags & MSG_CTRUNC ? " (truncated)" : "");
			return;
		}
		if (n == 0) {
			if (p->in_got)
				log_msg_ratelimited(&ended_rl, LOG_INFO,
						    "Connection %u (pid %d) ended in the middle of a message", p->id,
						    (int)p->owner.pid);
			peer_mark_dead(p);
			return;
		}
		if (p->closing)
			continue; /* drain and ignore: it is being told why it is refused */
		p->in_got += (size_t)n;
		if (in_hdr && p->in_got == sizeof(p->hdr)) {
			int r = proto_check_header(&p->hdr, true, &why);

			if (r < 0) {
				s->protocol_errors++;
				if (r == -EPROTONOSUPPORT) {
					char text[96];

					snprintf(text, sizeof(text),
						 "protocol version %u is not supported (daemon speaks %u to %u)",
						 p->hdr.version, PROTO_VERSION_MIN, PROTO_VERSION);
					send_result(p, r, text);
					p->closing = true;
				}
				peer_kill(p, "%s (type %u, %u bytes, %u fds)", why, p->hdr.type, p->hdr.len, p->hdr.nfds);
				return;
			}
			if (p->welcomed && p->hdr.version != p->version) {
				s->protocol_errors++;
				peer_kill(p, "%s request in protocol version %u after a hello in %u",
					  proto_type_name(p->hdr.type), p->hdr.version, p->version);
				return;
			}
			if (p->busy) {
				s->protocol_errors++;
				peer_kill(p, "%s request sent while another is outstanding",
					  proto_type_name(p->hdr.type));
				return;
			}
			p->in_payload = malloc(p->hdr.len ? p->hdr.len : 1);
			if (!p->in_payload) {
				peer_kill(p, "out of memory");
				return;
			}
		}
		if (p->in_got == sizeof(p->hdr) + p->hdr.len && p->in_payload) {
			dispatch(s, p);
			free(p->in_payload);
			p->in_payload = NULL;
			p->in_got = 0;
		}
	}
	peer_note(p, false);
}
