/* SPDX-License-Identifier: MIT */
/*
 * size.h - parse and format byte sizes ("64M", "1G", "4096") for the config file, the CLI and
 * the benchmarks. Suffixes are binary (K = 1024). Pure functions, no state.
 */
#ifndef HP_SIZE_H
#define HP_SIZE_H

#include <stddef.h>
#include <stdint.h>

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
