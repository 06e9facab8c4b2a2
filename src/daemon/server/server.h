/* SPDX-License-Identifier: MIT */
/*
 * server.h - hugepoold's serving side: the listening socket, the connected clients, and the
 * one event loop (epoll) that owns them, the lease table and the status counters.
 *
 * server_open() binds the socket (so main can report READY=1 only once clients can connect);
 * server_run() serves until SIGTERM or SIGINT, then sends what its clients wait for (a moment at
 * most) and leaves the warm state as it is for the next life. Everything here runs on the main thread except
 * the recycler, which server.c starts and stops (see recycler.h).
 */
#ifndef HP_SERVER_H
#define HP_SERVER_H

#include "config.h"
#include "fdstore.h"
#include "journal.h"
#include "proto.h"
#include "pool.h"
#include "spill.h"
#include "warm.h"

struct server;

/*
 * What the previous life of the daemon handed over that the server may take: its listening
 * socket (-1: none) and its connections, as its state (prev, NULL: none) describes them, out of
 * fds (fdstore_take). The server counts what it took and what it had to close.
 */
struct server_handover {
	int listen_fd;
	struct warm_prev *prev;
	struct fdstore_fd *fds;
	unsigned nfds;
	unsigned adopted, closed; /* connections */
	/*
	 * A take-over's next life preparing from the snapshot (takeover.h): the connections in the
	 * middle of a request there are left as they are, nothing is published, no acquire queued
	 * again, no retired buffer let go: server_takeover_apply and server_takeover_finish do
	 * that once the running life stopped.
	 */
	bool prepare;
};

/*
 * journals, spill and warm: made by main, still main's to free (after server_free). The
 * listening socket the previous life left is taken over if it is the configured one, else
 * closed and a new one bound; it is kept in the fd store as "listen", and a socket kept there
 * is not unlinked when the server ends (the next life serves it). Each connection is kept as
 * "conn.<id>" with its record in warm. h may be NULL.
 */
int server_open(const struct config *cfg, struct pool *pool, struct journal **journals, unsigned njournals,
		struct spill *spill, struct warm *warm, struct server_handover *h, struct server **ret);
/*
 * 0 after SIGTERM/SIGINT; SERVER_REEXEC when a restart was asked: main re-executes the daemon;
 * SERVER_TAKEOVER when a restart by take-over was (takeover.h) and the next life is prepared:
 * main lets the connections' journal writers go (server_drop_writers), closes the journals and
 * calls server_takeover_go.
 */
#define SERVER_REEXEC 1
#define SERVER_TAKEOVER 2
int server_run(struct server *s);
/*
 * Close every connection's journal writers: the journals close before the server is freed (a
 * take-over's running life closes them for the next life to recover), and a writer must not
 * outlive its journal. The connections that held them are closed by the next life.
 */
void server_drop_writers(struct server *s);
/* When server_run stopped serving (CLOCK_MONOTONIC ns). */
uint64_t server_stopped_at(const struct server *s);
/*
 * Hand over what changed since the snapshot and wait until the next life has taken over. 0: it
 * did (its pid in *ret_pid; the manager was told MAINPID=, the next life that it is the main
 * process): this life ends; or, where the next life hands the service back (restart = exec), it
 * was asked to (BACK), and this life becomes its binary again (reexec_back) on the channel in
 * *ret_back with the nice in *ret_nice (*ret_back is -1 otherwise). Else -EXDEV with why in why:
 * the next life refused, failed or went away, and this life re-executes itself in place instead
 * (reexec_run), which takes the newest published state over. die_after_go: killed once GO is
 * sent (the tests).
 */
int server_takeover_go(struct server *s, bool die_after_go, pid_t *ret_pid, int *ret_back, int *ret_nice, char *why,
		       size_t len);
/*
 * The next life's side of a take-over, once GO came: apply what changed since the snapshot
 * (takeover.h's delta; prev is read again where records changed, from prev_fd, the running
 * life's state memfd; the fds that came with it become h's). 0; or -EXDEV with why: a change this life cannot take over (it says
 * REFUSED, and the running life re-executes itself instead); other negative errnos: a failure.
 */
struct takeover_delta;
int server_takeover_apply(struct server *s, struct server_handover *h, int prev_fd, struct takeover_delta *d,
			  char *why, size_t len);
/* Then, journals open: retire, release and publish what a start does, queue the acquires again. */
void server_takeover_finish(struct server *s, struct server_handover *h, unsigned njournals);
/*
 * Taken over: the channel to the previous life stays polled until it says this life is the
 * service's main process; then the hand-over's fds nobody took (fds, the server's now) are
 * closed and the manager told what was held back (notify_hold, fdstore_manager_wait), and
 * `ready` (READY=1 ...).
 */
void server_wait_main(struct server *s, int chan, const char *ready, struct fdstore_fd *fds, unsigned nfds);

/*
 * The end of this process, stopped (server_run returned 0 or SERVER_REEXEC): what the exit or
 * the exec does not do itself: the restart being checked or prepared cancelled, the journal
 * writers let go (main closes the journals next), the socket's path unlinked unless a next life
 * serves it, and before an exec the closer's threads held (closer_hold: the exec places the fds
 * it hands over at numbers a queued close could name). The rest (connections, fds, memory,
 * threads) goes with the process: every fd is close-on-exec, and a stopped server changes
 * neither its state nor its files (server_quiesce). server_free after it still frees, for a
 * re-execution that failed.
 */
void server_leave(struct server *s, bool exec);

/*
 * restart = exec (the pid kept by two take-overs) answers the connection that asked once the
 * service is coming back; should it not (the next life refused at GO, and this life re-executes
 * in place instead), server_restart_unanswered says which one waits (its conn_id; 0: none) for
 * the life after to answer with server_answer_restart (the restart went through).
 */
uint64_t server_restart_unanswered(const struct server *s);
void server_answer_restart(struct server *s, uint64_t conn_id);

/* For status: how this life started. */
void server_set_start(struct server *s, const struct proto_status_start *start);
void server_free(struct server *s);

#endif
