/* SPDX-License-Identifier: MIT */
/*
 * workpool.h - libhugepool's process-wide worker pool (private): one thread per online CPU,
 * started on first use, shared by every merge of the process, never stopped. Tasks wait in one
 * FIFO run queue; a worker pops one and calls its run(), which must never wait for another task.
 * The pool lock guards the queue, the queued flags and the slots; callers may hold their own
 * lock around submit/unqueue (order: theirs, then the pool's); run() gets no lock. The task's
 * memory is the submitter's and must stay valid while queued or running. Slots are an advisory
 * count of workers promised to merges: a merge that finds none free runs serially.
 */
#ifndef HP_WORKPOOL_H
#define HP_WORKPOOL_H

#include <stdbool.h>

struct wp_task {
	void (*run)(struct wp_task *t); /* called on a worker, no pool lock held */
	struct wp_task *next, *prev; /* run queue links: pool lock */
	bool queued; /* on the run queue: pool lock */
};

/* Start the pool on first use; the number of workers (0 when none could be started). */
unsigned workpool_size(void);

/* Take up to want of the free slots; returns how many were taken (0: the pool is busy). */
unsigned workpool_reserve(unsigned want);

/* Give back n slots taken by workpool_reserve. */
void workpool_release(unsigned n);

/* Append t to the run queue (t must not be queued) and wake a worker if one is idle. */
void workpool_submit(struct wp_task *t);

/*
 * Take t off the run queue if it is still there: true when it was (the caller now owns it and
 * no worker will run it), false when a worker has already popped it (or it was never queued).
 */
bool workpool_unqueue(struct wp_task *t);

#endif
