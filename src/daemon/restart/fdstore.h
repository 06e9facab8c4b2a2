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
	bool held; /* the service manager holds it too (what LISTEN_FDS hands over: all) */
	bool gone; /* forgotten by the life that gave it (a take-over's): nobody takes it */
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
/* Put fd back in the array as the one named name, taken before (-ENOENT: no such place). */
int fdstore_untake(struct fdstore_fd *fds, unsigned n, const char *name, int fd);
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
/* Forget it here only: the object lives on under its name, kept again later (a take-over's). */
void fdstore_forget(const char *name);
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
 * A take-over (takeover.h), the running life's side: the table handed to a next life that runs
 * beside this one. After fdstore_handover_begin, fdstore_handover_batch gives up to max fds kept
 * and not given yet to give (the table locked meanwhile: no fd in the batch is closed by its
 * owner before give sent it; give must not call back here), which returns 0 when it sent them
 * (they are given) or a negative errno; it returns how many were given (0 when every fd is: the
 * table as it is then is the snapshot) or give's error. fdstore_handover_given marks fds given
 * another way. The table records what becomes of the given ones. Once the daemon has stopped, fdstore_handover_delta gives what changed since:
 * the fds kept and not given, the names of given ones forgotten, and the names of given ones the
 * service manager took (malloc'd arrays, the caller's). fdstore_handover_end stops recording
 * (the take-over done or given up).
 */
struct fdstore_handed {
	char name[FDSTORE_NAME_MAX + 1];
	int fd; /* the table's caller's: valid until the table changes */
	bool held; /* the service manager holds it */
};
typedef char fdstore_name[FDSTORE_NAME_MAX + 1];
int fdstore_handover_begin(void);
int fdstore_handover_batch(unsigned max, int (*give)(const struct fdstore_handed *batch, unsigned n, void *ud),
			   void *ud);
void fdstore_handover_given(const struct fdstore_handed *given, unsigned n);
int fdstore_handover_delta(struct fdstore_handed **ret_added, unsigned *ret_nadded, fdstore_name **ret_removed,
			   unsigned *ret_nremoved, fdstore_name **ret_held, unsigned *ret_nheld);
void fdstore_handover_end(void);

/*
 * The next life's side. Its fds come from the running life: fdstore_handed_init remembers which
 * of fds (sorted, as fdstore_receive makes them) the service manager holds; fdstore_handed_merge
 * adds the fds kept since (the array grows, sorted again), closes those the running life forgot
 * that are still in it, and notes what the manager holds now. Until fdstore_manager_ready, this
 * life is not the service's main process, whose notifications alone the manager takes
 * (NotifyAccess=main): nothing is sent to it (fdstore_manager_wait) — what is kept waits, what
 * is forgotten is remembered, a barrier returns at once — and fdstore_manager_ready sends what
 * was forgotten, and has fdstore_flush send what was kept (a few at every call, from then on).
 */
void fdstore_handed_init(const struct fdstore_fd *fds, unsigned n);
int fdstore_handed_merge(struct fdstore_fd **fds, unsigned *n, const struct fdstore_fd *added, unsigned nadded,
			 const fdstore_name *removed, unsigned nremoved, const fdstore_name *held, unsigned nheld);
void fdstore_manager_wait(void);
void fdstore_manager_ready(void);

/*
 * Re-execution, in two steps. fdstore_exec_prepare, while the daemon still serves: keep a few fd
 * numbers above the kept fds for the exec's own (-errno when the daemon has none to spare: the
 * restart is refused and nothing changed). fdstore_exec: replace this process by the executable
 * open at exe_fd with argv, passing the kept fds from fd 3 on with LISTEN_PID (our own: exec
 * keeps it) and LISTEN_FDS set as systemd would, and their names in a sealed memfd named by
 * HUGEPOOLD_FDNAMES_FD; if that exec fails, the same with fallback_fd (this life's own binary,
 * so that the daemon comes back as it was). Returns only when both failed. The fds are the
 * callers' own, so none may be closed before while it is kept (the daemon ends by this exec, not
 * by tearing down: boot_leave). A kept fd already at its number stays there, the others are
 * copied to the numbers left (dup2): after a re-execution, where every one came from 3 on, none
 * moves.
 */
int fdstore_exec_prepare(void);
int fdstore_exec(int exe_fd, int fallback_fd, char *const argv[]);

#endif
