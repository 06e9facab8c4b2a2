/* SPDX-License-Identifier: MIT */
/*
 * workpool.c - the process-wide worker pool of libhugepool (see workpool.h): started by the
 * first user under pthread_once, one detached thread per online CPU with every signal blocked,
 * living as long as the process; the pool owns no memory (tasks belong to their submitters).
 * Threads: workers run worker_main; any thread submits, unqueues, reserves and releases.
 * pool.lock guards all of `pool`; workers sleep on pool.cond only while the queue is empty.
 * Invariant: a task is on the queue iff its queued flag is set, and a worker clears the flag as
 * it pops the task, so each submission ends in exactly one of "a worker runs it" and "unqueue
 * returned true". After fork() the child has no workers: its merges run serially.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <unistd.h>

#include "workpool.h"

#define WORKPOOL_MAX 1024 /* threads, whatever the CPU count says */

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond; /* a task was queued: wakes one idle worker */
	struct wp_task *head, *tail; /* the FIFO run queue */
	unsigned nworkers; /* threads running worker_main */
	unsigned idle; /* workers waiting on cond */
	unsigned reserved; /* slots handed out by workpool_reserve */
} pool = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
};

static pthread_once_t pool_once = PTHREAD_ONCE_INIT;

static void *worker_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&pool.lock);
	for (;;) {
		struct wp_task *t;

		while (!pool.head) {
			pool.idle++;
			pthread_cond_wait(&pool.cond, &pool.lock);
			pool.idle--;
		}
		t = pool.head;
		pool.head = t->next;
		if (pool.head)
			pool.head->prev = NULL;
		else
			pool.tail = NULL;
		t->next = t->prev = NULL;
		t->queued = false;
		pthread_mutex_unlock(&pool.lock);
		t->run(t);
		pthread_mutex_lock(&pool.lock);
	}
	return NULL;
}

static void atfork_prepare(void)
{
	pthread_mutex_lock(&pool.lock);
}

static void atfork_parent(void)
{
	pthread_mutex_unlock(&pool.lock);
}

static void atfork_child(void)
{
	/* The workers did not survive the fork; the forking thread holds the lock. */
	pool.nworkers = 0;
	pool.idle = 0;
	pool.reserved = 0;
	pthread_cond_init(&pool.cond, NULL);
	pthread_mutex_unlock(&pool.lock);
}

static void pool_start(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned want = n < 1 ? 1 : n > WORKPOOL_MAX ? WORKPOOL_MAX : (unsigned)n;
	unsigned started = 0;
	pthread_attr_t attr;
	sigset_t all, old;

	if (pthread_atfork(atfork_prepare, atfork_parent, atfork_child))
		return; /* no workers: every merge runs serially */
	if (pthread_attr_init(&attr))
		return;
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (; started < want; started++) {
		pthread_t th;

		if (pthread_create(&th, &attr, worker_main, NULL))
			break;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	pthread_mutex_lock(&pool.lock);
	pool.nworkers = started;
	pthread_mutex_unlock(&pool.lock);
}

unsigned workpool_size(void)
{
	unsigned n;

	pthread_once(&pool_once, pool_start);
	pthread_mutex_lock(&pool.lock);
	n = pool.nworkers;
	pthread_mutex_unlock(&pool.lock);
	return n;
}

unsigned workpool_reserve(unsigned want)
{
	unsigned got = 0;

	pthread_once(&pool_once, pool_start);
	pthread_mutex_lock(&pool.lock);
	if (pool.nworkers > pool.reserved) {
		got = pool.nworkers - pool.reserved;
		if (got > want)
			got = want;
		pool.reserved += got;
	}
	pthread_mutex_unlock(&pool.lock);
	return got;
}

void workpool_release(unsigned n)
{
	pthread_mutex_lock(&pool.lock);
	pool.reserved = pool.reserved > n ? pool.reserved - n : 0;
	pthread_mutex_unlock(&pool.lock);
}

void workpool_submit(struct wp_task *t)
{
	pthread_mutex_lock(&pool.lock);
	t->next = NULL;
	t->prev = pool.tail;
	if (pool.tail)
		pool.tail->next = t;
	else
		pool.head = t;
	pool.tail = t;
	t->queued = true;
	if (pool.idle)
		pthread_cond_signal(&pool.cond);
	pthread_mutex_unlock(&pool.lock);
}

bool workpool_unqueue(struct wp_task *t)
{
	bool was;

	pthread_mutex_lock(&pool.lock);
	was = t->queued;
	if (was) {
		if (t->prev)
			t->prev->next = t->next;
		else
			pool.head = t->next;
		if (t->next)
			t->next->prev = t->prev;
		else
			pool.tail = t->prev;
		t->next = t->prev = NULL;
		t->queued = false;
	}
	pthread_mutex_unlock(&pool.lock);
	return was;
}
