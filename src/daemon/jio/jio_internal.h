/* SPDX-License-Identifier: MIT */
/*
 * jio_internal.h - what jio.c shares with its backends (jio_uring.c, jio_aio.c, jio_sync.c).
 *
 * Each backend has an open function that sets io->ops and io->priv on a struct jio whose efd
 * already exists; it returns 0 or a negative errno and leaves io untouched on failure. The
 * generic layer (jio.c) owns efd, inflight and fault injection: a backend's submit sees only
 * requests that passed its checks (1..JIO_MAX_IOV buffers, a free slot guaranteed), and its
 * reap is called only from jio_reap. Same thread model as jio.h: one thread at a time.
 */
#ifndef HP_JIO_INTERNAL_H
#define HP_JIO_INTERNAL_H

#include <errno.h>

#include "jio.h"

int jio_uring_open(struct jio *io);
int jio_aio_open(struct jio *io);
int jio_sync_open(struct jio *io);

/* Write a request's buffers and fdatasync, on the calling thread: the sync backend's work. */
int jio_sync_run(struct jio *io, const struct jio_req *req);

/* fdatasync(fd) on the calling thread, as the sync and libaio backends make their requests
 * durable (and where an armed stall waits); 0 or a negative errno. */
int jio_datasync(struct jio *io, int fd);

/* Make io->efd readable (a completion is waiting). Never fails in practice: the counter of an
 * eventfd only overflows after 2^64 - 2 writes without a read. */
void jio_signal(struct jio *io);

/* A FIFO of finished requests, at most JIO_DEPTH (the most that can be in flight). */
struct jio_fifo {
	struct jio_req *q[JIO_DEPTH];
	unsigned head, n;
};

static inline void jio_fifo_push(struct jio_fifo *f, struct jio_req *req)
{
	/* cannot overflow: at most JIO_DEPTH requests exist between submit and reap */
	f->q[(f->head + f->n++) % JIO_DEPTH] = req;
}

static inline struct jio_req *jio_fifo_pop(struct jio_fifo *f)
{
	struct jio_req *req;

	if (!f->n)
		return NULL;
	req = f->q[f->head];
	f->head = (f->head + 1) % JIO_DEPTH;
	f->n--;
	return req;
}

/* The result of a request from the results of its operations in order (writes, then the sync
 * where there is one): the first real failure. -ECANCELED only says an earlier operation of the
 * chain failed, so it counts only when nothing else explains it. */
static inline int jio_first_error(const int *res, unsigned n)
{
	int canceled = 0;

	for (unsigned i = 0; i < n; i++) {
		if (res[i] == -ECANCELED)
			canceled = res[i];
		else if (res[i] < 0)
			return res[i];
	}
	return canceled;
}

#endif
