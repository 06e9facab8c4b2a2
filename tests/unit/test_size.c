/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for decimal_parse(), decimal_prefix(), size_parse() and size_format(): suffixes,
 * strictness, overflow and rounding.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "size.h"

#define SENTINEL UINT64_C(0xdeadbeefcafef00d)

static void check_ok(const char *s, uint64_t want)
{
	uint64_t v = SENTINEL;
	int r = size_parse(s, &v);

	if (r != 0)
		fail_msg("size_parse(\"%s\") = %d, want 0", s, r);
	if (v != want)
		fail_msg("size_parse(\"%s\") gave %" PRIu64 ", want %" PRIu64, s, v, want);
}

static void check_err(const char *s, int want)
{
	uint64_t v = SENTINEL;
	int r = size_parse(s, &v);

	if (r != want)
		fail_msg("size_parse(\"%s\") = %d, want %d", s, r, want);
	/* The header promises *ret is untouched on failure. */
	assert_true(v == SENTINEL);
}

static void check_format(uint64_t bytes, const char *want)
{
	char buf[64];
	const char *s = size_format(bytes, buf, sizeof(buf));

	assert_ptr_equal(s, buf);
	if (strcmp(s, want))
		fail_msg("size_format(%" PRIu64 ") = \"%s\", want \"%s\"", bytes, s, want);
}

static void test_parse_plain(void **state)
{
	(void)state;
	check_ok("0", 0);
	check_ok("1", 1);
	check_ok("4096", 4096);
	check_ok("007", 7);
	check_ok("18446744073709551615", UINT64_MAX);
}

static void test_parse_suffixes(void **state)
{
	(void)state;
	check_ok("1K", 1024);
	check_ok("1k", 1024);
	check_ok("2M", 2 << 20);
	check_ok("2m", 2 << 20);
	check_ok("1G", UINT64_C(1) << 30);
	check_ok("3g", UINT64_C(3) << 30);
	check_ok("1T", UINT64_C(1) << 40);
	check_ok("5t", UINT64_C(5) << 40);
	check_ok("0M", 0);
}

static void test_parse_byte_suffixes(void **state)
{
	(void)state;
	check_ok("512B", 512);
	check_ok("512b", 512);
	check_ok("0B", 0);
	check_ok("2MB", 2 << 20);
	check_ok("2mb", 2 << 20);
	check_ok("2Mb", 2 << 20);
	check_ok("2MiB", 2 << 20);
	check_ok("2mib", 2 << 20);
	check_ok("2MIB", 2 << 20);
	check_ok("1GiB", UINT64_C(1) << 30);
	check_ok("4KiB", 4096);
	check_ok("1TiB", UINT64_C(1) << 40);
	check_ok("1024MiB", UINT64_C(1) << 30);
}

static void test_parse_limits(void **state)
{
	(void)state;
	/* UINT64_MAX >> 10, >> 20, >> 30, >> 40 are the largest values each suffix can take. */
	check_ok("18014398509481983K", UINT64_C(18014398509481983) << 10);
	check_ok("17592186044415M", UINT64_C(17592186044415) << 20);
	check_ok("17179869183G", UINT64_C(17179869183) << 30);
	check_ok("16777215T", UINT64_C(16777215) << 40);
	check_err("18014398509481984K", -ERANGE);
	check_err("17592186044416M", -ERANGE);
	check_err("17179869184G", -ERANGE);
	check_err("16777216T", -ERANGE);
	check_err("18446744073709551616", -ERANGE);
	check_err("99999999999999999999999999", -ERANGE);
	check_err("99999999999999999999999999T", -ERANGE);
}

static void test_parse_rejects_syntax(void **state)
{
	static const char *const bad[] = {
		"", " ", "1 ", " 1", "1 M", "1M ", "+1", "-1", "-0", "0x10", "0X10", "1.5G", "1,5G",
		"1e3", "M", "B", "iB", "KiB", "1iB", "1ib", "1Bi", "1MM", "1MBB", "1MiBB", "1Ki",
		"1Kib ", "1X", "1KX", "1KiBx", "12abc", "1\t", "\n1", "1\n", "99999999999999999999X",
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		check_err(bad[i], -EINVAL);
	check_err(NULL, -EINVAL);
}

static void check_decimal(const char *s, int want, uint64_t want_v)
{
	uint64_t v = SENTINEL;
	int r = decimal_parse(s, &v);

	if (r != want)
		fail_msg("decimal_parse(\"%s\") = %d, want %d", s, r, want);
	if (v != (r == 0 ? want_v : SENTINEL))
		fail_msg("decimal_parse(\"%s\") gave %" PRIu64, s, v);
}

/* Everything strtoul would take and turn into a different number is refused. */
static void test_decimal(void **state)
{
	(void)state;
	check_decimal("0", 0, 0);
	check_decimal("0755", 0, 755);
	check_decimal("18446744073709551615", 0, UINT64_MAX);
	check_decimal("18446744073709551616", -ERANGE, 0);
	check_decimal("99999999999999999999x", -EINVAL, 0);
	check_decimal("", -EINVAL, 0);
	check_decimal("-1", -EINVAL, 0);
	check_decimal("+1", -EINVAL, 0);
	check_decimal(" 7", -EINVAL, 0);
	check_decimal("7 ", -EINVAL, 0);
	check_decimal("0x10", -EINVAL, 0);
	check_decimal("1M", -EINVAL, 0);
	check_decimal("12\n", -EINVAL, 0);
}

static void test_decimal_prefix(void **state)
{
	const char *list = "12,345:x", *end = NULL;
	uint64_t v = SENTINEL;

	(void)state;
	assert_int_equal(decimal_prefix(list, &end, &v), 0);
	assert_int_equal(v, 12);
	assert_ptr_equal(end, list + 2);
	assert_int_equal(decimal_prefix(end + 1, &end, &v), 0);
	assert_int_equal(v, 345);
	assert_ptr_equal(end, list + 6);
	v = SENTINEL;
	assert_int_equal(decimal_prefix(end + 1, &end, &v), -EINVAL);
	assert_true(v == SENTINEL);
	/* past every digit even when they overflow, so the caller can say what follows */
	assert_int_equal(decimal_prefix("123456789012345678901234:", &end, &v), -ERANGE);
	assert_int_equal(*end, ':');
	assert_true(v == SENTINEL);
}

static void test_format_bytes(void **state)
{
	(void)state;
	check_format(0, "0 B");
	check_format(1, "1 B");
	check_format(512, "512 B");
	check_format(1023, "1023 B");
}

static void test_format_units(void **state)
{
	(void)state;
	check_format(1024, "1.0 KiB");
	check_format(4096, "4.0 KiB");
	check_format(1536, "1.5 KiB");
	check_format(1126, "1.1 KiB");
	check_format(1075, "1.0 KiB");
	check_format(UINT64_C(3) << 19, "1.5 MiB");
	check_format(UINT64_C(2) << 20, "2.0 MiB");
	check_format(UINT64_C(2) << 30, "2.0 GiB");
	check_format(UINT64_C(1) << 40, "1.0 TiB");
	check_format(UINT64_C(1536) << 30, "1.5 TiB");
}

static void test_format_rounding(void **state)
{
	(void)state;
	/* 1.999 KiB rounds to 2.0, and 1023.99... KiB carries over into the next unit. */
	check_format(2047, "2.0 KiB");
	check_format((UINT64_C(1) << 20) - 1, "1.0 MiB");
	check_format((UINT64_C(1) << 30) - 1, "1.0 GiB");
	check_format((UINT64_C(1) << 40) - 1, "1.0 TiB");
	check_format((UINT64_C(1) << 20) + 1, "1.0 MiB");
	/* TiB is the largest unit: big values just get more digits. */
	check_format(UINT64_C(1) << 50, "1024.0 TiB");
	check_format(UINT64_MAX, "16777216.0 TiB");
}

static void test_format_truncates(void **state)
{
	char buf[5];

	(void)state;
	memset(buf, 'x', sizeof(buf));
	assert_ptr_equal(size_format(UINT64_C(2) << 30, buf, sizeof(buf)), buf);
	assert_string_equal(buf, "2.0 ");
	assert_ptr_equal(size_format(123456, buf, 1), buf);
	assert_string_equal(buf, "");
}

static void test_roundtrip(void **state)
{
	static const char *const in[] = { "2M", "1G", "4K", "1T", "512B" };
	static const char *const out[] = { "2.0 MiB", "1.0 GiB", "4.0 KiB", "1.0 TiB", "512 B" };
	char buf[32];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
		uint64_t v;

		assert_int_equal(size_parse(in[i], &v), 0);
		assert_string_equal(size_format(v, buf, sizeof(buf)), out[i]);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_plain),
		cmocka_unit_test(test_parse_suffixes),
		cmocka_unit_test(test_parse_byte_suffixes),
		cmocka_unit_test(test_parse_limits),
		cmocka_unit_test(test_parse_rejects_syntax),
		cmocka_unit_test(test_decimal),
		cmocka_unit_test(test_decimal_prefix),
		cmocka_unit_test(test_format_bytes),
		cmocka_unit_test(test_format_units),
		cmocka_unit_test(test_format_rounding),
		cmocka_unit_test(test_format_truncates),
		cmocka_unit_test(test_roundtrip),
	};

	return cmocka_run_group_tests_name("size", tests, NULL, NULL);
}
