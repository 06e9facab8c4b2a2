/* SPDX-License-Identifier: MIT */
/*
 * format.h - how hugepoolctl writes values as text for people: wall-clock times, durations and
 * the three encodings of a journal record's payload (an escaped string, hexadecimal, base64).
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

/* A payload as a quoted string: printable ASCII as is, the rest as \n, \t, \r, \\, \" or \xNN. */
void print_escaped(FILE *f, const unsigned char *p, size_t n);

/* Two lowercase hex digits a byte, nothing between them. */
void print_hex(FILE *f, const unsigned char *p, size_t n);

/* RFC 4648 base64, with padding. */
void print_base64(FILE *f, const unsigned char *p, size_t n);

#endif
