/* SPDX-License-Identifier: MIT */
/*
 * recycler.c - see recycler.h.
 *
 * `lock` guards todo[], done[] and stop. Both rings hold at most one entry per pool buffer (a
 * buffer is submitted again only after it was collected), so they are sized to the pool and
 * never overflow. The thread signals completion by writing the eventfd after queueing in done.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "log.h"
#include "recycler.h"
#include "size.h"
#include "util.h"

struct done_entry {
	struct pool_buffer *b;
	int err;
};

struct recycler {
	struct pool *pool;
	int efd;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stop;
	bool joined; /* the thread has ended (recycler_halt) */
	struct pool_buffer **todo; /* ring: todo_head, ntodo */
	size_t todo_head, ntodo;
	struct done_entry *done; /* array: ndone */
	size_t ndone;
	size_t cap;
};

static void *recycler_main(void *arg)
{
	struct recycler *r = arg;

	pthread_mutex_lock(&r->lock);
	for (;;) {
		while (!r->stop && r->ntodo == 0)
			pthread_cond_wait(&r->cond, &r->lock);
		if (r->stop)
			break;
		struct pool_buffer *b = r->todo[r->todo_head];

		r->todo_head = (r->todo_head + 1) % r->cap;
		r->ntodo--;
		pthread_mutex_unlock(&r->lock);

		int err = pool_buffer_renew(r->pool, b);

		if (err < 0) {
			char s[32];

			log_warning("Failed to give buffer %u (class \"%s\", %s) fresh pages: %s; it stays out "
				    "of service until it is wanted again (does a process still map it?)",
				    b->index, r->pool->classes[b->class_index].name, size_format(b->size, s, sizeof(s)),
				    strerror(-err));
		}
		pthread_mutex_lock(&r->lock);
		r->done[r->ndone++] = (struct done_entry){ b, err };
		uint64_t one = 1;

		if (write(r->efd, &one, sizeof(one)) < 0) {
			/* the counter cannot overflow at one write per buffer */
		}
	}
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

int recycler_start(struct pool *pool, struct recycler **ret)
{
	struct recycler *r = calloc(1, sizeof(*r));
	int e;

	if (!r)
		return -ENOMEM;
	r->pool = pool;
	r->cap = pool->nbuffers ? pool->nbuffers : 1;
	r->todo = calloc(r->cap, sizeof(*r->todo));
	r->done = calloc(r->cap, sizeof(*r->done));
	r->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (!r->todo || !r->done || r->efd < 0) {
		e = r->efd < 0 ? -errno : -ENOMEM;
		goto out_free;
	}
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->cond, NULL);
	e = -pthread_create(&r->thread, NULL, recycler_main, r);
	if (e < 0)
		goto out_destroy;
	*ret = r;
	return 0;
out_destroy:
	pthread_cond_destroy(&r->cond);
	pthread_mutex_destroy(&r->lock);
out_free:
	if (r->efd >= 0)
		close(r->efd);
	free(r->todo);
	free(r->done);
	free(r);
	return e;
}

int recycler_fd(const struct recycler *r)
{
	return r->efd;
}

void recycler_submit(struct recycler *r, struct pool_buffer *b)
{
	pthread_mutex_lock(&r->lock);
	r->todo[(r->todo_head + r->ntodo) % r->cap] = b;
	r->ntodo++;
	pthread_cond_signal(&r->cond);
	pthread_mutex_unlock(&r->lock);
}

unsigned recycler_collect(struct recycler *r, void (*fn)(struct pool_buffer *b, int err, void *ud), void *ud)
{
	uint64_t v;
	unsigned n = 0;

	if (read(r->efd, &v, sizeof(v)) < 0) {
		/* EAGAIN: nothing new, but look anyway */
	}
	for (;;) {
		struct done_entry d;

		pthread_mutex_lock(&r->lock);
		if (r->ndone == 0) {
			pthread_mutex_unlock(&r->lock);
			break;
		}
		d = r->done[--r->ndone];
		pthread_mutex_unlock(&r->lock);
		/* outside the lock: fn may submit again */
		fn(d.b, d.err, ud);
		n++;
	}
	return n;
}

void recycler_halt(struct recycler *r)
{
	if (!r || r->joined)
		return;
	pthread_mutex_lock(&r->lock);
	r->stop = true;
	pthread_cond_signal(&r->cond);
	pthread_mutex_unlock(&r->lock);
	pthread_join(r->thread, NULL);
	r->joined = true;
}

void recycler_stop(struct recycler *r)
{
	if (!r)
		return;
	recycler_halt(r);
	pthread_cond_destroy(&r->cond);
	pthread_mutex_destroy(&r->lock);
	close(r->efd);
	free(r->todo);
	free(r->done);
	free(r);
}
