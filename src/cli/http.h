/* SPDX-License-Identifier: MIT */
/*
 * http.h - the HTTP of `hugepoolctl metrics --http`, without the connections (http_server.h has
 * those): just enough HTTP/1.x for a scraper. A request head is complete at its blank line and
 * at most HTTP_REQUEST_MAX bytes; it is checked (GET or HEAD, of /metrics, with an Accept header
 * that may ask for OpenMetrics) into what to answer. An answer is a status line, a Content-Type,
 * a Content-Length and Connection: close, then the body (none for HEAD), an error's a one-line
 * text. No state, no allocation: the server feeds bytes in and writes what comes out.
 */
#ifndef HP_CLI_HTTP_H
#define HP_CLI_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#define HTTP_REQUEST_MAX 8192 /* bytes of a request head: more is answered 400 */
#define HTTP_TIMEOUT_MS 10000 /* to read the request head, and again to write the answer */
#define HTTP_HEAD_MAX 512 /* the bytes of an answer's head (http_answer_head) */

struct http_request {
	int status; /* 0: GET or HEAD of /metrics; else the status to answer: 400, 404, 405, 408 */
	bool head; /* HEAD: the answer without its body */
	bool openmetrics; /* Accept prefers application/openmetrics-text (version 1.0.0) */
};

/*
 * The request whose head is in buf[0..n): 0 while it is not complete and may still be (n below
 * HTTP_REQUEST_MAX, eof false); else 1 with *req saying what to answer (400 for a head too long,
 * cut short by eof, or malformed). Writes into buf (NULs at the ends of lines). *searched (0 at
 * first) is how far earlier calls looked for the head's end: each byte is looked at a bounded
 * number of times however the head arrives, a byte a read.
 */
int http_request_parse(char *buf, size_t n, size_t *searched, bool eof, struct http_request *req);

/*
 * Does this Accept header value prefer OpenMetrics 1.0.0 to the Prometheus text format? (q
 * values weighed; a tie, a wildcard or no header: the text format.)
 */
bool http_prefers_openmetrics(const char *accept);

/*
 * The head of an answer of status into hdr (HTTP_HEAD_MAX bytes): its length. For 200 the body
 * is len bytes of content_type; for an error the body is http_error_body's, whatever is passed.
 * For 405 it says Allow: GET, HEAD.
 */
size_t http_answer_head(char *hdr, int status, const char *content_type, size_t len);

/* The body of an error answer of status: one line of text (static). */
const char *http_error_body(int status);

#endif
