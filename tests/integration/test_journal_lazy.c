/* SPDX-License-Identifier: MIT */
/*
 * test_journal_lazy.c - lazy appends (hp_journal_appendv_flags with HP_JOURNAL_APPEND_LAZY,
 * jring.h's `want`) against a real hugepoold: records nobody waits for are held for one someone
 * does and synced with it, at most max_batch_delay; a wait, a close or the writer's death asks
 * for them at once; one writer's lazy records never hold back another's; a clean stop writes
 * what it took. Every case runs with max_batch_delay far beyond its liveness bound (10 s), so
 * a record held when it should not be shows as a wait that times out or a record missing, not
 * as a slow run.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <sys/wait.h>

#include "harness.h"
#include "hugepool.h"
#include "proto.h"
#include "case.h"
#include "journal_case.h"

#define LAZY_JOURNAL JOURNAL "max_batch_delay = 10s\n"

/* Wait, within half the liveness bound and without a wait of a writer's own (which would ask for
 * them), until the journal is durable up to lsn; fails with why otherwise. */
static void await_durable(hp_conn *c, uint64_t lsn, const char *why)
{
	double end = harness_ms() + LIVENESS_MS / 2;
	struct hp_status *st;

	for (;;) {
		st = status(c);
		if (jst(st)->durable_lsn >= lsn || harness_ms() > end)
			break;
		hp_status_free(st);
		sleep_ms(5);
	}
	if (jst(st)->durable_lsn < lsn)
		fail_msg("%s (durable up to LSN %" PRIu64 ")", why, jst(st)->durable_lsn);
	hp_status_free(st);
}

/* Start d with LAZY_JOURNAL, connect, open a writer and append n lazy records (LSNs and seeds
 * 1..n, remembered in e); returns the writer, its connection in *ret_c. */
static hp_journal *start_lazy(struct daemon *d, unsigned n, struct recs *e, hp_conn **ret_c)
{
	hp_journal *j;

	start_journal(d, LAZY_JOURNAL);
	*ret_c = conn(d);
	j = jopen(*ret_c);
	for (unsigned i = 1; i <= n; i++) {
		append_lazy(j, i, 100);
		recs_add(e, i, i, 100);
	}
	return j;
}

static uint64_t batches_of(hp_conn *c)
{
	struct hp_status *st = status(c);
	uint64_t n = jst(st)->batches;

	hp_status_free(st);
	return n;
}

/*
 * Three lazy records stay in the daemon's hands, unsynced, while nobody waits; the next
 * record appended to be waited for takes them to the disk in its batch: one batch, one sync,
 * four records, all read back as appended. Before lazy appends the three were synced at once.
 */
static void test_lazy_join_the_next_urgent(void **state)
{
	static struct daemon d;
	struct recs e = { 0 };
	hp_conn *c;
	hp_journal *j;
	(void)state;

	harness_watchdog_arm("lazy records join the next urgent one", 60);
	j = start_lazy(&d, 3, &e, &c);
	sleep_ms(300); /* the daemon has taken them (it is woken by each append) and holds them */
	if (hp_journal_durable_lsn(j) != 0 || batches_of(c) != 0)
		fail_msg("lazy records nobody waits for were synced at once: durable up to LSN %" PRIu64 ", %" PRIu64
			 " batches",
			 hp_journal_durable_lsn(j), batches_of(c));
	assert_int_equal(append_wait(j, 4, 100), 4);
	recs_add(&e, 4, 4, 100);
	assert_int_equal(batches_of(c), 1);
	read_expect(c, 1, &e, 1);
	free(e.v);
	hp_journal_close(j);
	hp_disconnect(c);
	stop(&d);
}

/*
 * A wait for a lazy record asks for it: hp_journal_wait, hp_journal_wait_lsn and the drain of
 * hp_journal_close each make it durable long before max_batch_delay (10 s) would have.
 */
static void test_lazy_asked_for(void **state)
{
	static struct daemon d;
	struct recs e = { 0 };
	uint64_t ticket;
	hp_conn *c, *c2;
	hp_journal *j;
	(void)state;

	harness_watchdog_arm("a wait asks for lazy records", 60);
	start_journal(&d, LAZY_JOURNAL);
	c = conn(&d);
	j = jopen(c);
	ticket = append_lazy(j, 1, 100);
	recs_add(&e, 1, 1, 100);
	assert_int_equal(hp_journal_wait(j, ticket, LIVENESS_MS / 2), 0);
	append_lazy(j, 2, 100);
	recs_add(&e, 2, 2, 100);
	assert_int_equal(hp_journal_wait_lsn(j, 2, LIVENESS_MS / 2), 0);
	append_lazy(j, 3, 100);
	recs_add(&e, 3, 3, 100);
	hp_journal_close(j);
	/* the close drains: the record is durable within the liveness bound, without a wait */
	c2 = conn(&d);
	await_durable(c2, 3, "a closed writer's lazy record is still not durable");
	read_expect(c2, 1, &e, 1);
	free(e.v);
	hp_disconnect(c2);
	hp_disconnect(c);
	stop(&d);
}

/*
 * A writer whose lazy records nobody will ever ask for (its process is killed) loses none: they
 * are the daemon's once appended, and go to the disk when the daemon sees it gone.
 */
static void test_lazy_writer_killed(void **state)
{
	static struct daemon d;
	struct recs e = { 0 };
	hp_conn *c;
	pid_t pid;
	int status_;
	(void)state;

	harness_watchdog_arm("a killed writer's lazy records", 60);
	start_journal(&d, LAZY_JOURNAL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		hp_conn *cc;
		hp_journal *jj;

		if (hp_connect(d.socket, &cc) < 0 || hp_journal_open(cc, JNAME, &jj) < 0)
			_exit(2);
		for (unsigned i = 1; i <= 5; i++) {
			uint8_t buf[100];
			struct iovec v = { buf, sizeof(buf) };

			pattern(buf, sizeof(buf), i);
			if (hp_journal_appendv_flags(jj, &v, 1, HP_JOURNAL_APPEND_LAZY, NULL) < 0)
				_exit(3);
		}
		raise(SIGKILL);
		_exit(4);
	}
	assert_int_equal(waitpid(pid, &status_, 0), pid);
	assert_true(WIFSIGNALED(status_) && WTERMSIG(status_) == SIGKILL);
	for (unsigned i = 1; i <= 5; i++)
		recs_add(&e, i, i, 100);
	c = conn(&d);
	await_durable(c, 5, "a killed writer's lazy records are not durable");
	read_expect(c, 1, &e, 1);
	free(e.v);
	hp_disconnect(c);
	stop(&d);
}

/*
 * One writer's lazy records hold back nobody else: another writer's record, appended while the
 * first one's wait in the daemon, is synced at once, and takes them along in its batch.
 */
static void test_lazy_holds_back_nobody(void **state)
{
	static struct daemon d;
	hp_conn *c1, *c2;
	hp_journal *j1, *j2;
	uint64_t lsn;
	(void)state;

	harness_watchdog_arm("lazy records hold back nobody", 60);
	start_journal(&d, LAZY_JOURNAL);
	c1 = conn(&d);
	c2 = conn(&d);
	j1 = jopen(c1);
	j2 = jopen(c2);
	append_lazy(j1, 1, 100);
	append_lazy(j1, 2, 100);
	sleep_ms(100);
	/* a wait of the other writer bounded well below the 10 s the lazy ones may wait */
	{
		uint64_t ticket = append_nowait(j2, 3, 100);

		assert_int_equal(hp_journal_wait(j2, ticket, LIVENESS_MS / 2), 0);
	}
	lsn = hp_journal_durable_lsn(j2);
	assert_true(lsn >= 3);
	hp_journal_close(j1);
	hp_journal_close(j2);
	hp_disconnect(c1);
	hp_disconnect(c2);
	stop(&d);
}

/*
 * A clean stop writes the records it took: lazy records held in the filling batch when the
 * daemon is told to stop are on the disk at the next start, and the LSNs go on after them with
 * no gap. Before, the stop dropped the filling batch but its clean marker counted its LSNs.
 */
static void test_lazy_clean_stop(void **state)
{
	static struct daemon d;
	struct recs e = { 0 };
	hp_conn *c;
	hp_journal *j;
	(void)state;

	harness_watchdog_arm("a clean stop writes lazy records", 60);
	j = start_lazy(&d, 3, &e, &c);
	sleep_ms(200); /* taken into the filling batch, held */
	terminate(&d);
	hp_journal_close(j);
	hp_disconnect(c);
	restart(&d);
	c = conn(&d);
	j = jopen(c);
	assert_int_equal(append_wait(j, 4, 100), 4);
	recs_add(&e, 4, 4, 100);
	read_expect(c, 1, &e, 1);
	free(e.v);
	hp_journal_close(j);
	hp_disconnect(c);
	stop(&d);
}

/*
 * One thread waits while another appends to the same writer (libhugepool(3), THREAD SAFETY): a
 * waiter's ticket or LSN is asked for although the appender publishes lazy entries meanwhile,
 * so every wait returns long before max_batch_delay (10 s) would have let it, and the waiter
 * switching the wait mode under the appender changes nothing of what is written. Records of
 * 100 bytes to 6 KiB fill the ring many times, so the appender also waits for room beside the
 * waiter. Under TSan the two threads' accesses to the writer are checked for races.
 */
#define BESIDE_RECORDS 3000

struct beside {
	hp_journal *j;
	uint64_t ticket, lsn; /* the appender's last: its ticket and LSN (atomic) */
	bool done; /* the appender appended them all (atomic) */
	int err; /* the waiter's first failure */
	const char *what;
	unsigned waits;
};

static uint32_t beside_len(uint64_t seed)
{
	return seed % 7 ? 100 : 6 * KIB;
}

static void *beside_waiter(void *arg)
{
	struct beside *b = arg;
	uint64_t waited = 0;

	for (unsigned k = 0;; k++) {
		bool done = __atomic_load_n(&b->done, __ATOMIC_ACQUIRE);
		uint64_t ticket = __atomic_load_n(&b->ticket, __ATOMIC_ACQUIRE);
		uint64_t lsn = __atomic_load_n(&b->lsn, __ATOMIC_ACQUIRE);
		int r;

		if (ticket == waited) {
			if (done)
				return NULL;
			sched_yield();
			continue;
		}
		if (k % 5 == 0)
			(void)hp_journal_set_wait_mode(b->j, k % 10 ? HP_JOURNAL_WAIT_SLEEP : HP_JOURNAL_WAIT_SPIN);
		r = k % 2 ? hp_journal_wait(b->j, ticket, LIVENESS_MS / 2) : hp_journal_wait_lsn(b->j, lsn, LIVENESS_MS / 2);
		if (r == 0 && hp_journal_durable_lsn(b->j) < lsn)
			r = -EPROTO;
		if (r < 0) {
			b->err = r;
			b->what = k % 2 ? "hp_journal_wait" : "hp_journal_wait_lsn";
			return NULL;
		}
		waited = ticket;
		b->waits++;
	}
}

static void test_lazy_wait_beside_append(void **state)
{
	static struct daemon d;
	struct beside b = { 0 };
	struct recs e = { 0 };
	pthread_t t;
	hp_conn *c;
	(void)state;

	harness_watchdog_arm("a wait beside an appending thread", 120);
	start_journal(&d, LAZY_JOURNAL);
	c = conn(&d);
	b.j = jopen(c);
	assert_int_equal(pthread_create(&t, NULL, beside_waiter, &b), 0);
	for (uint64_t i = 1; i <= BESIDE_RECORDS; i++) {
		/* every other record lazy: only the waiter's asking gets those synced in time */
		uint64_t ticket = i % 2 ? append_lazy(b.j, i, beside_len(i)) : append_nowait(b.j, i, beside_len(i));

		recs_add(&e, i, i, beside_len(i));
		__atomic_store_n(&b.lsn, i, __ATOMIC_RELEASE);
		__atomic_store_n(&b.ticket, ticket, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&b.done, true, __ATOMIC_RELEASE);
	assert_int_equal(pthread_join(t, NULL), 0);
	if (b.err)
		fail_msg("%s beside an appending thread, after %u waits: %s", b.what, b.waits, hp_strerror(b.err));
	assert_true(b.waits > 0);
	assert_int_equal(hp_journal_durable_lsn(b.j), BESIDE_RECORDS);
	read_expect(c, 1, &e, 1);
	free(e.v);
	hp_journal_close(b.j);
	hp_disconnect(c);
	stop(&d);
}

/* An unknown flag is refused and appends nothing. */
static void test_lazy_flags_checked(void **state)
{
	static struct daemon d;
	uint8_t buf[8] = { 0 };
	struct iovec v = { buf, sizeof(buf) };
	hp_conn *c;
	hp_journal *j;
	(void)state;

	start_journal(&d, LAZY_JOURNAL);
	c = conn(&d);
	j = jopen(c);
	assert_int_equal(hp_journal_appendv_flags(j, &v, 1, 2, NULL), -EINVAL);
	assert_int_equal(hp_journal_appendv_flags(j, &v, 1, ~0u, NULL), -EINVAL);
	assert_int_equal(append_wait(j, 1, 8), 1);
	hp_journal_close(j);
	hp_disconnect(c);
	stop(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_lazy_join_the_next_urgent, teardown),
		cmocka_unit_test_teardown(test_lazy_asked_for, teardown),
		cmocka_unit_test_teardown(test_lazy_writer_killed, teardown),
		cmocka_unit_test_teardown(test_lazy_holds_back_nobody, teardown),
		cmocka_unit_test_teardown(test_lazy_clean_stop, teardown),
		cmocka_unit_test_teardown(test_lazy_flags_checked, teardown),
		cmocka_unit_test_teardown(test_lazy_wait_beside_append, teardown),
	};

	return run_cases("journal_lazy", tests);
}
