/* SPDX-License-Identifier: MIT */
/*
 * Integration tests of journals against a real hugepoold, driven through libhugepool:
 *
 *   1. round trips for each backend (io_uring, libaio, sync, and direct = on): LSNs, groups,
 *      tickets, wait_lsn, readers from the start and the middle, status, records across
 *      segments, truncation; a full when_full = block journal that waits for a truncate;
 *      the ring's durable LSN after an ack;
 *   2. SIGKILL under load from 32 writers, recovery, and again (CRASH_CYCLES times);
 *   3. torn tails edited into the segment files (buffered and O_DIRECT); reused segments: stale
 *      records never replayed, and a clean stop of a reused segment is not a torn tail;
 *   4. injected write and sync errors (each backend), a lone writer pipelining appends when the
 *      journal fails, writers opening while it fails;
 *   5. io_uring forbidden by a seccomp filter (the noiouring wrapper);
 *   6. a client killed in the middle of appending;
 *   7. status and journal opens answered while the flusher's sync is held up (sync, libaio);
 *   8. hostile writers: a ring rewritten while the daemon reads it, a doorbell drained and made
 *      blocking and wake words zeroed by another client, symlinks and loose modes in the
 *      journal directory, a writer flooding batches with large records.
 *
 * Every record's content is a function of a seed (pattern()), so a test remembers only
 * (lsn, seed, len) of what was acknowledged and checks every byte a reader returns. Every wait
 * is bounded: the harness's watchdog SIGKILLs the daemon of a test that overruns its budget, so
 * a hung daemon turns into failed calls and a failed test, never a hung suite. HP_TEST_FILTER
 * (a cmocka pattern such as "test_eio*") runs some tests only.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "hugepool.h"
#include "jformat.h"
#include "jring.h"
#include "pattern.h"
#include "proto.h"
#include "case.h"

#define KIB 1024u
#define MIB (1024u * 1024u)
#define JNAME "j"
#define CLASSES "[class small]\nsize = 2M\ncount = 2\n"
/* small segments keep every test quick: 4 x 1 MiB unless a test says otherwise */
#define JOURNAL "[journal j]\ndirectory = @DIR@/j\nsegment_size = 1M\nmax_batch_bytes = 256K\n"
#define SEG_DATA (MIB - JFORMAT_BLOCK) /* record bytes one segment holds */
#define LIVENESS_MS 10000 /* "an ack arrives within": generous for sanitizer builds */
#ifndef MIN
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#endif

/* --- the daemon under test (case.h starts, stops and tears it down) ------------------------------ */

/* Start a daemon with CLASSES and these [journal] sections, run as o says (o may be NULL). */
static void start_journal_opts(struct daemon *d, const char *journals, const struct harness_opts *o)
{
	char classes[2048];

	snprintf(classes, sizeof(classes), "%s%s", CLASSES, journals);
	start_opts(d, NULL, classes, o);
}

static void start_journal(struct daemon *d, const char *journals)
{
	start_journal_opts(d, journals, NULL);
}

/* SIGKILL the daemon; the directory stays for a restart. */
static void crash(struct daemon *d)
{
	assert_int_equal(harness_kill(d), 128 + SIGKILL);
}

/* A clean SIGTERM stop that keeps the directory. */
static void terminate(struct daemon *d)
{
	assert_int_equal(harness_terminate(d), 0);
}

/* Start it again as it was run last, or (restart_opts) with o's environment and wrapper. */
static void restart(struct daemon *d)
{
	int r = harness_restart(d);

	if (r < 0)
		harness_dump_log(d);
	assert_int_equal(r, 0);
}

static void restart_opts(struct daemon *d, const struct harness_opts *o)
{
	int r = harness_restart_opts(d, o);

	if (r < 0)
		harness_dump_log(d);
	assert_int_equal(r, 0);
}

static hp_journal *jopen(hp_conn *c)
{
	hp_journal *j = NULL;
	int r = hp_journal_open(c, JNAME, &j);

	if (r < 0)
		fprintf(stderr, "hp_journal_open: %s (%s)\n", hp_strerror(r), hp_last_error(c));
	assert_int_equal(r, 0);
	return j;
}

static const struct hp_journal_status *jst(const struct hp_status *st)
{
	for (uint32_t i = 0; i < st->njournals; i++)
		if (strcmp(st->journals[i].name, JNAME) == 0)
			return &st->journals[i];
	fail_msg("no journal %s in status", JNAME);
	return NULL;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* Wait (bounded) until the journal's state is `state`; returns the status then. */
static struct hp_status *wait_state(hp_conn *c, int state)
{
	double end = harness_ms() + LIVENESS_MS;

	for (;;) {
		struct hp_status *st = status(c);

		if (jst(st)->state == state)
			return st;
		if (harness_ms() > end)
			fail_msg("journal never reached state %d (is %d: %s)", state, jst(st)->state, jst(st)->note);
		hp_status_free(st);
		sleep_ms(5);
	}
}

/* --- record contents ---------------------------------------------------------------------- */

static bool pattern_ok(const void *data, size_t len, uint64_t seed)
{
	uint8_t *want = malloc(len ? len : 1);
	bool ok;

	assert_non_null(want);
	pattern(want, len, seed);
	ok = len == 0 || memcmp(want, data, len) == 0;
	free(want);
	return ok;
}

/* Acknowledged records, in LSN order, consecutive LSNs. */
struct rec {
	uint64_t lsn, seed;
	uint32_t len;
};

struct recs {
	struct rec *v;
	size_t n, cap;
};

static void recs_add(struct recs *r, uint64_t lsn, uint64_t seed, uint32_t len)
{
	if (r->n == r->cap) {
		r->cap = r->cap ? r->cap * 2 : 256;
		r->v = realloc(r->v, r->cap * sizeof(*r->v));
		assert_non_null(r->v);
	}
	if (r->n)
		assert_int_equal(lsn, r->v[r->n - 1].lsn + 1);
	r->v[r->n++] = (struct rec){ lsn, seed, len };
}

static uint64_t recs_last(const struct recs *r)
{
	return r->n ? r->v[r->n - 1].lsn : 0;
}

static const struct rec *recs_find(const struct recs *r, uint64_t lsn)
{
	if (!r->n || lsn < r->v[0].lsn || lsn > recs_last(r))
		return NULL;
	return &r->v[lsn - r->v[0].lsn];
}

/*
 * Read the journal from `from` to its end and compare with e: every record returned must be
 * the one appended at its LSN, byte for byte, LSNs consecutive, ending at e's last. first:
 * the LSN the reader must start at (0: wherever the journal still has records, >= from).
 * Returns the first LSN read.
 */
static uint64_t read_expect(hp_conn *c, uint64_t from, const struct recs *e, uint64_t first)
{
	hp_journal_reader *r = NULL;
	uint64_t lsn, expect = first, start = 0, n = 0;
	const void *data;
	size_t len;
	int rc;

	assert_int_equal(hp_journal_reader_open(c, JNAME, from, &r), 0);
	while ((rc = hp_journal_reader_next(r, &lsn, &data, &len)) == 1) {
		const struct rec *want = recs_find(e, lsn);

		if (n++ == 0) {
			start = lsn;
			if (!first)
				expect = lsn;
			if (lsn < from)
				fail_msg("reader from LSN %" PRIu64 " returned LSN %" PRIu64 " first", from, lsn);
		}
		if (lsn != expect)
			fail_msg("reader returned LSN %" PRIu64 ", expected %" PRIu64, lsn, expect);
		if (!want)
			fail_msg("reader returned LSN %" PRIu64 ", never appended (appended %" PRIu64 "..%" PRIu64 ")",
				 lsn, e->n ? e->v[0].lsn : 0, recs_last(e));
		if (len != want->len || !pattern_ok(data, len, want->seed))
			fail_msg("record %" PRIu64 ": %zu bytes, appended %u bytes; content %s", lsn, len, want->len,
				 len == want->len ? "differs" : "not compared");
		expect++;
	}
	if (rc != 0)
		fail_msg("reader: %s after LSN %" PRIu64, hp_strerror(rc), expect - 1);
	if (expect - 1 != recs_last(e))
		fail_msg("reader from %" PRIu64 " ended at LSN %" PRIu64 " (read %" PRIu64 "), appended up to %" PRIu64,
			 from, expect - 1, n, recs_last(e));
	hp_journal_reader_close(r);
	return start;
}

/* Append one record of seed's content and wait; returns its LSN. */
static uint64_t append_wait(hp_journal *j, uint64_t seed, uint32_t len)
{
	uint8_t *buf = malloc(len ? len : 1);
	uint64_t lsn = 0;
	int r;

	assert_non_null(buf);
	pattern(buf, len, seed);
	r = hp_journal_append_wait(j, buf, len, &lsn);
	free(buf);
	if (r < 0)
		fail_msg("hp_journal_append_wait(%u bytes): %s", len, hp_strerror(r));
	return lsn;
}

/* Append one record without waiting; returns the ticket. */
static uint64_t append_nowait(hp_journal *j, uint64_t seed, uint32_t len)
{
	uint8_t *buf = malloc(len ? len : 1);
	uint64_t ticket = 0;
	int r;

	assert_non_null(buf);
	pattern(buf, len, seed);
	r = hp_journal_append(j, buf, len, &ticket);
	free(buf);
	if (r < 0)
		fail_msg("hp_journal_append(%u bytes): %s", len, hp_strerror(r));
	return ticket;
}

/*
 * One writer alone appends `count` records of `len` bytes whose seeds are their LSNs (known in
 * advance: nobody else appends), pipelined, then waits for them all. Returns the last LSN.
 */
static uint64_t append_run(hp_journal *j, struct recs *e, uint64_t next_lsn, unsigned count, uint32_t len)
{
	uint64_t ticket = 0;

	for (unsigned i = 0; i < count; i++) {
		ticket = append_nowait(j, next_lsn + i, len);
		recs_add(e, next_lsn + i, next_lsn + i, len);
	}
	assert_int_equal(hp_journal_wait(j, ticket, LIVENESS_MS), 0);
	assert_int_equal(hp_journal_wait_lsn(j, next_lsn + count - 1, LIVENESS_MS), 0);
	return next_lsn + count - 1;
}

/* --- segment files -------------------------------------------------------------------------- */

/* The last DATA record of the journal as the segment files hold it. */
struct last_rec {
	char path[256];
	uint64_t off, lsn;
	uint32_t len;
};

static void find_last_record(const struct daemon *d, unsigned segments, struct last_rec *ret)
{
	uint64_t best_gen = 0;

	memset(ret, 0, sizeof(*ret));
	for (unsigned i = 0; i < segments; i++) {
		char path[256];
		uint8_t *seg = malloc(MIB);
		struct jformat_seg_hdr h;
		int fd;

		assert_non_null(seg);
		snprintf(path, sizeof(path), "%s/j/%s-%03u.seg", d->dir, JNAME, i);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		assert_true(fd >= 0);
		assert_int_equal(pread(fd, seg, MIB, 0), MIB);
		close(fd);
		memcpy(&h, seg, sizeof(h));
		if (jformat_seg_hdr_check(&h, JNAME, NULL) == 0 && h.generation > best_gen) {
			uint64_t off = JFORMAT_BLOCK, lsn = h.first_lsn;
			struct jformat_rec rec;

			best_gen = h.generation;
			while (off < MIB && jformat_rec_check(seg + off, MIB - off, lsn, h.generation, &rec, NULL) == 0) {
				if (rec.type == JREC_DATA) {
					snprintf(ret->path, sizeof(ret->path), "%s", path);
					ret->off = off;
					ret->lsn = lsn++;
					ret->len = rec.len;
				}
				off += jformat_rec_size(rec.len);
			}
		}
		free(seg);
	}
	assert_true(best_gen > 0);
	assert_true(ret->lsn > 0);
}

/* Can files in /tmp be opened O_DIRECT? (tmpfs cannot) */
static bool direct_io_works(char *why, size_t len)
{
	char path[] = "/tmp/hugepool-direct.XXXXXX";
	int fd = mkostemp(path, O_CLOEXEC), dfd;

	if (fd < 0) {
		snprintf(why, len, "mkostemp in /tmp: %s", strerror(errno));
		return false;
	}
	dfd = open(path, O_RDWR | O_DIRECT | O_CLOEXEC);
	if (dfd < 0)
		snprintf(why, len, "O_DIRECT in /tmp: %s", strerror(errno));
	unlink(path);
	close(fd);
	if (dfd >= 0)
		close(dfd);
	return dfd >= 0;
}

/* --- 1. round trips ------------------------------------------------------------------------- */

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

/*
 * After hp_journal_append_wait acknowledged LSN L, the same handle's hp_journal_durable_lsn()
 * knows L is durable. A lone writer (whose waits spin on its ring) checks it many times: the
 * daemon must publish the durable LSN before the ring's durable position; the window when it did
 * not was a few instructions wide, which the sanitizer builds widen (found there nearly always,
 * seldom in an optimised build).
 */
static void test_durable_lsn_after_ack(void **state)
{
	static struct daemon d; /* static: teardown uses it after a failed assertion left this frame */
	uint8_t buf[64];
	hp_conn *c;
	hp_journal *j;
	double end;
	unsigned i;
	(void)state;

	harness_watchdog_arm("durable LSN after an ack", 30);
	start_journal(&d, JOURNAL "when_full = recycle\n");
	c = conn(&d);
	j = jopen(c);
	memset(buf, 7, sizeof(buf));
	end = harness_ms() + 5000; /* bounds the run time only */
	for (i = 0; i < 10000 && harness_ms() < end; i++) {
		uint64_t lsn = 0, known;

		assert_int_equal(hp_journal_append_wait(j, buf, sizeof(buf), &lsn), 0);
		known = hp_journal_durable_lsn(j);
		if (known < lsn)
			fail_msg("hp_journal_append_wait acknowledged LSN %" PRIu64 ", then hp_journal_durable_lsn() "
				 "said %" PRIu64 " (ack %u)", lsn, known, i + 1);
	}
	hp_journal_close(j);
	hp_disconnect(c);
	stop(&d);
}

/* --- when_full = block ------------------------------------------------------------------------ */

struct filler {
	hp_journal *j;
	uint64_t first_lsn; /* LSN of its first record: it is alone */
	unsigned count;
	uint32_t len;
	atomic_uint acked;
	atomic_bool done;
	int err;
};

static void *filler_main(void *arg)
{
	struct filler *f = arg;
	uint8_t *buf = malloc(f->len);

	for (unsigned i = 0; buf && i < f->count; i++) {
		uint64_t lsn = 0;

		pattern(buf, f->len, f->first_lsn + i);
		f->err = hp_journal_append_wait(f->j, buf, f->len, &lsn);
		if (f->err == 0 && lsn != f->first_lsn + i)
			f->err = -EBADMSG;
		if (f->err < 0)
			break;
		atomic_fetch_add(&f->acked, 1);
	}
	free(buf);
	atomic_store(&f->done, true);
	return NULL;
}

/* static: the thread must not outlive what it points into if an assertion fails */
static struct filler filler;
static pthread_t filler_thread;

static void filler_join(void)
{
	pthread_join(filler_thread, NULL);
}

static void test_full_blocks(void **state)
{
	static struct daemon d; /* static: teardown uses it after a failed assertion left this frame */
	struct recs e = { 0 };
	struct hp_status *st;
	hp_conn *c, *c2;
	unsigned acked;
	uint64_t durable;
	double end;
	(void)state;

	harness_watchdog_arm("full journal", 30);
	memset(&filler, 0, sizeof(filler));
	filler.first_lsn = 1;
	filler.len = 64 * KIB;
	start_journal(&d, JOURNAL "when_full = block\n");
	c = conn(&d);
	c2 = conn(&d);
	filler.j = jopen(c);
	/* 4 segments of 1 MiB hold 60 records of 64 KiB: 100 cannot all go in */
	filler.count = 100;
	for (unsigned i = 0; i < filler.count; i++)
		recs_add(&e, 1 + i, 1 + i, filler.len);
	assert_int_equal(pthread_create(&filler_thread, NULL, filler_main, &filler), 0);
	threads_cleanup = filler_join;

	/* the journal fills up and says so; the daemon must still answer (bounded) */
	harness_watchdog_arm("full journal: status while the journal fills up", 10);
	st = wait_state(c2, 1);
	durable = jst(st)->durable_lsn;
	assert_true(durable >= 3 * (SEG_DATA / (64 * KIB + 32)));
	assert_int_equal(jst(st)->segments_used, 4);
	hp_status_free(st);
	/* and the writer's append_wait does not return while it is full */
	acked = atomic_load(&filler.acked);
	sleep_ms(300);
	assert_false(atomic_load(&filler.done));
	assert_int_equal(atomic_load(&filler.acked), acked);
	st = status(c2);
	assert_int_equal(jst(st)->state, 1);
	assert_int_equal(jst(st)->durable_lsn, durable);
	hp_status_free(st);

	/* a truncate from another connection lets it go on: everything is written in the end */
	harness_watchdog_arm("full journal: truncate and the rest of the appends", 40);
	end = harness_ms() + 3 * LIVENESS_MS;
	while (!atomic_load(&filler.done) && harness_ms() < end) {
		st = status(c2);
		durable = jst(st)->durable_lsn;
		hp_status_free(st);
		assert_int_equal(hp_journal_truncate(c2, JNAME, durable + 1), 0);
		sleep_ms(20);
	}
	assert_true(atomic_load(&filler.done));
	threads_cleanup = NULL;
	pthread_join(filler_thread, NULL);
	assert_int_equal(filler.err, 0);
	assert_int_equal(atomic_load(&filler.acked), filler.count);
	st = status(c2);
	assert_int_equal(jst(st)->state, 0);
	assert_int_equal(jst(st)->durable_lsn, filler.count);
	hp_status_free(st);
	assert_true(read_expect(c2, 1, &e, 0) > 1);
	hp_journal_close(filler.j);
	hp_disconnect(c2);
	hp_disconnect(c);
	free(e.v);
	stop(&d);
}

/* --- 2. crash: SIGKILL under load, recover, go on ------------------------------------------------ */

#define CRASH_WRITERS 32
#define CRASH_CYCLES 10

struct acked {
	uint64_t lsn;
	uint32_t seq, len;
};

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
	struct acked *v;
	size_t n, cap;
	int last_err; /* how its last epoch ended */
	int bad; /* an ack with an LSN of 0 */
	pthread_t t;
};

static uint64_t crash_seed(unsigned id, uint32_t seq)
{
	return ((uint64_t)id << 32) | seq;
}

static uint32_t crash_len(unsigned id, uint32_t seq)
{
	uint64_t m = mix(crash_seed(id, seq));

	return m % 8 == 0 ? 0 : (uint32_t)(m % 1500);
}

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

		r = hp_connect(ctl->socket, &c);
		if (r == 0)
			r = hp_journal_open(c, JNAME, &j);
		while (r == 0) {
			uint32_t len = crash_len(w->id, w->seq);
			uint64_t lsn = 0;

			pattern(buf, len, crash_seed(w->id, w->seq));
			r = hp_journal_append_wait(j, buf, len, &lsn);
			if (r < 0)
				break;
			if (w->n == w->cap) {
				w->cap = w->cap ? w->cap * 2 : 1024;
				w->v = realloc(w->v, w->cap * sizeof(*w->v));
				if (!w->v)
					abort();
			}
			if (lsn == 0)
				w->bad++;
			w->v[w->n++] = (struct acked){ lsn, w->seq, len };
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

/* Every acknowledged record is in the journal at its LSN; LSNs 1..durable, no gaps. */
static void crash_verify(hp_conn *c, struct cwriter *w, unsigned nw, uint64_t *ret_durable)
{
	struct hp_status *st = status(c);
	uint64_t durable = jst(st)->durable_lsn, total = 0, lsn, expect = 1, seen = 0;
	struct acked **by_lsn;
	unsigned *owner;
	hp_journal_reader *r = NULL;
	const void *data;
	size_t len;
	int rc;

	/* nothing was truncated: recovery found every record there is */
	assert_int_equal(jst(st)->recovered_records, durable);
	assert_int_equal(jst(st)->next_lsn, durable + 1);
	assert_non_null(strstr(jst(st)->recovery, "records (LSN 1.."));
	hp_status_free(st);
	by_lsn = calloc(durable + 1, sizeof(*by_lsn));
	owner = calloc(durable + 1, sizeof(*owner));
	assert_true(by_lsn && owner);
	for (unsigned i = 0; i < nw; i++) {
		assert_int_equal(w[i].bad, 0);
		for (size_t k = 0; k < w[i].n; k++) {
			struct acked *a = &w[i].v[k];

			if (a->lsn > durable)
				fail_msg("writer %u's record %u was acknowledged with LSN %" PRIu64
					 ", recovery ended at %" PRIu64, i, a->seq, a->lsn, durable);
			if (by_lsn[a->lsn])
				fail_msg("LSN %" PRIu64 " acknowledged twice (writers %u and %u)", a->lsn, owner[a->lsn], i);
			by_lsn[a->lsn] = a;
			owner[a->lsn] = i;
			total++;
		}
	}
	assert_int_equal(hp_journal_reader_open(c, JNAME, 1, &r), 0);
	while ((rc = hp_journal_reader_next(r, &lsn, &data, &len)) == 1) {
		struct acked *a;

		if (lsn != expect)
			fail_msg("reader returned LSN %" PRIu64 ", expected %" PRIu64 " (a gap)", lsn, expect);
		expect++;
		if (lsn > durable)
			fail_msg("reader returned LSN %" PRIu64 " beyond the durable %" PRIu64, lsn, durable);
		a = by_lsn[lsn];
		if (!a)
			continue; /* written, never acknowledged: allowed */
		if (len != a->len || !pattern_ok(data, len, crash_seed(owner[lsn], a->seq)))
			fail_msg("LSN %" PRIu64 " (writer %u record %u, %u bytes) read back as %zu bytes%s", lsn,
				 owner[lsn], a->seq, a->len, len, len == a->len ? " of other content" : "");
		seen++;
	}
	if (rc != 0)
		fail_msg("reader: %s after LSN %" PRIu64, hp_strerror(rc), expect - 1);
	hp_journal_reader_close(r);
	if (expect - 1 != durable)
		fail_msg("reader ended at LSN %" PRIu64 ", the journal is durable to %" PRIu64, expect - 1, durable);
	assert_int_equal(seen, total);
	free(by_lsn);
	free(owner);
	*ret_durable = durable;
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
		free(crash_w[i].v);
	}
	free(crash_w);
	crash_w = NULL;
}

static void test_crash_recovery(void **state)
{
	static struct daemon d; /* static: teardown uses it after a failed assertion left this frame */
	struct cwriter *w = crash_w = calloc(CRASH_WRITERS, sizeof(*w));
	unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();
	uint64_t durable = 0, prev_durable = 0;
	hp_conn *c;
	(void)state;

	assert_non_null(w);
	crash_ctl.epoch = crash_ctl.stopped = 0;
	crash_ctl.done = false;
	atomic_store(&crash_ctl.acks, 0);
	print_message("crash test: random seed %u\n", seed);
	harness_watchdog_arm("crash recovery", 120);
	/* room for all cycles without truncating: a cycle lands up to ~4000 acks of at most 1.5 KB
	 * on disk (about 0.7 KB on average), so 10 cycles fit 64 x 1 MiB even at worst (a full
	 * journal would stall the writers and fail the cycle's liveness check: a sizing error of
	 * the test, not a daemon bug) */
	start_journal(&d, JOURNAL "segments = 64\n");
	crash_ctl.socket = d.socket;
	threads_cleanup = crash_join;
	for (unsigned i = 0; i < CRASH_WRITERS; i++) {
		w[i] = (struct cwriter){ .ctl = &crash_ctl, .id = i };
		assert_int_equal(pthread_create(&w[i].t, NULL, cwriter_main, &w[i]), 0);
	}
	for (unsigned cycle = 0; cycle < CRASH_CYCLES; cycle++) {
		unsigned long base = atomic_load(&crash_ctl.acks);
		unsigned extra_ms = (unsigned)rand_r(&seed) % 40;
		double end = harness_ms() + 3 * LIVENESS_MS;
		int errors[CRASH_WRITERS];

		pthread_mutex_lock(&crash_ctl.lock);
		crash_ctl.epoch++;
		pthread_cond_broadcast(&crash_ctl.cond);
		pthread_mutex_unlock(&crash_ctl.lock);
		/* under load: some acks, then a random moment */
		while (atomic_load(&crash_ctl.acks) < base + 300 && harness_ms() < end)
			sleep_ms(1);
		if (atomic_load(&crash_ctl.acks) < base + 300)
			fail_msg("cycle %u: only %lu acks in %d ms", cycle, atomic_load(&crash_ctl.acks) - base, 3 * LIVENESS_MS);
		sleep_ms((int)extra_ms);
		crash(&d);
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
			fail_msg("cycle %u: %u writers still blocked %d ms after the daemon was killed", cycle, stuck,
				 LIVENESS_MS);
		}
		pthread_mutex_unlock(&crash_ctl.lock);
		for (unsigned i = 0; i < CRASH_WRITERS; i++)
			if (errors[i] >= 0)
				fail_msg("cycle %u: writer %u ended with %d, not an error", cycle, i, errors[i]);

		restart(&d);
		c = conn(&d);
		crash_verify(c, w, CRASH_WRITERS, &durable);
		/* LSNs go on from where recovery ended, never back */
		assert_true(durable >= prev_durable);
		prev_durable = durable;
		hp_disconnect(c);
		print_message("cycle %u: killed after %lu acks (+%u ms), recovered %" PRIu64 " records\n", cycle,
			      atomic_load(&crash_ctl.acks) - base, extra_ms, durable);
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
	crash_verify(c, w, CRASH_WRITERS, &durable);
	assert_true(durable > prev_durable);
	hp_disconnect(c);
	threads_cleanup = NULL;
	crash_join();
	stop(&d);
}

/* --- 3. torn tails and stale segments -------------------------------------------------------- */

enum tear { TEAR_ZERO_HALF, TEAR_FLIP_BYTE };

struct tear_case {
	enum tear how;
	bool direct; /* and the last batch holds several records, so the cut is inside a block */
};

static const struct tear_case tc_zero = { TEAR_ZERO_HALF, false };
static const struct tear_case tc_flip = { TEAR_FLIP_BYTE, false };
static const struct tear_case tc_zero_direct = { TEAR_ZERO_HALF, true };

static void torn_tail(const struct tear_case *tc)
{
	static struct daemon d; /* static: teardown uses it after a failed assertion left this frame */
	struct recs e = { 0 }, kept = { 0 };
	struct last_rec last;
	struct hp_status *st;
	const struct hp_journal_status *js;
	uint8_t *buf;
	hp_conn *c;
	hp_journal *j;
	uint64_t lsn = 0;
	size_t size;
	int fd;

	harness_watchdog_arm("torn tail", 30);
	if (tc->direct) {
		char why[128];

		if (!direct_io_works(why, sizeof(why))) {
			print_message("skipped: direct = on needs O_DIRECT: %s\n", why);
			skip();
		}
		start_journal(&d, JOURNAL "direct = on\n");
	} else {
		start_journal(&d, JOURNAL);
	}
	c = conn(&d);
	j = jopen(c);
	for (unsigned i = 0; i < 10; i++) {
		lsn = append_wait(j, 100 + i, 1000 + 100 * i);
		recs_add(&e, lsn, 100 + i, 1000 + 100 * i);
	}
	if (tc->direct) {
		/* a last batch of three records: the one torn starts inside a block */
		const uint32_t lens[3] = { 1500, 700, 2000 };
		struct iovec iov[3];
		uint8_t *b[3];

		for (unsigned i = 0; i < 3; i++) {
			b[i] = malloc(lens[i]);
			pattern(b[i], lens[i], 200 + i);
			iov[i] = (struct iovec){ b[i], lens[i] };
		}
		assert_int_equal(hp_journal_appendv_wait(j, iov, 3, &lsn), 0);
		for (unsigned i = 0; i < 3; i++) {
			recs_add(&e, lsn + i, 200 + i, lens[i]);
			free(b[i]);
		}
	}
	hp_journal_close(j);
	hp_disconnect(c);
	terminate(&d);

	/* tear the last record on disk */
	find_last_record(&d, 4, &last);
	assert_int_equal(last.lsn, recs_last(&e));
	assert_int_equal(last.len, recs_find(&e, last.lsn)->len);
	if (tc->direct)
		assert_true(last.off % JFORMAT_BLOCK != 0);
	size = jformat_rec_size(last.len);
	fd = open(last.path, O_RDWR | O_CLOEXEC);
	assert_true(fd >= 0);
	if (tc->how == TEAR_ZERO_HALF) {
		buf = calloc(1, size);
		assert_int_equal(pwrite(fd, buf, size - size / 2, (off_t)(last.off + size / 2)), (ssize_t)(size - size / 2));
	} else {
		uint8_t byte;
		off_t at = (off_t)(last.off + JFORMAT_REC_HDR + last.len / 2);

		buf = NULL;
		assert_int_equal(pread(fd, &byte, 1, at), 1);
		byte ^= 0x10;
		assert_int_equal(pwrite(fd, &byte, 1, at), 1);
	}
	free(buf);
	assert_int_equal(fsync(fd), 0);
	close(fd);

	/* the torn record is gone, everything before it is there */
	restart(&d);
	c = conn(&d);
	st = status(c);
	js = jst(st);
	assert_int_equal(js->durable_lsn, last.lsn - 1);
	assert_int_equal(js->next_lsn, last.lsn);
	assert_int_equal(js->recovered_records, last.lsn - 1);
	if (!strstr(js->recovery, "cut"))
		fail_msg("recovery text does not mention the cut: \"%s\"", js->recovery);
	/* both a zeroed half and a flipped byte break the record's checksum */
	assert_non_null(strstr(js->recovery, "checksum"));
	hp_status_free(st);
	for (size_t i = 0; i + 1 < e.n; i++)
		recs_add(&kept, e.v[i].lsn, e.v[i].seed, e.v[i].len);
	assert_int_equal(read_expect(c, 1, &kept, 1), 1);

	/* appending goes on at the torn record's LSN, and reads back */
	j = jopen(c);
	for (unsigned i = 0; i < 5; i++) {
		lsn = append_wait(j, 300 + i, 3000 + 10 * i);
		assert_int_equal(lsn, last.lsn + i);
		recs_add(&kept, lsn, 300 + i, 3000 + 10 * i);
	}
	assert_int_equal(read_expect(c, 1, &kept, 1), 1);
	hp_journal_close(j);
	hp_disconnect(c);

	/* and a second recovery finds the new records too */
	crash(&d);
	restart(&d);
	c = conn(&d);
	st = status(c);
	assert_int_equal(jst(st)->durable_lsn, recs_last(&kept));
	assert_int_equal(jst(st)->recovered_records, recs_last(&kept));
	hp_status_free(st);
	assert_int_equal(read_expect(c, 1, &kept, 1), 1);
	hp_disconnect(c);
	free(e.v);
	free(kept.v);
	stop(&d);
}

static void test_torn_tail_zeroed(void **state)
{
	(void)state;
	torn_tail(&tc_zero);
}

static void test_torn_tail_flipped(void **state)
{
	(void)state;
	torn_tail(&tc_flip);
}

static void test_torn_tail_direct(void **state)
{
	(void)state;
	torn_tail(&tc_zero_direct);
}

/* when_full = recycle: reused segments never replay a record of their earlier use */
static void test_recycle_stale(void **state)
{
	static struct daemon d; /* static: teardown uses it after a failed assertion left this frame */
	struct recs e = { 0 };
	struct hp_status *st;
	hp_conn *c;
	hp_journal *j;
	uint64_t last = 0, first, first2;
	(void)state;

	harness_watchdog_arm("recycle", 30);
	start_journal(&d, JOURNAL "segments = 3\nwhen_full = recycle\n");
	c = conn(&d);
	j = jopen(c);
	/* 5.5 segments' worth through a journal of 3: sizes vary so records straddle old ones */
	for (unsigned round = 0; round < 11; round++)
		last = append_run(j, &e, last + 1, 16, (uint32_t)(20000 + 3000 * round + 8 * (round % 3)));
	st = status(c);
	assert_int_equal(jst(st)->state, 0);
	assert_int_equal(jst(st)->durable_lsn, last);
	hp_status_free(st);
	first = read_expect(c, 1, &e, 0);
	assert_true(first > 1);
	hp_journal_close(j);
	hp_disconnect(c);

	/* after a clean stop and after a crash: only the retained range, never an old record */
	for (unsigned k = 0; k < 2; k++) {
		if (k == 0)
			terminate(&d);
		else
			crash(&d);
		restart(&d);
		c = conn(&d);
		st = status(c);
		assert_int_equal(jst(st)->durable_lsn, last);
		assert_int_equal(jst(st)->recovered_records, last - first + 1);
		hp_status_free(st);
		assert_int_equal(read_expect(c, 1, &e, 0), first);
		/* appending goes on after the recovered end, through more reuse */
		j = jopen(c);
		last = append_run(j, &e, last + 1, 40, 30000);
		first2 = read_expect(c, 1, &e, 0);
		assert_true(first2 > first);
		first = first2;
		hp_journal_close(j);
		hp_disconnect(c);
	}
	free(e.v);
	stop(&d);
}

/*
 * A clean stop of a journal whose current segment is a reused one: what the segment's earlier use
 * wrote follows the last record. Recovery must find a clean end there, not a torn tail (its log
 * and status would tell the operator that a crash tore a write, and it would rewrite the rest of
 * the segment). Twice: records all of one size, so that the end falls on a record header of the
 * earlier use, then of mixed sizes, so that it falls in the middle of an earlier record.
 */
static void clean_restart_after_reuse(bool recycle)
{
	static struct daemon d; /* static: teardown uses it after a failed assertion left this frame */

	harness_watchdog_arm("clean restart after reuse", 30);
	for (unsigned mixed = 0; mixed < 2; mixed++) {
		struct recs e = { 0 };
		struct hp_status *st;
		hp_conn *c;
		hp_journal *j;
		uint64_t last = 0, first;

		start_journal(&d, recycle ? JOURNAL "segments = 3\nwhen_full = recycle\n" : JOURNAL "segments = 3\n");
		c = conn(&d);
		j = jopen(c);
		/* about 3.4 MiB through 3 segments of 1 MiB: the 4th segment written (the 1st reused) is
		 * a quarter full, with its first use's records behind the last one */
		for (unsigned round = 0; round < (mixed ? 16u : 13u); round++) {
			uint32_t len = mixed ? 40000 + (round * 7919) % 30001 + 8 * (round % 3) : 64 * KIB;

			last = append_run(j, &e, last + 1, 4, len);
			if (!recycle)
				assert_int_equal(hp_journal_truncate(c, JNAME, last + 1), 0);
		}
		hp_journal_close(j);
		hp_disconnect(c);
		terminate(&d);
		restart(&d);
		c = conn(&d);
		st = status(c);
		assert_int_equal(jst(st)->durable_lsn, last);
		if (strstr(jst(st)->recovery, "torn") || strstr(jst(st)->recovery, "cut"))
			fail_msg("after a clean stop (records of %s), recovery reports \"%s\"",
				 mixed ? "mixed sizes" : "one size", jst(st)->recovery);
		hp_status_free(st);
		assert_int_equal(harness_log_count(&d, "torn tail"), 0);
		first = read_expect(c, 1, &e, 0);
		assert_true(first > 1);
		hp_disconnect(c);
		free(e.v);
		stop(&d);
	}
}

static void test_clean_restart_recycled(void **state)
{
	(void)state;
	clean_restart_after_reuse(true);
}

static void test_clean_restart_truncated(void **state)
{
	(void)state;
	clean_restart_after_reuse(false);
}

/* --- 4. injected I/O errors ------------------------------------------------------------------- */

#define EIO_WRITERS 4

struct eio_writer {
	const char *socket;
	unsigned id;
	struct acked *v; /* acknowledged: LSN, seq, len */
	size_t n, cap;
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
	int r = hp_connect(w->socket, &c);

	if (r == 0)
		r = hp_journal_open(c, JNAME, &j);
	for (uint32_t seq = 0; r == 0 && seq < 100000; seq++) {
		uint32_t len = 100 + (uint32_t)(mix(crash_seed(w->id, seq)) % 3000);
		uint64_t lsn = 0;

		pattern(buf, len, crash_seed(w->id, seq));
		r = hp_journal_append_wait(j, buf, len, &lsn);
		if (r < 0)
			break;
		if (w->n == w->cap) {
			w->cap = w->cap ? w->cap * 2 : 256;
			w->v = realloc(w->v, w->cap * sizeof(*w->v));
			if (!w->v)
				abort();
		}
		w->v[w->n++] = (struct acked){ lsn, seq, len };
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
		free(eio_w[i].v);
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

static void eio_case(const char *spec, const char *backend)
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
		total += eio_w[i].n;
		for (size_t k = 0; k < eio_w[i].n; k++)
			max_acked = MAX(max_acked, eio_w[i].v[k].lsn);
	}
	/* the fault fired after some appends were acknowledged (K > 1) */
	assert_true(total > 0);

	/* the journal says it failed, and why; nothing past its durable LSN was acknowledged */
	st = status(c);
	js = jst(st);
	assert_int_equal(js->state, 2);
	assert_int_equal(js->error, -EIO);
	assert_true(strlen(js->note) > 0);
	durable = js->durable_lsn;
	assert_true(max_acked <= durable);
	hp_status_free(st);
	assert_true(harness_log_count(&d, "is read-only from now on") >= 1);
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
		struct cwriter cw[EIO_WRITERS];

		for (unsigned i = 0; i < EIO_WRITERS; i++)
			cw[i] = (struct cwriter){ .id = i, .v = eio_w[i].v, .n = eio_w[i].n };
		crash_verify(c, cw, EIO_WRITERS, &durable);
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
	r = hp_connect(w->socket, &c);
	if (r == 0)
		r = hp_journal_open(c, JNAME, &j);
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

/* --- 5. io_uring forbidden ---------------------------------------------------------------------- */

static void test_no_io_uring(void **state)
{
	struct harness_opts o = { .wrapper = "tests/noiouring" };
	static struct daemon d; /* static: teardown uses it after a failed assertion left this frame */
	struct recs e = { 0 };
	struct hp_status *st;
	const struct hp_journal_status *js;
	char path[300];
	hp_conn *c;
	hp_journal *j;
	uint64_t lsn, first;
	struct iovec iov[2];
	uint8_t a[500], b2[9000];
	(void)state;

	harness_watchdog_arm("no io_uring", 30);
#if !defined(__x86_64__)
	print_message("skipped: noiouring's seccomp filter is written for x86_64\n");
	skip();
#endif
	snprintf(path, sizeof(path), "%s/tests/noiouring", harness_build());
	if (access(path, X_OK) != 0)
		fail_msg("%s is missing: make builds it with test_journal", path);

	/* auto: io_uring is passed over with the reason, libaio does the job */
	start_journal_opts(&d, JOURNAL "backend = auto\n", &o);
	c = conn(&d);
	st = status(c);
	js = jst(st);
	assert_string_equal(js->backend, "libaio");
	if (!strstr(js->note, "io_uring"))
		fail_msg("note does not mention io_uring: \"%s\"", js->note);
	assert_non_null(strstr(js->note, "Operation not permitted"));
	hp_status_free(st);
	assert_true(harness_log_count(&d, "io_uring") >= 1);
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
	assert_string_equal(jst(st)->backend, "libaio");
	assert_int_equal(jst(st)->durable_lsn, first + 1);
	hp_status_free(st);
	hp_journal_close(j);
	hp_disconnect(c);
	stop(&d);

	/* io_uring asked for by name: the daemon refuses to start, and says why */
	start_refused_opts(&d, NULL, CLASSES JOURNAL "backend = io_uring\n", &o, 5,
			   "no I/O backend could be set up (io_uring: Operation not permitted");
	free(e.v);
}

/* --- 6. a client killed while appending ---------------------------------------------------------- */

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
	int r = hp_connect(w->socket, &c);

	if (r == 0)
		r = hp_journal_open(c, JNAME, &j);
	for (uint32_t seq = 0; r == 0 && !atomic_load(&w->stop); seq++) {
		pattern(buf, sizeof(buf), crash_seed(w->id, seq));
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
	if (hp_connect(socket, &c) < 0 || hp_journal_open(c, JNAME, &j) < 0)
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

/* --- hostile writers ------------------------------------------------------------------------ */

#define HOSTILE_RING (64 * KIB)
#define HOSTILE_JOURNAL JOURNAL "ring_size = 64K\nwhen_full = recycle\n"

/* Start addresses of this process's mappings whose name contains what and that are len long. */
static unsigned maps_find(const char *what, uint64_t len, uintptr_t *starts, unsigned max)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];
	unsigned n = 0;

	assert_non_null(f);
	while (n < max && fgets(line, sizeof(line), f)) {
		uintptr_t a, b;

		if (strstr(line, what) && sscanf(line, "%" SCNxPTR "-%" SCNxPTR, &a, &b) == 2 && b - a == len)
			starts[n++] = a;
	}
	fclose(f);
	return n;
}

/* Unmap every mapping whose name contains what (a forked child drops its parent's). */
static void maps_unmap(const char *what)
{
	uintptr_t a[64], b[64];
	unsigned n = 0;
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];

	if (!f)
		return;
	while (n < 64 && fgets(line, sizeof(line), f))
		if (strstr(line, what) && sscanf(line, "%" SCNxPTR "-%" SCNxPTR, &a[n], &b[n]) == 2)
			n++;
	fclose(f);
	for (unsigned i = 0; i < n; i++)
		munmap((void *)a[i], b[i] - a[i]);
}

/* The mapping of that kind which was not among before[0..nbefore). */
static void *maps_new(const char *what, uint64_t len, const uintptr_t *before, unsigned nbefore)
{
	uintptr_t now[64];
	unsigned n = maps_find(what, len, now, 64);

	for (unsigned i = 0; i < n; i++) {
		bool old = false;

		for (unsigned k = 0; k < nbefore; k++)
			old |= now[i] == before[k];
		if (!old)
			return (void *)now[i];
	}
	fail_msg("no new mapping of %s (%" PRIu64 " bytes)", what, len);
	return NULL;
}

/* Open a writer and find its ring in our address space (the library keeps it to itself). */
static hp_journal *jopen_ring(hp_conn *c, struct jring_hdr **ret_ring)
{
	uintptr_t before[64];
	unsigned n = maps_find("hugepool-journal:", JRING_HDR_SIZE + HOSTILE_RING, before, 64);
	hp_journal *j = jopen(c);

	*ret_ring = maps_new("hugepool-journal:", JRING_HDR_SIZE + HOSTILE_RING, before, n);
	return j;
}

/*
 * An entry of half the ring: a 112-byte record then FLIP_EMPTY empty ones, so the second such
 * entry ends exactly at the end of the ring. The flipper makes that entry's first record
 * swallow all the others and back, as fast as it can: a reader that checks the lengths and
 * then reads them again may see 112 first and the swallowing length after, walk to the end of
 * the entry and read the next record header past the ring. Many records make the time between
 * the two readings long.
 */
#define FLIP_LEN 112u
#define FLIP_ENTRY (HOSTILE_RING / 2)
#define FLIP_EMPTY ((FLIP_ENTRY - sizeof(struct jring_entry) - (FLIP_LEN + 8)) / 8)
#define FLIP_SWALLOW (FLIP_ENTRY - sizeof(struct jring_entry) - sizeof(struct jring_rec))
#define FLIP_ATTEMPTS 64
/* the race is the point and may be lost many times on a slow (sanitized) build: keep trying */
#define FLIP_ATTEMPTS_MAX 2048

static struct {
	volatile uint32_t *len;
	atomic_bool stop;
	pthread_t thread;
	bool started;
} flip;

/* racing with the library's own writes into the ring is the point: not for TSan to report */
__attribute__((no_sanitize_thread)) static void *flipper_main(void *arg)
{
	(void)arg;
	while (!atomic_load_explicit(&flip.stop, memory_order_relaxed)) {
		*flip.len = FLIP_SWALLOW;
		*flip.len = FLIP_LEN;
	}
	return NULL;
}

static void flip_join(void)
{
	if (!flip.started)
		return;
	atomic_store(&flip.stop, true);
	pthread_join(flip.thread, NULL);
	flip.started = false;
}

static void test_hostile_ring_flip(void **state)
{
	static struct daemon d; /* static: teardown uses it after a failed assertion left this frame */
	hp_conn *vc, *hc;
	hp_journal *victim;
	unsigned cut_off = 0;
	static struct iovec v[1 + FLIP_EMPTY];
	uint8_t rec[FLIP_LEN];

	(void)state;
	start_journal(&d, HOSTILE_JOURNAL);
	harness_watchdog_arm("test_hostile_ring_flip", 600);
	vc = conn(&d);
	hc = conn(&d);
	victim = jopen(vc);
	append_wait(victim, 1, 100);
	memset(rec, 0x5a, sizeof(rec));
	v[0] = (struct iovec){ rec, sizeof(rec) };
	for (unsigned i = 1; i <= FLIP_EMPTY; i++)
		v[i] = (struct iovec){ rec, 0 };
	for (unsigned a = 0; a < FLIP_ATTEMPTS || (cut_off == 0 && a < FLIP_ATTEMPTS_MAX); a++) {
		struct jring_hdr *ring;
		hp_journal *spacer = jopen(hc), *h = jopen_ring(hc, &ring);
		int r = 0;

		/*
		 * The daemon maps rings top-down: closing the spacer, opened just before, leaves this
		 * ring with nothing mapped after it once the daemon has let the spacer go, so a read
		 * past its end faults instead of landing in a neighbour.
		 */
		hp_journal_close(spacer);
		append_wait(victim, 1000 + a, 100);

		assert_int_equal(ring->size, HOSTILE_RING);
		flip.len = (volatile uint32_t *)((uint8_t *)ring + JRING_HDR_SIZE + FLIP_ENTRY +
						 sizeof(struct jring_entry));
		atomic_store(&flip.stop, false);
		assert_int_equal(pthread_create(&flip.thread, NULL, flipper_main, NULL), 0);
		flip.started = true;
		threads_cleanup = flip_join;
		/* 32 times round the ring, or until the daemon cuts this writer off */
		for (unsigned i = 0; i < 32 * HOSTILE_RING / FLIP_ENTRY && r == 0; i++)
			r = hp_journal_appendv(h, v, 1 + FLIP_EMPTY, NULL);
		flip_join();
		threads_cleanup = NULL;
		if (r == -EPROTO)
			cut_off++;
		else if (r < 0)
			fail_msg("attempt %u: a hostile append failed with %s, not EPROTO (the daemon died?)", a,
				 hp_strerror(r));
		hp_journal_close(h);
		/* the daemon lives and the other writer goes on */
		append_wait(victim, 2 + a, 100);
	}
	assert_true(cut_off > 0);
	assert_true(harness_log_count(&d, "broke the ring protocol") > 0);
	hp_journal_close(victim);
	hp_disconnect(hc);
	hp_disconnect(vc);
	stop(&d);
}

/*
 * Run fn(arg) in a child process: as HARNESS_OTHER_UID when we may (the hostile client is
 * another user), else as ourselves (the doorbell and wake page attacks need no second uid).
 * Returns fn's return value, or 128 + signal.
 */
static int run_other(int (*fn)(void *), void *arg)
{
	pid_t pid;
	int status;

	if (harness_two_uids())
		return harness_as_uid(HARNESS_OTHER_UID, fn, arg);
	fprintf(stderr, "test: running the hostile client as our own uid\n");
	pid = fork();
	if (pid == 0)
		_exit(fn(arg) & 0xff);
	assert_true(pid > 0);
	while (waitpid(pid, &status, 0) < 0)
		assert_int_equal(errno, EINTR);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

#define VICTIM_APPENDS 30

struct doorbell_attack {
	const char *socket;
	int stop_fd; /* readable: the victim is done */
};

/* The first eventfd among our fds, or -1. */
static int find_eventfd(void)
{
	for (int fd = 3; fd < 256; fd++) {
		char path[64], link[64];
		ssize_t n;

		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		n = readlink(path, link, sizeof(link) - 1);
		if (n > 0) {
			link[n] = '\0';
			if (strcmp(link, "anon_inode:[eventfd]") == 0)
				return fd;
		}
	}
	return -1;
}

/*
 * The hostile client: a writer of its own, then until told to stop it drains the doorbell it
 * was given, leaves it blocking (a daemon that reads it would hang) and zeroes the wake words
 * it can reach (a daemon that trusts `waiters` would skip FUTEX_WAKE). It first drops what it
 * inherited from the test (fds, mappings): it attacks with what the daemon gave it, nothing else.
 */
static int doorbell_attacker_main(void *arg)
{
	struct doorbell_attack *a = arg;
	uintptr_t wakes[64];
	struct pollfd stop = { .fd = 3, .events = POLLIN };
	hp_conn *c = NULL;
	hp_journal *j = NULL;
	unsigned nw;
	int efd;

	if (dup2(a->stop_fd, 3) < 0 || syscall(SYS_close_range, 4, ~0u, 0) < 0)
		return 10;
	maps_unmap("hugepool-journal");
	if (hp_connect(a->socket, &c) < 0 || hp_journal_open(c, JNAME, &j) < 0)
		return 11;
	efd = find_eventfd();
	nw = maps_find("hugepool-journal-wake", JRING_WAKE_SIZE, wakes, 64);
	if (efd < 0 || nw == 0)
		return 12;
	while (poll(&stop, 1, 0) == 0) {
		uint64_t v;

		fcntl(efd, F_SETFL, O_NONBLOCK);
		if (read(efd, &v, sizeof(v)) < 0) {
			/* empty */
		}
		fcntl(efd, F_SETFL, 0);
		for (unsigned i = 0; i < nw; i++) {
			struct jring_wake *w = (struct jring_wake *)wakes[i];

			__atomic_store_n(&w->waiters, 0, __ATOMIC_RELAXED);
			__atomic_store_n(&w->futex, 0, __ATOMIC_RELAXED);
		}
	}
	return 0;
}

static struct {
	hp_journal *j;
	int stop_fd;
	unsigned done;
	int err;
	pthread_t thread;
	bool started;
} victim;

static void *victim_main(void *arg)
{
	(void)arg;
	for (unsigned i = 0; i < VICTIM_APPENDS; i++) {
		uint64_t ticket = append_nowait(victim.j, 500 + i, 100);
		int r = hp_journal_wait(victim.j, ticket, LIVENESS_MS);

		if (r < 0) {
			victim.err = r;
			break;
		}
		victim.done++;
		/* leave the flusher time to fall asleep: the next append must ring */
		sleep_ms(2);
	}
	if (write(victim.stop_fd, "x", 1) != 1)
		victim.err = -EIO;
	return NULL;
}

static void victim_join(void)
{
	if (victim.started)
		pthread_join(victim.thread, NULL);
	victim.started = false;
}

static void test_hostile_doorbell(void **state)
{
	static struct daemon d; /* static: teardown uses it after a failed assertion left this frame */
	struct doorbell_attack a;
	int pipefd[2], rc;
	hp_conn *c;

	(void)state;
	/* the attacker is another uid: it may append (it is a writer of the journal, as in real
	 * life the hostile one is) */
	start_journal(&d, JOURNAL "append = 65534\n");
	harness_watchdog_arm("test_hostile_doorbell", 120);
	c = conn(&d);
	victim.j = jopen(c);
	append_wait(victim.j, 1, 100);
	assert_int_equal(pipe2(pipefd, O_CLOEXEC), 0);
	a = (struct doorbell_attack){ d.socket, pipefd[0] };
	victim.stop_fd = pipefd[1];
	victim.done = 0;
	victim.err = 0;
	assert_int_equal(pthread_create(&victim.thread, NULL, victim_main, NULL), 0);
	victim.started = true;
	threads_cleanup = victim_join;
	rc = run_other(doorbell_attacker_main, &a);
	victim_join();
	threads_cleanup = NULL;
	close(pipefd[0]);
	close(pipefd[1]);
	assert_int_equal(rc, 0);
	if (victim.done != VICTIM_APPENDS)
		fail_msg("the victim's appends: %u of %u completed, then %s", victim.done, VICTIM_APPENDS,
			 hp_strerror(victim.err));
	hp_journal_close(victim.j);
	hp_disconnect(c);
	stop(&d);
}

/* Restart must fail with the journal's exit status and a log line saying why. */
static void restart_refused(struct daemon *d, const char *why)
{
	int before = harness_log_count(d, why);

	assert_int_equal(harness_restart(d), -ECHILD);
	assert_int_equal(d->exit_status, 5);
	if (harness_log_count(d, why) <= before) {
		harness_dump_log(d);
		fail_msg("the daemon did not say \"%s\"", why);
	}
}

static void test_journal_dir_checks(void **state)
{
	static const mode_t loose[] = { 0770, 0702, 0777 };
	static struct daemon d; /* static: teardown uses it after a failed assertion left this frame */
	char dir[160];

	(void)state;
	start_journal(&d, JOURNAL);
	terminate(&d);
	snprintf(dir, sizeof(dir), "%s/j", d.dir);
	for (unsigned i = 0; i < sizeof(loose) / sizeof(loose[0]); i++) {
		assert_int_equal(chmod(dir, loose[i]), 0);
		restart_refused(&d, "writable by group or others; refusing it");
	}
	assert_int_equal(chmod(dir, 0700), 0);
	if (harness_two_uids()) {
		assert_int_equal(chown(dir, HARNESS_OTHER_UID, HARNESS_OTHER_UID), 0);
		restart_refused(&d, "not to the daemon");
		assert_int_equal(chown(dir, getuid(), getgid()), 0);
	}
	restart(&d);
	stop(&d);
}

/* Opens of path since the watch was set (inotify, non-blocking). */
static unsigned opens_seen(int ifd)
{
	char buf[4096] __attribute__((aligned(8)));
	unsigned n = 0;
	ssize_t len;

	while ((len = read(ifd, buf, sizeof(buf))) > 0)
		for (char *p = buf; p < buf + len; p += sizeof(struct inotify_event) + ((struct inotify_event *)p)->len)
			n += (((struct inotify_event *)p)->mask & IN_OPEN) != 0;
	return n;
}

static void test_hostile_symlink(void **state)
{
	struct recs e = { 0 };
	static struct daemon d; /* static: teardown uses it after a failed assertion left this frame */
	char secret[160], seg[160], moved[160];
	hp_journal_reader *r = NULL;
	hp_conn *c;
	hp_journal *j;
	uint64_t lsn;
	int fd, ifd;

	(void)state;
	start_journal(&d, JOURNAL);
	harness_watchdog_arm("test_hostile_symlink", 60);
	c = conn(&d);
	j = jopen(c);
	for (unsigned i = 0; i < 8; i++) {
		lsn = append_wait(j, 700 + i, 300);
		recs_add(&e, lsn, 700 + i, 300);
	}
	/* a file outside the journal's directory, of a segment's size, that must never be opened */
	snprintf(secret, sizeof(secret), "%s/secret", d.dir);
	fd = open(secret, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, MIB), 0);
	close(fd);
	ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	assert_true(ifd >= 0);
	assert_true(inotify_add_watch(ifd, secret, IN_OPEN) >= 0);
	/* the first segment's name now leads out of the directory */
	snprintf(seg, sizeof(seg), "%s/j/j-000.seg", d.dir);
	snprintf(moved, sizeof(moved), "%s/j/moved", d.dir);
	assert_int_equal(rename(seg, moved), 0);
	assert_int_equal(symlink(secret, seg), 0);
	if (hp_journal_reader_open(c, JNAME, 1, &r) == 0)
		hp_journal_reader_close(r);
	assert_int_equal(opens_seen(ifd), 0);
	/* and readers still get the journal's own records */
	read_expect(c, 1, &e, 1);
	assert_int_equal(opens_seen(ifd), 0);
	hp_journal_close(j);
	hp_disconnect(c);
	terminate(&d);
	/* at start, a symlink for a segment is refused, not followed */
	restart_refused(&d, "is not a regular file of the daemon's uid");
	assert_int_equal(opens_seen(ifd), 0);
	close(ifd);
	assert_int_equal(unlink(seg), 0);
	assert_int_equal(rename(moved, seg), 0);
	restart(&d);
	c = conn(&d);
	read_expect(c, 1, &e, 1);
	hp_disconnect(c);
	stop(&d);
	free(e.v);
}

/*
 * Fair batches. The flooder's records fill a 256 KiB batch exactly, four to a batch, and its
 * 4 MiB ring keeps sixteen batches of them queued; segments are large, so no segment end leaves
 * room for anything else. A batch filled writer by writer in list order would take the flooder
 * first every time and leave the small writer out until the flooder's queue runs dry. Filled
 * fairly, a small record is in the first batch not yet full when it is appended: after the
 * durable LSN seen before appending come at most two batches in flight and a full filling one
 * (4 records each), then in its own batch at most the flooder's first share (half a batch, 2
 * records), then the small record: at most 15 LSNs on.
 */
#define FAIR_JOURNAL "[journal j]\ndirectory = @DIR@/j\nsegment_size = 32M\nsegments = 2\n" \
		     "max_batch_bytes = 256K\nring_size = 4M\nwhen_full = recycle\n"
#define FLOOD_LEN (64 * KIB - JFORMAT_REC_HDR)
#define FAIR_APPENDS 10
#define FAIR_MAX_AHEAD (3 * 4 + 2 + 1)

static struct {
	hp_journal *j;
	atomic_bool stop;
	int err;
	pthread_t thread;
	bool started;
} flood;

static void *flooder_main(void *arg)
{
	static uint8_t buf[FLOOD_LEN];

	(void)arg;
	memset(buf, 0xf1, sizeof(buf));
	while (!atomic_load(&flood.stop)) {
		int r = hp_journal_append(flood.j, buf, sizeof(buf), NULL);

		if (r < 0) {
			flood.err = r;
			break;
		}
	}
	return NULL;
}

static void flood_join(void)
{
	if (!flood.started)
		return;
	atomic_store(&flood.stop, true);
	pthread_join(flood.thread, NULL);
	flood.started = false;
}

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

static void test_fair_batches(void **state)
{
	static struct daemon d; /* static: teardown uses it after a failed assertion left this frame */
	hp_conn *fc, *sc;
	hp_journal *small;
	uint64_t worst = 0;

	(void)state;
	start_journal(&d, FAIR_JOURNAL);
	harness_watchdog_arm("test_fair_batches", 120);
	/* the flooder opens first: the daemon's list of writers has it in front */
	fc = conn(&d);
	sc = conn(&d);
	flood.j = jopen(fc);
	small = jopen(sc);
	append_wait(small, 1, 100);
	atomic_store(&flood.stop, false);
	flood.err = 0;
	assert_int_equal(pthread_create(&flood.thread, NULL, flooder_main, NULL), 0);
	flood.started = true;
	threads_cleanup = flood_join;
	for (unsigned i = 0; i < FAIR_APPENDS; i++) {
		uint64_t before = hp_journal_durable_lsn(small), lsn = 0;
		uint8_t rec[100];
		int r;

		memset(rec, i, sizeof(rec));
		r = hp_journal_append_wait(small, rec, sizeof(rec), &lsn);
		if (r < 0)
			fail_msg("small append %u: %s", i, hp_strerror(r));
		worst = MAX(worst, lsn - before);
	}
	flood_join();
	threads_cleanup = NULL;
	assert_int_equal(flood.err, 0);
	if (worst > FAIR_MAX_AHEAD)
		fail_msg("a small record waited behind %" PRIu64 " records (at most %u with fair batches)", worst - 1,
			 FAIR_MAX_AHEAD - 1);
	hp_journal_close(small);
	hp_journal_close(flood.j);
	hp_disconnect(sc);
	hp_disconnect(fc);
	stop(&d);
}

/* Records per batch in status: each bucket holds what it says, and they add up to the batches. */
static void check_batch_sizes(hp_conn *c, bool all_single)
{
	struct hp_status *st = status(c);
	const struct hp_journal_status *js = jst(st);
	const struct hp_journal_batches *b = &st->journal_batches[js - st->journals];
	uint64_t batches = 0, least = 0, most = 0;

	for (unsigned k = 0; k < HP_BATCH_BUCKETS; k++) {
		batches += b->by_size[k];
		least += b->by_size[k] * (k == 0 ? 0 : (1ull << (k - 1)) + 1);
		most += b->by_size[k] * (k == HP_BATCH_BUCKETS - 1 ? UINT32_MAX : 1ull << k);
	}
	assert_int_equal(batches, js->batches);
	if (js->appends < least || js->appends > most)
		fail_msg("%" PRIu64 " appends in batches of %" PRIu64 " to %" PRIu64 " records", js->appends, least, most);
	if (all_single)
		assert_int_equal(b->by_size[0], js->batches);
	hp_status_free(st);
}

static void test_batch_sizes(void **state)
{
	static struct daemon d; /* static: teardown uses it after a failed assertion left this frame */
	struct recs e = { 0 };
	hp_conn *c;
	hp_journal *j;
	uint64_t lsn = 0;

	(void)state;
	start_journal(&d, JOURNAL);
	c = conn(&d);
	j = jopen(c);
	/* one writer waiting for each record: a batch each */
	for (unsigned i = 0; i < 20; i++)
		lsn = append_wait(j, i, 100);
	check_batch_sizes(c, true);
	/* pipelined: batches of several records */
	lsn = append_run(j, &e, lsn + 1, 500, 100);
	assert_true(lsn >= 520);
	check_batch_sizes(c, false);
	free(e.v);
	hp_journal_close(j);
	hp_disconnect(c);
	stop(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_roundtrip_io_uring, teardown),
		cmocka_unit_test_teardown(test_batch_sizes, teardown),
		cmocka_unit_test_teardown(test_roundtrip_libaio, teardown),
		cmocka_unit_test_teardown(test_roundtrip_sync, teardown),
		cmocka_unit_test_teardown(test_roundtrip_direct, teardown),
		cmocka_unit_test_teardown(test_durable_lsn_after_ack, teardown),
		cmocka_unit_test_teardown(test_full_blocks, teardown),
		cmocka_unit_test_teardown(test_crash_recovery, teardown),
		cmocka_unit_test_teardown(test_torn_tail_zeroed, teardown),
		cmocka_unit_test_teardown(test_torn_tail_flipped, teardown),
		cmocka_unit_test_teardown(test_torn_tail_direct, teardown),
		cmocka_unit_test_teardown(test_recycle_stale, teardown),
		cmocka_unit_test_teardown(test_clean_restart_recycled, teardown),
		cmocka_unit_test_teardown(test_clean_restart_truncated, teardown),
		cmocka_unit_test_teardown(test_eio_write_io_uring, teardown),
		cmocka_unit_test_teardown(test_eio_write_libaio, teardown),
		cmocka_unit_test_teardown(test_eio_write_sync, teardown),
		cmocka_unit_test_teardown(test_eio_sync_io_uring, teardown),
		cmocka_unit_test_teardown(test_eio_sync_libaio, teardown),
		cmocka_unit_test_teardown(test_eio_sync_sync, teardown),
		cmocka_unit_test_teardown(test_eio_lone_pipelined, teardown),
		cmocka_unit_test_teardown(test_eio_while_opening, teardown),
		cmocka_unit_test_teardown(test_no_io_uring, teardown),
		cmocka_unit_test_teardown(test_client_killed, teardown),
		cmocka_unit_test_teardown(test_hostile_ring_flip, teardown),
		cmocka_unit_test_teardown(test_hostile_doorbell, teardown),
		cmocka_unit_test_teardown(test_journal_dir_checks, teardown),
		cmocka_unit_test_teardown(test_hostile_symlink, teardown),
		cmocka_unit_test_teardown(test_fair_batches, teardown),
		cmocka_unit_test_teardown(test_stalled_sync_sync, teardown),
		cmocka_unit_test_teardown(test_stalled_sync_libaio, teardown),
	};

	return run_cases("journal", tests);
}
