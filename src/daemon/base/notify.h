/* SPDX-License-Identifier: MIT */
/*
 * notify.h - the systemd notification protocol (sd_notify) without libsystemd: one datagram of
 * "KEY=value" lines to $NOTIFY_SOCKET, with fds for the file descriptor store. A no-op when the
 * variable is unset (not under systemd).
 */
#ifndef HP_NOTIFY_H
#define HP_NOTIFY_H

/* Returns 1 when sent, 0 when there is no notify socket, or a negative errno. */
int notify_send(const char *state);
/*
 * The same with fds attached as SCM_RIGHTS (FDSTORE=1, BARRIER=1); at most 253. flags:
 * sendmsg's, e.g. MSG_DONTWAIT: -EAGAIN rather than wait while the manager's queue is full.
 */
int notify_send_fds(const char *state, const int *fds, unsigned nfds, int flags);
int notify_sendf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
