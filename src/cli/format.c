/* SPDX-License-Identifier: MIT */
/*
 * format.c - how hugepoolctl writes values as text (see format.h): times, durations and record
 * payloads. Byte sizes come from src/common/size.c, shared with the daemon.
 */
#include <inttypes.h>
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

void print_escaped(FILE *f, const unsigned char *p, size_t n)
{
	fputc('"', f);
	for (size_t i = 0; i < n; i++) {
		switch (p[i]) {
		case '"':
		case '\\':
			fprintf(f, "\\%c", p[i]);
			break;
		case '\n':
			fputs("\\n", f);
			break;
		case '\t':
			fputs("\\t", f);
			break;
		case '\r':
			fputs("\\r", f);
			break;
		default:
			if (p[i] < 0x20 || p[i] >= 0x7f)
				fprintf(f, "\\x%02x", p[i]);
			else
				fputc(p[i], f);
		}
	}
	fputc('"', f);
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
