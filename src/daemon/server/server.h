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
	const struct warm_prev *prev;
	struct fdstore_fd *fds;
	unsigned nfds;
	unsigned adopted, closed; /* connections */
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
/* 0 after SIGTERM/SIGINT; SERVER_REEXEC when a restart was asked: main re-executes the daemon. */
#define SERVER_REEXEC 1
int server_run(struct server *s);
/* For status: how this life started. */
void server_set_start(struct server *s, const struct proto_status_start *start);
void server_free(struct server *s);

#endif
