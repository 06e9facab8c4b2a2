/* SPDX-License-Identifier: MIT */
/*
 * manager.h - the tests' service manager: the part of systemd a daemon talks to.
 *
 * A manager owns a notify socket ($NOTIFY_SOCKET for the daemons it starts) and a thread that
 * reads it for as long as the manager lives, across daemon lives, as PID 1 would: READY=1 is
 * remembered; with a file descriptor store (store_max > 0, FileDescriptorStoreMax=) FDSTORE=1
 * keeps the fds under FDNAME (an fd already kept, the same open file, is not kept twice),
 * FDSTOREREMOVE=1 closes those of that name, FDPOLL=0 exempts an fd from polling, and an fd
 * that is polled is dropped once it hangs up (POLLHUP/POLLERR, a client that closed its
 * connection); BARRIER=1 closes the fd it carries after everything before it was done. Without
 * a store, fds sent are closed at once (systemd ignores them the same way).
 *
 * MAINPID= names the service's main process from then on (a take-over, takeover.h): manager_main_pid.
 *
 * manager_fds() lays the kept fds out for the next start from fd 3 with LISTEN_FDS,
 * LISTEN_FDNAMES (LISTEN_PID is the child's pid): harness.c calls it in the forked child.
 */
#ifndef HP_TEST_MANAGER_H
#define HP_TEST_MANAGER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct manager;

/* A manager listening on path. */
int manager_new(const char *path, unsigned store_max, struct manager **ret);
void manager_free(struct manager *m);

/* Forget READY=1 (before a new start); wait at most timeout_ms for READY=1: has it come since? */
void manager_reset_ready(struct manager *m);
bool manager_wait_ready(struct manager *m, int timeout_ms);

/* The pid the last MAINPID= named since manager_reset_ready (0: none). */
pid_t manager_main_pid(struct manager *m);

/* FDSTORE=1 datagrams received since the last manager_reset_ready (this life's), duplicates too. */
unsigned manager_stores(struct manager *m);
/* Fds kept now; with a name, those of that name. */
unsigned manager_count(struct manager *m, const char *name_prefix);

/*
 * For the child of fork(): put the kept fds at 3.., and fill env (at least 3 entries of 64 +
 * the names' length) with LISTEN_PID=pid, LISTEN_FDS, LISTEN_FDNAMES. Uses no malloc and no
 * lock (call it after fork in the child, having called manager_prepare before the fork).
 * manager_prepare holds the manager's lock until manager_layout_free (in the parent, after the
 * fork), so that the kept fds the child moves are the ones it names.
 */
struct manager_layout;
struct manager_layout *manager_prepare(struct manager *m);
void manager_layout_child(struct manager_layout *l, char **env, unsigned *nenv);
void manager_layout_free(struct manager_layout *l);

/* A dup of the first kept fd whose name starts with name_prefix, -1 if none (for attacks). */
int manager_dup(struct manager *m, const char *name_prefix);

/* The name of the first kept fd whose name starts with name_prefix (false if none). */
bool manager_name(struct manager *m, const char *name_prefix, char *name, size_t len);
/* Put fd in the place of the kept fd named name (an attack on the store); -ENOENT if none. */
int manager_swap(struct manager *m, const char *name, int fd);

/* Drop every kept fd (systemctl stop: the store is flushed). */
void manager_flush(struct manager *m);

#endif
