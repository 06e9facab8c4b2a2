/* SPDX-License-Identifier: MIT */
/*
 * jio_uring.c - the io_uring backend of jio.h, on liburing.
 *
 * A request becomes one chain of SQEs: a write per buffer, each with IOSQE_IO_LINK, then an
 * fsync with IORING_FSYNC_DATASYNC. The kernel runs the chain in order and cancels what follows
 * a failed or short write (-ECANCELED). Chains run independently of each other, so when an
 * earlier request's writes are still running at submission (O_DIRECT writes finish in any
 * order), the fsync is held back instead of linked: it is queued once the writes of this request
 * and of every earlier one are in, so that it covers them (jio.h). io->efd is registered with the
 * ring, so each CQE makes it readable and reap releases held fsyncs. A CQE's user_data is its
 * request's slot with the operation's index in the low bits; reap hands the request back once
 * all niov + 1 CQEs are in, with the first real error: a short write is -EIO, and the
 * -ECANCELED of the operations after a failure is never reported in its place (a held fsync
 * after a failed write is never queued, and counts as cancelled). Used by one thread at a time
 * (the struct jio's); nothing here locks.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdalign.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <liburing.h>

#include "jio_internal.h"
#include "util.h"

#define NOPS (JIO_MAX_IOV + 1) /* per request: the writes, then the sync */
#define OP_MASK 7u
_Static_assert(NOPS <= OP_MASK + 1, "an operation's index must fit below a slot's alignment");

struct slot {
	alignas(OP_MASK + 1) struct jio_req *req; /* NULL: free */
	unsigned nops; /* niov + 1 */
	unsigned pending; /* CQEs still to come */
	unsigned writes_left; /* write CQEs still to come */
	bool sync_held; /* its fsync is not queued yet: earlier writes were running */
	uint64_t seq; /* submission order */
	int res[NOPS]; /* 0 or the negative errno of each operation, in chain order */
};

struct uring {
	struct io_uring ring;
	struct slot slots[JIO_DEPTH];
	struct jio_fifo done;
	uint64_t seq;
};

/*
 * Hand the queued SQEs to the kernel. When it takes none or only some of them (it could not
 * allocate requests just now), they stay in the ring: make efd readable so that the flusher's
 * next reap tries again, rather than waiting for completions that were never started.
 */
static void kick(struct jio *io, struct uring *u)
{
	int r;

	do
		r = io_uring_submit(&u->ring);
	while (r == -EINTR);
	if (io_uring_sq_ready(&u->ring))
		jio_signal(io);
}

static void complete(struct uring *u, const struct io_uring_cqe *cqe);

/* Take every CQE that is in. */
static void take_cqes(struct uring *u)
{
	struct io_uring_cqe *cqe;

	while (io_uring_peek_cqe(&u->ring, &cqe) == 0) {
		complete(u, cqe);
		io_uring_cqe_seen(&u->ring, cqe);
	}
}

/* Are writes of a request submitted before seq (or of the request seq itself) still running? */
static bool writes_running(const struct uring *u, uint64_t seq)
{
	for (unsigned i = 0; i < JIO_DEPTH; i++)
		if (u->slots[i].req && u->slots[i].seq <= seq && u->slots[i].writes_left)
			return true;
	return false;
}

static void prep_fsync(struct io_uring_sqe *sqe, struct slot *s)
{
	io_uring_prep_fsync(sqe, s->req->fd, IORING_FSYNC_DATASYNC);
	io_uring_sqe_set_data64(sqe, (uintptr_t)s | (s->nops - 1));
}

static void finish(struct uring *u, struct slot *s)
{
	s->req->res = jio_first_error(s->res, s->nops);
	jio_fifo_push(&u->done, s->req);
	s->req = NULL;
}

/*
 * Queue the held fsyncs whose request, and every earlier one, has no write running; a request
 * whose own writes failed is finished without one. Returns whether SQEs were queued.
 */
static bool release_held(struct uring *u)
{
	bool queued = false;

	for (unsigned i = 0; i < JIO_DEPTH; i++) {
		struct slot *s = &u->slots[i];
		struct io_uring_sqe *sqe;

		if (!s->req || !s->sync_held || writes_running(u, s->seq))
			continue;
		if (jio_first_error(s->res, s->nops - 1) < 0) {
			s->sync_held = false;
			s->res[s->nops - 1] = -ECANCELED;
			if (!--s->pending)
				finish(u, s);
			continue;
		}
		sqe = io_uring_get_sqe(&u->ring);
		if (!sqe)
			break; /* the ring is full of unsubmitted SQEs: the next reap tries again */
		prep_fsync(sqe, s);
		s->sync_held = false;
		queued = true;
	}
	return queued;
}

static int uring_submit(struct jio *io, struct jio_req *req)
{
	struct uring *u = io->priv;
	struct io_uring_sqe *sqe;
	struct slot *s = NULL;
	bool hold;

	for (unsigned i = 0; i < JIO_DEPTH && !s; i++)
		if (!u->slots[i].req)
			s = &u->slots[i];
	/* neither can happen below JIO_DEPTH requests: the ring holds JIO_DEPTH full chains */
	if (!s || io_uring_sq_space_left(&u->ring) < req->niov + 1)
		return -EBUSY;

	/* what finished already does not hold this fsync back */
	take_cqes(u);
	hold = writes_running(u, u->seq);
	for (unsigned i = 0; i < req->niov; i++) {
		const struct jio_iov *v = &req->iov[i];

		sqe = io_uring_get_sqe(&u->ring);
		io_uring_prep_write(sqe, req->fd, v->buf, (unsigned)v->len, v->off);
		if (i + 1 < req->niov || !hold)
			sqe->flags |= IOSQE_IO_LINK;
		io_uring_sqe_set_data64(sqe, (uintptr_t)s | i);
	}
	s->req = req;
	s->nops = s->pending = req->niov + 1;
	s->writes_left = req->niov;
	s->sync_held = hold;
	s->seq = u->seq++;
	memset(s->res, 0, sizeof(s->res));
	if (!hold)
		prep_fsync(io_uring_get_sqe(&u->ring), s);
	kick(io, u);
	return 0;
}

static void complete(struct uring *u, const struct io_uring_cqe *cqe)
{
	struct slot *s = (struct slot *)(uintptr_t)(cqe->user_data & ~(uint64_t)OP_MASK);
	unsigned op = (unsigned)(cqe->user_data & OP_MASK);
	int res = cqe->res;

	/* a write must have moved all of its buffer; a short one broke the chain after it */
	if (op + 1 < s->nops) {
		s->writes_left--;
		if (res >= 0 && (size_t)res != s->req->iov[op].len)
			res = -EIO;
	}
	s->res[op] = res < 0 ? res : 0;
	if (!--s->pending)
		finish(u, s);
}

static struct jio_req *uring_reap(struct jio *io)
{
	struct uring *u = io->priv;

	take_cqes(u);
	if (release_held(u) || io_uring_sq_ready(&u->ring))
		kick(io, u);
	return jio_fifo_pop(&u->done);
}

static bool any_pending(const struct uring *u)
{
	for (unsigned i = 0; i < JIO_DEPTH; i++)
		if (u->slots[i].req)
			return true;
	return false;
}

static void uring_close(struct jio *io)
{
	struct uring *u = io->priv;
	struct io_uring_cqe *cqe;

	/* The caller may free the buffers of requests still in flight once this returns: wait for
	 * the kernel to be done with them (their requests are dropped, never completed). SQEs the
	 * kernel refuses to take were never started; the ring's exit discards them, and a held
	 * fsync is never queued. */
	for (unsigned i = 0; i < JIO_DEPTH; i++) {
		struct slot *s = &u->slots[i];

		if (s->req && s->sync_held && !--s->pending)
			s->req = NULL;
	}
	while (any_pending(u)) {
		int r;

		if (io_uring_sq_ready(&u->ring) && io_uring_submit(&u->ring) <= 0)
			break;
		r = io_uring_wait_cqe(&u->ring, &cqe);
		if (r == -EINTR)
			continue;
		if (r < 0)
			break;
		complete(u, cqe);
		io_uring_cqe_seen(&u->ring, cqe);
	}
	io_uring_queue_exit(&u->ring);
	free(u);
}

static const struct jio_ops uring_ops = {
	.name = "io_uring",
	.queue = true,
	.on_caller = false,
	.submit = uring_submit,
	.run = jio_sync_run, /* inline: write(2) and fdatasync(2) on the caller's thread */
	.reap = uring_reap,
	.close = uring_close,
};

int jio_uring_open(struct jio *io)
{
	_cleanup_free_ struct uring *u = calloc(1, sizeof(*u));
	struct io_uring_probe *probe;
	int r;

	if (!u)
		return -ENOMEM;
	/* liburing returns -errno: EPERM (io_uring_disabled, seccomp), ENOSYS, ENOMEM... */
	r = io_uring_queue_init(JIO_DEPTH * NOPS, &u->ring, 0);
	if (r < 0)
		return r;
	probe = io_uring_get_probe_ring(&u->ring);
	if (!probe || !io_uring_opcode_supported(probe, IORING_OP_WRITE) ||
	    !io_uring_opcode_supported(probe, IORING_OP_FSYNC))
		r = -EOPNOTSUPP;
	if (probe)
		io_uring_free_probe(probe);
	if (r == 0)
		r = io_uring_register_eventfd(&u->ring, io->efd);
	if (r < 0) {
		io_uring_queue_exit(&u->ring);
		return r;
	}
	io->ops = &uring_ops;
	io->priv = TAKE_PTR(u);
	return 0;
}
