/* SPDX-License-Identifier: MIT */
/*
 * recycler.h - the background thread that gives buffers fresh, zeroed pages before they pass
 * to another uid, so that no acquire ever waits on the event loop for memory to be cleared.
 *
 * The event loop submits buffers and later collects finished ones when the recycler's eventfd
 * becomes readable; in between, the buffer belongs to the recycler alone (its fd and mapping
 * change there, see pool_buffer_renew). Submit and collect are event-loop only; the two queues
 * between the threads are guarded by one mutex.
 */
#ifndef HP_RECYCLER_H
#define HP_RECYCLER_H

#include "pool.h"

struct recycler;

int recycler_start(struct pool *pool, struct recycler **ret);
/* Readable when finished buffers wait to be collected. */
int recycler_fd(const struct recycler *r);
void recycler_submit(struct recycler *r, struct pool_buffer *b);
/* Hand every finished buffer to fn (err: 0 or the renewal's negative errno); returns how many. */
unsigned recycler_collect(struct recycler *r, void (*fn)(struct pool_buffer *b, int err, void *ud), void *ud);
/*
 * Stop the thread after the buffer in hand (its result can still be collected); buffers still
 * queued are left as they are. recycler_stop does the same and frees everything.
 */
void recycler_halt(struct recycler *r);
void recycler_stop(struct recycler *r);

#endif
