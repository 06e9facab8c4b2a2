/* SPDX-License-Identifier: MIT */
/*
 * notify.h - the systemd notification protocol (sd_notify) without libsystemd: one datagram of
 * "KEY=value" lines to $NOTIFY_SOCKET, with fds for the file descriptor store. A no-op when the
 * variable is unset (not under systemd).
 */
#ifndef HP_NOTIFY_H
#define HP_NOTIFY_H

#include <stdbool.h>

/*
 * Create a spare socket for notifications to go through when the daemon has used up its open
 * files: each still creates a socket of its own (as sd_notify does: one datagram's skbs charge
 * one socket's send buffer, so a burst of FDSTORE=1 does not block on a shared one), and takes
 * the spare only when that fails with EMFILE or ENFILE, so READY=1 and FDSTORE=1 reach the
 * manager all the same. 0 when there is no notify socket, 1 when open, or a negative errno.
 */
int notify_open(void);

/* Returns 1 when sent, 0 when there is no notify socket, or a negative errno. */
int notify_send(const char *state);
/*
 * The same with fds attached as SCM_RIGHTS (FDSTORE=1, BARRIER=1); at most 253. flags:
 * sendmsg's, e.g. MSG_DONTWAIT: -EAGAIN rather than wait while the manager's queue is full.
 */
int notify_send_fds(const char *state, const int *fds, unsigned nfds, int flags);
int notify_sendf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * A take-over's next life is not the service's main process until the running one has told the
 * manager MAINPID= (takeover.h), and the manager refuses (and logs) the notifications of any
 * other process: while held, notifications are dropped, as if there were no manager.
 */
void notify_hold(bool hold);

#endif
