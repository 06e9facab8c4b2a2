/* SPDX-License-Identifier: MIT */
/* Unit tests of CRC-32C: the standard check value, chaining, and hardware = software. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "crc32c.h"

static void test_check_values(void **state)
{
	uint8_t zeros[32] = { 0 }, ones[32];
	(void)state;

	memset(ones, 0xff, sizeof(ones));
	/* the catalogue check value and the iSCSI (RFC 3720, B.4) vectors */
	assert_int_equal(crc32c(0, "123456789", 9), 0xE3069283);
	assert_int_equal(crc32c_sw(0, "123456789", 9), 0xE3069283);
	assert_int_equal(crc32c(0, zeros, 32), 0x8A9136AA);
	assert_int_equal(crc32c(0, ones, 32), 0x62A8AB43);
	assert_int_equal(crc32c(0, "", 0), 0);
}

static void test_chaining_and_hw_equals_sw(void **state)
{
	uint8_t buf[1100];
	(void)state;

	srand(42);
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)rand();
	/* every length at every alignment of the first 8 bytes */
	for (size_t off = 0; off < 8; off++)
		for (size_t len = 0; len + off <= 1024; len++) {
			uint32_t sw = crc32c_sw(0, buf + off, len);

			assert_int_equal(crc32c(0, buf + off, len), sw);
			if (len > 3)
				assert_int_equal(crc32c(crc32c(0, buf + off, 3), buf + off + 3, len - 3), sw);
		}
	if (!crc32c_hw_available())
		print_message("note: no CRC32 instruction here; only the table path was tested\n");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_check_values),
		cmocka_unit_test(test_chaining_and_hw_equals_sw),
	};

	return cmocka_run_group_tests_name("crc32c", tests, NULL, NULL);
}
