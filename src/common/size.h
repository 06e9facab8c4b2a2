/* SPDX-License-Identifier: MIT */
/*
 * size.h - the one parser of numbers written as text: plain decimal counts and ids ("4096") and
 * byte sizes ("64M", "1G") for the config file, the environment, the daemon's own small files,
 * the CLI and the benchmarks; and the formatter of sizes. Suffixes are binary (K = 1024). Pure
 * functions, no state.
 */
#ifndef HP_SIZE_H
#define HP_SIZE_H

#include <stddef.h>
#include <stdint.h>

/*
 * Parse the decimal digits at the start of s: no sign, no spaces, no base prefix ("0755" is 755).
 * Sets *end to the first character after them. Returns 0 and sets *ret, or -EINVAL (s does not
 * start with a digit) or -ERANGE (more than 64 bits). *ret is untouched on failure.
 */
int decimal_prefix(const char *s, const char **end, uint64_t *ret);

/* The whole of s as decimal_prefix reads it, nothing after: 0, -EINVAL or -ERANGE. */
int decimal_parse(const char *s, uint64_t *ret);

/*
 * Parse a decimal byte count with an optional K, M, G or T suffix (case-insensitive, an optional
 * trailing "B" or "iB" is accepted: "2M", "2MiB", "2mb"). No sign, no fraction, no spaces inside.
 * Returns 0 and sets *ret, or -EINVAL (not a size) or -ERANGE (does not fit in 64 bits).
 * *ret is untouched on failure.
 */
int size_parse(const char *s, uint64_t *ret);

/* Format bytes as "512 B", "4.0 KiB", "1.5 GiB" into buf; returns buf. */
const char *size_format(uint64_t bytes, char *buf, size_t len);

#endif
