/* SPDX-License-Identifier: MIT */
/*
 * http_server.c - see http_server.h. A connection goes READ (its request head, into its own
 * buffer) -> WANT (it asked for the metrics: answered at the end of the turn, with the others
 * that asked) -> WRITE (head and body, non-blocking) -> LINGER (written, SHUT_WR sent, what the
 * peer still sends read away so that it gets the answer rather than a reset) -> closed. Errors
 * skip WANT. Every state has a deadline; poll() sleeps until the earliest. Bodies are counted
 * references, one per format per turn, freed when the last connection that writes one is done.
 * All memory is static but the bodies; one thread, so no locks.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "http.h"
#include "http_server.h"
#include "util.h"

#define LINGER_MS 1000 /* after the answer: how long what the peer still sends is read away */
#define LINGER_MAX (64u << 10)
#define LISTENERS_MAX 16
/*
 * The bytes of bodies that connections still write (peers that do not read keep theirs): past
 * it, the oldest such connections are closed for a new body, so that no number of non-reading
 * peers takes the process past its unit's MemoryMax= (an OOM kill a few times over would stop
 * the service for good, at its start limit).
 */
#define BODIES_MAX (16u << 20)

enum conn_state { C_FREE, C_READ, C_WANT, C_WRITE, C_LINGER };

struct body {
	unsigned refs;
	size_t len;
	char data[];
};

struct conn {
	enum conn_state state;
	int in, out; /* one socket; two fds only for standard input and output */
	uint64_t born; /* the order connections came in, for eviction */
	uint64_t deadline; /* CLOCK_MONOTONIC ns */
	char buf[HTTP_REQUEST_MAX];
	size_t n, searched; /* in buf; how far the head's end was looked for */
	struct http_request req;
	char head[HTTP_HEAD_MAX];
	size_t head_len;
	struct body *body; /* a 200's, referenced; NULL: text is the body */
	char *text; /* the body written: body->data, or errtext */
	size_t text_len; /* 0 for HEAD */
	char errtext[64];
	size_t at; /* of head and body written */
	size_t drained; /* while lingering */
};

static struct conn conns[HTTP_CONNS];
static uint64_t born_next;
static size_t bodies_bytes; /* of every body alive */

static void body_put(struct body *b)
{
	if (b && --b->refs == 0) {
		bodies_bytes -= b->len;
		free(b);
	}
}

static void conn_close(struct conn *c)
{
	if (c->in >= 0)
		close(c->in);
	if (c->out >= 0 && c->out != c->in)
		close(c->out);
	body_put(c->body);
	c->body = NULL;
	c->state = C_FREE;
}

/* Start writing an answer of status (200: with c->body); deadline: HTTP_TIMEOUT_MS from now. */
static void answer(struct conn *c, int status, const char *content_type, uint64_t now)
{
	if (status == 200) {
		c->text = c->body->data;
		c->text_len = c->body->len;
	} else {
		snprintf(c->errtext, sizeof(c->errtext), "%s", http_error_body(status));
		c->text = c->errtext;
		c->text_len = strlen(c->errtext);
	}
	c->head_len = http_answer_head(c->head, status, content_type, c->text_len);
	if (c->req.head)
		c->text_len = 0;
	c->at = 0;
	c->state = C_WRITE;
	c->deadline = now + HTTP_TIMEOUT_MS * 1000000ull;
}

/* Written: no more to say, and a moment to read what the peer still sends. */
static void linger(struct conn *c, uint64_t now)
{
	body_put(c->body);
	c->body = NULL;
	if (shutdown(c->out, SHUT_WR) < 0) {
		conn_close(c); /* not a socket (a test's pipe): nothing to reset */
		return;
	}
	c->state = C_LINGER;
	c->drained = 0;
	c->deadline = now + LINGER_MS * 1000000ull;
}

static void conn_write(struct conn *c, uint64_t now)
{
	while (c->at < c->head_len + c->text_len) {
		struct iovec iov[2];
		int k = 0;
		ssize_t w;

		if (c->at < c->head_len)
			iov[k++] = (struct iovec){ c->head + c->at, c->head_len - c->at };
		if (c->text_len) {
			size_t from = c->at > c->head_len ? c->at - c->head_len : 0;

			iov[k++] = (struct iovec){ c->text + from, c->text_len - from };
		}
		w = writev(c->out, iov, k);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN)
			return; /* POLLOUT */
		if (w < 0) {
			conn_close(c); /* the peer went away: nothing more to do */
			return;
		}
		c->at += (size_t)w;
	}
	linger(c, now);
}

static void conn_read(struct conn *c, uint64_t now)
{
	for (;;) {
		ssize_t k = read(c->in, c->buf + c->n, sizeof(c->buf) - c->n);
		bool eof = k == 0;

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && errno == EAGAIN)
			return;
		if (k < 0 || (eof && c->n == 0)) {
			conn_close(c); /* gone before asking: nothing to answer */
			return;
		}
		c->n += (size_t)(eof ? 0 : k);
		if (http_request_parse(c->buf, c->n, &c->searched, eof, &c->req)) {
			if (c->req.status == 0)
				c->state = C_WANT; /* answered at the end of the turn */
			else
				answer(c, c->req.status, NULL, now);
			return;
		}
	}
}

static void conn_drain(struct conn *c)
{
	char buf[4096];

	for (;;) {
		ssize_t k = read(c->in, buf, sizeof(buf));

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && errno == EAGAIN)
			return;
		if (k <= 0 || (c->drained += (size_t)k) >= LINGER_MAX) {
			conn_close(c);
			return;
		}
	}
}

/*
 * The connection to close for a new one: the oldest still sending its request or already
 * answered, else the oldest writing its answer, else the oldest about to be answered; NULL if
 * none is open.
 */
static struct conn *conn_victim(void)
{
	struct conn *victim = NULL;
	int rank_victim = 0;

	for (unsigned i = 0; i < HTTP_CONNS; i++) {
		struct conn *c = &conns[i];
		int rank = c->state == C_READ || c->state == C_LINGER ? 0 : c->state == C_WRITE ? 1 : 2;

		if (c->state == C_FREE)
			continue;
		if (!victim || rank < rank_victim || (rank == rank_victim && c->born < victim->born)) {
			victim = c;
			rank_victim = rank;
		}
	}
	return victim;
}

/* Take a slot for a new connection: a free one, else conn_victim's, closed. */
static struct conn *conn_slot(void)
{
	struct conn *victim;

	for (unsigned i = 0; i < HTTP_CONNS; i++)
		if (conns[i].state == C_FREE)
			return &conns[i];
	victim = conn_victim();
	conn_close(victim);
	return victim;
}

static struct conn *conn_new(int in, int out, uint64_t now)
{
	struct conn *c = conn_slot();

	c->state = C_READ;
	c->in = in;
	c->out = out;
	c->born = born_next++;
	c->deadline = now + HTTP_TIMEOUT_MS * 1000000ull;
	c->n = c->searched = 0;
	c->body = NULL;
	return c;
}

/* Up to HTTP_ACCEPTS_PER_TURN connections from lfd, each read at once. 0 or a fatal -errno. */
static int accept_some(int lfd, uint64_t now)
{
	for (unsigned i = 0; i < HTTP_ACCEPTS_PER_TURN; i++) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			switch (errno) {
			case EAGAIN:
				return 0;
			case EINTR:
			case ECONNABORTED:
			case EPROTO:
			case EPERM: /* a firewall's */
			case ENOBUFS:
			case ENOMEM:
				continue;
			case EMFILE:
			case ENFILE: {
				/* HTTP_CONNS fit the unit's limit: the machine's, then; conn_victim frees one */
				struct conn *c = conn_victim();

				if (!c)
					return -errno; /* none open: the limit is below what serving needs */
				conn_close(c);
				return 0;
			}
			}
			return -errno;
		}
		conn_read(conn_new(fd, fd, now), now);
	}
	return 0;
}

/* Room for a body of len bytes: the oldest connections still writing one are closed until it fits. */
static void bodies_make_room(size_t len)
{
	while (bodies_bytes + len > BODIES_MAX) {
		struct conn *oldest = NULL;

		for (unsigned i = 0; i < HTTP_CONNS; i++)
			if (conns[i].state == C_WRITE && conns[i].body && (!oldest || conns[i].born < oldest->born))
				oldest = &conns[i];
		if (!oldest)
			return; /* one body alone may be larger: it is what there is to send */
		conn_close(oldest);
	}
}

/* Every connection that asked this turn gets the body of its format, made once for all of them. */
static void answer_wanting(http_body_fn body_fn, http_type_fn type_fn, void *arg, uint64_t now)
{
	for (int om = 0; om < 2; om++) {
		struct body *b = NULL;
		bool made = false;
		int status = 200;

		for (unsigned i = 0; i < HTTP_CONNS; i++) {
			struct conn *c = &conns[i];

			if (c->state != C_WANT || c->req.openmetrics != (bool)om)
				continue;
			if (!made) {
				char *buf = NULL;
				size_t len = 0;

				int r = body_fn(arg, om, &buf, &len);

				made = true;
				if (r == 0)
					bodies_make_room(len);
				if (r < 0 || !(b = malloc(sizeof(*b) + len))) {
					status = 500;
				} else {
					*b = (struct body){ .refs = 1, .len = len };
					memcpy(b->data, buf, len);
					bodies_bytes += len;
				}
				free(buf);
			}
			if (b) {
				c->body = b;
				b->refs++;
			}
			answer(c, status, type_fn(om), now);
			conn_write(c, now);
		}
		body_put(b); /* the making's reference */
	}
}

/* Deadlines: a request that never ended is answered 408; an answer or a linger that did not end, closed. */
static void expire(uint64_t now)
{
	for (unsigned i = 0; i < HTTP_CONNS; i++) {
		struct conn *c = &conns[i];

		if (c->state == C_FREE || c->state == C_WANT || now < c->deadline)
			continue;
		if (c->state == C_READ) {
			answer(c, 408, NULL, now);
			conn_write(c, now);
		} else {
			conn_close(c);
		}
	}
}

int http_serve(const int *lfds, unsigned nl, int in, int out, http_body_fn body_fn, http_type_fn type_fn, void *arg)
{
	struct pollfd pfd[LISTENERS_MAX + HTTP_CONNS];
	struct conn *owner[LISTENERS_MAX + HTTP_CONNS];

	/* conns[] is static, all C_FREE (0) until used: not written here, so that a process that
	 * answers one connection does not fault in the pages of 64 */
	if (nl > LISTENERS_MAX)
		return -EMFILE;
	if (nl == 0) {
		fcntl(in, F_SETFL, fcntl(in, F_GETFL) | O_NONBLOCK);
		fcntl(out, F_SETFL, fcntl(out, F_GETFL) | O_NONBLOCK);
		conn_new(in, out, now_ns());
	}
	for (;;) {
		uint64_t now = now_ns(), first = UINT64_MAX;
		unsigned np = 0, live = 0;
		int timeout, r;

		for (unsigned i = 0; i < nl; i++) {
			owner[np] = NULL;
			pfd[np++] = (struct pollfd){ .fd = lfds[i], .events = POLLIN };
		}
		for (unsigned i = 0; i < HTTP_CONNS; i++) {
			struct conn *c = &conns[i];

			if (c->state == C_FREE)
				continue;
			live++;
			first = c->deadline < first ? c->deadline : first;
			owner[np] = c;
			pfd[np++] = c->state == C_WRITE ? (struct pollfd){ .fd = c->out, .events = POLLOUT }
							: (struct pollfd){ .fd = c->in, .events = POLLIN };
		}
		if (nl == 0 && live == 0)
			return 0; /* the one connection is done */
		timeout = first == UINT64_MAX ? -1 : first <= now ? 0 : (int)((first - now + 999999) / 1000000);
		r = poll(pfd, np, timeout);
		if (r < 0 && errno != EINTR)
			return -errno;
		now = now_ns();
		for (unsigned i = 0; r > 0 && i < np; i++) {
			struct conn *c = owner[i];

			if (!pfd[i].revents || !c)
				continue;
			if (c->state == C_READ)
				conn_read(c, now);
			else if (c->state == C_WRITE)
				conn_write(c, now);
			else if (c->state == C_LINGER)
				conn_drain(c);
		}
		for (unsigned i = 0; r > 0 && i < nl; i++)
			if (pfd[i].revents) {
				int e = accept_some(lfds[i], now);

				if (e < 0)
					return e;
			}
		answer_wanting(body_fn, type_fn, arg, now);
		expire(now);
	}
}
