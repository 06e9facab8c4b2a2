/* SPDX-License-Identifier: MIT */
/*
 * fdstore.h - the fds hugepoold keeps across its own restarts, by name.
 *
 * Under systemd the daemon hands each fd it wants back (a buffer's memfd, the listening socket,
 * the warm state memfd) to the service manager's file descriptor store with a notify datagram
 * ("FDSTORE=1\nFDNAME=name" and the fd as SCM_RIGHTS; "FDSTOREREMOVE=1" to take one back, see
 * sd_notify(3) of systemd 252), and the next start of the service gets them all back from fd 3
 * on, with LISTEN_FDS, LISTEN_FDNAMES and LISTEN_PID (sd_listen_fds(3)). The same table is kept
 * in the process, so that `hugepoolctl restart` can re-execute the daemon handing the same fds
 * over the same way without systemd (fdstore_exec). Names are printable ASCII without ':', at
 * most FDSTORE_NAME_MAX bytes, one fd per name.
 *
 * Thread-safe: the event loop and the recycler both add and remove.
 */
#ifndef HP_FDSTORE_H
#define HP_FDSTORE_H

#include <stdbool.h>

#define FDSTORE_NAME_MAX 64

struct fdstore_fd {
	char name[FDSTORE_NAME_MAX + 1];
	int fd; /* -1 once taken */
};

/*
 * The fds the previous life left, as LISTEN_PID/LISTEN_FDS/LISTEN_FDNAMES describe them (the
 * variables are unset, the fds made close-on-exec). *ret is NULL and *n 0 when there are none.
 * The caller owns the array and every fd still in it (fdstore_received_free closes them).
 */
int fdstore_receive(struct fdstore_fd **ret, unsigned *n);
/* Take the fd named name out of the array (-1 if none): the caller owns it now. */
int fdstore_take(struct fdstore_fd *fds, unsigned n, const char *name);
/* Is the fd named name still in the array (not taken)? */
bool fdstore_has(const struct fdstore_fd *fds, unsigned n, const char *name);
/* Close the fds nobody took, and have the service manager drop them too; free the array. */
void fdstore_received_free(struct fdstore_fd *fds, unsigned n);

/*
 * Keep fd under name (the caller keeps owning fd and calls fdstore_remove before it closes it).
 * poll: let the service manager drop it when it hangs up (a client's connection); memfds and
 * the listening socket are kept unpolled. Returns 0, or a negative errno (logged by the caller:
 * the fd is then not kept across a restart, nothing else changes). A fd handed to this life
 * under the same name (the same file) is only recorded: the service manager holds it already.
 */
int fdstore_add(const char *name, int fd, bool poll);
/* Forget the fd named name, here and in the service manager (also one only a previous life kept). */
void fdstore_remove(const char *name);
/*
 * Wait until the service manager has processed everything sent so far (BARRIER=1), at most
 * timeout_ms: after fdstore_remove and this, the manager holds no copy of the fd any more.
 */
int fdstore_barrier(int timeout_ms);

/* How many fds are kept now. */
unsigned fdstore_count(void);

/*
 * Re-execution, in two steps. fdstore_exec_prepare: the table takes its own copies of every
 * kept fd (close-on-exec, above where they will go), so that the daemon may then tear itself
 * down, closing the originals. fdstore_exec: replace this process by path with argv, passing
 * the kept fds from fd 3 on with LISTEN_* set as systemd would (LISTEN_PID is our own pid: exec
 * keeps it). Returns only on failure: before anything moved when path is not executable, else
 * the caller must exit.
 */
int fdstore_exec_prepare(void);
int fdstore_exec(const char *path, char *const argv[]);

#endif
