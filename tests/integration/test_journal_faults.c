/* SPDX-License-Identifier: MIT */
/*
 * test_journal_faults.c - I/O faults injected into a real hugepoold (HUGEPOOLD_FAULT_INJECT): a
 * write or a sync error on each backend (and on each path of backend = auto) fails the journal,
 * every writer is told (-EIO) and no append is taken after it, the daemon goes on serving, and
 * a restart without the fault finds every acknowledged record; a lone writer pipelining appends
 * as the journal fails; writers
 * opening while it fails (round after round for a few seconds: the window is narrow); a sync
 * held up on the sync and libaio backends while status and journal opens are still answered.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>

#include "harness.h"
#include "hugepool.h"
#include "proto.h"
#include "case.h"
#include "journal_case.h"

/* --- injected I/O errors ------------------------------------------------------------------- */

#define EIO_WRITERS 4

struct eio_writer {
	const char *socket;
	unsigned id;
	struct acks acks;
	int err; /* the error that ended it */
	atomic_bool done;
	pthread_t t;
};

static struct eio_writer eio_w[EIO_WRITERS]; /* static: threads may outlive a failed test's frame */

static void *eio_writer_main(void *arg)
{
	struct eio_writer *w = arg;
	hp_conn *c = NULL;
	hp_journal *j = NULL;
	uint8_t buf[4096];
	int r = writer_open(w->socket, &c, &j);

	for (uint32_t seq = 0; r == 0 && seq < 100000; seq++) {
		uint32_t len = 100 + (uint32_t)(mix(writer_seed(w->id, seq)) % 3000);
		uint64_t lsn = 0;

		pattern(buf, len, writer_seed(w->id, seq));
		r = hp_journal_append_wait(j, buf, len, &lsn);
		if (r < 0)
			break;
		acks_add(&w->acks, lsn, seq, len);
	}
	/* after the failure every append is refused at once, it is not taken and dropped */
	if (r < 0 && j) {
		uint64_t ticket = 0;
		int r2 = hp_journal_append(j, buf, 10, &ticket);

		if (r2 == 0)
			r = 1; /* reported as "an append was taken after the failure" */
	}
	w->err = r;
	hp_journal_close(j);
	hp_disconnect(c);
	atomic_store(&w->done, true);
	return NULL;
}

static void eio_join(void)
{
	for (unsigned i = 0; i < EIO_WRITERS; i++)
		if (eio_w[i].t)
			pthread_join(eio_w[i].t, NULL);
	for (unsigned i = 0; i < EIO_WRITERS; i++) {
		free(eio_w[i].acks.v);
		memset(&eio_w[i], 0, sizeof(eio_w[i]));
	}
}


/*
 * Wait (bounded) until the journal failed and then until every writer thread is done: a
 * writer still blocked LIVENESS_MS after the failure was never told.
 */
static void wait_failed_and_done(hp_conn *c, atomic_bool *const *done, unsigned n, const char *who)
{
	struct hp_status *st = wait_state(c, 2);
	double end = harness_ms() + LIVENESS_MS;

	hp_status_free(st);
	for (unsigned i = 0; i < n; i++) {
		while (!atomic_load(done[i]) && harness_ms() < end)
			sleep_ms(5);
		if (!atomic_load(done[i]))
			fail_msg("%s %u still blocked %d ms after the journal failed: it was never told of the "
				 "failure", who, i, LIVENESS_MS);
	}
}

/*
 * backend = auto: which path the failing journal's batches of more writers than CPUs took, as
 * the spec's path: part pinned it ("inline", "queued", "queued-alt") or alternated it ("flip":
 * all).
 */
static void check_paths(hp_conn *c, const char *spec)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	struct hp_status *st = status(c);
	const struct hp_journal_path *p = &jst(st)->path;

	assert_int_equal(p->adaptive, 1);
	if (cpus > 0 && cpus < EIO_WRITERS) {
		if (strstr(spec, "path:inline")) {
			assert_true(p->inline_batches > 0);
			assert_int_equal(p->queued_batches, 0);
		} else if (strstr(spec, "path:queued")) {
			assert_true(p->queued_batches > 0);
			assert_int_equal(p->inline_batches, 0);
			assert_string_equal(p->path, strstr(spec, "path:queued-alt") ? "queued-alt" : "queued");
		} else if (strstr(spec, "path:flip")) {
			assert_true(p->inline_batches > 0 && p->queued_batches > 0);
		}
	}
	hp_status_free(st);
}

/* The path of the batch whose write or sync failed, as the daemon logged it ("inline", ...). */
static const char *failed_path(const struct daemon *d)
{
	static const char *const paths[] = { "inline-spin", "inline", "queued", "queued-alt" };

	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		char what[64];

		snprintf(what, sizeof(what), " (%s) failed", paths[i]);
		if (harness_log_count(d, what))
			return paths[i];
	}
	return "unknown";
}

/* Returns the path of the batch that failed (failed_path). */
static const char *eio_case(const char *spec, const char *backend)
{
	char env[128], journals[512];
	struct harness_opts o = { .env = { env, NULL } };
	static struct daemon d; /* static: teardown uses it after a failed assertion left this frame */
	atomic_bool *done[EIO_WRITERS];
	struct hp_status *st;
	const struct hp_journal_status *js;
	struct hp_buffer b;
	hp_conn *c;
	hp_journal *j = NULL;
	hp_journal_reader *r = NULL;
	uint64_t durable, total = 0, max_acked = 0, lsn;
	const char *path;
	const void *data;
	size_t len;
	int rc;

	snprintf(env, sizeof(env), "HUGEPOOLD_FAULT_INJECT=%s:%s", JNAME, spec);
	snprintf(journals, sizeof(journals), JOURNAL "backend = %s\n", backend);
	harness_watchdog_arm(spec, 15);
	start_journal_opts(&d, journals, &o);
	assert_int_equal(harness_log_count(&d, "fault injection armed"), 1);
	c = conn(&d);
	threads_cleanup = eio_join;
	for (unsigned i = 0; i < EIO_WRITERS; i++) {
		eio_w[i] = (struct eio_writer){ .socket = d.socket, .id = i };
		done[i] = &eio_w[i].done;
		assert_int_equal(pthread_create(&eio_w[i].t, NULL, eio_writer_main, &eio_w[i]), 0);
	}
	/* every writer ends with an error once the fault fires, within a bounded time */
	wait_failed_and_done(c, done, EIO_WRITERS, "writer");
	for (unsigned i = 0; i < EIO_WRITERS; i++) {
		pthread_join(eio_w[i].t, NULL);
		eio_w[i].t = 0;
	}
	for (unsigned i = 0; i < EIO_WRITERS; i++) {
		if (eio_w[i].err == 1)
			fail_msg("writer %u: an append was taken after the journal failed", i);
		if (eio_w[i].err != -EIO)
			fail_msg("writer %u ended with %d (%s), expected -EIO", i, eio_w[i].err, hp_strerror(eio_w[i].err));
		total += eio_w[i].acks.n;
		for (size_t k = 0; k < eio_w[i].acks.n; k++)
			max_acked = MAX(max_acked, eio_w[i].acks.v[k].lsn);
	}
	/* the fault fired after some appends were acknowledged (K > 1) */
	assert_true(total > 0);

	/* the journal says it failed, and why; nothing past its durable LSN was acknowledged */
	st = status(c);
	js = jst(st);
	assert_int_equal(js->state, 2);
	assert_int_equal(js->error, -EIO);
	assert_true(strlen(js->note) > 0);
	/* counted where monitoring sees it (the failed write, maybe another in flight with it) */
	assert_true(js->durability.io_errors >= 1);
	durable = js->durable_lsn;
	assert_true(max_acked <= durable);
	hp_status_free(st);
	if (!strcmp(backend, "auto"))
		check_paths(c, spec);
	assert_true(harness_log_count(&d, "is read-only from now on") >= 1);
	path = failed_path(&d);
	/* the daemon still serves: status, the pool, readers; a new writer is refused */
	assert_int_equal(hp_acquire(c, "small", 1, 1000, &b), 0);
	memset(b.addr, 0x11, 4096);
	assert_int_equal(hp_release(c, &b, 1), 0);
	assert_int_equal(hp_journal_open(c, JNAME, &j), -EIO);
	assert_int_equal(hp_journal_reader_open(c, JNAME, 1, &r), 0);
	lsn = 0;
	while ((rc = hp_journal_reader_next(r, &lsn, &data, &len)) == 1)
		;
	assert_int_equal(rc, 0);
	assert_int_equal(lsn, durable);
	hp_journal_reader_close(r);
	hp_disconnect(c);
	terminate(&d);

	/* restarted without the fault: every acknowledged record is there, maybe more */
	harness_watchdog_arm(spec, 30);
	restart_opts(&d, NULL);
	assert_int_equal(harness_log_count(&d, "fault injection armed"), 1); /* the first run only */
	c = conn(&d);
	st = status(c);
	assert_int_equal(jst(st)->state, 0);
	assert_true(jst(st)->durable_lsn >= durable);
	hp_status_free(st);
	{
		const struct acks *acks[EIO_WRITERS];

		for (unsigned i = 0; i < EIO_WRITERS; i++)
			acks[i] = &eio_w[i].acks;
		acks_verify(c, acks, EIO_WRITERS, &durable);
	}
	/* and the journal works again */
	j = jopen(c);
	lsn = append_wait(j, 1, 100);
	assert_int_equal(lsn, durable + 1);
	hp_journal_close(j);
	hp_disconnect(c);
	threads_cleanup = NULL;
	eio_join();
	stop(&d);
	return path;
}

static void test_eio_write_io_uring(void **state)
{
	(void)state;
	eio_case("write:7", "io_uring");
}

static void test_eio_write_libaio(void **state)
{
	(void)state;
	eio_case("write:7", "libaio");
}

static void test_eio_write_sync(void **state)
{
	(void)state;
	eio_case("write:7", "sync");
}

static void test_eio_sync_io_uring(void **state)
{
	(void)state;
	eio_case("sync:5", "io_uring");
}

static void test_eio_sync_libaio(void **state)
{
	(void)state;
	eio_case("sync:5", "libaio");
}

static void test_eio_sync_sync(void **state)
{
	(void)state;
	eio_case("sync:5", "sync");
}

/*
 * backend = auto, which sends the batches of more writers than CPUs inline or through a queue as
 * it measures: a failed write or sync fails the journal whichever path the batch took, pinned
 * (HUGEPOOLD_FAULT_INJECT=j:path:inline,...) or going round the paths every batch
 * (path:flip:1), so that the failure comes among changes of path, with the batches before it acknowledged in order.
 * With four writers the flip case is one with more writers than CPUs only on a machine of
 * fewer than four; elsewhere it checks the inline-spin path.
 */
/* A write and a sync failing on a pinned path: where more writers than CPUs make the path
 * matter, the failed batch took it. */
static void eio_pinned(const char *path)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	char spec[64];

	snprintf(spec, sizeof(spec), "path:%s,write:7", path);
	if (cpus > 0 && cpus < EIO_WRITERS)
		assert_string_equal(eio_case(spec, "auto"), path);
	else
		eio_case(spec, "auto");
	snprintf(spec, sizeof(spec), "path:%s,sync:5", path);
	if (cpus > 0 && cpus < EIO_WRITERS)
		assert_string_equal(eio_case(spec, "auto"), path);
	else
		eio_case(spec, "auto");
}

static void test_eio_auto_inline(void **state)
{
	(void)state;
	eio_pinned("inline");
}

static void test_eio_auto_queued(void **state)
{
	(void)state;
	eio_pinned("queued");
}

/* The second queue pinned: its failures are the journal's as well. */
static void test_eio_auto_queued_alt(void **state)
{
	(void)state;
	if (!two_queues()) {
		print_message("skipped: auto has no second queue here (no io_uring beside libaio)\n");
		skip();
	}
	eio_pinned("queued-alt");
}

/* Syncs 30, 31, ... fail in turn until one failed on each path (or 24 runs went by: a path's
 * turn lasts a batch or two, as the flusher finds them in flight). */
static void test_eio_auto_flip(void **state)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	bool alt = two_queues(), seen_inline = false, seen_queued = false, seen_alt = !alt;
	(void)state;

	eio_case("path:flip:1,write:40", "auto");
	for (unsigned n = 30; n < 54 && !(seen_inline && seen_queued && seen_alt); n++) {
		char spec[64];
		const char *p;

		snprintf(spec, sizeof(spec), "path:flip:1,sync:%u", n);
		p = eio_case(spec, "auto");
		seen_inline |= !strcmp(p, "inline");
		seen_queued |= !strcmp(p, "queued");
		seen_alt |= !strcmp(p, "queued-alt");
	}
	if (cpus > 0 && cpus < EIO_WRITERS && !(seen_inline && seen_queued && seen_alt))
		fail_msg("24 syncs in a row failed on some paths only (inline: %d, queued: %d, queued-alt: %d%s)",
			 seen_inline, seen_queued, seen_alt, alt ? "" : ", which does not exist here");
}

/*
 * A lone writer that appends without waiting when the journal fails: the entries it appended
 * after the failing batch stay in its ring. The daemon must go on serving (status, the pool)
 * and the records before the failure must be there after a restart.
 */
static void test_eio_lone_pipelined(void **state)
{
	static struct daemon d; /* static: teardown uses it after a failed assertion left this frame */
	char env[128];
	struct harness_opts o = { .env = { env, NULL } };
	struct recs e = { 0 };
	struct hp_status *st;
	struct hp_buffer b;
	uint8_t buf[2000];
	hp_conn *c;
	hp_journal *j;
	uint64_t durable, last;
	unsigned sent = 0;
	int r = 0;
	(void)state;

	snprintf(env, sizeof(env), "HUGEPOOLD_FAULT_INJECT=%s:sync:3", JNAME);
	harness_watchdog_arm("lone pipelining writer when the journal fails", 30);
	start_journal_opts(&d, JOURNAL "when_full = recycle\n", &o);
	c = conn(&d);
	j = jopen(c);
	while (sent < 100000) {
		pattern(buf, sizeof(buf), sent + 1);
		r = hp_journal_append(j, buf, sizeof(buf), NULL);
		if (r < 0)
			break;
		sent++;
	}
	assert_int_equal(r, -EIO);
	/* the daemon goes on answering (bounded: the watchdog kills a daemon that does not) */
	harness_watchdog_arm("status after a lone pipelining writer's journal failed", 10);
	st = status(c);
	assert_int_equal(jst(st)->state, 2);
	assert_int_equal(jst(st)->error, -EIO);
	durable = jst(st)->durable_lsn;
	assert_true(durable >= 1);
	assert_true(durable < sent);
	hp_status_free(st);
	assert_int_equal(hp_acquire(c, "small", 1, 1000, &b), 0);
	assert_int_equal(hp_release(c, &b, 1), 0);
	hp_journal_close(j);
	hp_disconnect(c);
	terminate(&d);

	/* restarted without the fault: 1..durable at least, each as appended */
	restart_opts(&d, NULL);
	c = conn(&d);
	st = status(c);
	last = jst(st)->durable_lsn;
	assert_true(last >= durable);
	assert_true(last <= sent);
	hp_status_free(st);
	for (uint64_t lsn = 1; lsn <= last; lsn++)
		recs_add(&e, lsn, lsn, sizeof(buf));
	assert_int_equal(read_expect(c, 1, &e, 0), 1);
	hp_disconnect(c);
	free(e.v);
	stop(&d);
}

/*
 * Writers opened while the journal fails must be told. Each round (a restart) injects a fault in
 * one of the journal's first writes, and RACE_THREADS threads let go at once each connect, open a
 * writer and append and wait in a loop, so that the failure comes while the daemon is still
 * opening writers. Every thread must end with the journal's error: a writer let in as the
 * journal failed but never told of it would leave its thread waiting for an append that is
 * neither acknowledged nor failed (append_wait has no timeout: the test bounds it), and a daemon
 * that stops answering is killed by the watchdog. The window (between journal_writer_new's check
 * of the state and its insertion of the writer) is narrow, so rounds repeat for a few seconds.
 */
#define RACE_THREADS 8
#define RACE_MIN_ROUNDS 3
#define RACE_MAX_ROUNDS 500
#ifndef RACE_SECONDS
#define RACE_SECONDS 2 /* bounds the run time, not a speed */
#endif

struct race_thread {
	const char *socket;
	unsigned id;
	int err; /* how it ended */
	unsigned acks;
	atomic_bool done;
	pthread_t t;
};

static struct race_thread race_w[RACE_THREADS];
static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned round; /* the threads of a round go when it reaches their `go` */
} race_go = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0 };

static void *race_writer_main(void *arg)
{
	struct race_thread *w = arg;
	hp_conn *c = NULL;
	hp_journal *j = NULL;
	uint8_t buf[512];
	int r;

	memset(buf, (int)w->id, sizeof(buf));
	pthread_mutex_lock(&race_go.lock);
	while (race_go.round == 0)
		pthread_cond_wait(&race_go.cond, &race_go.lock);
	pthread_mutex_unlock(&race_go.lock);
	r = writer_open(w->socket, &c, &j);
	while (r == 0) {
		uint64_t ticket = 0;

		r = hp_journal_append(j, buf, sizeof(buf), &ticket);
		if (r == 0)
			r = hp_journal_wait(j, ticket, LIVENESS_MS);
		if (r == 0)
			w->acks++;
	}
	w->err = r;
	hp_journal_close(j);
	hp_disconnect(c);
	atomic_store(&w->done, true);
	return NULL;
}

static void race_let_go(unsigned round)
{
	pthread_mutex_lock(&race_go.lock);
	race_go.round = round;
	pthread_cond_broadcast(&race_go.cond);
	pthread_mutex_unlock(&race_go.lock);
}

static void race_join(void)
{
	race_let_go(1);
	for (unsigned i = 0; i < RACE_THREADS; i++)
		if (race_w[i].t)
			pthread_join(race_w[i].t, NULL);
	memset(race_w, 0, sizeof(race_w));
}

static void test_eio_while_opening(void **state)
{
	static struct daemon d; /* static: teardown uses it after a failed assertion left this frame */
	char env[128];
	struct harness_opts o = { .env = { env, NULL } };
	atomic_bool *done[RACE_THREADS];
	double until = harness_ms() + RACE_SECONDS * 1000.0;
	unsigned round, acks = 0;
	hp_conn *c;
	(void)state;

	threads_cleanup = race_join;
	for (round = 0; round < RACE_MAX_ROUNDS && (round < RACE_MIN_ROUNDS || harness_ms() < until); round++) {
		char what[96];
		unsigned k = 2 + round % 8;

		/* per round: a daemon that stops answering is killed within it */
		snprintf(what, sizeof(what), "writers opening while the journal fails, round %u", round);
		harness_watchdog_arm(what, 2 * LIVENESS_MS / 1000 + 5);
		snprintf(env, sizeof(env), "HUGEPOOLD_FAULT_INJECT=%s:write:%u", JNAME, k);
		if (round == 0)
			start_journal_opts(&d, JOURNAL "when_full = recycle\n", &o);
		else
			restart_opts(&d, &o);
		c = conn(&d);
		race_let_go(0);
		for (unsigned i = 0; i < RACE_THREADS; i++) {
			race_w[i] = (struct race_thread){ .socket = d.socket, .id = i };
			done[i] = &race_w[i].done;
			assert_int_equal(pthread_create(&race_w[i].t, NULL, race_writer_main, &race_w[i]), 0);
		}
		race_let_go(1);
		wait_failed_and_done(c, done, RACE_THREADS, "writer thread");
		for (unsigned i = 0; i < RACE_THREADS; i++) {
			pthread_join(race_w[i].t, NULL);
			race_w[i].t = 0;
			acks += race_w[i].acks;
			if (race_w[i].err != -EIO)
				fail_msg("round %u (write:%u): writer thread %u ended with %s (%d), expected -EIO%s", round, k,
					 i, hp_strerror(race_w[i].err), race_w[i].err,
					 race_w[i].err == -ETIMEDOUT ? ": its append was neither acknowledged nor failed: its "
								       "writer was opened as the journal failed and never "
								       "told"
								     : "");
		}
		hp_disconnect(c);
		terminate(&d);
	}
	threads_cleanup = NULL;
	print_message("%u rounds (%u acks before the failures), every writer told of the failure\n", round, acks);
	harness_watchdog_arm("writers opening while the journal fails, the end", 30);
	restart_opts(&d, NULL);
	stop(&d);
}

/* --- a sync held up ---------------------------------------------------------------------------- */

/*
 * The event loop never waits for a disk: with the sync and libaio backends (which sync on the
 * flusher's thread) a sync is held up by HUGEPOOLD_FAULT_INJECT=j:stall:N:FIFO until the test
 * lets it go, and meanwhile status and a journal open must be answered. Not a timing check:
 * the sync is held for as long as the test likes, and an answer comes or never does (the
 * watchdog turns "never" into a failure).
 */
static void stalled_sync(const char *backend)
{
	static struct daemon d; /* static: teardown uses it after a failed assertion left this frame */
	char env[512], fifo[300], journals[512];
	struct harness_opts o = { .env = { env, NULL } };
	struct pollfd p;
	struct hp_status *st;
	hp_conn *c, *c2;
	hp_journal *w1, *w2, *j3;
	uint8_t buf[200];
	uint64_t ticket = 0;
	int rfd;

	harness_watchdog_arm("status while a sync is held up", 30);
	/* the daemon's directory exists only once it started: the FIFO lives beside it */
	snprintf(fifo, sizeof(fifo), "/tmp/hugepool-stall.%d", (int)getpid());
	unlink(fifo);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	rfd = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	assert_true(rfd >= 0);
	/* the 4th sync: the header's is the 1st, then batches of two writers at once */
	snprintf(env, sizeof(env), "HUGEPOOLD_FAULT_INJECT=%s:stall:4:%s", JNAME, fifo);
	snprintf(journals, sizeof(journals), JOURNAL "backend = %s\n", backend);
	start_journal_opts(&d, journals, &o);
	c = conn(&d);
	c2 = conn(&d);
	w1 = jopen(c);
	w2 = jopen(c);
	pattern(buf, sizeof(buf), 1);
	p = (struct pollfd){ .fd = rfd, .events = POLLIN };
	/* two writers keep the flusher busy until it holds the sync */
	for (unsigned i = 0; i < 2000 && poll(&p, 1, 0) == 0; i++) {
		assert_int_equal(hp_journal_append(w1, buf, sizeof(buf), &ticket), 0);
		assert_int_equal(hp_journal_append(w2, buf, sizeof(buf), NULL), 0);
		if (i % 16 == 15)
			sleep_ms(1);
	}
	assert_int_equal(poll(&p, 1, LIVENESS_MS), 1);
	/* held: the event loop answers all the same */
	st = status(c2);
	assert_non_null(st);
	assert_string_equal(jst(st)->backend, backend);
	hp_status_free(st);
	assert_int_equal(hp_journal_open(c2, JNAME, &j3), 0);
	hp_journal_close(j3);
	/* let it go: everything becomes durable */
	close(rfd);
	assert_int_equal(hp_journal_wait(w1, ticket, LIVENESS_MS), 0);
	hp_journal_close(w1);
	hp_journal_close(w2);
	hp_disconnect(c2);
	hp_disconnect(c);
	unlink(fifo);
	stop(&d);
}

static void test_stalled_sync_sync(void **state)
{
	(void)state;
	stalled_sync("sync");
}

static void test_stalled_sync_libaio(void **state)
{
	(void)state;
	stalled_sync("libaio");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_eio_write_io_uring, teardown),
		cmocka_unit_test_teardown(test_eio_write_libaio, teardown),
		cmocka_unit_test_teardown(test_eio_write_sync, teardown),
		cmocka_unit_test_teardown(test_eio_sync_io_uring, teardown),
		cmocka_unit_test_teardown(test_eio_sync_libaio, teardown),
		cmocka_unit_test_teardown(test_eio_sync_sync, teardown),
		cmocka_unit_test_teardown(test_eio_auto_inline, teardown),
		cmocka_unit_test_teardown(test_eio_auto_queued, teardown),
		cmocka_unit_test_teardown(test_eio_auto_queued_alt, teardown),
		cmocka_unit_test_teardown(test_eio_auto_flip, teardown),
		cmocka_unit_test_teardown(test_eio_lone_pipelined, teardown),
		cmocka_unit_test_teardown(test_eio_while_opening, teardown),
		cmocka_unit_test_teardown(test_stalled_sync_sync, teardown),
		cmocka_unit_test_teardown(test_stalled_sync_libaio, teardown),
	};

	return run_cases("journal_faults", tests);
}
