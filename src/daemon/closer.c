/* SPDX-License-Identifier: MIT */
/*
 * closer.c - see closer.h. One detached thread, one mutex-guarded ring of fds.
 */
#include <pthread.h>
#include <stdbool.h>
#include <unistd.h>

#include "closer.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static int ring[CLOSER_QUEUE_MAX];
static unsigned head, count;
static bool started, stopping;

static void *closer_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&lock);
	for (;;) {
		int fd;

		while (!count && !stopping)
			pthread_cond_wait(&wake, &lock);
		if (!count)
			break;
		fd = ring[head];
		head = (head + 1) % CLOSER_QUEUE_MAX;
		count--;
		pthread_mutex_unlock(&lock);
		close(fd); /* the one call that may block, for as long as the fd's owner wants */
		pthread_mutex_lock(&lock);
	}
	pthread_mutex_unlock(&lock);
	return NULL;
}

void closer_add(const int *fds, unsigned n)
{
	unsigned i = 0;

	pthread_mutex_lock(&lock);
	if (!started && !stopping) {
		pthread_attr_t a;
		pthread_t t;

		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		started = pthread_create(&t, &a, closer_main, NULL) == 0;
		pthread_attr_destroy(&a);
	}
	for (; started && i < n && count < CLOSER_QUEUE_MAX; i++, count++)
		ring[(head + count) % CLOSER_QUEUE_MAX] = fds[i];
	pthread_cond_signal(&wake);
	pthread_mutex_unlock(&lock);
	for (; i < n; i++)
		close(fds[i]); /* no thread, or its queue is full: no better place left */
}

void closer_stop(void)
{
	pthread_mutex_lock(&lock);
	stopping = true;
	pthread_cond_signal(&wake);
	pthread_mutex_unlock(&lock);
}
