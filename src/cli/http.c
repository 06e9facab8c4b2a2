/* SPDX-License-Identifier: MIT */
/*
 * http.c - see http.h. Parsing: the end of the head is the first blank line; the request line's
 * three words, then header lines "Name: value", of which only Accept matters. Status codes and
 * reasons come from one table (http_reason).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http.h"

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

/*
 * The end of the head in buf[0..n): just after "\r\n\r\n" or "\n\n"; NULL if not there yet.
 * The search starts at from: what was searched before, but for its last 3 bytes.
 */
static char *head_end(char *buf, size_t n, size_t from)
{
	for (size_t i = from > 3 ? from - 3 : 0; i + 1 < n; i++) {
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

int http_request_parse(char *buf, size_t n, size_t *searched, bool eof, struct http_request *req)
{
	char *end = head_end(buf, n, *searched);

	*searched = n;
	*req = (struct http_request){ .status = 400 };
	if (end) {
		parse(buf, end, req);
		return 1;
	}
	/* too long, or cut short: 400 */
	return n >= HTTP_REQUEST_MAX || eof;
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

const char *http_error_body(int status)
{
	static char text[64];

	snprintf(text, sizeof(text), "%d %s\n", status, http_reason(status));
	return text;
}

size_t http_answer_head(char *hdr, int status, const char *content_type, size_t len)
{
	int n;

	if (status != 200) {
		content_type = "text/plain; charset=utf-8";
		len = strlen(http_error_body(status));
	}
	n = snprintf(hdr, HTTP_HEAD_MAX,
		     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%sConnection: close\r\n\r\n", status,
		     http_reason(status), content_type, len, status == 405 ? "Allow: GET, HEAD\r\n" : "");
	return n < 0 ? 0 : (size_t)n < HTTP_HEAD_MAX ? (size_t)n : HTTP_HEAD_MAX - 1;
}
