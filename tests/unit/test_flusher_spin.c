/* SPDX-License-Identifier: MIT */
/*
 * test_flusher_spin.c - when a journal's flusher looks for a few writers' next append after
 * their batch (journal_flusher.c, spin_for_append), and when it stops looking: a writer that
 * comes back only after a pause much longer than the look (a broker's producer, once per round
 * trip to its client) must not cost the daemon a CPU-bound look after every batch. The real
 * journal_open with its flusher thread, a writer on its ring (journal_unit.h), the flusher's
 * counters from journal_get_stats.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <time.h>

#include <cmocka.h>

#include "journal_unit.h"

static const struct jcase jc_sync = { "sync", false, NULL };

#define PACED 64

/*
 * A lone writer appends a record, waits until it is durable, then pauses 2 ms (40 times the
 * flusher's look), PACED times. Each look finds nothing: after a miss the flusher sleeps at
 * once for a number of rounds that doubles with each miss in a row, so most rounds do not
 * look. Without the back-off every round looked, PACED looks.
 */
static void test_paced_writer_not_spun_for(void **state)
{
	struct journal_stats st;
	struct twriter t;
	struct journal *j;
	char dir[128];
	(void)state;

	fresh_dir(dir, sizeof(dir), "paced");
	assert_int_equal(life_open(dir, &jc_sync, NULL, &j), 0);
	twriter_open(j, &t);
	for (unsigned i = 0; i < PACED; i++) {
		assert_int_equal(append_wait(&t, i, 100, NULL), i + 1);
		nanosleep(&(struct timespec){ 0, 2000000 }, NULL);
	}
	journal_get_stats(j, &st);
	print_message("%u paced appends: the flusher looked %" PRIu64 " times (found %" PRIu64 "), slept at once %" PRIu64
		      " times\n",
		      PACED, st.spins, st.spins_found, st.spins_skipped);
	if (st.spins > PACED / 2 || st.spins_skipped < PACED / 4)
		fail_msg("the flusher looked for a paced writer's next append %" PRIu64 " times in %u rounds "
			 "(skipped %" PRIu64 "): looks that find nothing do not back off",
			 st.spins, PACED, st.spins_skipped);
	twriter_close(&t);
	journal_close(j);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_paced_writer_not_spun_for),
	};

	return cmocka_run_group_tests_name("flusher_spin", tests, group_setup, group_teardown);
}
