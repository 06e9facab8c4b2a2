/* SPDX-License-Identifier: MIT */
/*
 * test_journal_crash.c - processes killed while appending, against a real hugepoold: the daemon
 * SIGKILLed under the load of 32 writers at a random moment, restarted and killed again
 * (CRASH_CYCLES times), every acknowledged record read back at its LSN after each recovery and
 * LSNs going on from where recovery ended; the same with segments reused, where no restart may
 * log a warning (the end of the log in what a segment's earlier use left is no damage); clients
 * killed in the middle of appending large records, while the other writers keep getting acks and
 * the dead clients' writers go away.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <sys/wait.h>

#include "harness.h"
#include "hugepool.h"
#include "proto.h"
#include "case.h"
#include "journal_case.h"

#define CRASH_WRITERS 32
#define CRASH_CYCLES 10

struct crash_ctl {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned epoch; /* a new daemon to append to; writers wait for it to change */
	bool done;
	unsigned stopped; /* writers that ended an epoch */
	const char *socket;
	atomic_ulong acks;
};

struct cwriter {
	struct crash_ctl *ctl;
	unsigned id;
	uint32_t seq;
	struct acks acks;
	int last_err; /* how its last epoch ended */
	pthread_t t;
};

static void *cwriter_main(void *arg)
{
	struct cwriter *w = arg;
	struct crash_ctl *ctl = w->ctl;
	unsigned epoch = 0;
	uint8_t buf[1500];

	for (;;) {
		hp_conn *c = NULL;
		hp_journal *j = NULL;
		int r;

		pthread_mutex_lock(&ctl->lock);
		while (ctl->epoch == epoch && !ctl->done)
			pthread_cond_wait(&ctl->cond, &ctl->lock);
		epoch = ctl->epoch;
		if (ctl->done) {
			pthread_mutex_unlock(&ctl->lock);
			return NULL;
		}
		pthread_mutex_unlock(&ctl->lock);

		r = writer_open(ctl->socket, &c, &j);
		while (r == 0) {
			uint32_t len = writer_len(w->id, w->seq);
			uint64_t lsn = 0;

			pattern(buf, len, writer_seed(w->id, w->seq));
			r = hp_journal_append_wait(j, buf, len, &lsn);
			if (r < 0)
				break;
			acks_add(&w->acks, lsn, w->seq, len);
			w->seq++;
			atomic_fetch_add(&ctl->acks, 1);
		}
		hp_journal_close(j);
		hp_disconnect(c);
		pthread_mutex_lock(&ctl->lock);
		w->last_err = r;
		ctl->stopped++;
		pthread_cond_broadcast(&ctl->cond);
		pthread_mutex_unlock(&ctl->lock);
	}
}

/* static: writer threads must not outlive what they point into if an assertion fails */
static struct crash_ctl crash_ctl = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };
static struct cwriter *crash_w;

static void crash_join(void)
{
	pthread_mutex_lock(&crash_ctl.lock);
	crash_ctl.done = true;
	pthread_cond_broadcast(&crash_ctl.cond);
	pthread_mutex_unlock(&crash_ctl.lock);
	for (unsigned i = 0; crash_w && i < CRASH_WRITERS; i++) {
		if (crash_w[i].t)
			pthread_join(crash_w[i].t, NULL);
		free(crash_w[i].acks.v);
	}
	free(crash_w);
	crash_w = NULL;
}

/*
 * One cycle: a new epoch of appends to d, at least min_acks of them acknowledged, a random moment
 * more, then SIGKILL; returns once every writer saw the daemon gone, with an error.
 */
static void crash_cycle(struct daemon *d, unsigned cycle, unsigned long min_acks, unsigned *seed)
{
	struct cwriter *w = crash_w;
	unsigned long base = atomic_load(&crash_ctl.acks);
	unsigned extra_ms = (unsigned)rand_r(seed) % 40;
	double end = harness_ms() + 3 * LIVENESS_MS;
	int errors[CRASH_WRITERS];

	pthread_mutex_lock(&crash_ctl.lock);
	crash_ctl.epoch++;
	pthread_cond_broadcast(&crash_ctl.cond);
	pthread_mutex_unlock(&crash_ctl.lock);
	/* under load: some acks, then a random moment */
	while (atomic_load(&crash_ctl.acks) < base + min_acks && harness_ms() < end)
		sleep_ms(1);
	if (atomic_load(&crash_ctl.acks) < base + min_acks)
		fail_msg("cycle %u: only %lu acks in %d ms", cycle, atomic_load(&crash_ctl.acks) - base, 3 * LIVENESS_MS);
	sleep_ms((int)extra_ms);
	crash(d);
	/* every writer sees the daemon gone, with an error, within a bounded time */
	end = harness_ms() + LIVENESS_MS;
	pthread_mutex_lock(&crash_ctl.lock);
	while (crash_ctl.stopped < CRASH_WRITERS * (cycle + 1) && harness_ms() < end) {
		pthread_mutex_unlock(&crash_ctl.lock);
		sleep_ms(5);
		pthread_mutex_lock(&crash_ctl.lock);
	}
	for (unsigned i = 0; i < CRASH_WRITERS; i++)
		errors[i] = w[i].last_err;
	if (crash_ctl.stopped < CRASH_WRITERS * (cycle + 1)) {
		unsigned stuck = CRASH_WRITERS * (cycle + 1) - crash_ctl.stopped;

		pthread_mutex_unlock(&crash_ctl.lock);
		fail_msg("cycle %u: %u writers still blocked %d ms after the daemon was killed", cycle, stuck, LIVENESS_MS);
	}
	pthread_mutex_unlock(&crash_ctl.lock);
	for (unsigned i = 0; i < CRASH_WRITERS; i++)
		if (errors[i] >= 0)
			fail_msg("cycle %u: writer %u ended with %d, not an error", cycle, i, errors[i]);
	print_message("cycle %u: killed after %lu acks (+%u ms)\n", cycle, atomic_load(&crash_ctl.acks) - base, extra_ms);
}

/* Start CRASH_WRITERS writer threads appending to d (each waits for an epoch). */
static struct cwriter *crash_writers_start(struct daemon *d)
{
	struct cwriter *w = crash_w = calloc(CRASH_WRITERS, sizeof(*w));

	assert_non_null(w);
	crash_ctl.epoch = crash_ctl.stopped = 0;
	crash_ctl.done = false;
	atomic_store(&crash_ctl.acks, 0);
	crash_ctl.socket = d->socket;
	threads_cleanup = crash_join;
	for (unsigned i = 0; i < CRASH_WRITERS; i++) {
		w[i] = (struct cwriter){ .ctl = &crash_ctl, .id = i };
		assert_int_equal(pthread_create(&w[i].t, NULL, cwriter_main, &w[i]), 0);
	}
	return w;
}

static void test_crash_recovery(void **state)
{
	static struct daemon d; /* static: teardown uses it after a failed assertion left this frame */
	const struct acks *acks[CRASH_WRITERS];
	unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();
	uint64_t durable = 0, prev_durable = 0;
	struct cwriter *w;
	hp_conn *c;
	(void)state;

	print_message("crash test: random seed %u\n", seed);
	harness_watchdog_arm("crash recovery", 120);
	/* room for all cycles without truncating: a cycle lands up to ~4000 acks of at most 1.5 KB
	 * on disk (about 0.7 KB on average), so 10 cycles fit 64 x 1 MiB even at worst (a full
	 * journal would stall the writers and fail the cycle's liveness check: a sizing error of
	 * the test, not a daemon bug) */
	start_journal(&d, JOURNAL "segments = 64\n");
	w = crash_writers_start(&d);
	for (unsigned i = 0; i < CRASH_WRITERS; i++)
		acks[i] = &w[i].acks;
	for (unsigned cycle = 0; cycle < CRASH_CYCLES; cycle++) {
		crash_cycle(&d, cycle, 300, &seed);
		restart(&d);
		c = conn(&d);
		acks_verify(c, acks, CRASH_WRITERS, &durable);
		/* LSNs go on from where recovery ended, never back */
		assert_true(durable >= prev_durable);
		prev_durable = durable;
		hp_disconnect(c);
		print_message("cycle %u: recovered %" PRIu64 " records\n", cycle, durable);
	}
	/* one more epoch on the last daemon: appending goes on after the last recovery */
	{
		unsigned long base = atomic_load(&crash_ctl.acks);
		double end = harness_ms() + 3 * LIVENESS_MS;

		pthread_mutex_lock(&crash_ctl.lock);
		crash_ctl.epoch++;
		pthread_cond_broadcast(&crash_ctl.cond);
		pthread_mutex_unlock(&crash_ctl.lock);
		while (atomic_load(&crash_ctl.acks) < base + 100 && harness_ms() < end)
			sleep_ms(1);
		assert_true(atomic_load(&crash_ctl.acks) >= base + 100);
	}
	crash(&d);
	pthread_mutex_lock(&crash_ctl.lock);
	crash_ctl.done = true;
	pthread_cond_broadcast(&crash_ctl.cond);
	pthread_mutex_unlock(&crash_ctl.lock);
	for (unsigned i = 0; i < CRASH_WRITERS; i++) {
		pthread_join(w[i].t, NULL);
		w[i].t = 0;
	}
	restart(&d);
	c = conn(&d);
	acks_verify(c, acks, CRASH_WRITERS, &durable);
	assert_true(durable > prev_durable);
	hp_disconnect(c);
	threads_cleanup = NULL;
	crash_join();
	stop(&d);
}

/*
 * A SIGKILL under load with segments reused (when_full = recycle, 4 segments of 1 MiB, each cycle
 * about a segment's worth): the walk usually stops inside what a segment's earlier use left,
 * bytes of an earlier record that hold anything where a type would be. That is the normal end
 * of the log after a crash: no restart may log a warning (it used to log "cut a torn tail:
 * unknown record type" after about every other kill), and every acknowledged record is still
 * durable (recovery goes on at least past the last ack).
 */
static void test_kill_no_warning(void **state)
{
	static struct daemon d; /* static: teardown uses it after a failed assertion left this frame */
	unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();
	struct cwriter *w;
	(void)state;

	print_message("kill without warning: random seed %u\n", seed);
	harness_watchdog_arm("kill without warning", 120);
	start_journal(&d, JOURNAL "segments = 4\nwhen_full = recycle\n");
	w = crash_writers_start(&d);
	for (unsigned cycle = 0; cycle < CRASH_CYCLES; cycle++) {
		struct hp_status *st;
		uint64_t acked = 0;
		hp_conn *c;

		/* the first cycle fills every segment and reuses some */
		crash_cycle(&d, cycle, cycle == 0 ? 7000 : 1000 + (unsigned)rand_r(&seed) % 1000, &seed);
		for (unsigned i = 0; i < CRASH_WRITERS; i++)
			if (w[i].acks.n)
				acked = MAX(acked, w[i].acks.v[w[i].acks.n - 1].lsn);
		restart(&d);
		c = conn(&d);
		st = status(c);
		print_message("cycle %u: recovered %s\n", cycle, jst(st)->recovery);
		if (jst(st)->durable_lsn < acked)
			fail_msg("cycle %u: recovered up to LSN %" PRIu64 ", %" PRIu64 " was acknowledged", cycle,
				 jst(st)->durable_lsn, acked);
		hp_status_free(st);
		hp_disconnect(c);
		if (harness_log_count(&d, "hugepoold: warning:") != 0) {
			harness_dump_log(&d);
			fail_msg("cycle %u: the restart after a kill logged a warning", cycle);
		}
	}
	threads_cleanup = NULL;
	crash_join();
	stop(&d);
}

/* --- a client killed while appending ---------------------------------------------------------- */

#define LIVE_WRITERS 4
#define DYING_CHILDREN 3

struct live_writer {
	const char *socket;
	unsigned id;
	atomic_uint acks;
	atomic_bool stop;
	int err;
	pthread_t t;
};

static void *live_writer_main(void *arg)
{
	struct live_writer *w = arg;
	hp_conn *c = NULL;
	hp_journal *j = NULL;
	uint8_t buf[256];
	int r = writer_open(w->socket, &c, &j);

	for (uint32_t seq = 0; r == 0 && !atomic_load(&w->stop); seq++) {
		pattern(buf, sizeof(buf), writer_seed(w->id, seq));
		r = hp_journal_append_wait(j, buf, sizeof(buf), NULL);
		if (r == 0)
			atomic_fetch_add(&w->acks, 1);
	}
	w->err = r;
	hp_journal_close(j);
	hp_disconnect(c);
	return NULL;
}

/* A child that appends big records as fast as it can, until killed. */
static void dying_child(const char *socket, int go_fd, int ready_fd)
{
	static uint8_t buf[200 * KIB];
	hp_conn *c;
	hp_journal *j;
	char x;

	if (read(go_fd, &x, 1) != 1)
		_exit(1);
	if (writer_open(socket, &c, &j) < 0)
		_exit(2);
	memset(buf, 0x5a, sizeof(buf));
	if (hp_journal_append_wait(j, buf, 1000, NULL) < 0)
		_exit(3);
	if (write(ready_fd, "r", 1) != 1)
		_exit(4);
	for (unsigned i = 0;; i++) {
		/* mostly without waiting: the ring stays full of entries half copied */
		if (hp_journal_append(j, buf, 100 * KIB + (i % 7) * 1000, NULL) < 0)
			_exit(5);
	}
}

static struct live_writer live_w[LIVE_WRITERS]; /* static: see test_crash_recovery */
static pid_t kids[DYING_CHILDREN];

static void live_join(void)
{
	for (unsigned k = 0; k < DYING_CHILDREN; k++)
		if (kids[k] > 0) {
			kill(kids[k], SIGKILL);
			waitpid(kids[k], NULL, 0);
			kids[k] = 0;
		}
	for (unsigned i = 0; i < LIVE_WRITERS; i++)
		atomic_store(&live_w[i].stop, true);
	for (unsigned i = 0; i < LIVE_WRITERS; i++)
		if (live_w[i].t)
			pthread_join(live_w[i].t, NULL);
	memset(live_w, 0, sizeof(live_w));
}

static void test_client_killed(void **state)
{
	struct live_writer *w = live_w;
	static struct daemon d; /* static: teardown uses it after a failed assertion left this frame */
	int go[DYING_CHILDREN][2], ready[DYING_CHILDREN][2];
	struct hp_status *st;
	hp_conn *c;
	(void)state;

	harness_watchdog_arm("killed client", 60);
	start_journal(&d, JOURNAL "segments = 8\nwhen_full = recycle\n");
	/* children first, while this process has one thread (plus the watchdog's) */
	threads_cleanup = live_join;
	for (unsigned k = 0; k < DYING_CHILDREN; k++) {
		assert_int_equal(pipe(go[k]), 0);
		assert_int_equal(pipe(ready[k]), 0);
		kids[k] = fork();
		assert_true(kids[k] >= 0);
		if (kids[k] == 0) {
			close(go[k][1]);
			close(ready[k][0]);
			dying_child(d.socket, go[k][0], ready[k][1]);
		}
		close(go[k][0]);
		close(ready[k][1]);
	}
	c = conn(&d);
	for (unsigned i = 0; i < LIVE_WRITERS; i++) {
		w[i] = (struct live_writer){ .socket = d.socket, .id = i };
		assert_int_equal(pthread_create(&w[i].t, NULL, live_writer_main, &w[i]), 0);
	}
	for (unsigned k = 0; k < DYING_CHILDREN; k++) {
		unsigned base[LIVE_WRITERS];
		char x;
		double end;

		assert_int_equal(write(go[k][1], "g", 1), 1);
		assert_int_equal(read(ready[k][0], &x, 1), 1);
		sleep_ms(20 + 30 * (int)k);
		kill(kids[k], SIGKILL);
		assert_int_equal(waitpid(kids[k], NULL, 0), kids[k]);
		kids[k] = 0;
		/* every other writer keeps getting acks */
		for (unsigned i = 0; i < LIVE_WRITERS; i++)
			base[i] = atomic_load(&w[i].acks);
		end = harness_ms() + LIVENESS_MS;
		for (unsigned i = 0; i < LIVE_WRITERS; i++) {
			while (atomic_load(&w[i].acks) < base[i] + 20 && harness_ms() < end)
				sleep_ms(2);
			if (atomic_load(&w[i].acks) < base[i] + 20)
				fail_msg("after killed client %u: writer %u got %u acks in %d ms", k, i,
					 atomic_load(&w[i].acks) - base[i], LIVENESS_MS);
		}
	}
	/* the dead children's writers are gone from the daemon */
	{
		double end = harness_ms() + LIVENESS_MS;
		uint32_t n;

		do {
			st = status(c);
			n = jst(st)->writers;
			assert_int_equal(jst(st)->state, 0);
			hp_status_free(st);
			if (n == LIVE_WRITERS)
				break;
			sleep_ms(10);
		} while (harness_ms() < end);
		assert_int_equal(n, LIVE_WRITERS);
	}
	for (unsigned i = 0; i < LIVE_WRITERS; i++)
		atomic_store(&w[i].stop, true);
	for (unsigned i = 0; i < LIVE_WRITERS; i++) {
		pthread_join(w[i].t, NULL);
		w[i].t = 0;
		assert_int_equal(w[i].err, 0);
	}
	threads_cleanup = NULL;
	for (unsigned k = 0; k < DYING_CHILDREN; k++) {
		close(go[k][1]);
		close(ready[k][0]);
	}
	hp_disconnect(c);
	stop(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_crash_recovery, teardown),
		cmocka_unit_test_teardown(test_kill_no_warning, teardown),
		cmocka_unit_test_teardown(test_client_killed, teardown),
	};

	return run_cases("journal_crash", tests);
}
