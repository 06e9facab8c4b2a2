/* SPDX-License-Identifier: MIT */
/*
 * http_server.h - the connections of `hugepoolctl metrics --http`: one process, one thread, one
 * poll() loop that serves every scraper of the listening sockets a service manager handed over
 * (systemd's Accept=no), or the one connection on standard input and output (inetd, Accept=yes).
 *
 * Whoever reaches the port is a peer, and on loopback that is every local user, whom TCP does not
 * name: so no peer can hold what another needs, and none can stop the loop. Each connection has
 * HTTP_TIMEOUT_MS for its request head and again for its answer, then a moment to read what it
 * still sends; at most HTTP_CONNS are open, and a new one beyond them closes the oldest that has
 * not finished (the oldest still sending its request first), so silent or slow connections only
 * ever push each other out, and a scraper that asks at once is answered. The listeners are never
 * closed and the loop never exits by anything a peer does. The body of an answer comes from the
 * caller (body_fn), once per format per turn of the loop, shared by every request that turn
 * completed: a flood of requests costs the daemon one status a turn.
 */
#ifndef HP_CLI_HTTP_SERVER_H
#define HP_CLI_HTTP_SERVER_H

#include <stdbool.h>
#include <stddef.h>

#define HTTP_CONNS 64 /* connections open at once (+ the listeners: the unit's LimitNOFILE covers it) */
#define HTTP_ACCEPTS_PER_TURN 16 /* so that requests already in are read between batches */

/* An answer's body for a request that passed: 0 and a malloc'd *ret_buf of *ret_len bytes, or -errno (500). */
typedef int (*http_body_fn)(void *arg, bool openmetrics, char **ret_buf, size_t *ret_len);

/* How the content type of a body is named (expo_content_type's). */
typedef const char *(*http_type_fn)(bool openmetrics);

/*
 * Serve the listening sockets lfds[0..nl) until a fatal error of the process's own (returned as
 * -errno; a peer's never is); or, with nl 0, the one connection read from in and written to out,
 * returning once it is answered (0) or gone.
 */
int http_serve(const int *lfds, unsigned nl, int in, int out, http_body_fn body, http_type_fn type, void *arg);

#endif
