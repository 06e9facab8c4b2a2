/* SPDX-License-Identifier: MIT */
/*
 * closer.h - close fds a client smuggled in, off the event loop.
 *
 * A client can pass any fd over the socket, and closing the daemon's copy may run that object's
 * release in the daemon: a TCP socket with SO_LINGER blocks close() for as long as the client
 * chose, a file on a FUSE mount the client serves blocks it forever. Where the kernel lets the
 * daemon refuse fds at the socket (SO_PASSRIGHTS = 0, Linux 6.16+), nothing ever arrives; on
 * older kernels the event loop hands what arrived to one background thread that closes it.
 * That thread may be stuck by such an fd, but nothing else waits for it; its queue is bounded
 * (CLOSER_QUEUE_MAX) and a connection that sends fds is closed, so a client cannot make it
 * hold more than a bounded number. Past the bound, fds are closed on the caller's thread.
 */
#ifndef HP_CLOSER_H
#define HP_CLOSER_H

#define CLOSER_QUEUE_MAX 4096

/* Close these fds soon, on the closer thread (started on first use). Never blocks on them
 * unless the queue is full or the thread cannot start. Any thread. */
void closer_add(const int *fds, unsigned n);
/* Stop the thread after it closed what it has (it may be stuck: then it is left behind). */
void closer_stop(void);

#endif
