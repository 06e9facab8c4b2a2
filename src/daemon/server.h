/* SPDX-License-Identifier: MIT */
/*
 * server.h - hugepoold's serving side: the listening socket, the connected clients, and the
 * one event loop (epoll) that owns them, the lease table and the status counters.
 *
 * server_open() binds the socket (so main can report READY=1 only once clients can connect);
 * server_run() serves until SIGTERM or SIGINT. Everything here runs on the main thread except
 * the recycler, which server.c starts and stops (see recycler.h).
 */
#ifndef HP_SERVER_H
#define HP_SERVER_H

#include "config.h"
#include "journal.h"
#include "pool.h"
#include "spill.h"
#include "warm.h"

struct server;

/*
 * journals, spill and warm: made by main, still main's to free (after server_free). listen_fd:
 * a listening socket the previous life left (fdstore.h), taken over if it is the configured
 * one, else closed; -1: bind a new one. The listening socket is kept in the fd store as
 * "listen"; a socket kept there is not unlinked when the server ends (the next life serves it).
 */
int server_open(const struct config *cfg, struct pool *pool, struct journal **journals, unsigned njournals,
		struct spill *spill, struct warm *warm, int listen_fd, struct server **ret);
int server_run(struct server *s);
void server_free(struct server *s);

#endif
