/* SPDX-License-Identifier: MIT */
/*
 * case.h - cmocka helpers for integration test files that run one daemon per test case
 * (test_pool.c, test_spill.c): start and stop it with assertions, stop it in the teardown when
 * a case failed half-way, connect, ask for status. Header-only: include it once per test file,
 * after cmocka.h, harness.h and hugepool.h.
 */
#ifndef HP_TEST_CASE_H
#define HP_TEST_CASE_H

#include <stdio.h>

static struct daemon *running; /* stopped by teardown when a test fails half-way */

static void start(struct daemon *d, const char *globals, const char *classes)
{
	int r = harness_start(d, globals, classes);

	running = r == 0 ? d : NULL;
	if (r < 0)
		harness_dump_log(d);
	assert_int_equal(r, 0);
}

static void stop(struct daemon *d)
{
	running = NULL;
	assert_int_equal(harness_stop(d), 0);
}

static int teardown(void **state)
{
	(void)state;
	if (running) {
		harness_stop(running);
		running = NULL;
	}
	return 0;
}

static hp_conn *conn(const struct daemon *d)
{
	hp_conn *c = NULL;
	int r = hp_connect(d->socket, &c);

	if (r < 0)
		fprintf(stderr, "hp_connect: %s\n", hp_strerror(r));
	assert_int_equal(r, 0);
	return c;
}

static struct hp_status *status(hp_conn *c)
{
	struct hp_status *st = NULL;

	assert_int_equal(hp_status(c, &st), 0);
	return st;
}

#endif
