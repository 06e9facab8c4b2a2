/* SPDX-License-Identifier: MIT */
/*
 * format.c - how hugepoolctl writes values as text (see format.h): times, durations, record
 * payloads and the daemon's strings, both escaped by one rule (escape_next). Byte sizes come
 * from src/common/size.c, shared with the daemon.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "format.h"

const char *time_format(uint64_t ns, char *buf, size_t len)
{
	time_t t = (time_t)(ns / 1000000000u);
	struct tm tm;
	size_t n;

	if (ns == 0 || !localtime_r(&t, &tm) || (n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S%z", &tm)) < 5 ||
	    (buf[n - 5] != '+' && buf[n - 5] != '-') || n + 2 > len) {
		snprintf(buf, len, "-");
		return buf;
	}
	/* %z gives +hhmm; ISO 8601's extended format wants +hh:mm */
	memmove(buf + n - 1, buf + n - 2, 3);
	buf[n - 2] = ':';
	return buf;
}

const char *duration_format(uint64_t s, char *buf, size_t len)
{
	uint64_t d = s / 86400, h = s / 3600 % 24, m = s / 60 % 60, sec = s % 60;

	if (d)
		snprintf(buf, len, "%" PRIu64 "d %" PRIu64 "h %" PRIu64 "m %" PRIu64 "s", d, h, m, sec);
	else if (h)
		snprintf(buf, len, "%" PRIu64 "h %" PRIu64 "m %" PRIu64 "s", h, m, sec);
	else if (m)
		snprintf(buf, len, "%" PRIu64 "m %" PRIu64 "s", m, sec);
	else
		snprintf(buf, len, "%" PRIu64 "s", sec);
	return buf;
}

const char *span_format(uint64_t ns, char *buf, size_t len)
{
	if (ns >= 1000000000)
		snprintf(buf, len, "%g s", (double)ns / 1e9);
	else if (ns >= 1000000)
		snprintf(buf, len, "%g ms", (double)ns / 1e6);
	else if (ns >= 1000)
		snprintf(buf, len, "%g us", (double)ns / 1e3);
	else
		snprintf(buf, len, "%" PRIu64 " ns", ns);
	return buf;
}

size_t utf8_decode(const unsigned char *p, size_t n, uint32_t *ret_cp)
{
	size_t len = p[0] >= 0xf0 ? 4 : p[0] >= 0xe0 ? 3 : 2;
	uint32_t cp = p[0] & (0x7fu >> len);

	/* no character starts with ASCII, a continuation byte, 0xc0 or 0xc1 (overlong), or 0xf5 on */
	if (p[0] < 0xc2 || p[0] > 0xf4 || n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (p[i] & 0x3f);
	}
	/* overlong, past Unicode, or a surrogate */
	if (cp < (len == 2 ? 0x80u : len == 3 ? 0x800u : 0x10000u) || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	*ret_cp = cp;
	return len;
}

/*
 * The one escaping rule of hugepoolctl's text: the next character of p[0..n) (n > 0) as it is
 * printed, in out (*ret_len bytes, at most 4); returns the bytes of p it stands for. Printable
 * ASCII is itself; newline, tab, carriage return and the backslash are \n, \t, \r and \\, the
 * quote \" when quote is set; with utf8, a valid UTF-8 character that is no control is itself;
 * every other byte is \xNN.
 */
static size_t escape_next(const unsigned char *p, size_t n, bool utf8, bool quote, char *out, size_t *ret_len)
{
	static const char digits[] = "0123456789abcdef", short_from[] = "\n\t\r\\\"", short_to[] = "ntr\\\"";
	uint32_t cp = 0;
	size_t len = utf8 ? utf8_decode(p, n, &cp) : 0;
	const char *k;

	/* U+0080..U+009F are controls too (C1): terminals obey them */
	if (len && cp >= 0xa0) {
		memcpy(out, p, len);
		*ret_len = len;
		return len;
	}
	/* the short forms; the quote only where the text is quoted */
	k = memchr(short_from, p[0], quote ? sizeof(short_from) - 1 : sizeof(short_from) - 2);
	if (k) {
		out[0] = '\\';
		out[1] = short_to[k - short_from];
		*ret_len = 2;
	} else if (p[0] >= 0x20 && p[0] < 0x7f) {
		out[0] = (char)p[0];
		*ret_len = 1;
	} else {
		out[0] = '\\';
		out[1] = 'x';
		out[2] = digits[p[0] >> 4];
		out[3] = digits[p[0] & 15];
		*ret_len = 4;
	}
	return 1;
}

void print_escaped(FILE *f, const unsigned char *p, size_t n)
{
	fputc('"', f);
	for (size_t i = 0; i < n;) {
		char out[4];
		size_t len;

		i += escape_next(p + i, n - i, false, true, out, &len);
		fwrite(out, 1, len, f);
	}
	fputc('"', f);
}

const char *text_escape(const char *s, char *buf, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s), at = 0;

	for (size_t i = 0; i < n;) {
		char out[4];
		size_t k, used = escape_next(p + i, n - i, true, false, out, &k);

		if (at + k >= len)
			break; /* cut on a whole character */
		memcpy(buf + at, out, k);
		at += k;
		i += used;
	}
	buf[at] = '\0';
	return buf;
}

void print_hex(FILE *f, const unsigned char *p, size_t n)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		fputc(digits[p[i] >> 4], f);
		fputc(digits[p[i] & 15], f);
	}
}

void print_base64(FILE *f, const unsigned char *p, size_t n)
{
	static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t i;

	for (i = 0; i + 3 <= n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];

		fputc(digits[v >> 18], f);
		fputc(digits[(v >> 12) & 63], f);
		fputc(digits[(v >> 6) & 63], f);
		fputc(digits[v & 63], f);
	}
	if (n - i == 1) {
		uint32_t v = (uint32_t)p[i] << 16;

		fprintf(f, "%c%c==", digits[v >> 18], digits[(v >> 12) & 63]);
	} else if (n - i == 2) {
		uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8;

		fprintf(f, "%c%c%c=", digits[v >> 18], digits[(v >> 12) & 63], digits[(v >> 6) & 63]);
	}
}
