/* SPDX-License-Identifier: MIT */
/*
 * replay.c - run a fuzz target over its saved corpus as an ordinary test (cmocka): every file in
 * tests/fuzz/corpus/<target>/ is fed to LLVMFuzzerTestOneInput; a crash, an abort or a sanitizer
 * report fails the test. The target's name comes from the binary's name (test_fuzz_<target>).
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

static char corpus[512];

static void test_corpus(void **state)
{
	DIR *d = opendir(corpus);
	struct dirent *e;
	unsigned n = 0;
	(void)state;

	if (!d)
		fail_msg("cannot open corpus %s: %s", corpus, strerror(errno));
	while ((e = readdir(d))) {
		char path[1024];
		FILE *f;
		uint8_t *buf;
		long len;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", corpus, e->d_name);
		f = fopen(path, "rb");
		assert_non_null(f);
		fseek(f, 0, SEEK_END);
		len = ftell(f);
		rewind(f);
		buf = malloc((size_t)len + 1);
		assert_non_null(buf);
		assert_int_equal(fread(buf, 1, (size_t)len, f), (size_t)len);
		fclose(f);
		LLVMFuzzerTestOneInput(buf, (size_t)len);
		free(buf);
		n++;
	}
	closedir(d);
	/* an empty corpus would make this test pass without testing anything */
	assert_true(n > 0);
}

int main(int argc, char **argv)
{
	const char *base = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
	const struct CMUnitTest tests[] = { cmocka_unit_test(test_corpus) };

	(void)argc;
	/* test_fuzz_<target> */
	snprintf(corpus, sizeof(corpus), "tests/fuzz/corpus/%s", base + strlen("test_fuzz_"));
	return cmocka_run_group_tests_name(base, tests, NULL, NULL);
}
