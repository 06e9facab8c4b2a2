/* SPDX-License-Identifier: MIT */
/*
 * size.c - byte sizes as people write them ("2M", "1GiB", "4096") and as we print them back.
 *
 * The config file, hugepoolctl and the benchmarks all take sizes from humans, so they share one
 * strict parser: a typo such as "2,5G" or "0x1000" is an error, never a silently different
 * number. Suffixes are binary (K = 1024) because every size here ends up as a multiple of a page.
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

int size_parse(const char *s, uint64_t *ret)
{
	const char *p = s;
	uint64_t v = 0;
	bool overflow = false;
	int shift = 0;

	if (!s || *s < '0' || *s > '9')
		return -EINVAL;

	/* Keep scanning after an overflow so that "99999999999999999999X" is still -EINVAL. */
	for (; *p >= '0' && *p <= '9'; p++) {
		unsigned d = (unsigned)(*p - '0');

		if (v > (UINT64_MAX - d) / 10)
			overflow = true;
		else
			v = v * 10 + d;
	}

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

	if (overflow || (shift && v > (UINT64_MAX >> shift)))
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
