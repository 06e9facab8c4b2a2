/* SPDX-License-Identifier: MIT */
/*
 * http.c - see http.h. Reading: poll() with what is left of one deadline, read() into a buffer of
 * HTTP_REQUEST_MAX bytes until the blank line that ends the head. Parsing: the request line's
 * three words, then header lines "Name: value", of which only Accept matters. Writing: the
 * whole answer is one buffer written with poll() and its own deadline; SIGPIPE is the caller's
 * to ignore. Status codes and reasons come from one table (http_reason).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http.h"
#include "util.h"

#define LINGER_MS 1000 /* after the answer: how long what the peer still sends is read away */
#define LINGER_MAX (64u << 10)

static const char *http_reason(int status)
{
	switch (status) {
	case 200:
		return "OK";
	case 400:
		return "Bad Request";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 408:
		return "Request Timeout";
	}
	return "Internal Server Error";
}

static int ms_left(uint64_t deadline)
{
	uint64_t now = now_ns();

	return now >= deadline ? 0 : (int)((deadline - now + 999999) / 1000000);
}

/* Wait until fd is ready for events or the deadline: 1 ready, 0 timed out, or -errno. */
static int wait_fd(int fd, short events, uint64_t deadline)
{
	for (;;) {
		struct pollfd p = { .fd = fd, .events = events };
		int left = ms_left(deadline), r;

		if (left == 0)
			return 0;
		r = poll(&p, 1, left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r > 0)
			return 1;
	}
}

/* The end of the head in buf[0..n): just after "\r\n\r\n" or "\n\n"; NULL if not there yet. */
static char *head_end(char *buf, size_t n)
{
	for (size_t i = 0; i + 1 < n; i++) {
		if (buf[i] == '\n' && buf[i + 1] == '\n')
			return buf + i + 2;
		if (i + 3 < n && memcmp(buf + i, "\r\n\r\n", 4) == 0)
			return buf + i + 4;
	}
	return NULL;
}

/* The next line of [*p, end), its "\r\n" or "\n" cut off (NUL-terminated in place); NULL at the end. */
static char *next_line(char **p, char *end)
{
	char *line = *p, *nl;

	if (line >= end)
		return NULL;
	nl = memchr(line, '\n', (size_t)(end - line));
	if (!nl)
		return NULL;
	*p = nl + 1;
	if (nl > line && nl[-1] == '\r')
		nl--;
	*nl = '\0';
	return line;
}

/* Is the token tok (length n) a valid method or header name: visible ASCII but separators? */
static bool token_ok(const char *tok, size_t n)
{
	if (n == 0)
		return false;
	for (size_t i = 0; i < n; i++)
		if (tok[i] <= ' ' || tok[i] >= 127 || strchr("()<>@,;:\\\"/[]?={}", tok[i]))
			return false;
	return true;
}

/* The request line and the headers of the head [buf, end) into *req. */
static void parse(char *buf, char *end, struct http_request *req)
{
	char *p = buf, *line = next_line(&p, end), *method, *target, *version, *save = NULL;
	char accept[1024] = "";
	bool any_accept = false;

	req->status = 400;
	if (!line)
		return;
	method = strtok_r(line, " ", &save);
	target = strtok_r(NULL, " ", &save);
	version = strtok_r(NULL, " ", &save);
	if (!method || !target || !version || strtok_r(NULL, " ", &save) || !token_ok(method, strlen(method)) ||
	    strncmp(version, "HTTP/1.", 7) != 0 || (version[7] != '0' && version[7] != '1') || version[8])
		return;
	while ((line = next_line(&p, end)) && *line) {
		char *colon = strchr(line, ':'), *value;

		/* no name, or a folded line (obsolete, and a way to smuggle headers) */
		if (!colon || !token_ok(line, (size_t)(colon - line)))
			return;
		value = colon + 1;
		while (*value == ' ' || *value == '\t')
			value++;
		if ((size_t)(colon - line) == 6 && strncasecmp(line, "Accept", 6) == 0) {
			/* several Accept headers are one list */
			snprintf(accept + strlen(accept), sizeof(accept) - strlen(accept), "%s%s", any_accept ? "," : "",
				 value);
			any_accept = true;
		}
	}
	req->head = strcmp(method, "HEAD") == 0;
	if (!req->head && strcmp(method, "GET") != 0) {
		req->status = 405;
		return;
	}
	if (strcspn(target, "?") != strlen("/metrics") || strncmp(target, "/metrics", strlen("/metrics")) != 0) {
		req->status = 404;
		return;
	}
	req->openmetrics = http_prefers_openmetrics(accept);
	req->status = 0;
}

int http_read_request(int fd, int timeout_ms, struct http_request *req)
{
	uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000u;
	char buf[HTTP_REQUEST_MAX + 1];
	size_t n = 0;
	char *end;

	*req = (struct http_request){ .status = 400 };
	for (;;) {
		ssize_t k;
		int r = wait_fd(fd, POLLIN, deadline);

		if (r < 0)
			return r;
		if (r == 0) {
			req->status = 408;
			return 0;
		}
		k = read(fd, buf + n, HTTP_REQUEST_MAX - n);
		if (k < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (k < 0)
			return -errno;
		if (k == 0)
			return n ? 0 : -ECONNRESET; /* a part of a request: 400 */
		n += (size_t)k;
		end = head_end(buf, n);
		if (end) {
			parse(buf, end, req);
			return 0;
		}
		if (n == HTTP_REQUEST_MAX)
			return 0; /* too long: 400 */
	}
}

/* The q of one media range's parameters (";q=0.5;version=1.0.0"), and whether its version is ok. */
static double range_q(char *params, const char *want_version, bool *version_ok)
{
	char *save = NULL, *param;
	double q = 1.0;

	*version_ok = true;
	for (param = strtok_r(params, ";", &save); param; param = strtok_r(NULL, ";", &save)) {
		char *eq = strchr(param, '=');

		while (*param == ' ' || *param == '\t')
			param++;
		if (!eq)
			continue;
		*eq = '\0';
		for (char *t = eq - 1; t >= param && (*t == ' ' || *t == '\t'); t--)
			*t = '\0';
		eq++;
		while (*eq == ' ' || *eq == '\t')
			eq++;
		if (strcasecmp(param, "q") == 0) {
			char *e;

			q = strtod(eq, &e);
			if (e == eq || q < 0 || q > 1)
				q = 0;
		} else if (strcasecmp(param, "version") == 0 && want_version) {
			*version_ok = strncmp(eq, want_version, strlen(want_version)) == 0 &&
				      (eq[strlen(want_version)] == '\0' || eq[strlen(want_version)] == ' ');
		}
	}
	return q;
}

bool http_prefers_openmetrics(const char *accept)
{
	char copy[1024], *save = NULL, *range;
	double q_om = 0, q_text = 0;

	snprintf(copy, sizeof(copy), "%s", accept ? accept : "");
	for (range = strtok_r(copy, ",", &save); range; range = strtok_r(NULL, ",", &save)) {
		char *semi = strchr(range, ';'), *type = range, *t;
		bool ok;
		double q;

		if (semi)
			*semi = '\0';
		while (*type == ' ' || *type == '\t')
			type++;
		for (t = type + strlen(type); t > type && (t[-1] == ' ' || t[-1] == '\t'); t--)
			t[-1] = '\0';
		if (strcasecmp(type, "application/openmetrics-text") == 0) {
			q = range_q(semi ? semi + 1 : (char *)"", "1.0.0", &ok);
			if (ok && q > q_om)
				q_om = q;
		} else if (strcasecmp(type, "text/plain") == 0) {
			q = range_q(semi ? semi + 1 : (char *)"", "0.0.4", &ok);
			if (ok && q > q_text)
				q_text = q;
		} else if (strcasecmp(type, "text/*") == 0 || strcmp(type, "*/*") == 0) {
			q = range_q(semi ? semi + 1 : (char *)"", NULL, &ok);
			if (q > q_text)
				q_text = q;
		}
	}
	return q_om > 0 && q_om > q_text;
}

/* Write all of buf to fd before the deadline. */
static int write_all(int fd, const char *buf, size_t len, uint64_t deadline)
{
	while (len) {
		ssize_t k = write(fd, buf, len);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && errno == EAGAIN) {
			int r = wait_fd(fd, POLLOUT, deadline);

			if (r <= 0)
				return r < 0 ? r : -ETIMEDOUT;
			continue;
		}
		if (k < 0)
			return -errno;
		buf += k;
		len -= (size_t)k;
	}
	return 0;
}

/* After the answer: no more writing, and what the peer still sends read away, for a moment. */
static void linger(int in, int out)
{
	uint64_t deadline = now_ns() + LINGER_MS * 1000000ull;
	size_t drained = 0;
	char buf[4096];

	if (shutdown(out, SHUT_WR) < 0)
		return; /* not a socket (a test's pipe): nothing to reset */
	while (drained < LINGER_MAX && wait_fd(in, POLLIN, deadline) > 0) {
		ssize_t k = read(in, buf, sizeof(buf));

		if (k < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (k <= 0)
			break;
		drained += (size_t)k;
	}
}

int http_respond(int in, int out, int status, const char *content_type, const void *body, size_t len, bool head,
		 int timeout_ms)
{
	uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000u;
	char hdr[512], text[128];
	int n, r;

	if (status != 200) {
		n = snprintf(text, sizeof(text), "%d %s\n", status, http_reason(status));
		content_type = "text/plain; charset=utf-8";
		body = text;
		len = (size_t)n;
	}
	n = snprintf(hdr, sizeof(hdr),
		     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%sConnection: close\r\n\r\n", status,
		     http_reason(status), content_type, len, status == 405 ? "Allow: GET, HEAD\r\n" : "");
	/* non-blocking: a peer that does not read costs at most the deadline */
	fcntl(out, F_SETFL, fcntl(out, F_GETFL) | O_NONBLOCK);
	r = write_all(out, hdr, (size_t)n, deadline);
	if (r == 0 && !head)
		r = write_all(out, body, len, deadline);
	if (r == 0)
		linger(in, out);
	return r;
}
