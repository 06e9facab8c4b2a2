/* SPDX-License-Identifier: MIT */
/*
 * size.c - numbers as people and files write them ("4096", "2M", "1GiB"), and sizes as we print
 * them back.
 *
 * The config file, the environment, the daemon's marker files, hugepoolctl and the benchmarks all
 * take numbers as text, so they share one strict parser: a typo such as "2,5G", "-1" or "0x1000"
 * is an error, never a silently different number (strtoul takes "-1" and " 7"). Suffixes are
 * binary (K = 1024) because every size here ends up as a multiple of a page.
 * Pure functions: no allocation, no state, safe from any thread.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>

#include "size.h"

static int unit_shift(char c)
{
	switch (c) {
	case 'k':
	case 'K':
		return 10;
	case 'm':
	case 'M':
		return 20;
	case 'g':
	case 'G':
		return 30;
	case 't':
	case 'T':
		return 40;
	default:
		return -1;
	}
}

int decimal_prefix(const char *s, const char **end, uint64_t *ret)
{
	const char *p = s;
	uint64_t v = 0;
	bool overflow = false;

	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	/* keep scanning after an overflow so that *end still points past all the digits */
	for (; *p >= '0' && *p <= '9'; p++) {
		unsigned d = (unsigned)(*p - '0');

		if (v > (UINT64_MAX - d) / 10)
			overflow = true;
		else
			v = v * 10 + d;
	}
	*end = p;
	if (overflow)
		return -ERANGE;
	*ret = v;
	return 0;
}

int decimal_parse(const char *s, uint64_t *ret)
{
	const char *end;
	uint64_t v;
	int r;

	r = decimal_prefix(s, &end, &v);
	if (r == -EINVAL || *end)
		return -EINVAL; /* "99999999999999999999X" too: not a number at all, however long its digits */
	if (r < 0)
		return r;
	*ret = v;
	return 0;
}

int size_parse(const char *s, uint64_t *ret)
{
	const char *p;
	uint64_t v = 0;
	int shift = 0, r;

	/* an overflow of the digits is only -ERANGE if the rest is a size: "99999999999999999999X" is -EINVAL */
	r = decimal_prefix(s, &p, &v);
	if (r == -EINVAL)
		return r;

	if (*p && unit_shift(*p) >= 0) {
		shift = unit_shift(*p++);
		if (*p == 'i' || *p == 'I') {
			/* "iB" only makes sense after a binary prefix, hence inside this branch. */
			p++;
			if (*p != 'b' && *p != 'B')
				return -EINVAL;
		}
	}
	if (*p == 'b' || *p == 'B')
		p++;
	if (*p)
		return -EINVAL;

	if (r == -ERANGE || (shift && v > (UINT64_MAX >> shift)))
		return -ERANGE;

	*ret = v << shift;
	return 0;
}

const char *size_format(uint64_t bytes, char *buf, size_t len)
{
	static const char *const units[] = { "KiB", "MiB", "GiB", "TiB" };
	unsigned i;

	if (bytes < 1024) {
		snprintf(buf, len, "%" PRIu64 " B", bytes);
		return buf;
	}

	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		unsigned shift = 10 * (i + 1);
		uint64_t unit = UINT64_C(1) << shift;
		uint64_t whole = bytes >> shift;
		/* rem < 2^40 so rem * 10 cannot overflow; integers avoid binary-float rounding. */
		uint64_t rem = bytes & (unit - 1);
		uint64_t tenth = (rem * 10 + unit / 2) >> shift;

		if (tenth == 10) {
			whole++;
			tenth = 0;
		}
		/* Rounding can carry 1023.96 KiB up to 1024.0 KiB: print 1.0 MiB instead. */
		if (whole < 1024 || i == sizeof(units) / sizeof(units[0]) - 1) {
			snprintf(buf, len, "%" PRIu64 ".%" PRIu64 " %s", whole, tenth, units[i]);
			break;
		}
	}
	return buf;
}
