/* SPDX-License-Identifier: MIT */
/*
 * jio_sync.c - the sync backend of jio.h: pwrite and fdatasync inside submit.
 *
 * The fallback that works everywhere. submit does the whole request on the calling thread
 * (writes in buffer order, then fdatasync), queues it as finished and makes io->efd readable;
 * reap only pops that queue. A short write is continued until the whole buffer is written, so
 * the error reported is the kernel's own reason (ENOSPC, EFBIG...), or -EIO if a write moves
 * nothing without one. The first failure stops the request: the writes after it and the sync
 * are not attempted. Used by one thread at a time; nothing here locks.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

#include "jio_internal.h"

struct syncb {
	struct jio_fifo done;
};

static int write_all(int fd, const struct jio_iov *v)
{
	const char *p = v->buf;
	size_t left = v->len;
	off_t off = (off_t)v->off;

	while (left) {
		ssize_t n = pwrite(fd, p, left, off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		p += n;
		left -= (size_t)n;
		off += n;
	}
	return 0;
}

int jio_sync_run(struct jio *io, const struct jio_req *req)
{
	int r = 0;

	for (unsigned i = 0; i < req->niov && !r; i++)
		r = write_all(req->fd, &req->iov[i]);
	return r ? r : jio_datasync(io, req->fd);
}

static int sync_submit(struct jio *io, struct jio_req *req)
{
	struct syncb *b = io->priv;

	req->res = jio_sync_run(io, req);
	jio_fifo_push(&b->done, req);
	jio_signal(io);
	return 0;
}

static struct jio_req *sync_reap(struct jio *io)
{
	struct syncb *b = io->priv;

	return jio_fifo_pop(&b->done);
}

static void sync_close(struct jio *io)
{
	free(io->priv);
}

static const struct jio_ops sync_ops = {
	.name = "sync",
	.queue = false,
	.on_caller = true,
	.submit = sync_submit,
	.run = jio_sync_run,
	.reap = sync_reap,
	.close = sync_close,
};

int jio_sync_open(struct jio *io)
{
	struct syncb *b = calloc(1, sizeof(*b));

	if (!b)
		return -ENOMEM;
	io->ops = &sync_ops;
	io->priv = b;
	return 0;
}
