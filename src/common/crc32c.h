/* SPDX-License-Identifier: MIT */
/*
 * crc32c.h - CRC-32C (Castagnoli, iSCSI polynomial 0x1EDC6F41), the checksum of journal records.
 *
 * Uses the CPU's CRC32 instruction (SSE4.2) when it has one, chosen once at first use, and a
 * table-driven implementation otherwise; both give the same results (tests/unit/test_crc32c.c
 * holds them to each other and to the standard check value). Thread-safe, no state beyond the
 * one-time choice.
 */
#ifndef HP_CRC32C_H
#define HP_CRC32C_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Extend crc (0 to start) over len bytes: crc32c(crc32c(0, a, n), b, m) == crc32c(0, a||b, n+m). */
uint32_t crc32c(uint32_t crc, const void *buf, size_t len);

/* The table implementation alone, and whether crc32c() uses the instruction (for tests). */
uint32_t crc32c_sw(uint32_t crc, const void *buf, size_t len);
bool crc32c_hw_available(void);

#endif
