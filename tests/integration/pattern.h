/* SPDX-License-Identifier: MIT */
/*
 * pattern.h - record contents as a function of a seed, for the journal tests
 * (tests/integration/test_journal_*.c, tests/unit/test_recovery.c): a test remembers only
 * (lsn, seed, len) of what it appended and checks every byte it reads back. Header-only.
 */
#ifndef HP_TEST_PATTERN_H
#define HP_TEST_PATTERN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

/* The content of a record: len bytes determined by seed (the seed itself first, if room). */
static inline void pattern(void *buf, size_t len, uint64_t seed)
{
	uint8_t *p = buf;
	uint64_t s = mix(seed ^ 0x9e3779b97f4a7c15ull);
	size_t i = 0;

	if (len >= 8) {
		memcpy(p, &seed, 8);
		i = 8;
	}
	for (; i < len; i += 8) {
		s = mix(s + i);
		memcpy(p + i, &s, (len - i < 8 ? len - i : 8));
	}
}

#endif
