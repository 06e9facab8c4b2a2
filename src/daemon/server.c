/* SPDX-License-Identifier: MIT */
/*
 * server.c - see server.h.
 *
 * Each connection is a struct peer. Input is read non-blocking into the peer until one whole
 * message is there (header checked by proto_check_header before any payload byte is read),
 * then dispatched through the handler table. The protocol is request/reply: a second request
 * while one is outstanding, any fd sent by a client, or a malformed message closes that one
 * connection with a logged reason. Output goes through a per-peer queue whose fd records make
 * sure every message carrying fds starts its own sendmsg, so the fds arrive with its header.
 * A peer found broken while sending (possibly inside a lease callback) is only marked dead;
 * dead peers are destroyed at the end of each loop iteration, never in the middle of one.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "access.h"
#include "closer.h"
#include "journal.h"
#include "lease.h"
#include "log.h"
#include "proto.h"
#include "recycler.h"
#include "server.h"
#include "spill.h"
#include "util.h"

#define OUT_MAX (PROTO_REPLY_MAX + (1u << 20)) /* a peer that lets more pile up is dropped */
/*
 * Backpressure: a peer's next request is not read while more than OUT_PAUSE bytes of its
 * replies, or any fd of them, wait to be sent. A client that does not read its replies
 * therefore holds at most one reply's worth of daemon memory and fds beyond OUT_PAUSE.
 */
#define OUT_PAUSE (64u << 10)
/* fds one received message may carry before the kernel truncates: SCM_MAX_FD */
#define IN_FDS_MAX 253

#ifndef SO_PASSRIGHTS
#define SO_PASSRIGHTS 83 /* Linux 6.16: refuse SCM_RIGHTS sent to this socket (inherited at accept) */
#endif
#define VERSION_STRING HUGEPOOL_VERSION

#define PEER_WRITERS_MAX 64 /* journal writers one connection may hold */

/*
 * The fds of one queued message. They are the queue's own: an fd the daemon keeps elsewhere
 * (a pool buffer, a doorbell) is queued as a dup, so what the client receives is the object
 * the message was about even if the original fd number is closed and reused meanwhile. They
 * are closed once sent, or when the peer goes. A GRANT also names its lease slots, which
 * become releasable only once the message left (lease_slot_delivered).
 */
struct out_fds {
	size_t at; /* offset in out[] of the header of the message they go with */
	unsigned n;
	int fds[PROTO_MAX_FDS];
	struct lease_slot *grants[PROTO_MAX_FDS]; /* a GRANT's slots, else NULL */
};

struct peer_writer {
	uint64_t id;
	struct journal_writer *w;
};

struct peer {
	int fd;
	unsigned id;
	struct server *srv;
	struct lease_owner owner;
	bool attached; /* owner is attached to the lease table */
	bool welcomed;
	bool dead; /* destroy at the end of this loop iteration */
	bool closing; /* destroy once out[] is flushed; ignore input */
	bool busy; /* a request awaits its reply */
	bool admin; /* root, the daemon's uid or admin_group: sees every client in status */
	struct access_creds creds; /* uid, gid and groups, as of connect() */
	char name[PROTO_NAME_MAX];
	uint64_t connected_rt;
	/* input: header then payload */
	struct proto_hdr hdr;
	size_t in_got;
	uint8_t *in_payload;
	/* output */
	uint8_t *out;
	size_t out_off, out_len, out_cap;
	struct out_fds *ofds;
	size_t ofds_head, nofds, ofds_cap;
	unsigned queued_fds; /* in ofds[] */
	bool want_out; /* EPOLLOUT registered */
	bool paused; /* EPOLLIN not registered: too many of its replies wait (peer_paused) */
	struct peer_writer writers[PEER_WRITERS_MAX];
	unsigned nwriters;
	struct spill_owner spill;
	TAILQ_ENTRY(peer) link;
};

struct server {
	const struct config *cfg;
	struct pool *pool;
	struct lease_table *leases;
	struct recycler *recycler;
	struct journal **journals;
	unsigned njournals;
	struct spill *spill;
	uint64_t next_writer_id;
	int listen_fd, epoll_fd, signal_fd;
	int reserve_fd; /* spent on accept-and-close when the daemon is out of fds */
	uint64_t listen_paused_until; /* CLOCK_MONOTONIC ns; 0 = the listener is polled */
	bool have_admin_gid;
	gid_t admin_gid; /* admin_group, resolved at start */
	gid_t socket_gid; /* socket_group resolved, or the daemon's group */
	struct access_list (*jaccess)[JOURNAL_OPS]; /* per journal (cfg->journals order), per op */
	TAILQ_HEAD(, peer) peers;
	unsigned npeers, next_id;
	uint64_t started_rt;
	uint64_t connections_total, protocol_errors;
	bool stop;
};

/* epoll data for the fixed fds; peers use their own pointer */
static int tag_listen, tag_signal, tag_recycler;

static void peer_kill(struct peer *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void peer_kill(struct peer *p, const char *fmt, ...)
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
	p->dead = true;
}

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

/* Send what the queue holds until the socket is full. */
static void peer_flush(struct peer *p)
{
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
		if (with_fds) {
			struct cmsghdr *c;

			memset(&cbuf, 0, sizeof(cbuf));
			msg.msg_control = cbuf.buf;
			msg.msg_controllen = CMSG_SPACE(sizeof(int) * f->n);
			c = CMSG_FIRSTHDR(&msg);
			c->cmsg_level = SOL_SOCKET;
			c->cmsg_type = SCM_RIGHTS;
			c->cmsg_len = CMSG_LEN(sizeof(int) * f->n);
			memcpy(CMSG_DATA(c), f->fds, sizeof(int) * f->n);
		}
		n = sendmsg(p->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			if (errno == EINTR)
				continue;
			if (errno == EPIPE || errno == ECONNRESET)
				p->dead = true; /* it left; the read side reports that */
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
			p->dead = true;
	}
	if (!p->dead && epoll_set(p->srv, p) < 0)
		peer_kill(p, "epoll_ctl failed: %m");
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

/*
 * Queue one message (header + two payload parts + fds) and try to send it. The fds whose bit is
 * set in `take` are given to the queue; the others stay the caller's and the queue sends dups
 * of them. grants, if not NULL, names the lease slot each fd is the buffer of.
 */
static void peer_send_fds(struct peer *p, enum proto_type type, const void *a, size_t alen, const void *b,
			  size_t blen, const int *fds, unsigned nfds, uint32_t take, struct lease_slot *const *grants)
{
	static struct log_ratelimit rl = LOG_RATELIMIT(5, 5);
	struct out_fds *f = NULL;
	struct proto_hdr h;
	unsigned own = 0;
	int mine[PROTO_MAX_FDS];

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
	proto_hdr_init(&h, type, (uint32_t)(alen + blen), nfds);
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

static void peer_send(struct peer *p, enum proto_type type, const void *a, size_t alen, const void *b,
		      size_t blen)
{
	peer_send_fds(p, type, a, alen, b, blen, NULL, 0, 0, NULL);
}

static void send_result(struct peer *p, int err, const char *text)
{
	struct proto_result r = { .err = err, .text_len = text ? (uint32_t)strnlen(text, PROTO_TEXT_MAX) : 0 };

	peer_send(p, PROTO_RESULT, &r, sizeof(r), text, r.text_len);
	p->busy = false;
}

/* --- lease table callbacks ------------------------------------------------------------ */

static void on_granted(struct lease_owner *o, struct lease_slot *const *slots, unsigned n, void *ud)
{
	struct peer *p = (struct peer *)((char *)o - offsetof(struct peer, owner));
	(void)ud;

	for (unsigned first = 0; first < n; first += PROTO_MAX_FDS) {
		unsigned k = MIN(n - first, (unsigned)PROTO_MAX_FDS);
		struct proto_grant g = { .total = n, .first = first, .n = k };
		struct proto_grant_entry e[PROTO_MAX_FDS];
		int fds[PROTO_MAX_FDS];

		for (unsigned i = 0; i < k; i++) {
			struct pool_buffer *b = lease_slot_buffer(slots[first + i]);

			e[i] = (struct proto_grant_entry){ .lease_id = lease_slot_id(slots[first + i]), .size = b->size };
			fds[i] = b->fd;
		}
		peer_send_fds(p, PROTO_GRANT, &g, sizeof(g), e, k * sizeof(e[0]), fds, k, 0, slots + first);
	}
	p->busy = false;
	log_debug("Granted %u buffers of class \"%s\" to pid %d (uid %u)", n,
		  p->srv->pool->classes[lease_slot_buffer(slots[0])->class_index].name, (int)o->pid,
		  (unsigned)o->uid);
}

static void on_failed(struct lease_owner *o, int err, const char *text, void *ud)
{
	struct peer *p = (struct peer *)((char *)o - offsetof(struct peer, owner));
	(void)ud;

	log_debug("Acquire of pid %d (uid %u) failed: %s", (int)o->pid, (unsigned)o->uid, text);
	send_result(p, err, text);
}

static void on_renew(struct pool_buffer *b, void *ud)
{
	struct server *s = ud;

	recycler_submit(s->recycler, b);
}

static bool on_intact(struct pool_buffer *b, void *ud)
{
	static struct log_ratelimit rl = LOG_RATELIMIT(10, 5);
	struct server *s = ud;
	bool ok = pool_buffer_intact(b);

	if (!ok)
		log_msg_ratelimited(&rl, LOG_NOTICE,
				    "Buffer %u of class \"%s\" has pages punched out by a holder; "
				    "it gets fresh pages before its next lease",
				    b->index, s->pool->classes[b->class_index].name);
	return ok;
}

static void on_renewed(struct pool_buffer *b, int err, void *ud)
{
	struct server *s = ud;

	lease_renewed(s->leases, b, err);
}

/* --- request handlers ------------------------------------------------------------------ */

/* A handler gets a request proto_parse_request accepted; < 0 closes the connection. */
typedef int (*handler_fn)(struct server *s, struct peer *p, const union proto_request *req);

static int handle_hello(struct server *s, struct peer *p, const union proto_request *req)
{
	const struct proto_hello *h = &req->hello;
	struct proto_welcome w = { .version = PROTO_VERSION, .nclasses = s->pool->nclasses,
				   .page_size = s->pool->page_size };

	if (p->welcomed)
		return -EPROTO;
	/* informative only: keep what is printable */
	for (size_t i = 0; i < sizeof(p->name) - 1 && h->name[i]; i++)
		p->name[i] = (h->name[i] >= 0x20 && h->name[i] < 0x7f) ? h->name[i] : '?';
	proto_set_name(w.daemon_version, sizeof(w.daemon_version), VERSION_STRING);
	p->welcomed = true;
	peer_send(p, PROTO_WELCOME, &w, sizeof(w), NULL, 0);
	p->busy = false;
	log_debug("Connection %u is pid %d (uid %u, \"%s\")", p->id, (int)p->owner.pid, (unsigned)p->owner.uid,
		  p->name);
	return 0;
}

static int handle_acquire(struct server *s, struct peer *p, const union proto_request *req)
{
	const struct proto_acquire *a = &req->acquire;
	int64_t timeout_ms = a->timeout_ms, cap_ms = (int64_t)(s->cfg->max_acquire_wait_ns / 1000000);
	char text[PROTO_TEXT_MAX];
	int r;

	if (a->count == 0 || a->count > PROTO_ACQUIRE_MAX) {
		snprintf(text, sizeof(text), "count %" PRIu32 " is outside 1..%u", a->count, PROTO_ACQUIRE_MAX);
		send_result(p, -EINVAL, text);
		return 0;
	}
	/* a waiter holds back its class: nobody may wait longer than max_acquire_wait */
	if (cap_ms && (timeout_ms < 0 || timeout_ms > cap_ms))
		timeout_ms = cap_ms;
	r = lease_acquire(s->leases, &p->owner, a->class_name, a->count, timeout_ms, now_ns(), text, sizeof(text));
	if (r < 0) {
		if (r == -EDQUOT)
			log_notice("Refused pid %d (uid %u): %s", (int)p->owner.pid, (unsigned)p->owner.uid, text);
		send_result(p, r, text);
	}
	return 0;
}

static int handle_release(struct server *s, struct peer *p, const union proto_request *req)
{
	char text[PROTO_TEXT_MAX];
	int r;

	r = lease_release(s->leases, &p->owner, req->release.ids, req->release.hdr.n, text, sizeof(text));
	send_result(p, r, r < 0 ? text : NULL);
	return 0;
}

/*
 * Which clients a status shows to whom: an administrator (root, the daemon's own uid, a member
 * of admin_group) sees every client and lease; anyone else only those of its own uid. Pool,
 * journal and spill figures are for everyone: they name nobody.
 */
static bool status_shows(const struct peer *to, const struct peer *q)
{
	return to->admin || q->owner.uid == to->owner.uid;
}

static int handle_status(struct server *s, struct peer *p, const union proto_request *req)
{
	const struct lease_counters *lc = lease_counters(s->leases);
	struct proto_status_spill spill;
	struct proto_status st = { 0 };
	struct peer *q;
	size_t nleases = 0, size;
	_cleanup_free_ uint8_t *buf = NULL;
	uint8_t *w;

	(void)req;
	TAILQ_FOREACH(q, &s->peers, link)
		if (q->attached && status_shows(p, q))
			nleases += q->owner.nleases;
	size = s->pool->nclasses * sizeof(struct proto_status_class) +
	       s->npeers * sizeof(struct proto_status_client) + nleases * sizeof(struct proto_status_lease) +
	       s->njournals * sizeof(struct proto_status_journal) + sizeof(struct proto_status_spill);
	if (size + sizeof(st) > PROTO_REPLY_MAX) {
		send_result(p, -EMSGSIZE, "status is larger than a reply may be");
		return 0;
	}
	buf = malloc(size ? size : 1);
	if (!buf) {
		send_result(p, -ENOMEM, "out of memory");
		return 0;
	}
	w = buf;
	st.nclasses = s->pool->nclasses;
	st.pool_flags = (s->pool->hugetlb ? PROTO_POOL_HUGETLB : 0) | (s->pool->fallback ? PROTO_POOL_FALLBACK : 0);
	st.page_size = s->pool->page_size;
	st.pool_bytes = s->pool->bytes;
	st.boot_prefault_ns = s->pool->boot.ns;
	st.boot_threads = s->pool->boot.threads;
	st.pid = (uint32_t)getpid();
	st.started_realtime_ns = s->started_rt;
	st.connections_total = s->connections_total;
	st.acquires = lc->acquires;
	st.grants = lc->grants;
	st.releases = lc->releases;
	st.timeouts = lc->timeouts;
	st.denials = lc->denials;
	st.protocol_errors = s->protocol_errors;
	st.recycled_buffers = lc->renewals;
	st.disconnect_releases = lc->disconnect_releases;
	proto_set_name(st.daemon_version, sizeof(st.daemon_version), VERSION_STRING);
	proto_set_name(st.fallback_reason, sizeof(st.fallback_reason), s->pool->fallback_reason);
	for (unsigned c = 0; c < s->pool->nclasses; c++) {
		struct lease_class_stats cs;
		struct proto_status_class pc = { 0 };

		lease_class_stats(s->leases, c, &cs);
		proto_set_name(pc.name, sizeof(pc.name), s->pool->classes[c].name);
		pc.size = s->pool->classes[c].size;
		pc.total = cs.total;
		pc.free = cs.free;
		pc.leased = cs.leased;
		pc.waiters = cs.waiters;
		pc.zeroing = cs.renewing;
		memcpy(w, &pc, sizeof(pc));
		w += sizeof(pc);
	}
	spill_get_status(s->spill, &spill); /* reads each client's spill page, once */
	TAILQ_FOREACH(q, &s->peers, link) {
		struct proto_status_client pc = { 0 };

		if (!q->attached || !status_shows(p, q))
			continue;
		memcpy(pc.name, q->name, sizeof(pc.name));
		pc.pid = (uint32_t)q->owner.pid;
		pc.uid = q->owner.uid;
		pc.gid = q->owner.gid;
		pc.leases = q->owner.nleases;
		pc.leased_bytes = q->owner.leased_bytes;
		pc.connected_realtime_ns = q->connected_rt;
		pc.waiting = q->owner.req != NULL;
		spill_owner_status(&q->spill, &pc.spill_files, &pc.spill_bytes, &pc.spill_streams_memory,
				   &pc.spill_bytes_memory);
		memcpy(w, &pc, sizeof(pc));
		w += sizeof(pc);
		st.nclients++;
	}
	TAILQ_FOREACH(q, &s->peers, link) {
		struct lease_slot *sl = NULL;

		if (!q->attached || !status_shows(p, q))
			continue;
		while ((sl = lease_owner_next(&q->owner, sl))) {
			struct proto_status_lease pl = { .lease_id = lease_slot_id(sl),
							 .pid = (uint32_t)q->owner.pid,
							 .uid = q->owner.uid,
							 .class_index = lease_slot_buffer(sl)->class_index,
							 .since_realtime_ns = lease_slot_since(sl) };

			memcpy(w, &pl, sizeof(pl));
			w += sizeof(pl);
			st.nleases++;
		}
	}
	for (unsigned i = 0; i < s->njournals; i++) {
		static struct journal_stats js; /* event loop only; large */
		struct proto_status_journal pj = { 0 };

		journal_get_stats(s->journals[i], &js);
		proto_set_name(pj.name, sizeof(pj.name), journal_name(s->journals[i]));
		proto_set_name(pj.backend, sizeof(pj.backend), js.backend);
		pj.state = js.state;
		pj.error = js.error;
		pj.next_lsn = js.next_lsn;
		pj.durable_lsn = js.durable_lsn;
		pj.retain_lsn = js.retain_lsn;
		pj.appends = js.appends;
		pj.bytes = js.bytes;
		pj.batches = js.batches;
		pj.syncs = js.syncs;
		pj.writers = js.writers;
		pj.segments = js.segments;
		pj.segments_used = js.segments_used;
		pj.segment_size = js.segment_size;
		pj.direct = s->cfg->journals[i].direct;
		pj.sync_p50_ns = hist_quantile(&js.sync_ns, 0.5);
		pj.sync_p99_ns = hist_quantile(&js.sync_ns, 0.99);
		pj.sync_p999_ns = hist_quantile(&js.sync_ns, 0.999);
		pj.sync_max_ns = js.sync_ns.max;
		pj.mean_batch_milli = js.batches ? js.appends * 1000 / js.batches : 0;
		pj.recovered_records = js.recovered_records;
		proto_set_name(pj.note, sizeof(pj.note), js.note);
		proto_set_name(pj.recovery, sizeof(pj.recovery), js.recovery);
		memcpy(w, &pj, sizeof(pj));
		w += sizeof(pj);
		st.njournals++;
	}
	memcpy(w, &spill, sizeof(spill));
	w += sizeof(spill);
	st.nspill = 1;
	peer_send(p, PROTO_STATUS_REPLY, &st, sizeof(st), buf, (size_t)(w - buf));
	p->busy = false;
	return 0;
}


/* The journal called name if p may do op to it; otherwise answer p and return NULL. */
static struct journal *journal_or_answer(struct server *s, struct peer *p, const char *name, enum journal_op op)
{
	static const char *const verbs[JOURNAL_OPS] = { "append to", "read", "truncate" };
	static const char *const keys[JOURNAL_OPS] = { "append", "read", "truncate" };
	char text[PROTO_TEXT_MAX];
	unsigned i = 0;

	while (i < s->njournals && strcmp(journal_name(s->journals[i]), name) != 0)
		i++;
	if (i == s->njournals) {
		snprintf(text, sizeof(text), "no journal \"%s\"", name);
		send_result(p, -ENOENT, text);
		return NULL;
	}
	if (!access_allows(&s->jaccess[i][op], &p->creds)) {
		snprintf(text, sizeof(text), "uid %u may not %s journal \"%s\" (\"%s\" in hugepoold.conf)",
			 (unsigned)p->owner.uid, verbs[op], name, keys[op]);
		send_result(p, -EACCES, text);
		return NULL;
	}
	return s->journals[i];
}

/* Journal writers open on all connections of uid (a uid has at most max_connections_per_uid). */
static unsigned uid_writers(const struct server *s, uid_t uid)
{
	const struct peer *q;
	unsigned n = 0;

	TAILQ_FOREACH(q, &s->peers, link)
		if (q->owner.uid == uid)
			n += q->nwriters;
	return n;
}

static int handle_journal_open(struct server *s, struct peer *p, const union proto_request *req)
{
	static struct log_ratelimit writers_rl = LOG_RATELIMIT(10, 5);
	struct journal *j = journal_or_answer(s, p, req->jopen.name, JOURNAL_APPEND);
	struct proto_journal_opened o;
	struct journal_writer *w;
	struct journal_stats st;
	char text[PROTO_TEXT_MAX];
	int fds[3], r;

	if (!j)
		return 0;
	if (p->nwriters >= PEER_WRITERS_MAX) {
		snprintf(text, sizeof(text), "this connection already has %u journal writers", PEER_WRITERS_MAX);
		send_result(p, -EMFILE, text);
		return 0;
	}
	if (s->cfg->max_journal_writers_per_uid && uid_writers(s, p->owner.uid) >= s->cfg->max_journal_writers_per_uid) {
		snprintf(text, sizeof(text), "uid %u already has %u journal writers open (max_journal_writers_per_uid)",
			 (unsigned)p->owner.uid, s->cfg->max_journal_writers_per_uid);
		log_msg_ratelimited(&writers_rl, LOG_NOTICE, "Refused a journal writer to pid %d: %s", (int)p->owner.pid,
				    text);
		send_result(p, -EUSERS, text);
		return 0;
	}
	r = journal_writer_new(j, p->owner.uid, p->owner.pid, req->jopen.ring_size, &w, &fds[0], &fds[1], &fds[2]);
	if (r < 0) {
		snprintf(text, sizeof(text), "cannot open a writer of journal \"%s\": %s", req->jopen.name,
			 r == -EINVAL ? "ring size must be a power of two from 64 KiB to 64 MiB" : strerror(-r));
		send_result(p, r, text);
		return 0;
	}
	journal_get_stats(j, &st);
	p->writers[p->nwriters++] = (struct peer_writer){ ++s->next_writer_id, w };
	o = (struct proto_journal_opened){ .writer_id = s->next_writer_id, .ring_size = journal_writer_ring_size(w),
					   .durable_lsn = st.durable_lsn };
	/* the message owns the three fds (dups of the daemon's) and closes them once sent */
	peer_send_fds(p, PROTO_JOURNAL_OPENED, &o, sizeof(o), NULL, 0, fds, 3, 7u, NULL);
	p->busy = false;
	return 0;
}

static int handle_journal_close(struct server *s, struct peer *p, const union proto_request *req)
{
	(void)s;
	for (unsigned i = 0; i < p->nwriters; i++) {
		if (p->writers[i].id != req->jclose.writer_id)
			continue;
		journal_writer_close(p->writers[i].w);
		p->writers[i] = p->writers[--p->nwriters];
		send_result(p, 0, NULL);
		return 0;
	}
	send_result(p, -EINVAL, "no such journal writer on this connection");
	return 0;
}

static int handle_journal_truncate(struct server *s, struct peer *p, const union proto_request *req)
{
	struct journal *j = journal_or_answer(s, p, req->jtruncate.name, JOURNAL_TRUNCATE);

	if (j) {
		journal_truncate(j, req->jtruncate.lsn);
		send_result(p, 0, NULL);
	}
	return 0;
}

static int handle_journal_read(struct server *s, struct peer *p, const union proto_request *req)
{
	struct journal *j = journal_or_answer(s, p, req->jread.name, JOURNAL_READ);
	struct journal_segment_info infos[PROTO_MAX_FDS];
	struct proto_journal_segment e[PROTO_MAX_FDS];
	struct proto_journal_segments h = { 0 };
	int fds[PROTO_MAX_FDS];
	unsigned n = 0;
	int r;

	if (!j)
		return 0;
	r = journal_read_segments(j, req->jread.from_lsn, PROTO_MAX_FDS, fds, infos, &n, &h.durable_lsn);
	if (r < 0) {
		send_result(p, r, "cannot open the journal's segments");
		return 0;
	}
	for (unsigned i = 0; i < n; i++)
		e[i] = (struct proto_journal_segment){ infos[i].generation, infos[i].first_lsn, infos[i].size };
	h.n = n;
	h.more = n == PROTO_MAX_FDS;
	peer_send_fds(p, PROTO_JOURNAL_SEGMENTS, &h, sizeof(h), e, n * sizeof(e[0]), fds, n,
		      n ? (uint32_t)((1ull << n) - 1) : 0, NULL);
	p->busy = false;
	return 0;
}

static int handle_spill_attach(struct server *s, struct peer *p, const union proto_request *req)
{
	struct proto_spill_attached a = { .page_size = 4096 };
	int fd, r;

	(void)req;
	r = spill_attach(s->spill, &p->spill, &fd, &a.threshold);
	if (r < 0) {
		send_result(p, r, r == -EEXIST ? "this connection is attached already" : "cannot create the spill page");
		return 0;
	}
	peer_send_fds(p, PROTO_SPILL_ATTACHED, &a, sizeof(a), NULL, 0, &fd, 1, 1u, NULL);
	p->busy = false;
	return 0;
}

static int handle_spill_create(struct server *s, struct peer *p, const union proto_request *req)
{
	struct proto_spill_created c;
	char text[PROTO_TEXT_MAX];
	int fd, r;

	r = spill_create(s->spill, &p->spill, req->screate.charge, &c.file_id, &fd, text, sizeof(text));
	if (r < 0) {
		if (r == -EDQUOT)
			log_notice("Refused a spill file to pid %d (uid %u): %s", (int)p->owner.pid,
				   (unsigned)p->owner.uid, text);
		send_result(p, r, text);
		return 0;
	}
	peer_send_fds(p, PROTO_SPILL_CREATED, &c, sizeof(c), NULL, 0, &fd, 1, 1u, NULL);
	p->busy = false;
	return 0;
}

static int handle_spill_charge(struct server *s, struct peer *p, const union proto_request *req)
{
	char text[PROTO_TEXT_MAX];
	int r;

	r = spill_charge(s->spill, &p->spill, req->scharge.file_id, req->scharge.total, text, sizeof(text));
	if (r == -EDQUOT)
		log_notice("Refused spill bytes to pid %d (uid %u): %s", (int)p->owner.pid, (unsigned)p->owner.uid,
			   text);
	send_result(p, r, r < 0 ? text : NULL);
	return 0;
}

static int handle_spill_close(struct server *s, struct peer *p, const union proto_request *req)
{
	if (!spill_owns(&p->spill, req->sclose.file_id)) {
		send_result(p, -ENOENT, "no such spill file on this connection");
		return 0;
	}
	/* answer first: the client goes on while this thread truncates (frees the pages) */
	send_result(p, 0, NULL);
	spill_close_file(s->spill, &p->spill, req->sclose.file_id);
	return 0;
}

static const struct {
	uint16_t type;
	handler_fn fn;
} handlers[] = {
	{ PROTO_HELLO, handle_hello },
	{ PROTO_ACQUIRE, handle_acquire },
	{ PROTO_RELEASE, handle_release },
	{ PROTO_STATUS, handle_status },
	{ PROTO_JOURNAL_OPEN, handle_journal_open },
	{ PROTO_JOURNAL_CLOSE, handle_journal_close },
	{ PROTO_JOURNAL_TRUNCATE, handle_journal_truncate },
	{ PROTO_JOURNAL_READ, handle_journal_read },
	{ PROTO_SPILL_ATTACH, handle_spill_attach },
	{ PROTO_SPILL_CREATE, handle_spill_create },
	{ PROTO_SPILL_CHARGE, handle_spill_charge },
	{ PROTO_SPILL_CLOSE, handle_spill_close },
};

static void dispatch(struct server *s, struct peer *p)
{
	static union proto_request req; /* event loop only; large (a release's 1024 ids) */
	const char *why;
	handler_fn fn = NULL;
	int r;

	for (size_t i = 0; i < ARRAY_SIZE(handlers); i++)
		if (handlers[i].type == p->hdr.type)
			fn = handlers[i].fn;
	if (!p->welcomed && p->hdr.type != PROTO_HELLO) {
		s->protocol_errors++;
		peer_kill(p, "first message is %s, not hello", proto_type_name(p->hdr.type));
		return;
	}
	if (proto_parse_request(&p->hdr, p->in_payload, &req, &why) < 0) {
		s->protocol_errors++;
		peer_kill(p, "%s", why);
		return;
	}
	p->busy = true;
	r = fn(s, p, &req);
	if (r < 0) {
		s->protocol_errors++;
		peer_kill(p, "unexpected %s request", proto_type_name(p->hdr.type));
	}
}

/* --- connections ------------------------------------------------------------------------ */

/* Hand every fd a message brought to the closer thread (closer.h says why not close here). */
static void close_fds_in(struct msghdr *msg)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(msg, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || c->cmsg_len < CMSG_LEN(0))
			continue;
		size_t k = MIN((c->cmsg_len - CMSG_LEN(0)) / sizeof(int), (size_t)IN_FDS_MAX);
		int fds[IN_FDS_MAX];

		memcpy(fds, CMSG_DATA(c), sizeof(int) * k);
		closer_add(fds, (unsigned)k);
	}
}

/* Read whatever is there; dispatch each complete message. */
static void peer_read(struct server *s, struct peer *p)
{
	/* a paused peer's next request waits until its replies have gone (OUT_PAUSE) */
	while (!p->dead && !(p->in_got == 0 && peer_paused(p))) {
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

		n = recvmsg(p->fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				peer_kill(p, "receive failed: %m");
			return;
		}
		if (msg.msg_controllen || (msg.msg_flags & MSG_CTRUNC)) {
			close_fds_in(&msg);
			s->protocol_errors++;
			peer_kill(p, "client sent file descriptors%s",
				  msg.msg_flags & MSG_CTRUNC ? " (truncated)" : "");
			return;
		}
		if (n == 0) {
			if (p->in_got)
				log_info("Connection %u (pid %d) ended in the middle of a message", p->id,
					 (int)p->owner.pid);
			p->dead = true;
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

					snprintf(text, sizeof(text), "protocol version %u is not supported (daemon speaks %u)",
						 p->hdr.version, PROTO_VERSION);
					send_result(p, r, text);
					p->closing = true;
				}
				peer_kill(p, "%s (type %u, %u bytes, %u fds)", why, p->hdr.type, p->hdr.len, p->hdr.nfds);
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
}

static void peer_destroy(struct server *s, struct peer *p)
{
	if (p->attached) {
		unsigned held = p->owner.nleases;

		lease_owner_detach(s->leases, &p->owner);
		if (held)
			log_info("Connection %u (pid %d, uid %u, \"%s\") closed; released its %u leases", p->id,
				 (int)p->owner.pid, (unsigned)p->owner.uid, p->name, held);
	}
	for (unsigned i = 0; i < p->nwriters; i++)
		journal_writer_close(p->writers[i].w);
	spill_owner_release(s->spill, &p->spill);
	for (size_t i = 0; i < p->nofds; i++)
		out_fds_release(p, &p->ofds[(p->ofds_head + i) % p->ofds_cap]);
	access_creds_free(&p->creds);
	TAILQ_REMOVE(&s->peers, p, link);
	s->npeers--;
	epoll_ctl(s->epoll_fd, EPOLL_CTL_DEL, p->fd, NULL);
	close(p->fd);
	free(p->in_payload);
	free(p->out);
	free(p->ofds);
	free(p);
}

static void accept_one(struct server *s, int fd)
{
	static struct log_ratelimit rl = LOG_RATELIMIT(5, 10);
	struct peer *p = calloc(1, sizeof(*p));
	struct ucred cred;
	socklen_t len = sizeof(cred);
	char text[PROTO_TEXT_MAX];
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP };
	int r;

	if (!p || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
		log_error("Failed to set up a new connection: %s", p ? strerror(errno) : "out of memory");
		free(p);
		close(fd);
		return;
	}
	p->fd = fd;
	p->srv = s;
	p->id = ++s->next_id;
	p->connected_rt = realtime_ns();
	p->owner.pid = cred.pid;
	p->owner.uid = cred.uid;
	access_creds_get(fd, &cred, &p->creds);
	p->admin = access_is_daemon(&p->creds) || (s->have_admin_gid && access_in_group(&p->creds, s->admin_gid));
	spill_owner_init(s->spill, &p->spill, cred.uid, cred.pid);
	TAILQ_INSERT_TAIL(&s->peers, p, link);
	s->npeers++;
	s->connections_total++;
	ev.data.ptr = p;
	if (epoll_ctl(s->epoll_fd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		peer_kill(p, "epoll_ctl failed: %m");
		return;
	}
	if (s->npeers > s->cfg->max_connections) {
		snprintf(text, sizeof(text), "the daemon already serves %u connections (max_connections)",
			 s->cfg->max_connections);
		r = -EUSERS;
	} else {
		r = lease_owner_attach(s->leases, &p->owner, cred.uid, cred.gid, cred.pid, text, sizeof(text));
	}
	if (r < 0) {
		log_msg_ratelimited(&rl, LOG_NOTICE, "Refusing connection of pid %d (uid %u): %s", (int)cred.pid,
				    (unsigned)cred.uid, text);
		/* say why, then close: the client reads it as the answer to its hello */
		p->closing = true;
		send_result(p, r, text);
		return;
	}
	p->attached = true;
}

#define LISTEN_PAUSE_NS (100 * 1000000ull) /* out of fds and no reserve: poll the listener later */

/*
 * Out of fds (EMFILE, ENFILE): a pending connection keeps the listener readable, so the loop
 * would spin on it. Spend the reserve fd to accept it and close it at once (the client sees its
 * connection end), take the reserve back, and say so in the log a few times a minute at most.
 * Without a reserve, stop polling the listener for a moment.
 */
static bool accept_out_of_fds(struct server *s, int err)
{
	static struct log_ratelimit rl = LOG_RATELIMIT(10, 3);
	int fd;

	log_msg_ratelimited(&rl, LOG_ERR, "Cannot accept connections: %s; closing new ones until fds are free",
			    strerror(err));
	if (s->reserve_fd >= 0) {
		close(s->reserve_fd);
		fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd >= 0)
			close(fd);
		s->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (fd >= 0 && s->reserve_fd >= 0)
			return true;
	}
	if (epoll_ctl(s->epoll_fd, EPOLL_CTL_DEL, s->listen_fd, NULL) == 0)
		s->listen_paused_until = now_ns() + LISTEN_PAUSE_NS;
	return false;
}

static void accept_all(struct server *s)
{
	static struct log_ratelimit rl = LOG_RATELIMIT(10, 3);

	for (;;) {
		int fd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if ((errno == EMFILE || errno == ENFILE) && accept_out_of_fds(s, errno))
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EMFILE && errno != ENFILE)
				log_msg_ratelimited(&rl, LOG_ERR, "Failed to accept a connection: %m");
			return;
		}
		accept_one(s, fd);
	}
}

/* --- socket and loop -------------------------------------------------------------------- */

/* gid: the socket's group (resolve_access looked socket_group up), (gid_t)-1 = leave it */
static int socket_bind(const struct config *cfg, gid_t gid)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	_cleanup_close_ int fd = -1;
	struct stat st;
	mode_t old;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", cfg->socket_path);
	if (lstat(cfg->socket_path, &st) == 0) {
		_cleanup_close_ int probe = -1;

		if (!S_ISSOCK(st.st_mode)) {
			log_error("Socket path '%s' exists and is not a socket; refusing to replace it",
				  cfg->socket_path);
			return -EEXIST;
		}
		probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (probe >= 0 && connect(probe, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
			log_error("Another hugepoold is already listening on '%s'", cfg->socket_path);
			return -EADDRINUSE;
		}
		/* a stale socket from a daemon that died */
		unlink(cfg->socket_path);
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		log_error("Failed to create a Unix socket: %m");
		return -errno;
	}
	/*
	 * Bind under the umask that gives the socket exactly socket_mode: it is created with its
	 * final permissions, and never chmod-ed by path afterwards (a path can be swapped for a
	 * symlink by whoever may write the directory).
	 */
	old = umask(~cfg->socket_mode & 0777);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;

		umask(old);
		log_error("Failed to bind '%s': %s", cfg->socket_path, strerror(e));
		return -e;
	}
	umask(old);
	/* AT_SYMLINK_NOFOLLOW: if the name is no longer our socket, change no other file */
	if (gid != (gid_t)-1 && fchownat(AT_FDCWD, cfg->socket_path, (uid_t)-1, gid, AT_SYMLINK_NOFOLLOW) < 0) {
		log_error("Failed to give socket '%s' to group '%s': %m", cfg->socket_path, cfg->socket_group);
		unlink(cfg->socket_path);
		return -EINVAL;
	}
	if (listen(fd, 512) < 0) {
		log_error("Failed to set up socket '%s': %m", cfg->socket_path);
		unlink(cfg->socket_path);
		return -errno;
	}
	return TAKE_FD(fd);
}

/*
 * Clients never send fds. Where the kernel can refuse them at the socket (SO_PASSRIGHTS,
 * Linux 6.16+; accepted sockets inherit it from the listener), a client's sendmsg with
 * SCM_RIGHTS fails with EPERM and nothing reaches the daemon. Elsewhere fds that arrive are
 * closed off the event loop (closer.h).
 */
static void refuse_passed_fds(int listen_fd)
{
	int zero = 0;

	if (setsockopt(listen_fd, SOL_SOCKET, SO_PASSRIGHTS, &zero, sizeof(zero)) == 0)
		return;
	log_notice("This kernel cannot refuse fds at the socket (SO_PASSRIGHTS: %m; Linux 6.16+ can); "
		   "fds clients send are closed on a background thread");
}

/*
 * Every name the configuration gives a user or group by, to ids, once and before the socket
 * exists: socket_group, admin_group, every journal's access lists (an unset one is the socket's
 * group). A name that does not exist is an error here, not a surprise later.
 */
static int resolve_access(struct server *s)
{
	const struct config *cfg = s->cfg;
	char err[128];

	s->socket_gid = getegid();
	if (cfg->socket_group[0]) {
		struct group *g = getgrnam(cfg->socket_group);

		if (!g) {
			log_error("Failed to give socket '%s' to group '%s': no such group", cfg->socket_path,
				  cfg->socket_group);
			return -EINVAL;
		}
		s->socket_gid = g->gr_gid;
	}
	if (cfg->admin_group[0]) {
		struct group *g = getgrnam(cfg->admin_group);

		if (!g) {
			log_error("admin_group '%s' does not exist", cfg->admin_group);
			return -EINVAL;
		}
		s->admin_gid = g->gr_gid;
		s->have_admin_gid = true;
	}
	s->jaccess = calloc(s->njournals ? s->njournals : 1, sizeof(*s->jaccess));
	if (!s->jaccess)
		return -ENOMEM;
	for (unsigned i = 0; i < s->njournals; i++)
		for (unsigned op = 0; op < JOURNAL_OPS; op++)
			if (access_list_resolve(&cfg->journals[i].access[op], s->socket_gid, &s->jaccess[i][op], err,
						sizeof(err)) < 0) {
				log_error("Journal '%s' (line %u): %s", cfg->journals[i].name, cfg->journals[i].line,
					  err);
				return -EINVAL;
			}
	return 0;
}

static int epoll_add_tag(int epfd, int fd, int *tag)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = tag };

	return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

int server_open(const struct config *cfg, struct pool *pool, struct journal **journals, unsigned njournals,
		struct spill *spill, struct server **ret)
{
	static const struct lease_ops ops = { on_granted, on_failed, on_renew, on_intact };
	struct lease_limits lim = { .max_bytes_per_uid = cfg->max_bytes_per_uid,
				    .max_connections_per_uid = cfg->max_connections_per_uid };
	struct server *s = calloc(1, sizeof(*s));
	sigset_t mask;
	int r;

	if (!s)
		return -ENOMEM;
	s->cfg = cfg;
	s->pool = pool;
	s->journals = journals;
	s->njournals = njournals;
	s->spill = spill;
	s->listen_fd = s->epoll_fd = s->signal_fd = s->reserve_fd = -1;
	s->started_rt = realtime_ns();
	TAILQ_INIT(&s->peers);
	r = lease_table_new(pool, &lim, &ops, s, &s->leases);
	if (r < 0)
		goto fail;
	r = recycler_start(pool, &s->recycler);
	if (r < 0) {
		log_error("Failed to start the recycler thread: %s", strerror(-r));
		goto fail;
	}
	/* SIGTERM and SIGINT arrive as events; they were blocked by main before any thread started */
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	s->signal_fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	s->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	if (s->signal_fd < 0 || s->epoll_fd < 0) {
		r = -errno;
		log_error("Failed to set up the event loop: %m");
		goto fail;
	}
	r = resolve_access(s);
	if (r < 0)
		goto fail;
	r = socket_bind(cfg, cfg->socket_group[0] ? s->socket_gid : (gid_t)-1);
	if (r < 0)
		goto fail;
	s->listen_fd = r;
	refuse_passed_fds(s->listen_fd);
	s->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if ((r = epoll_add_tag(s->epoll_fd, s->listen_fd, &tag_listen)) < 0 ||
	    (r = epoll_add_tag(s->epoll_fd, s->signal_fd, &tag_signal)) < 0 ||
	    (r = epoll_add_tag(s->epoll_fd, recycler_fd(s->recycler), &tag_recycler)) < 0) {
		log_error("Failed to set up the event loop: %s", strerror(-r));
		goto fail;
	}
	log_info("Listening on '%s' (mode %04o)", cfg->socket_path, (unsigned)cfg->socket_mode);
	if ((cfg->socket_mode & 0002) && (!cfg->max_bytes_per_uid || !cfg->spill_max_bytes_per_uid))
		log_notice("Every user of this machine may connect (socket_mode %04o), and %s is 0 (no limit): "
			   "one user can take all of it from everyone else",
			   (unsigned)cfg->socket_mode,
			   !cfg->max_bytes_per_uid ? (!cfg->spill_max_bytes_per_uid ? "max_bytes_per_uid (the pool) and "
										       "spill_max_bytes_per_uid (spill_max_bytes)"
										     : "max_bytes_per_uid (the pool)")
						   : "spill_max_bytes_per_uid (spill_max_bytes)");
	*ret = s;
	return 0;
fail:
	server_free(s);
	return r;
}

static void reap(struct server *s)
{
	struct peer *p, *next;

	for (p = TAILQ_FIRST(&s->peers); p; p = next) {
		next = TAILQ_NEXT(p, link);
		if (p->dead)
			peer_destroy(s, p);
	}
}

int server_run(struct server *s)
{
	struct epoll_event evs[64];

	while (!s->stop) {
		uint64_t now = now_ns();
		uint64_t deadline = MIN(lease_next_deadline(s->leases), spill_audit(s->spill, now, false));
		int timeout = -1, n;

		if (s->listen_paused_until && now >= s->listen_paused_until) {
			s->listen_paused_until = 0;
			if (epoll_add_tag(s->epoll_fd, s->listen_fd, &tag_listen) < 0)
				log_error("Failed to poll the listening socket again: %m");
		}
		if (s->listen_paused_until)
			deadline = MIN(deadline, s->listen_paused_until);

		if (deadline != UINT64_MAX)
			timeout = deadline <= now ? 0 : (int)MIN((deadline - now + 999999) / 1000000, (uint64_t)INT32_MAX);
		n = epoll_wait(s->epoll_fd, evs, ARRAY_SIZE(evs), timeout);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			log_error("epoll_wait failed: %m");
			return -errno;
		}
		for (int i = 0; i < n; i++) {
			void *tag = evs[i].data.ptr;

			if (tag == &tag_listen) {
				accept_all(s);
			} else if (tag == &tag_signal) {
				struct signalfd_siginfo si;

				if (read(s->signal_fd, &si, sizeof(si)) == sizeof(si)) {
					log_info("Received %s, shutting down", strsignal((int)si.ssi_signo));
					s->stop = true;
				}
			} else if (tag == &tag_recycler) {
				recycler_collect(s->recycler, on_renewed, s);
			} else {
				struct peer *p = tag;

				if (evs[i].events & EPOLLOUT)
					peer_flush(p);
				if (p->paused && (evs[i].events & (EPOLLHUP | EPOLLERR)))
					p->dead = true; /* gone, with replies it will never read */
				else if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR | EPOLLRDHUP))
					peer_read(s, p);
			}
		}
		lease_expire(s->leases, now_ns());
		reap(s);
	}
	return 0;
}

void server_free(struct server *s)
{
	struct peer *p;

	if (!s)
		return;
	while ((p = TAILQ_FIRST(&s->peers)))
		peer_destroy(s, p);
	/* stop the recycler before the lease table: it may still hold a buffer */
	recycler_stop(s->recycler);
	lease_table_free(s->leases);
	if (s->listen_fd >= 0) {
		close(s->listen_fd);
		unlink(s->cfg->socket_path);
	}
	if (s->signal_fd >= 0)
		close(s->signal_fd);
	if (s->reserve_fd >= 0)
		close(s->reserve_fd);
	free(s->jaccess);
	closer_stop();
	if (s->epoll_fd >= 0)
		close(s->epoll_fd);
	free(s);
}
