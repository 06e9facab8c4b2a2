/* SPDX-License-Identifier: MIT */
/*
 * jio_uring.c - the io_uring backend of jio.h, on liburing.
 *
 * A request becomes one chain of SQEs: a write per buffer, each with IOSQE_IO_LINK, then an
 * fsync with IORING_FSYNC_DATASYNC. The kernel runs the chain in order and cancels what follows
 * a failed or short write (-ECANCELED). io->efd is registered with the ring, so each CQE makes
 * it readable. A CQE's user_data is its request's slot with the operation's index in the low
 * bits; reap hands the request back once all niov + 1 CQEs are in, with the first real error:
 * a short write is -EIO, and the -ECANCELED of the operations after a failure is never reported
 * in its place. Used by one thread at a time (the struct jio's); nothing here locks.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdalign.h>
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
	int res[NOPS]; /* 0 or the negative errno of each operation, in chain order */
};

struct uring {
	struct io_uring ring;
	struct slot slots[JIO_DEPTH];
	struct jio_fifo done;
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

static int uring_submit(struct jio *io, struct jio_req *req)
{
	struct uring *u = io->priv;
	struct io_uring_sqe *sqe;
	struct slot *s = NULL;

	for (unsigned i = 0; i < JIO_DEPTH && !s; i++)
		if (!u->slots[i].req)
			s = &u->slots[i];
	/* neither can happen below JIO_DEPTH requests: the ring holds JIO_DEPTH full chains */
	if (!s || io_uring_sq_space_left(&u->ring) < req->niov + 1)
		return -EBUSY;

	for (unsigned i = 0; i < req->niov; i++) {
		const struct jio_iov *v = &req->iov[i];

		sqe = io_uring_get_sqe(&u->ring);
		io_uring_prep_write(sqe, req->fd, v->buf, (unsigned)v->len, v->off);
		sqe->flags |= IOSQE_IO_LINK;
		io_uring_sqe_set_data64(sqe, (uintptr_t)s | i);
	}
	sqe = io_uring_get_sqe(&u->ring);
	io_uring_prep_fsync(sqe, req->fd, IORING_FSYNC_DATASYNC);
	io_uring_sqe_set_data64(sqe, (uintptr_t)s | req->niov);

	s->req = req;
	s->nops = s->pending = req->niov + 1;
	memset(s->res, 0, sizeof(s->res));
	kick(io, u);
	return 0;
}

static void complete(struct uring *u, const struct io_uring_cqe *cqe)
{
	struct slot *s = (struct slot *)(uintptr_t)(cqe->user_data & ~(uint64_t)OP_MASK);
	unsigned op = (unsigned)(cqe->user_data & OP_MASK);
	int res = cqe->res;

	/* a write must have moved all of its buffer; a short one broke the chain after it */
	if (op + 1 < s->nops && res >= 0 && (size_t)res != s->req->iov[op].len)
		res = -EIO;
	s->res[op] = res < 0 ? res : 0;
	if (--s->pending)
		return;
	s->req->res = jio_first_error(s->res, s->nops);
	jio_fifo_push(&u->done, s->req);
	s->req = NULL;
}

static struct jio_req *uring_reap(struct jio *io)
{
	struct uring *u = io->priv;
	struct io_uring_cqe *cqe;

	if (io_uring_sq_ready(&u->ring))
		kick(io, u);
	while (io_uring_peek_cqe(&u->ring, &cqe) == 0) {
		complete(u, cqe);
		io_uring_cqe_seen(&u->ring, cqe);
	}
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
	 * kernel refuses to take were never started; the ring's exit discards them. */
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
	.submit = uring_submit,
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
