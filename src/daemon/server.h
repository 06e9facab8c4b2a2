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

struct server;

/* journals and spill: opened by main, still main's to close (after server_free). */
int server_open(const struct config *cfg, struct pool *pool, struct journal **journals, unsigned njournals,
		struct spill *spill, struct server **ret);
int server_run(struct server *s);
void server_free(struct server *s);

#endif
