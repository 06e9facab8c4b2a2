/* SPDX-License-Identifier: MIT */
/*
 * test_journal_append.c - appending and waiting against a real hugepoold: the durable LSN a
 * handle knows as soon as its append is acknowledged; a when_full = block journal whose writer
 * waits, and the daemon answers meanwhile, until another connection truncates; what status and
 * hugepoolctl say of each journal's configuration (when_full, the batch limits, the ring); fair
 * batches (a small writer is not left behind a flooder that fills every batch); the
 * records-per-batch figures of status (one per batch for a writer that waits for each, several
 * when it pipelines).
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

/* --- what status says of a journal's configuration ----------------------------------------- */

/* Out holds needle, or the case fails showing what hugepoolctl printed (args). */
static void expect_out(const char *out, const char *args, const char *needle)
{
	if (!strstr(out, needle))
		fail_msg("hugepoolctl %s does not say \"%s\":\n%s", args, needle, out);
}

/*
 * Status says what hugepoold.conf sets for each journal, in the journals' order (a client that
 * keeps records until it truncates them refuses a journal that recycles): j recycles, with its
 * own batch delay and ring; k blocks, writing every batch at once, with the default ring.
 * hugepoolctl says it in journal stat (text and JSON), journal list and metrics.
 */
#define CONFIG_JOURNALS                                                                            \
	JOURNAL "when_full = recycle\nmax_batch_delay = 500us\nring_size = 128K\n"                      \
		"[journal k]\ndirectory = @DIR@/k\nsegment_size = 1M\nmax_batch_bytes = 512K\nmax_batch_delay = 0\n"

static void test_status_says_config(void **state)
{
	static struct daemon d; /* static: teardown uses it after a failed assertion left this frame */
	static char out[1 << 18];
	const struct hp_journal_config *jc, *kc;
	struct jring_hdr *ring;
	struct hp_status *st;
	hp_conn *c;
	(void)state;

	harness_watchdog_arm("a journal's configuration in status", 30);
	start_journal(&d, CONFIG_JOURNALS);
	c = conn(&d);
	st = status(c);
	assert_int_equal(st->njournals, 2);
	assert_string_equal(st->journals[0]->name, "j");
	assert_string_equal(st->journals[1]->name, "k");
	jc = &st->journals[0]->config;
	kc = &st->journals[1]->config;
	assert_int_equal(jc->when_full, HP_JOURNAL_RECYCLE);
	assert_int_equal(jc->max_batch_delay_ns, 500000);
	assert_int_equal(jc->max_batch_bytes, 256 * KIB);
	assert_int_equal(jc->ring_size, 128 * KIB);
	assert_int_equal(kc->when_full, HP_JOURNAL_BLOCK);
	assert_int_equal(kc->max_batch_delay_ns, 0);
	assert_int_equal(kc->max_batch_bytes, 512 * KIB);
	assert_int_equal(kc->ring_size, MIB); /* the default */
	hp_status_free(st);
	/* a writer of j gets the ring the status announces */
	hp_journal_close(jopen_ring(c, 128 * KIB, &ring));

	assert_int_equal(ctl(&d, "journal stat j", out, sizeof(out)), 0);
	expect_out(out, "journal stat j", "\nWhen full:    recycle (the oldest segment is reused; records not truncated are lost)\n");
	expect_out(out, "journal stat j",
		   "\nBatches at:   500 us or 256.0 KiB, whichever comes first; rings of 128.0 KiB per writer\n");
	assert_int_equal(ctl(&d, "journal stat k", out, sizeof(out)), 0);
	expect_out(out, "journal stat k", "\nWhen full:    block (appends wait for a truncate)\n");
	expect_out(out, "journal stat k",
		   "\nBatches at:   512.0 KiB, or at once (max_batch_delay 0); rings of 1.0 MiB per writer\n");
	assert_int_equal(ctl(&d, "--json journal stat j", out, sizeof(out)), 0);
	expect_out(out, "--json journal stat j",
		   "\"config\":{\"when_full\":\"recycle\",\"max_batch_delay_ns\":500000,\"max_batch_bytes\":262144,"
		   "\"ring_size\":131072}");
	assert_int_equal(ctl(&d, "--json journal list", out, sizeof(out)), 0);
	expect_out(out, "--json journal list",
		   "\"config\":{\"when_full\":\"block\",\"max_batch_delay_ns\":0,\"max_batch_bytes\":524288,"
		   "\"ring_size\":1048576}");
	/* journal list marks the journal that loses records when full, and only it */
	assert_int_equal(ctl(&d, "journal list", out, sizeof(out)), 0);
	expect_out(out, "journal list", "  recycle\nk ");
	if (strstr(strstr(out, "recycle") + 1, "recycle"))
		fail_msg("journal list marks more than j:\n%s", out);
	assert_int_equal(ctl(&d, "metrics", out, sizeof(out)), 0);
	expect_out(out, "metrics", "\n# TYPE hugepool_journal_recycle gauge\n");
	expect_out(out, "metrics", "\nhugepool_journal_recycle{journal=\"j\"} 1\n");
	expect_out(out, "metrics", "\nhugepool_journal_recycle{journal=\"k\"} 0\n");
	hp_disconnect(c);
	stop(&d);
}

/* --- fair batches ---------------------------------------------------------------------------- */

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

/* --- batch sizes ----------------------------------------------------------------------------- */

/* A latency histogram's buckets add up to its count. */
static void check_latency(const struct hp_latency *h)
{
	uint64_t n = 0;

	for (unsigned i = 0; i <= HP_LATENCY_BUCKETS; i++)
		n += h->buckets[i];
	assert_int_equal(n, h->count);
}

/*
 * Every record appended is durable by now: each counted once in the append-to-durable latency,
 * each batch's write and sync once, and the batch sizes add up to the records (version 6).
 */
static void check_durability(const struct hp_journal_durability *d, const struct hp_journal_status *js)
{
	assert_int_equal(js->durable_lsn, js->appends);
	assert_int_equal(d->batch_records, js->appends);
	assert_int_equal(d->to_durable.count, js->appends);
	assert_int_equal(d->write_sync.count, js->syncs);
	assert_true(d->write_sync.sum_ns > 0);
	assert_int_equal(d->io_errors, 0);
	check_latency(&d->to_durable);
	check_latency(&d->write_sync);
}

/* Records per batch in status: each bucket holds what it says, and they add up to the batches. */
static void check_batch_sizes(hp_conn *c, bool all_single)
{
	struct hp_status *st = status(c);
	const struct hp_journal_status *js = jst(st);
	const struct hp_journal_batches *b = &js->batch_sizes;
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
	check_durability(&js->durability, js);
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
		cmocka_unit_test_teardown(test_batch_sizes, teardown),
		cmocka_unit_test_teardown(test_durable_lsn_after_ack, teardown),
		cmocka_unit_test_teardown(test_full_blocks, teardown),
		cmocka_unit_test_teardown(test_status_says_config, teardown),
		cmocka_unit_test_teardown(test_fair_batches, teardown),
	};

	return run_cases("journal_append", tests);
}
