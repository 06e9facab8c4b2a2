/* SPDX-License-Identifier: MIT */
/*
 * test_jring_want.c - how the daemon reads a ring's lazy-entry words (jring_take_want,
 * jring_arm; jring.h "Lazy entries") as a hostile client may write them: `want` is taken
 * monotonically and never past what the daemon has read, so a client that moves it back and
 * forth cannot have the flusher see its batch urgent before each sleep and lazy at each gather
 * (a loop that neither sleeps nor writes); `lazy` other than 1 makes every entry urgent. No
 * daemon: a ring header in memory.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "jring.h"

#define RING_DATA (64u << 10)

static struct jring_hdr *ring_new(void)
{
	struct jring_hdr *h = aligned_alloc(4096, JRING_HDR_SIZE + RING_DATA);

	assert_non_null(h);
	memset(h, 0, JRING_HDR_SIZE + RING_DATA);
	jring_init(h, RING_DATA, RING_DATA / 2);
	return h;
}

/*
 * Lazy entries up to 512 in the filling batch, everything read (head = tail = 512). The client
 * asks for them (want 512): the arm sees it and does not sleep; it then moves want back to 0:
 * what was seen stays seen, for the arm and for the gather after it, so the batch goes.
 */
static void test_want_moved_back(void **state)
{
	struct jring_hdr *h = ring_new();
	uint64_t seen = 0;

	(void)state;
	h->lazy = 1;
	h->tail = 512;
	h->want = 0;
	assert_true(jring_arm(h, true, 512, 512, &seen)); /* nothing asked for: sleeping is safe */
	h->want = 512;
	assert_false(jring_arm(h, true, 512, 512, &seen));
	assert_int_equal(seen, 512);
	h->want = 0;
	assert_false(jring_arm(h, true, 512, 512, &seen));
	assert_int_equal(jring_take_want(h, 512, &seen), 512);
	free(h);
}

/* A want past what the daemon has read counts only up to it; a later one is taken as it grows. */
static void test_want_capped(void **state)
{
	struct jring_hdr *h = ring_new();
	uint64_t seen = 0;

	(void)state;
	h->lazy = 1;
	h->want = UINT64_MAX;
	assert_int_equal(jring_take_want(h, 256, &seen), 256);
	assert_int_equal(jring_take_want(h, 1024, &seen), 1024);
	h->want = 768;
	assert_int_equal(jring_take_want(h, 2048, &seen), 1024);
	free(h);
}

/* A client that does not keep want (an older library: lazy 0), or writes anything but 1 there:
 * every entry read is urgent, whatever want says. */
static void test_not_lazy(void **state)
{
	struct jring_hdr *h = ring_new();
	uint64_t seen = 0;

	(void)state;
	h->want = 0;
	assert_int_equal(jring_take_want(h, 4096, &seen), 4096);
	h->lazy = 7;
	assert_int_equal(jring_take_want(h, 8192, &seen), 8192);
	free(h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_want_moved_back),
		cmocka_unit_test(test_want_capped),
		cmocka_unit_test(test_not_lazy),
	};

	return cmocka_run_group_tests_name("jring_want", tests, NULL, NULL);
}
