/* SPDX-License-Identifier: MIT */
/*
 * test_journal_backends.c - a journal's round trip on each I/O backend (io_uring, libaio, sync,
 * and direct = on) against a real hugepoold, through libhugepool: LSNs of single appends and of
 * groups, tickets, wait_lsn from another writer, a reader opened on the empty journal, readers
 * from the start and from the middle, the status figures, records across segments, truncation
 * as records go, and what is refused (records too large, a journal that does not exist). Then
 * each queue forbidden by a seccomp filter (the noaio and noiouring wrappers): auto, which tries
 * libaio first and opens io_uring's queue beside it, takes io_uring without libaio and libaio
 * alone without io_uring, and says why; the forbidden backend asked for by name refuses to
 * start.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>


#include "harness.h"
#include "hugepool.h"
#include "proto.h"
#include "case.h"
#include "journal_case.h"

struct backend_case {
	const char *backend;
	bool direct;
	const char *expect; /* backend name in status */
};

static const struct backend_case bc_uring = { "io_uring", false, "io_uring" };
static const struct backend_case bc_aio = { "libaio", false, "libaio" };
static const struct backend_case bc_sync = { "sync", false, "sync" };
static const struct backend_case bc_direct = { "auto", true, NULL };

/* Start with this backend, or skip with the reason when the machine cannot provide it. */
static void start_backend(struct daemon *d, const struct backend_case *bc, const char *extra)
{
	char classes[2048];
	char why[128];
	int r;

	if (bc->direct && !direct_io_works(why, sizeof(why))) {
		print_message("skipped: direct = on needs O_DIRECT: %s\n", why);
		skip();
	}
	snprintf(classes, sizeof(classes), "%s" JOURNAL "backend = %s\ndirect = %s\n%s", CLASSES, bc->backend,
		 bc->direct ? "on" : "off", extra ? extra : "");
	r = start_try(d, NULL, classes, NULL);
	if (r == -ECHILD && d->exit_status == 5 && harness_log_count(d, "no I/O backend could be set up") > 0) {
		running = NULL;
		harness_dump_log(d);
		harness_cleanup(d);
		print_message("skipped: backend %s cannot be set up on this machine (see the log)\n", bc->backend);
		skip();
	}
	assert_int_equal(r, 0);
}

static void roundtrip(const struct backend_case *bc)
{
	static const uint32_t sizes[] = { 0, 1, 7, 8, 9, 100, 4095, 4096, 4097, 65536, 100 * KIB, 0, 3, 100 * KIB - 1 };
	const uint32_t group[] = { 10, 0, 100 * KIB, 33 };
	struct iovec iov[4];
	uint8_t *gbuf[4];
	static struct daemon d; /* static: teardown uses it after a failed assertion left this frame */
	struct recs e = { 0 };
	struct hp_status *st;
	const struct hp_journal_status *js;
	hp_conn *c, *c2;
	hp_journal *j, *j2 = NULL;
	hp_journal_reader *early = NULL;
	uint64_t lsn, prev = 0, first, tickets[5], retain;
	uint64_t disk = 0;
	const void *data;
	size_t len;
	uint8_t *big;

	harness_watchdog_arm("round trip", 60);
	start_backend(&d, bc, NULL);
	c = conn(&d);
	c2 = conn(&d);
	j = jopen(c);
	assert_int_equal(hp_journal_durable_lsn(j), 0);
	/* a reader of the empty journal has nothing yet, and finds the records once they come */
	assert_int_equal(hp_journal_reader_open(c2, JNAME, 1, &early), 0);
	assert_int_equal(hp_journal_reader_next(early, &lsn, &data, &len), 0);
	/* what cannot be a journal's record or name is refused, and takes no LSN */
	big = calloc(1, MIB + 1);
	assert_non_null(big);
	assert_int_equal(hp_journal_append_wait(j, big, MIB + 1, &lsn), -EMSGSIZE);
	assert_int_equal(hp_journal_append_wait(j, big, 300 * KIB, &lsn), -EMSGSIZE); /* > max_batch_bytes */
	{
		struct iovec three[3] = { { big, 100 * KIB }, { big, 100 * KIB }, { big, 100 * KIB } };

		assert_int_equal(hp_journal_appendv_wait(j, three, 3, &lsn), -EMSGSIZE);
	}
	free(big);
	assert_int_equal(hp_journal_open(c, "nosuch", &j2), -ENOENT);
	assert_non_null(strstr(hp_last_error(c), "nosuch"));
	assert_int_equal(hp_journal_truncate(c, "nosuch", 1), -ENOENT);

	/* append_wait: LSNs 1, 2, 3, ... for a lone writer */
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		lsn = append_wait(j, 1000 + i, sizes[i]);
		assert_int_equal(lsn, prev + 1);
		/* the ring's durable LSN may lag the ack by a moment (published after the position) */
		assert_int_equal(hp_journal_wait_lsn(j, lsn, LIVENESS_MS), 0);
		assert_true(hp_journal_durable_lsn(j) >= lsn);
		recs_add(&e, lsn, 1000 + i, sizes[i]);
		prev = lsn;
	}

	/* appendv_wait: a group gets consecutive LSNs */
	for (unsigned i = 0; i < 4; i++) {
		gbuf[i] = malloc(group[i] + 1);
		pattern(gbuf[i], group[i], 2000 + i);
		iov[i] = (struct iovec){ gbuf[i], group[i] };
	}
	assert_int_equal(hp_journal_appendv_wait(j, iov, 4, &first), 0);
	assert_int_equal(first, prev + 1);
	for (unsigned i = 0; i < 4; i++) {
		recs_add(&e, first + i, 2000 + i, group[i]);
		free(gbuf[i]);
	}
	prev = first + 3;
	assert_int_equal(hp_journal_wait_lsn(j, prev, LIVENESS_MS), 0);

	/* append without waiting, then wait for the tickets (the last one covers them all) */
	for (unsigned i = 0; i < 5; i++) {
		tickets[i] = append_nowait(j, 3000 + i, 1000 * i);
		recs_add(&e, prev + 1 + i, 3000 + i, 1000 * i);
	}
	assert_int_equal(hp_journal_wait(j, tickets[4], LIVENESS_MS), 0);
	assert_int_equal(hp_journal_wait(j, tickets[1], 0), 0); /* durable already: no wait */
	prev += 5;
	assert_int_equal(hp_journal_wait_lsn(j, prev, LIVENESS_MS), 0);
	assert_true(hp_journal_durable_lsn(j) >= prev);

	/* wait_lsn from another writer on another connection: durability is the journal's */
	j2 = jopen(c2);
	append_nowait(j, 4000, 777);
	recs_add(&e, prev + 1, 4000, 777);
	prev++;
	assert_int_equal(hp_journal_wait_lsn(j2, prev, LIVENESS_MS), 0);
	assert_true(hp_journal_durable_lsn(j2) >= prev);
	/* and a writer's own records through wait_lsn */
	append_nowait(j2, 4001, 12345);
	recs_add(&e, prev + 1, 4001, 12345);
	prev++;
	assert_int_equal(hp_journal_wait_lsn(j2, prev, LIVENESS_MS), 0);

	/* the early reader now returns them all, in order */
	for (uint64_t want = 1; want <= prev; want++) {
		const struct rec *r = recs_find(&e, want);

		assert_int_equal(hp_journal_reader_next(early, &lsn, &data, &len), 1);
		assert_int_equal(lsn, want);
		assert_int_equal(len, r->len);
		assert_true(pattern_ok(data, len, r->seed));
	}
	assert_int_equal(hp_journal_reader_next(early, &lsn, &data, &len), 0);
	hp_journal_reader_close(early);

	/* everything reads back, from the start and from the middle */
	assert_int_equal(read_expect(c, 1, &e, 1), 1);
	assert_int_equal(read_expect(c2, 0, &e, 1), 1); /* 0 means from the start */
	assert_int_equal(read_expect(c, 12, &e, 12), 12);
	assert_int_equal(read_expect(c, prev, &e, prev), prev);

	st = status(c);
	js = jst(st);
	if (bc->expect)
		assert_string_equal(js->backend, bc->expect);
	assert_int_equal(js->state, 0);
	assert_int_equal(js->error, 0);
	assert_int_equal(js->appends, prev);
	assert_int_equal(js->durable_lsn, prev);
	assert_int_equal(js->next_lsn, prev + 1);
	assert_true(js->batches >= 1);
	assert_true(js->syncs >= 1);
	assert_true(js->bytes > 0);
	assert_int_equal(js->writers, 2);
	assert_int_equal(js->segments, 4);
	assert_int_equal(js->segment_size, MIB);
	assert_int_equal(js->direct, bc->direct);
	assert_true(js->sync_p50_ns > 0);
	assert_true(js->sync_p99_ns > 0);
	assert_true(js->sync_p999_ns > 0);
	assert_true(js->sync_max_ns >= js->sync_p50_ns);
	assert_true(js->mean_batch > 0);
	assert_int_equal(js->recovered_records, 0);
	assert_non_null(strstr(js->recovery, "new journal"));
	hp_status_free(st);

	/* more than a segment's worth: the records span several segments and still read back */
	for (size_t i = 0; i < e.n; i++)
		disk += jformat_rec_size(e.v[i].len);
	prev = append_run(j, &e, prev + 1, (unsigned)((2 * SEG_DATA + SEG_DATA / 2 - disk) / (64 * KIB + 32)), 64 * KIB);
	st = status(c);
	assert_true(jst(st)->segments_used >= 3);
	assert_int_equal(jst(st)->durable_lsn, prev);
	hp_status_free(st);
	assert_int_equal(read_expect(c, 1, &e, 1), 1);
	assert_int_equal(read_expect(c2, prev - 20, &e, prev - 20), prev - 20);

	/*
	 * when_full = block: twice the journal's capacity goes through it when the records are
	 * truncated as they go (appending that much without truncating is test_full_blocks)
	 */
	retain = 0;
	for (unsigned round = 0; round < 16; round++) {
		prev = append_run(j, &e, prev + 1, 8, 64 * KIB);
		retain = prev - 4;
		assert_int_equal(hp_journal_truncate(c2, JNAME, retain), 0);
	}
	st = status(c);
	js = jst(st);
	assert_int_equal(js->state, 0);
	assert_int_equal(js->retain_lsn, retain);
	assert_int_equal(js->durable_lsn, prev);
	hp_status_free(st);
	/* a reader from LSN 1 starts at the oldest record still kept, which is not the first */
	first = read_expect(c, 1, &e, 0);
	assert_true(first > 1);
	assert_true(first <= retain);
	/* one from the retention point starts there */
	assert_int_equal(read_expect(c, retain, &e, retain), retain);

	hp_journal_close(j2);
	hp_journal_close(j);
	hp_disconnect(c2);
	hp_disconnect(c);
	free(e.v);
	stop(&d);
}

static void test_roundtrip_io_uring(void **state)
{
	(void)state;
	roundtrip(&bc_uring);
}

static void test_roundtrip_libaio(void **state)
{
	(void)state;
	roundtrip(&bc_aio);
}

static void test_roundtrip_sync(void **state)
{
	(void)state;
	roundtrip(&bc_sync);
}

static void test_roundtrip_direct(void **state)
{
	(void)state;
	roundtrip(&bc_direct);
}

/* --- a backend forbidden ---------------------------------------------------------------------- */

struct forbidden {
	const char *wrapper; /* tests/noaio or tests/noiouring: the backend's setup call denied */
	const char *denied; /* its backend */
	const char *auto_takes; /* what auto uses then, alone */
};

/*
 * Under a seccomp filter that denies one backend's setup (EPERM, as a container's profile
 * would): auto takes the other backend alone, saying why the denied one is not there (in its
 * note and log), and a journal's round trip works on it; the denied backend asked for by name refuses to start, and says why.
 */
static void forbidden(const struct forbidden *f)
{
	struct harness_opts o = { .wrapper = f->wrapper };
	static struct daemon d; /* static: teardown uses it after a failed assertion left this frame */
	struct recs e = { 0 };
	struct hp_status *st;
	const struct hp_journal_status *js;
	char path[300], conf[300], refusal[160];
	hp_conn *c;
	hp_journal *j;
	uint64_t lsn, first;
	struct iovec iov[2];
	uint8_t a[500], b2[9000];

	harness_watchdog_arm(f->wrapper, 30);
#if !defined(__x86_64__)
	print_message("skipped: the wrappers' seccomp filters are written for x86_64\n");
	skip();
#endif
	snprintf(path, sizeof(path), "%s/%s", harness_build(), f->wrapper);
	if (access(path, X_OK) != 0)
		fail_msg("%s is missing: make builds it with test_journal_backends", path);

	start_journal_opts(&d, JOURNAL "backend = auto\n", &o);
	c = conn(&d);
	st = status(c);
	js = jst(st);
	assert_string_equal(js->backend, f->auto_takes);
	if (!strstr(js->note, f->denied) || !strstr(js->note, "Operation not permitted"))
		fail_msg("note does not say why %s is not used: \"%s\"", f->denied, js->note);
	assert_true(harness_log_count(&d, f->denied) >= 1);
	hp_status_free(st);
	j = jopen(c);
	for (unsigned i = 0; i < 20; i++) {
		lsn = append_wait(j, 50 + i, 100 * i);
		recs_add(&e, lsn, 50 + i, 100 * i);
	}
	pattern(a, sizeof(a), 90);
	pattern(b2, sizeof(b2), 91);
	iov[0] = (struct iovec){ a, sizeof(a) };
	iov[1] = (struct iovec){ b2, sizeof(b2) };
	assert_int_equal(hp_journal_appendv_wait(j, iov, 2, &first), 0);
	recs_add(&e, first, 90, sizeof(a));
	recs_add(&e, first + 1, 91, sizeof(b2));
	assert_int_equal(read_expect(c, 1, &e, 1), 1);
	st = status(c);
	assert_string_equal(jst(st)->backend, f->auto_takes);
	assert_int_equal(jst(st)->durable_lsn, first + 1);
	/* one queue: the path's words name no other */
	if (strstr(jst(st)->path.why, f->denied))
		fail_msg("the path's words name %s: \"%s\"", f->denied, jst(st)->path.why);
	hp_status_free(st);
	hp_journal_close(j);
	hp_disconnect(c);
	stop(&d);

	/* asked for by name: the daemon refuses to start, and says why */
	snprintf(conf, sizeof(conf), CLASSES JOURNAL "backend = %s\n", f->denied);
	snprintf(refusal, sizeof(refusal), "no I/O backend could be set up (%s: Operation not permitted", f->denied);
	start_refused_opts(&d, NULL, conf, &o, 5, refusal);
	free(e.v);
}

/* libaio denied: auto, which tries it first, says so and takes io_uring */
static void test_no_libaio(void **state)
{
	static const struct forbidden f = { "tests/noaio", "libaio", "io_uring" };

	(void)state;
	forbidden(&f);
}

/* io_uring denied: auto has libaio's queue alone, and says why */
static void test_no_io_uring(void **state)
{
	static const struct forbidden f = { "tests/noiouring", "io_uring", "libaio" };

	(void)state;
	forbidden(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_roundtrip_io_uring, teardown),
		cmocka_unit_test_teardown(test_roundtrip_libaio, teardown),
		cmocka_unit_test_teardown(test_roundtrip_sync, teardown),
		cmocka_unit_test_teardown(test_roundtrip_direct, teardown),
		cmocka_unit_test_teardown(test_no_libaio, teardown),
		cmocka_unit_test_teardown(test_no_io_uring, teardown),
	};

	return run_cases("journal_backends", tests);
}
