/* SPDX-License-Identifier: MIT */
/*
 * closer.h - close fds a client smuggled in, off the event loop.
 *
 * A client can pass any fd over the socket, and closing the daemon's copy may run that object's
 * release in the daemon: a TCP socket with SO_LINGER blocks close() for as long as the client
 * chose, a file on a FUSE mount the client serves blocks it forever. Where the kernel lets the
 * daemon refuse fds at the socket (SO_PASSRIGHTS = 0, Linux 6.16+), nothing ever arrives; on
 * older kernels the event loop hands what arrived to background threads that close it, and so
 * it does with the socket of every connection, admitted or not (closing a socket releases the
 * fds still in flight in it, on the thread that closes it).
 *
 * Nothing here ever closes on the caller's thread. Each uid's fds wait in a queue of their own,
 * and a queue is worked on by one thread at a time: an fd that blocks its close forever stops
 * its own uid's queue and one thread, nobody else's (threads are started as uids need them, up
 * to CLOSER_THREADS_MAX). A socket's linger is turned off before it is queued (an abortive close
 * does not wait). What one uid has waiting is bounded by the caller: closer_pending() says how
 * much, and the server admits no more connections of a uid past CLOSER_PENDING_MAX.
 */
#ifndef HP_CLOSER_H
#define HP_CLOSER_H

#include <sys/types.h>

#define CLOSER_THREADS_MAX 16
#define CLOSER_PENDING_MAX 1024

/* Close these fds soon, on a closer thread (started as needed), charged to uid. Any thread. */
void closer_add(const int *fds, unsigned n, uid_t uid);
/* How many of uid's fds wait to be closed, or are being closed now. */
unsigned closer_pending(uid_t uid);
/*
 * Before an exec that places fds at numbers of its choosing (fdstore_exec): no thread takes
 * another fd from now on, and the closes under way end first, for at most timeout_ms (one stuck
 * longer has the number off the table already). Else a thread could close a number the exec just
 * gave to an fd it hands over. What waits is then closed by the exec (close-on-exec) or by the
 * dup2 that takes its number, on the caller's thread: an fd that blocks its close (where
 * SO_PASSRIGHTS cannot refuse it) delays that exec, as the exec's own closes always could.
 */
void closer_hold(unsigned timeout_ms);
/* Stop the threads once they closed what they have (one may be stuck: it is left behind). */
void closer_stop(void);

#endif
