/* SPDX-License-Identifier: MIT */
/*
 * jio_aio.c - the libaio backend of jio.h: io_submit for the writes, fdatasync in reap.
 *
 * A request takes a slot of JIO_MAX_IOV iocbs, one pwrite per buffer, each signalling io->efd
 * when it completes. reap collects events with a zero timeout and then syncs in submission
 * order: the oldest requests whose writes are all in are made durable with one fdatasync(fd)
 * per run of requests on the same file, on the calling (flusher) thread (IOCB_CMD_FDSYNC is
 * EINVAL on ext4 and xfs, so it is not used). A request whose writes finished before an
 * earlier one's waits for it, so its sync also covers every earlier request's writes (jio.h):
 * O_DIRECT writes finish in any order. A short write is -EIO; an iocb io_submit refuses
 * (EBADF, EINVAL for a misaligned O_DIRECT buffer...) completes its request with that error
 * through the same efd. The first failing write, in buffer order, is the one reported. Used by
 * one thread at a time; nothing here locks.
 *
 * Without O_DIRECT the kernel performs a buffered write inside io_submit, so this backend is
 * then as synchronous as the sync one (and gains nothing over it); with O_DIRECT the writes
 * really run in the background and several requests overlap.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libaio.h>

#include "jio_internal.h"
#include "util.h"

struct slot {
	struct jio_req *req; /* NULL: free */
	unsigned pending; /* events still to come */
	int res[JIO_MAX_IOV];
	struct iocb cb[JIO_MAX_IOV];
};

struct aio {
	io_context_t ctx;
	struct slot slots[JIO_DEPTH];
	struct slot *order[JIO_DEPTH]; /* submitted, not synced yet: oldest first */
	unsigned norder;
	struct jio_fifo done; /* synced (or failed), to be handed back */
};

static int aio_submit(struct jio *io, struct jio_req *req)
{
	struct aio *a = io->priv;
	struct iocb *cbs[JIO_MAX_IOV];
	struct slot *s = NULL;
	unsigned n = req->niov, started = 0;

	for (unsigned i = 0; i < JIO_DEPTH && !s; i++)
		if (!a->slots[i].req)
			s = &a->slots[i];
	if (!s)
		return -EBUSY; /* cannot happen below JIO_DEPTH requests */

	for (unsigned i = 0; i < n; i++) {
		const struct jio_iov *v = &req->iov[i];

		/* libaio's prototype drops the const; the kernel only reads the buffer */
		io_prep_pwrite(&s->cb[i], req->fd, (void *)(uintptr_t)v->buf, v->len, (long long)v->off);
		io_set_eventfd(&s->cb[i], io->efd);
		s->cb[i].data = s;
		cbs[i] = &s->cb[i];
	}
	s->req = req;
	s->pending = n;
	memset(s->res, 0, sizeof(s->res));
	a->order[a->norder++] = s;

	while (started < n) {
		/* libaio returns how many iocbs the kernel took, or -errno for the first one */
		int r = io_submit(a->ctx, (long)(n - started), cbs + started);

		if (r == -EINTR)
			continue;
		if (r <= 0) {
			/* cbs[started] failed, those after it never started: they produce no event */
			s->res[started] = r < 0 ? r : -EIO;
			for (unsigned i = started + 1; i < n; i++)
				s->res[i] = -ECANCELED;
			s->pending -= n - started;
			if (!s->pending)
				jio_signal(io); /* reap finds it finished */
			break;
		}
		started += (unsigned)r;
	}
	return 0;
}

/*
 * Sync the oldest requests whose writes are all in, in submission order: one fdatasync for each
 * run of them on the same file. A request whose writes failed is not synced (its error stands).
 */
static void sync_in_order(struct jio *io, struct aio *a)
{
	unsigned k = 0;

	while (k < a->norder && !a->order[k]->pending) {
		int fd = a->order[k]->req->fd, r = 0;
		unsigned end = k;
		bool any = false;

		for (; end < a->norder && !a->order[end]->pending && a->order[end]->req->fd == fd; end++)
			any |= jio_first_error(a->order[end]->res, a->order[end]->req->niov) == 0;
		if (any)
			r = jio_datasync(io, fd);
		for (; k < end; k++) {
			struct slot *s = a->order[k];

			s->req->res = jio_first_error(s->res, s->req->niov);
			if (s->req->res == 0)
				s->req->res = r;
			jio_fifo_push(&a->done, s->req);
			s->req = NULL;
		}
	}
	a->norder -= k;
	memmove(a->order, a->order + k, a->norder * sizeof(a->order[0]));
}

static struct jio_req *aio_reap(struct jio *io)
{
	struct aio *a = io->priv;
	struct io_event ev[JIO_DEPTH * JIO_MAX_IOV];
	struct timespec zero = { 0, 0 };
	int n;

	do
		n = io_getevents(a->ctx, 0, (long)ARRAY_SIZE(ev), ev, &zero);
	while (n == -EINTR);
	for (int i = 0; i < n; i++) {
		struct slot *s = ev[i].data;
		unsigned k = (unsigned)(ev[i].obj - s->cb);
		long res = (long)ev[i].res;

		if (res < 0)
			s->res[k] = (int)res;
		else if ((unsigned long)res != s->req->iov[k].len)
			s->res[k] = -EIO;
		s->pending--;
	}
	sync_in_order(io, a);
	return jio_fifo_pop(&a->done);
}

static void aio_close(struct jio *io)
{
	struct aio *a = io->priv;

	/* io_destroy waits for the iocbs still in flight: their buffers are free after it */
	io_destroy(a->ctx);
	free(a);
}

static const struct jio_ops aio_ops = {
	.name = "libaio",
	.queue = true,
	.on_caller = true,
	.submit = aio_submit,
	.run = jio_sync_run, /* inline: write(2) and fdatasync(2) on the caller's thread */
	.reap = aio_reap,
	.close = aio_close,
};

int jio_aio_open(struct jio *io)
{
	_cleanup_free_ struct aio *a = calloc(1, sizeof(*a));
	int r;

	if (!a)
		return -ENOMEM;
	/* libaio returns -errno: ENOSYS (no CONFIG_AIO), EAGAIN (fs.aio-max-nr), EPERM (seccomp) */
	r = io_setup(JIO_DEPTH * JIO_MAX_IOV, &a->ctx);
	if (r < 0)
		return r;
	io->ops = &aio_ops;
	io->priv = TAKE_PTR(a);
	return 0;
}
