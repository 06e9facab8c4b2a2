/* SPDX-License-Identifier: MIT */
/*
 * crc32c.c - see crc32c.h. Debian ships no C library for CRC-32C (only a Python one), and the
 * instruction makes it a dozen lines, so it is written here (docs/ARCHITECTURE.md).
 *
 * The software path is slicing-by-8 over tables built once under pthread_once. The hardware
 * path folds 8 bytes per instruction. Both work on the reflected, inverted form: the caller's
 * crc is inverted on entry and on exit so that calls can be chained.
 */
#include <pthread.h>
#include <string.h>

#include "crc32c.h"

#define POLY 0x82F63B78u /* 0x1EDC6F41 reflected */

static uint32_t table[8][256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void table_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ POLY : c >> 1;
		table[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xff];
}

uint32_t crc32c_sw(uint32_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	pthread_once(&table_once, table_init);
	crc = ~crc;
	while (len >= 8) {
		uint64_t v;

		memcpy(&v, p, 8);
		v ^= crc;
		crc = table[7][v & 0xff] ^ table[6][(v >> 8) & 0xff] ^ table[5][(v >> 16) & 0xff] ^
		      table[4][(v >> 24) & 0xff] ^ table[3][(v >> 32) & 0xff] ^ table[2][(v >> 40) & 0xff] ^
		      table[1][(v >> 48) & 0xff] ^ table[0][v >> 56];
		p += 8;
		len -= 8;
	}
	while (len--)
		crc = (crc >> 8) ^ table[0][(crc ^ *p++) & 0xff];
	return ~crc;
}

#if defined(__x86_64__)
#include <nmmintrin.h>

__attribute__((target("sse4.2"))) static uint32_t crc32c_hw(uint32_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	uint64_t c = ~crc;

	while (len >= 8) {
		uint64_t v;

		memcpy(&v, p, 8);
		c = _mm_crc32_u64(c, v);
		p += 8;
		len -= 8;
	}
	while (len--)
		c = _mm_crc32_u8((uint32_t)c, *p++);
	return ~(uint32_t)c;
}

bool crc32c_hw_available(void)
{
	return __builtin_cpu_supports("sse4.2");
}
#else
static uint32_t crc32c_hw(uint32_t crc, const void *buf, size_t len)
{
	return crc32c_sw(crc, buf, len);
}

bool crc32c_hw_available(void)
{
	return false;
}
#endif

uint32_t crc32c(uint32_t crc, const void *buf, size_t len)
{
	/* a data race on first use would only make two threads compute the same answer */
	static int hw = -1;

	if (__builtin_expect(hw < 0, 0))
		__atomic_store_n(&hw, crc32c_hw_available(), __ATOMIC_RELAXED);
	return __atomic_load_n(&hw, __ATOMIC_RELAXED) ? crc32c_hw(crc, buf, len) : crc32c_sw(crc, buf, len);
}
