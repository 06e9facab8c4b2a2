/* SPDX-License-Identifier: MIT */
/*
 * closer.c - see closer.h. `lock` guards the queues (one per uid, in a list) and the thread
 * counts; a thread takes a queue nobody works on (`busy`), closes one fd without the lock, and
 * looks again. A queue is freed once it is empty and nobody works on it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "closer.h"
#include "util.h"

struct queue {
	uid_t uid;
	int *fds; /* a ring: head, n of cap */
	unsigned head, n, cap;
	bool busy; /* a thread is closing one of them */
	struct queue *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static pthread_cond_t closed = PTHREAD_COND_INITIALIZER; /* a thread ended a close (closer_hold) */
static struct queue *queues;
static unsigned threads, idle, closing;
static bool stopping, held;

static struct queue *find(uid_t uid, bool create)
{
	struct queue *q;

	for (q = queues; q; q = q->next)
		if (q->uid == uid)
			return q;
	if (!create || !(q = calloc(1, sizeof(*q))))
		return NULL;
	q->uid = uid;
	q->next = queues;
	queues = q;
	return q;
}

static void drop(struct queue *q)
{
	struct queue **pp = &queues;

	while (*pp != q)
		pp = &(*pp)->next;
	*pp = q->next;
	free(q->fds);
	free(q);
}

/* A queue with fds nobody works on; under lock. */
static struct queue *ready(void)
{
	for (struct queue *q = queues; q; q = q->next)
		if (q->n && !q->busy)
			return q;
	return NULL;
}

static void *closer_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&lock);
	for (;;) {
		struct queue *q = held ? NULL : ready();
		int fd;

		if (!q) {
			if (stopping)
				break;
			idle++;
			pthread_cond_wait(&wake, &lock);
			idle--;
			continue;
		}
		fd = q->fds[q->head];
		q->head = (q->head + 1) % q->cap;
		q->n--;
		q->busy = true;
		closing++;
		pthread_mutex_unlock(&lock);
		close(fd); /* the one call that may block, for as long as the fd's owner wants */
		pthread_mutex_lock(&lock);
		closing--;
		pthread_cond_broadcast(&closed);
		q->busy = false;
		if (!q->n)
			drop(q);
	}
	threads--;
	pthread_mutex_unlock(&lock);
	return NULL;
}

/* Room for one more fd in q; under lock. */
static int reserve(struct queue *q)
{
	unsigned cap = q->cap ? 2 * q->cap : 16;
	int *fds;

	if (q->n < q->cap)
		return 0;
	fds = malloc(cap * sizeof(*fds));
	if (!fds)
		return -ENOMEM;
	for (unsigned i = 0; i < q->n; i++)
		fds[i] = q->fds[(q->head + i) % q->cap];
	free(q->fds);
	q->fds = fds;
	q->head = 0;
	q->cap = cap;
	return 0;
}

void closer_add(const int *fds, unsigned n, uid_t uid)
{
	static const struct linger abort_close = { .l_onoff = 1, .l_linger = 0 };
	struct queue *q;

	/* a TCP socket's close then resets the connection rather than wait to send (ENOTSOCK: not one) */
	for (unsigned i = 0; i < n; i++)
		(void)setsockopt(fds[i], SOL_SOCKET, SO_LINGER, &abort_close, sizeof(abort_close));
	pthread_mutex_lock(&lock);
	q = find(uid, true);
	for (unsigned i = 0; q && i < n; i++) {
		if (reserve(q) < 0)
			break; /* out of memory: the rest stays open, never closed here */
		q->fds[(q->head + q->n++) % q->cap] = fds[i];
	}
	if (!idle && threads < CLOSER_THREADS_MAX && !stopping) {
		pthread_attr_t a;
		pthread_t t;

		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		threads += pthread_create(&t, &a, closer_main, NULL) == 0;
		pthread_attr_destroy(&a);
	}
	pthread_cond_broadcast(&wake);
	pthread_mutex_unlock(&lock);
}

unsigned closer_pending(uid_t uid)
{
	const struct queue *q;
	unsigned n;

	pthread_mutex_lock(&lock);
	q = find(uid, false);
	n = q ? q->n + q->busy : 0;
	pthread_mutex_unlock(&lock);
	return n;
}

void closer_hold(unsigned timeout_ms)
{
	struct timespec until = realtime_in_ms(timeout_ms);

	pthread_mutex_lock(&lock);
	held = true;
	/* one still in close() past the wait is stuck in it: the kernel took the number off the
	 * table as the call began, so the number is free whatever the close does */
	while (closing && pthread_cond_timedwait(&closed, &lock, &until) == 0)
		;
	pthread_mutex_unlock(&lock);
}

void closer_stop(void)
{
	pthread_mutex_lock(&lock);
	stopping = true;
	pthread_cond_broadcast(&wake);
	pthread_mutex_unlock(&lock);
}
