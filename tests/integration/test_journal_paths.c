/* SPDX-License-Identifier: MIT */
/*
 * test_journal_paths.c - which way a journal's batches go to the disk, against a real hugepoold:
 * with backend = auto and more writers than CPUs the daemon measures inline and queued (and
 * queued-alt, io_uring's queue beside libaio's) and chooses, and status, its log (the first decision once, at info level) and hugepoolctl journal
 * stat (text and JSON) say which path and why; a lone writer's batches go inline-spin; an
 * explicit backend is not measured and says so; writers spin for a batch written inline or through
 * libaio's queue and sleep for one in io_uring's. What it chooses depends on the machine: the
 * cases check that it chose, from measurements of inline and a queue at least, never which.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>

#include "harness.h"
#include "hugepool.h"
#include "proto.h"
#include "case.h"
#include "journal_case.h"

#define MAX_WRITERS 256

struct pwriter {
	const char *socket;
	unsigned id;
	uint64_t acks;
	int err;
	pthread_t t;
};

static struct pwriter pw[MAX_WRITERS]; /* static: threads may outlive a failed case's frame */
static unsigned npw;
static atomic_bool pw_stop;

static void *pwriter_main(void *arg)
{
	struct pwriter *w = arg;
	hp_conn *c = NULL;
	hp_journal *j = NULL;
	uint8_t buf[100];
	int r = writer_open(w->socket, &c, &j);

	memset(buf, (int)w->id, sizeof(buf));
	while (r == 0 && !atomic_load(&pw_stop)) {
		r = hp_journal_append_wait(j, buf, sizeof(buf), NULL);
		if (r == 0)
			w->acks++;
	}
	w->err = r;
	hp_journal_close(j);
	hp_disconnect(c);
	return NULL;
}

/* Stop and join the writer threads (the teardown's too: it asserts nothing). */
static void pwriters_join(void)
{
	atomic_store(&pw_stop, true);
	for (unsigned i = 0; i < npw; i++)
		if (pw[i].t)
			pthread_join(pw[i].t, NULL);
}

/* The case's end of its writers: joined, each ended without an error. */
static void pwriters_stop(void)
{
	pwriters_join();
	threads_cleanup = NULL;
	for (unsigned i = 0; i < npw; i++)
		if (pw[i].err)
			fail_msg("writer %u: %s", i, hp_strerror(pw[i].err));
	memset(pw, 0, sizeof(pw));
	npw = 0;
}

/* More writers than the daemon has CPUs, appending and waiting in a loop until pwriters_stop. */
static void pwriters_start(const struct daemon *d, unsigned cpus)
{
	npw = 2 * cpus + 2 < MAX_WRITERS ? 2 * cpus + 2 : MAX_WRITERS;
	atomic_store(&pw_stop, false);
	threads_cleanup = pwriters_join;
	for (unsigned i = 0; i < npw; i++) {
		pw[i] = (struct pwriter){ .socket = d->socket, .id = i };
		assert_int_equal(pthread_create(&pw[i].t, NULL, pwriter_main, &pw[i]), 0);
	}
}

static unsigned cpus_online(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n > 0 ? (unsigned)n : 1;
}

/* The status of journal j's path (a copy). */
static struct hp_journal_path jpath_of(hp_conn *c)
{
	struct hp_status *st = status(c);
	struct hp_journal_path p = jst(st)->path;

	hp_status_free(st);
	return p;
}

/* A path of more writers than CPUs: inline, queued, or (auto's second queue) queued-alt. */
static bool path_is_one_of_many(const char *p)
{
	return !strcmp(p, "inline") || !strcmp(p, "queued") || !strcmp(p, "queued-alt");
}

/*
 * backend = auto under more writers than CPUs: within a bounded time it has measured inline and a
 * queue and chosen one; status, the log and hugepoolctl say which and why.
 */
static void test_auto_measures_and_says(void **state)
{
	static struct daemon d; /* static: teardown uses it after a failed assertion left this frame */
	unsigned cpus = cpus_online();
	struct hp_journal_path p;
	double end = harness_ms() + LIVENESS_MS;
	char out[8192], want[96];
	hp_conn *c;
	hp_journal *j;
	(void)state;

	harness_watchdog_arm("auto measures its paths", 60);
	start_journal(&d, JOURNAL "backend = auto\nwhen_full = recycle\n");
	c = conn(&d);
	p = jpath_of(c);
	assert_int_equal(p.adaptive, 1);
	assert_int_equal(p.cpus, cpus);
	assert_string_equal(p.path, "none");
	assert_string_equal(p.chosen, "");
	assert_non_null(strstr(p.why, "measuring"));

	pwriters_start(&d, cpus);
	for (;;) {
		p = jpath_of(c);
		if (p.chosen[0])
			break;
		if (harness_ms() > end)
			fail_msg("auto chose no path for %u writers within %d ms (%" PRIu64 " batches inline, %" PRIu64
				 " queued): %s", npw, LIVENESS_MS, p.inline_batches, p.queued_batches, p.why);
		sleep_ms(20);
	}
	/* chosen from measurements of both */
	assert_true(path_is_one_of_many(p.chosen));
	assert_true(p.inline_batches > 0 && p.queued_batches > 0);
	assert_true(p.inline_rate > 0 && p.queued_rate > 0);
	if (!strstr(p.why, "measured") || !strstr(p.why, "records/s"))
		fail_msg("status says why as \"%s\"", p.why);

	/* hugepoolctl says it too, in words and in JSON */
	assert_int_equal(ctl(&d, "journal stat " JNAME, out, sizeof(out)), 0);
	if (!strstr(out, "Path:") || !strstr(out, "measured") || !strstr(out, "By path:"))
		fail_msg("journal stat:\n%s", out);
	assert_int_equal(ctl(&d, "--json journal stat " JNAME, out, sizeof(out)), 0);
	/* (the choice may have moved on since: the second queue is compared soon after the first) */
	if (!(strstr(out, "\"chosen\":\"inline\"") || strstr(out, "\"chosen\":\"queued\"") ||
	      strstr(out, "\"chosen\":\"queued-alt\"")) ||
	    !strstr(out, "\"adaptive\":1") || !strstr(out, "\"path_why\":\"") || !strstr(out, "\"inline_batches\":"))
		fail_msg("journal stat --json:\n%s", out);
	pwriters_stop();

	/* the first decision is logged once, at info level; later ones only at debug level */
	snprintf(want, sizeof(want), "batches of more writers than CPUs (%u) go", cpus);
	assert_int_equal(harness_log_count(&d, want), 1);

	/* a lone writer: inline, spinning */
	j = jopen(c);
	for (unsigned i = 0; i < 20; i++)
		append_wait(j, i, 100);
	p = jpath_of(c);
	assert_string_equal(p.path, "inline-spin");
	hp_journal_close(j);
	hp_disconnect(c);
	stop(&d);
}

/* An explicit backend is what it is: its batches never go inline for many writers, and it says why. */
static void test_explicit_not_measured(void **state)
{
	static struct daemon d;
	unsigned cpus = cpus_online();
	struct hp_journal_path p;
	char out[8192];
	hp_conn *c;
	(void)state;

	harness_watchdog_arm("an explicit backend is not measured", 60);
	start_journal(&d, JOURNAL "backend = io_uring\nwhen_full = recycle\n");
	c = conn(&d);
	pwriters_start(&d, cpus);
	do {
		sleep_ms(50);
		p = jpath_of(c);
	} while (p.queued_batches < 50 && !harness_watchdog_fired());
	pwriters_stop();
	p = jpath_of(c);
	assert_int_equal(p.adaptive, 0);
	assert_string_equal(p.chosen, "");
	assert_int_equal(p.inline_batches, 0);
	assert_int_equal(p.inline_rate, 0);
	assert_non_null(strstr(p.why, "as configured"));
	assert_int_equal(ctl(&d, "journal stat " JNAME, out, sizeof(out)), 0);
	assert_non_null(strstr(out, "as configured"));
	assert_int_equal(harness_log_count(&d, "batches of more writers than CPUs"), 0);
	hp_disconnect(c);
	stop(&d);
}

/*
 * How writers wait, whatever their number: spinning (the hint the daemon writes into their rings
 * at each submit) for a batch that needs no CPU but the flusher's, written inline or through
 * libaio's queue; sleeping (hint 0) while io_uring's io-wq workers write and sync it. Each path
 * pinned (a pinned path is never taken for a few writers' inline-spin), so every submit sets
 * that path's hint, on any machine.
 */
static void test_spin_hint_per_path(void **state)
{
	static struct daemon d;
	static const struct {
		const char *path;
		bool spin;
	} cases[] = { { "inline", true }, { "queued", true }, { "queued-alt", false } };
	(void)state;

	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char env[128];
		struct harness_opts o = { .env = { env, NULL } };
		struct jring_hdr *ring;
		uint32_t spin_us;
		hp_conn *c;
		hp_journal *j;

		if (!strcmp(cases[i].path, "queued-alt") && !two_queues()) {
			print_message("queued-alt: not here (auto has no io_uring queue beside libaio's)\n");
			continue;
		}
		harness_watchdog_arm("the spin hint of a pinned path", 60);
		snprintf(env, sizeof(env), "HUGEPOOLD_FAULT_INJECT=%s:path:%s", JNAME, cases[i].path);
		start_journal_opts(&d, JOURNAL "backend = auto\nring_size = 64K\n", &o);
		c = conn(&d);
		j = jopen_ring(c, 64 * KIB, &ring);
		for (unsigned k = 0; k < 20; k++)
			append_wait(j, k, 100);
		assert_string_equal(jpath_of(c).path, cases[i].path);
		spin_us = __atomic_load_n(&ring->spin_us, __ATOMIC_RELAXED);
		if (cases[i].spin ? spin_us == 0 : spin_us != 0)
			fail_msg("path %s: the writers' spin hint is %" PRIu32 " us: they should %s", cases[i].path,
				 spin_us, cases[i].spin ? "spin" : "sleep");
		hp_journal_close(j);
		hp_disconnect(c);
		stop(&d);
	}
}

/* The tests' path spec is refused where nothing is measured, and when malformed. */
static void test_path_spec_refused(void **state)
{
	static struct daemon d;
	char env[128], journals[512];
	struct harness_opts o = { .env = { env, NULL } };
	(void)state;

	harness_watchdog_arm("path specs refused", 60);
	snprintf(env, sizeof(env), "HUGEPOOLD_FAULT_INJECT=%s:path:inline", JNAME);
	snprintf(journals, sizeof(journals), "%s" JOURNAL "backend = sync\n", CLASSES);
	start_refused_opts(&d, NULL, journals, &o, 5, "bad path for the tests");
	snprintf(env, sizeof(env), "HUGEPOOLD_FAULT_INJECT=%s:path:flip:0", JNAME);
	snprintf(journals, sizeof(journals), "%s" JOURNAL "backend = auto\n", CLASSES);
	start_refused_opts(&d, NULL, journals, &o, 5, "bad path for the tests");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_auto_measures_and_says, teardown),
		cmocka_unit_test_teardown(test_explicit_not_measured, teardown),
		cmocka_unit_test_teardown(test_spin_hint_per_path, teardown),
		cmocka_unit_test_teardown(test_path_spec_refused, teardown),
	};

	return run_cases("journal_paths", tests);
}
