/* SPDX-License-Identifier: MIT */
/*
 * format.h - how hugepoolctl writes values as text for people: wall-clock times, durations, the
 * three encodings of a journal record's payload (an escaped string, hexadecimal, base64), and
 * the daemon's strings escaped for a terminal.
 * Sizes are size_format() in size.h. No state; the *_format functions fill the caller's buffer
 * and return it, so they fit in a printf argument list.
 */
#ifndef HP_CLI_FORMAT_H
#define HP_CLI_FORMAT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* CLOCK_REALTIME ns as local time in ISO 8601, "2026-11-22T09:30:00+01:00"; "-" for 0. */
const char *time_format(uint64_t ns, char *buf, size_t len);

/* "3d 4h 5m 6s", leaving out leading zero units. */
const char *duration_format(uint64_t s, char *buf, size_t len);

/* A span of ns in the largest unit it reaches, as hugepoold.conf writes durations: "500 us", "2 ms", "1.5 s". */
const char *span_format(uint64_t ns, char *buf, size_t len);

/*
 * The valid UTF-8 character at p (n > 0 bytes left): its length, and its code point in *ret_cp;
 * 0 when none starts there (ASCII, a stray continuation byte, an overlong form, a surrogate,
 * past U+10FFFF, cut short). The one UTF-8 decoder of the text and the JSON hugepoolctl prints.
 */
size_t utf8_decode(const unsigned char *p, size_t n, uint32_t *ret_cp);

/* A payload as a quoted string: printable ASCII as is, the rest as \n, \t, \r, \\, \" or \xNN. */
void print_escaped(FILE *f, const unsigned char *p, size_t n);

/*
 * A string the daemon sent (a name, a reason, an error text: whoever answers on the socket may
 * have written it), safe to print as text: valid UTF-8 as it is, but control characters (C0,
 * DEL, C1), the bytes of invalid UTF-8 and the backslash escaped as print_escaped does them, so
 * nothing in it can move the cursor, clear the screen, set the title or end a line. Cut on a
 * whole character to fit len (> 0) bytes with the NUL; returns buf. --json needs none of it:
 * json_string escapes on its own.
 */
const char *text_escape(const char *s, char *buf, size_t len);

/* Room for text_escape of any string libhugepool hands out (at most 256 bytes, each \xNN). */
#define TEXT_ESCAPED_MAX (4 * 256 + 1)

/* text_escape(s) into a buffer that lives to the end of the enclosing block: for printf's arguments. */
#define ESCAPED(s) text_escape((s), (char[TEXT_ESCAPED_MAX]){ 0 }, TEXT_ESCAPED_MAX)

/* Two lowercase hex digits a byte, nothing between them. */
void print_hex(FILE *f, const unsigned char *p, size_t n);

/* RFC 4648 base64, with padding. */
void print_base64(FILE *f, const unsigned char *p, size_t n);

#endif
