/* SPDX-License-Identifier: MIT */
/*
 * test_journal_recovery.c - what a restarted hugepoold makes of a journal's files: a torn last
 * record (half of it zeroed, a byte flipped, and with direct = on a record that starts inside a
 * block) is cut, the records before it kept, and appending goes on at its LSN; reused segments
 * (when_full = recycle, or truncation) never replay a record of their earlier use, after a clean
 * stop or a crash, and a clean stop in a reused segment is not taken for a torn tail; a record
 * damaged after a clean stop, which recovery does not read, fails its reader.
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

/* --- torn tails ------------------------------------------------------------------------------ */

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
	/* killed: a clean stop's marker would name the end, and recovery would read no record */
	crash(&d);

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

/* --- reused segments ------------------------------------------------------------------------- */

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

/*
 * After a clean stop recovery reads no record (it takes the end the stop's marker names), so a
 * record damaged on the disk since is not cut at the start: its reader meets it, and fails with
 * EUCLEAN after the records before it, rather than being given fewer records than were durable
 * without a word.
 */
static void test_damage_after_clean_stop(void **state)
{
	static struct daemon d;
	struct last_rec last;
	struct hp_status *st;
	hp_journal_reader *r = NULL;
	const void *data;
	uint64_t lsn = 0, n = 0;
	size_t len;
	uint8_t byte;
	hp_conn *c;
	hp_journal *j;
	int fd, rc;

	(void)state;
	harness_watchdog_arm("damage after a clean stop", 30);
	start_journal(&d, JOURNAL);
	c = conn(&d);
	j = jopen(c);
	for (unsigned i = 0; i < 10; i++)
		lsn = append_wait(j, 100 + i, 1000 + 100 * i);
	hp_journal_close(j);
	hp_disconnect(c);
	terminate(&d);

	/* a byte of the last record's payload flipped, as a failing device might */
	find_last_record(&d, 4, &last);
	assert_int_equal(last.lsn, lsn);
	fd = open(last.path, O_RDWR | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &byte, 1, (off_t)(last.off + JFORMAT_REC_HDR + last.len / 2)), 1);
	byte ^= 0x10;
	assert_int_equal(pwrite(fd, &byte, 1, (off_t)(last.off + JFORMAT_REC_HDR + last.len / 2)), 1);
	close(fd);

	restart(&d);
	c = conn(&d);
	st = status(c);
	assert_int_equal(jst(st)->durable_lsn, lsn);
	if (!strstr(jst(st)->recovery, "clean end, not walked"))
		fail_msg("after a clean stop recovery walked the journal: \"%s\"", jst(st)->recovery);
	hp_status_free(st);
	assert_int_equal(hp_journal_reader_open(c, JNAME, 1, &r), 0);
	while ((rc = hp_journal_reader_next(r, &lsn, &data, &len)) == 1)
		assert_int_equal(lsn, ++n);
	assert_int_equal(n, last.lsn - 1);
	assert_int_equal(rc, -EUCLEAN);
	hp_journal_reader_close(r);
	hp_disconnect(c);
	stop(&d);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_torn_tail_zeroed, teardown),
		cmocka_unit_test_teardown(test_damage_after_clean_stop, teardown),
		cmocka_unit_test_teardown(test_torn_tail_flipped, teardown),
		cmocka_unit_test_teardown(test_torn_tail_direct, teardown),
		cmocka_unit_test_teardown(test_recycle_stale, teardown),
		cmocka_unit_test_teardown(test_clean_restart_recycled, teardown),
		cmocka_unit_test_teardown(test_clean_restart_truncated, teardown),
	};

	return run_cases("journal_recovery", tests);
}
