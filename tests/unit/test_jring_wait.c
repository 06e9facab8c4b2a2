/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for how a journal writer waits (jring_wait, src/common/jring.c): with the daemon's
 * hint to spin it polls before it sleeps on the futex, and a client that asked to sleep
 * (sleep_only: hp_journal_set_wait_mode(HP_JOURNAL_WAIT_SLEEP)) goes to the futex at once, hint
 * or not. Counted by the calls to the wait's condition, which the spin makes in a loop and the
 * futex loop a fixed few times per slice; no daemon: a ring header in memory that never becomes
 * durable, and a deadline.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "jring.h"
#include "util.h"

#define RING_DATA (64u << 10)
/* the futex loop's looks at the condition in one slice that times out: before, around and
 * after FUTEX_WAIT, and once more on the way out */
#define FUTEX_LOOKS 4

static unsigned looks;

static bool never(const struct jring_client *c, uint64_t arg)
{
	(void)c, (void)arg;
	looks++;
	return false;
}

static bool not_gone(void *arg)
{
	(void)arg;
	return false;
}

/* Wait 20 ms for what never comes, with the daemon's hint at the most it may say; the looks. */
static unsigned wait_looks(bool sleep_only)
{
	void *ring = aligned_alloc(4096, JRING_HDR_SIZE + RING_DATA);
	struct jring_wake wake = { 0 };
	struct jring_client c;
	const char *why = NULL;

	assert_non_null(ring);
	memset(ring, 0, JRING_HDR_SIZE + RING_DATA);
	jring_init(ring, RING_DATA, RING_DATA / 2);
	jring_set_spin(ring, JRING_SPIN_MAX_US);
	assert_int_equal(jring_client_init(&c, ring, RING_DATA, &wake, -1, not_gone, NULL, &why), 0);
	c.sleep_only = sleep_only;
	looks = 0;
	assert_int_equal(jring_wait(&c, never, 0, now_ns() + 20 * 1000000ull), -ETIMEDOUT);
	free(ring);
	return looks;
}

static void test_spins_on_the_hint(void **state)
{
	(void)state;
	/* the spin looks at least once before the futex loop; it usually looks thousands of times */
	if (wait_looks(false) <= FUTEX_LOOKS)
		fail_msg("a waiter told to spin went to the futex at once");
}

static void test_sleep_only_never_spins(void **state)
{
	unsigned n;

	(void)state;
	n = wait_looks(true);
	if (n > FUTEX_LOOKS)
		fail_msg("a waiter that asked to sleep looked %u times: it polled", n);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_spins_on_the_hint),
		cmocka_unit_test(test_sleep_only_never_spins),
	};

	return cmocka_run_group_tests_name("jring_wait", tests, NULL, NULL);
}
