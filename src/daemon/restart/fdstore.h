/* SPDX-License-Identifier: MIT */
/*
 * fdstore.h - the fds hugepoold keeps across its own restarts, by name.
 *
 * Under systemd the daemon hands each fd it wants back (a buffer's memfd, the listening socket,
 * the warm state memfd, a connection, a spill file) to the service manager's file descriptor
 * store with a notify datagram ("FDSTORE=1\nFDNAME=name" and the fd as SCM_RIGHTS;
 * "FDSTOREREMOVE=1" to take one back, see sd_notify(3) of systemd 252), and the next start of
 * the service gets them all back from fd 3 on, with LISTEN_FDS, LISTEN_FDNAMES and LISTEN_PID
 * (sd_listen_fds(3)). The same table is kept in the process, so that `hugepoolctl restart` can
 * re-execute the daemon handing the same fds over without systemd (fdstore_exec). Names are
 * printable ASCII without ':', at most FDSTORE_NAME_MAX bytes, one fd per name.
 *
 * What bounds the store. systemd hands every name back in the one environment string
 * LISTEN_FDNAMES, which execve(2) refuses past 128 KiB (MAX_ARG_STRLEN: the start fails with
 * 203/EXEC and the store is lost), and keeps at most FileDescriptorStoreMax= fds (it closes what
 * comes beyond, telling nobody). So under a service manager the table refuses (-ENOSPC) an fd
 * that would take the names past FDSTORE_NAMES_MAX or the count past the store's size ($FDSTORE,
 * which systemd 254+ sets, else FDSTORE_ENTRIES_DEFAULT, the packaged unit's); an fd made for a
 * client (FDSTORE_CLIENT) must also leave FDSTORE_HEADROOM entries for the daemon's own (a buffer
 * renewed, the state replaced). The re-execution passes the names in a memfd instead
 * (HUGEPOOLD_FDNAMES_FD), so it is bounded by nothing but the open files limit.
 *
 * Thread-safe: the event loop and the recycler both add and remove.
 */
#ifndef HP_FDSTORE_H
#define HP_FDSTORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FDSTORE_NAME_MAX 64
/* what LISTEN_FDNAMES may hold: 128 KiB with its "LISTEN_FDNAMES=" and NUL, less a margin */
#define FDSTORE_NAMES_MAX (128u * 1024 - 1024)
#define FDSTORE_ENTRIES_DEFAULT 16384 /* hugepoold.service's FileDescriptorStoreMax= */
#define FDSTORE_HEADROOM 4
#define FDSTORE_CLIENT_DELAY_NS 1000000000ull
#define FDSTORE_FLUSH_MAX 64

struct fdstore_fd {
	char name[FDSTORE_NAME_MAX + 1];
	int fd; /* -1 once taken */
};

/*
 * The fds the previous life left, as LISTEN_PID/LISTEN_FDS/LISTEN_FDNAMES (or, after a
 * re-execution, HUGEPOOLD_FDNAMES_FD) describe them (the variables are unset, the fds made
 * close-on-exec), sorted by name. *ret is NULL and *n 0 when there are none. The caller owns the
 * array and every fd still in it (fdstore_received_free closes them).
 */
int fdstore_receive(struct fdstore_fd **ret, unsigned *n);
/* Sort the array by name again (after names in it changed), for fdstore_take and fdstore_has. */
void fdstore_sort(struct fdstore_fd *fds, unsigned n);
/* Take the fd named name out of the array (-1 if none): the caller owns it now. A binary search. */
int fdstore_take(struct fdstore_fd *fds, unsigned n, const char *name);
/* Is the fd named name still in the array (not taken)? */
bool fdstore_has(const struct fdstore_fd *fds, unsigned n, const char *name);
/* Close the fds nobody took, and have the service manager drop them too; free the array. */
void fdstore_received_free(struct fdstore_fd *fds, unsigned n);

enum {
	FDSTORE_POLL = 1 << 0, /* let the service manager drop it when it hangs up (a connection) */
	FDSTORE_CLIENT = 1 << 1, /* made for a client: leaves FDSTORE_HEADROOM for the daemon's own */
};

/*
 * Keep fd under name (the caller keeps owning fd and calls fdstore_remove before it closes it).
 * flags: FDSTORE_*; memfds and the listening socket are kept unpolled. Returns 0, -EEXIST (the
 * name is kept already) or another negative errno; the caller logs: the fd is then not kept
 * across a restart, nothing else changes. A fd handed to this life under the same name (the same file) is only recorded:
 * the service manager holds it already.
 */
int fdstore_add(const char *name, int fd, unsigned flags);
/*
 * Send the service manager the fds that have been kept for FDSTORE_CLIENT_DELAY_NS and not sent
 * (a client's, or one that found no room), at most FDSTORE_FLUSH_MAX a call, without waiting;
 * all: every one not sent yet, waiting, and until the manager has taken them (a stop for the
 * next life; BARRIER=1). fdstore_due: when there is something to send (CLOCK_MONOTONIC ns;
 * UINT64_MAX: nothing).
 */
void fdstore_flush(uint64_t now, bool all);
uint64_t fdstore_due(void);
/* Forget the fd named name, here and in the service manager (also one only a previous life kept). */
void fdstore_remove(const char *name);
/*
 * Wait until the service manager has processed everything sent so far (BARRIER=1), at most
 * timeout_ms: after fdstore_remove and this, the manager holds no copy of the fd any more.
 */
int fdstore_barrier(int timeout_ms);

/* What is kept, what of it the service manager holds, and how much it could. */
struct fdstore_usage {
	unsigned kept;
	unsigned sent; /* to the service manager */
	size_t sent_bytes; /* their names, as LISTEN_FDNAMES will hold them */
	unsigned entries_max; /* $FDSTORE, else FDSTORE_ENTRIES_DEFAULT */
	size_t names_max; /* FDSTORE_NAMES_MAX */
};
void fdstore_usage(struct fdstore_usage *ret);

/*
 * Re-execution, in two steps. fdstore_exec_prepare, while the daemon still serves: the table
 * takes its own copies of every kept fd (close-on-exec), and of every fd kept from then on, so
 * that the daemon may tear itself down closing the originals; on failure (out of fds) nothing
 * changed and the daemon goes on. fdstore_exec: replace this process by the executable open at
 * exe_fd with argv, passing the kept fds from fd 3 on with LISTEN_PID (our own: exec keeps it)
 * and LISTEN_FDS set as systemd would, and their names in a sealed memfd named by
 * HUGEPOOLD_FDNAMES_FD; if that exec fails, the same with fallback_fd (this life's own binary,
 * so that the daemon comes back as it was). Returns only when both failed.
 */
int fdstore_exec_prepare(void);
int fdstore_exec(int exe_fd, int fallback_fd, char *const argv[]);

#endif
