/* SPDX-License-Identifier: MIT */
/*
 * http.h - the one request and the one answer of `hugepoolctl metrics --http`, on a connection
 * a service manager accepted and handed over as standard input and output (systemd's
 * Accept=yes sockets). Just enough HTTP/1.x for a scraper: the request head is read with a
 * bound on its size and on the time it may take, then checked (GET or HEAD, of /metrics, with
 * an Accept header that may ask for OpenMetrics); the answer carries a Content-Length and
 * closes the connection. A peer that sends too much, too slowly or nothing sensible gets an
 * error status, never a daemon connection: the caller asks the daemon only for a request that
 * passed. No state survives a call, no memory is kept: the process ends after one answer.
 */
#ifndef HP_CLI_HTTP_H
#define HP_CLI_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#define HTTP_REQUEST_MAX 8192 /* bytes of a request head: more is answered 400 */
#define HTTP_TIMEOUT_MS 10000 /* to read the request head, and again to write the answer */

struct http_request {
	int status; /* 0: GET or HEAD of /metrics; else the status to answer: 400, 404, 405, 408 */
	bool head; /* HEAD: the answer without its body */
	bool openmetrics; /* Accept prefers application/openmetrics-text (version 1.0.0) */
};

/*
 * Read one request head from fd, HTTP_REQUEST_MAX bytes at most, within timeout_ms, into *req
 * (status says what to answer). Returns 0, or -ECONNRESET when the peer went away before a
 * byte of a request came (nothing to answer), or another negative errno from reading.
 */
int http_read_request(int fd, int timeout_ms, struct http_request *req);

/*
 * Does this Accept header value prefer OpenMetrics 1.0.0 to the Prometheus text format? (q
 * values weighed; a tie, a wildcard or no header: the text format.)
 */
bool http_prefers_openmetrics(const char *accept);

/*
 * Answer on out: the status line of status, then (200) content_type and body, len bytes (but
 * for a HEAD request), or (an error) a one-line text body; Content-Length, Connection: close,
 * and for 405 Allow: GET, HEAD. Within timeout_ms. Then shuts writing down and reads what in
 * still holds for a moment, so that the peer gets the answer rather than a reset. Returns 0 or
 * a negative errno.
 */
int http_respond(int in, int out, int status, const char *content_type, const void *body, size_t len, bool head,
		 int timeout_ms);

#endif
