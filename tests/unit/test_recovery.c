/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of a journal's recovery, in process (journal.h and the flusher of libdaemon, no
 * daemon, no socket): disk states edited or built by hand, then the real journal_open on them.
 *
 *   - records left after the recovered end of the last segment (a later batch that reached the
 *     disk while an earlier one did not) are zeroed, whatever stopped the walk, so a later life
 *     cannot resurrect them;
 *   - a hole before the last segment: refused when that segment was opened once everything
 *     before it was durable, cut when an older version wrote both sides of the switch at once;
 *   - a segment that cannot be read is reported with the error that stopped it (EINVAL from an
 *     unaligned O_DIRECT read is not "Input/output error") and the segment it concerns;
 *   - the end of the log after a crash, in the middle of what a reused segment's earlier use left,
 *     is information; a torn record of the last use a warning that names it;
 *   - the truncation point's marker file is read strictly: a damaged one is ignored, and said so;
 *   - a segment's temporary file left by a stop while it was being made anew is removed.
 *
 * Every disk state a power loss could leave during a recorded workload is the crash-point
 * harness's (test_crash_points.c). Writers are the journal's own rings (journal_unit.h). Every
 * record's content is a function of its seed, so a test checks every byte.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdatomic.h>
#include <sys/syscall.h>

#include "journal_fs.h"
#include "journal_unit.h"

static const struct jcase jc_sync = { "sync", false, NULL };

/* Where the record of lsn lies in the segment files (the newest generation that holds it). */
static void find_record(const char *dir, uint64_t lsn, char *ret_path, size_t len, uint64_t *ret_off)
{
	uint64_t best = 0;

	for (unsigned i = 0; i < NSEGS; i++) {
		char p[256], name[16];
		uint8_t *map;
		struct jformat_seg_hdr h;
		int fd;

		snprintf(name, sizeof(name), "j-%03u.seg", i);
		path_of(p, sizeof(p), dir, name);
		fd = open(p, O_RDONLY | O_CLOEXEC);
		assert_true(fd >= 0);
		map = mmap(NULL, SEG_SIZE, PROT_READ, MAP_SHARED, fd, 0);
		close(fd);
		assert_true(map != MAP_FAILED);
		memcpy(&h, map, sizeof(h));
		if (jformat_seg_hdr_check(&h, "j", NULL) == 0 && h.generation > best && h.first_lsn <= lsn) {
			uint64_t off = JFORMAT_BLOCK, at = h.first_lsn;
			struct jformat_rec rec;

			while (off < SEG_SIZE && jformat_rec_check(map + off, SEG_SIZE - off, at, h.generation, &rec, NULL) == 0) {
				if (rec.type == JREC_DATA && at++ == lsn) {
					best = h.generation;
					snprintf(ret_path, len, "%s", p);
					*ret_off = off;
					break;
				}
				off += jformat_rec_size(rec.len);
			}
		}
		munmap(map, SEG_SIZE);
	}
	if (!best)
		fail_msg("no record %" PRIu64 " in %s", lsn, dir);
}

/* Are the bytes of the file at path from off to its end all zero? */
static bool zero_from(const char *path, uint64_t off, uint64_t *ret_first)
{
	uint8_t *map;
	struct stat st;
	bool zero = true;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	assert_true(map != MAP_FAILED);
	for (uint64_t i = off; i < (uint64_t)st.st_size && zero; i++)
		if (map[i]) {
			zero = false;
			*ret_first = i;
		}
	munmap(map, (size_t)st.st_size);
	return zero;
}

/*
 * pread as recovery calls it, seen by the test (this definition takes the place of the C
 * library's in this program): while fail_seg_reads is set, reads of a segment file fail with
 * that errno.
 */
static int fail_seg_reads;

ssize_t pread(int fd, void *buf, size_t n, off_t off)
{
	if (fail_seg_reads) {
		char link[64], target[256];
		ssize_t len;

		snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
		len = readlink(link, target, sizeof(target) - 1);
		if (len > 4 && !memcmp(target + len - 4, ".seg", 4)) {
			errno = fail_seg_reads;
			return -1;
		}
	}
	return syscall(SYS_pread64, fd, buf, n, off);
}

/* --- records after the recovered end ------------------------------------------------------ */

/* A journal of n records of size bytes (LSN i has seed i) in a fresh directory named after what
 * (its path in dir), left open. */
static struct journal *records_in(char *dir, size_t len, const char *what, uint64_t n, uint32_t size)
{
	struct journal *j;
	struct twriter t;

	fresh_dir(dir, len, what);
	assert_int_equal(life_open(dir, &jc_sync, NULL, &j), 0);
	twriter_open(j, &t);
	for (uint64_t i = 1; i <= n; i++)
		assert_int_equal(append_wait(&t, i, size, NULL), i);
	twriter_close(&t);
	return j;
}

/* records_in, then stopped as a power loss right after the last ack would (crash) or cleanly. */
static void records_then_stop(char *dir, size_t len, const char *what, uint64_t n, uint32_t size, bool crash)
{
	struct journal *j = records_in(dir, len, what, n, size);

	if (crash)
		life_crash(j, dir);
	else
		journal_close(j);
}

/*
 * A later batch reached the disk while an earlier one did not: zeros where the earlier one
 * belongs, valid records of the segment's generation after them. Recovery stops at the zeros
 * ("end of written data") and must zero what follows too: otherwise a later life that writes
 * records of the same sizes there lines up with them, and a crash then brings them back as
 * its own, records the earlier life never acknowledged.
 */
static void test_orphans_zeroed(void **state)
{
	char dir[128], seg[256], clean[256];
	struct journal *j;
	struct twriter t;
	struct jrecs got;
	uint64_t off, first_bad;
	uint8_t zeros[1024 + JFORMAT_REC_HDR] = { 0 };
	int fd;
	(void)state;

	records_then_stop(dir, sizeof(dir), "orphans", 20, 1000, true);

	/* the batch of LSN 15 never reached the disk; those of 16..20 did */
	find_record(dir, 15, seg, sizeof(seg), &off);
	fd = open(seg, O_WRONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, zeros, jformat_rec_size(1000), (off_t)off), (ssize_t)jformat_rec_size(1000));
	close(fd);

	assert_int_equal(life_open(dir, &jc_sync, NULL, &j), 0);
	journal_records(j, &got);
	assert_int_equal(got.n, 14);
	assert_int_equal(got.next_lsn, 15);
	free(got.v);
	if (!zero_from(seg, off, &first_bad))
		fail_msg("after recovery, %s holds data at offset %" PRIu64 " after the recovered end %" PRIu64,
			 seg, first_bad, off);

	/* a new life writes LSN 15 with the same size (other content) and stops by a crash */
	twriter_open(j, &t);
	assert_int_equal(append_wait(&t, 1015, 1000, NULL), 15);
	twriter_close(&t);
	life_crash(j, dir);
	assert_int_equal(life_open(dir, &jc_sync, NULL, &j), 0);
	journal_records(j, &got);
	if (got.next_lsn != 16)
		fail_msg("the second recovery ends at LSN %" PRIu64 ": the first life's unacknowledged records "
			 "16.. came back", got.next_lsn - 1);
	assert_int_equal(got.n, 15);
	free(got.v);
	journal_close(j);
	path_of(clean, sizeof(clean), dir, "j.clean");
	assert_int_equal(access(clean, F_OK), 0);
}

/*
 * Where a crash ends a reused segment's records, what follows is what its earlier use left:
 * often the middle of an earlier record, whose bytes hold anything in the place of a type or a
 * length. That is the normal end of the log: recovery says so as information, and names what it
 * found there, with no warning (it used to judge the type first, and report "unknown record type"
 * as a torn tail after a plain kill). A record of the journal's last use that is torn (its
 * header there, its checksum wrong) is a warning naming its LSN, its offset and its file.
 */
static void test_end_of_log_words(void **state)
{
	char dir[128], seg[256], log[8192], want[400];
	struct journal_stats st;
	struct journal *j;
	uint64_t off;
	uint8_t stale[4000];
	int fd;
	(void)state;

	records_then_stop(dir, sizeof(dir), "end-words", 20, 1000, true);

	/* the batches of LSN 16.. never reached the disk; an earlier record's payload lies there */
	find_record(dir, 16, seg, sizeof(seg), &off);
	pattern(stale, sizeof(stale), 77);
	stale[20] = 0x7f; /* where a type would be: none the format knows */
	fd = open(seg, O_WRONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, stale, sizeof(stale), (off_t)off), (ssize_t)sizeof(stale));
	close(fd);
	assert_int_equal(open_logged(dir, &jc_sync, NULL, &j, log, sizeof(log)), 0);
	journal_get_stats(j, &st);
	if (strstr(log, "warning") || strstr(st.recovery, "torn"))
		fail_msg("the normal end of a reused segment's records was reported as damage:\n%s", log);
	if (!strstr(st.recovery, "15 records") || !strstr(st.recovery, "no clean stop") ||
	    !strstr(st.recovery, "left by an earlier use"))
		fail_msg("recovery does not say where and why the log ended: \"%s\"", st.recovery);
	life_crash(j, dir);

	/* record 16 is there but torn: its header, half its payload */
	fd = open(seg, O_WRONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	{
		uint8_t rec[JFORMAT_REC_HDR + 1000];

		jformat_rec_write(rec, 16, 1, JREC_DATA, stale, 1000);
		assert_int_equal(pwrite(fd, rec, JFORMAT_REC_HDR + 500, (off_t)off), JFORMAT_REC_HDR + 500);
	}
	close(fd);
	assert_int_equal(open_logged(dir, &jc_sync, NULL, &j, log, sizeof(log)), 0);
	snprintf(want, sizeof(want), "record 16 at offset %" PRIu64 " of segment 0 ('%s') is torn or corrupt", off, seg);
	if (!strstr(log, "warning") || !strstr(log, want))
		fail_msg("a torn record of the last use is not a warning naming it (\"%s\"):\n%s", want, log);
	journal_close(j);
}

/* The file syncs a recovery makes (journal_fs.h's tap): fdatasync or fsync of a segment. */
static unsigned syncs_seen;

static void count_syncs(void *arg, const struct jfs_event *ev)
{
	(void)arg;
	if (ev->op == JFS_SYNC)
		syncs_seen++;
}

static int open_counting_syncs(const char *dir, struct journal **j, unsigned *syncs)
{
	int r;

	syncs_seen = 0;
	jfs_set_tap(count_syncs, NULL);
	r = life_open(dir, &jc_sync, NULL, j);
	jfs_set_tap(NULL, NULL);
	*syncs = syncs_seen;
	return r;
}

/*
 * A take-over's stop writes the clean end without a sync (journal_stop(j, true)), for a next life
 * that reads it at once: then it is a clean end, and recovery syncs no segment (the clean stop
 * left them durable; it synced three, 0.1-0.4 ms each, in the clients' pause). A power failure
 * before that next life removed the marker may leave it empty, cut short or zeros: none of them
 * may pass for a clean end. Recovery then ends as after a crash, every record there, the
 * segments synced, the marker removed.
 */
static void test_handover_marker(void **state)
{
	static const struct {
		const char *text;
		size_t len;
	} left[] = { { "", 0 }, { "0 1", 3 }, { "\0\0\0\0\0\0\0\0\0\0\0\0", 12 } };
	char dir[128], clean[256];
	struct journal_stats st;
	struct journal *j;
	struct jrecs got;
	unsigned syncs;
	(void)state;

	j = records_in(dir, sizeof(dir), "handover-marker", 20, 1000);
	path_of(clean, sizeof(clean), dir, "j.clean");
	journal_stop(j, true);
	journal_close(j);
	assert_int_equal(open_counting_syncs(dir, &j, &syncs), 0);
	journal_get_stats(j, &st);
	if (!strstr(st.recovery, "20 records") || !strstr(st.recovery, "clean end"))
		fail_msg("a take-over's clean end was not taken: \"%s\"", st.recovery);
	if (syncs)
		fail_msg("recovery after a clean end synced %u segments", syncs);
	for (size_t k = 0; k < sizeof(left) / sizeof(left[0]); k++) {
		int fd;

		life_crash(j, dir);
		fd = open(clean, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		assert_true(fd >= 0);
		assert_int_equal(write(fd, left[k].text, left[k].len), (ssize_t)left[k].len);
		close(fd);
		assert_int_equal(open_counting_syncs(dir, &j, &syncs), 0);
		journal_get_stats(j, &st);
		if (!strstr(st.recovery, "no clean stop"))
			fail_msg("a clean end marker left as %zu bytes was taken: \"%s\"", left[k].len, st.recovery);
		if (!syncs)
			fail_msg("recovery after a crash synced no segment");
		journal_records(j, &got);
		assert_int_equal(got.n, 20);
		assert_int_equal(got.next_lsn, 21);
		free(got.v);
		assert_int_equal(access(clean, F_OK), -1);
	}
	journal_close(j);
}

/*
 * A stop asks its journals to end as soon as the event loop stopped (journal_stop_begin), and the
 * flusher writes its last batch and the clean end itself, while the loop finishes its own stop: in
 * a take-over that is 100-150 us of the clients' pause less. The marker appears with no
 * journal_stop called, and names the end recovery then takes.
 */
static void test_stop_begun_marks_end(void **state)
{
	char dir[128], clean[256], text[80] = "";
	struct journal_stats st;
	struct journal *j;
	ssize_t n = -1;
	(void)state;

	j = records_in(dir, sizeof(dir), "stop-begun", 20, 1000);
	path_of(clean, sizeof(clean), dir, "j.clean");
	journal_stop_begin(j, true);
	for (unsigned waited = 0; waited < 10000 && n <= 0; waited++) {
		int fd = open(clean, O_RDONLY | O_CLOEXEC);

		if (fd >= 0) {
			n = read(fd, text, sizeof(text) - 1);
			close(fd);
		}
		if (n <= 0)
			usleep(1000);
	}
	if (n <= 0)
		fail_msg("no clean end marked 10 s after the stop was asked, journal_stop not called");
	text[n] = '\0';
	if (!strstr(text, " 21\n"))
		fail_msg("the clean end marked does not name LSN 21 next: \"%s\"", text);
	journal_stop(j, false);
	journal_close(j);
	assert_int_equal(life_open(dir, &jc_sync, NULL, &j), 0);
	journal_get_stats(j, &st);
	if (!strstr(st.recovery, "20 records (LSN 1..20) in 1 segments; clean end, not walked"))
		fail_msg("after a stop asked early: \"%s\"", st.recovery);
	journal_close(j);
}

/* The journal's records: n of them, LSN 1..n, each of seed == LSN and len bytes. */
static void expect_records(struct journal *j, uint64_t n, uint32_t len)
{
	uint8_t buf[65536];
	struct jrecs got;

	journal_records(j, &got);
	assert_int_equal(got.n, n);
	assert_int_equal(got.next_lsn, n + 1);
	for (uint64_t i = 0; i < n; i++) {
		pattern(buf, len, i + 1);
		if (got.v[i].lsn != i + 1 || got.v[i].len != len || got.v[i].crc != fingerprint(buf, len))
			fail_msg("record %" PRIu64 " is not the one appended", i + 1);
	}
	free(got.v);
}

/*
 * After a clean stop recovery takes the end its marker names and reads no record (a walk is 5 ms
 * for 32 MiB: a restart's start would grow with the journal). That end must be exactly where the
 * next record goes: records over two segments, a clean stop, one more record, a crash (no marker:
 * the next recovery walks), and every record is there once, the last right after the others.
 */
static void test_clean_end_not_walked(void **state)
{
	char dir[128];
	struct journal_stats st;
	struct journal *j;
	struct twriter t;
	(void)state;

	/* 60 records of 30,000 bytes: about 1.7 MiB, so in the second of the 1 MiB segments */
	records_then_stop(dir, sizeof(dir), "clean-not-walked", 60, 30000, false);
	assert_int_equal(life_open(dir, &jc_sync, NULL, &j), 0);
	journal_get_stats(j, &st);
	if (!strstr(st.recovery, "60 records (LSN 1..60) in 2 segments; clean end, not walked"))
		fail_msg("a clean end was not taken as its marker says: \"%s\"", st.recovery);
	twriter_open(j, &t);
	assert_int_equal(append_wait(&t, 61, 30000, NULL), 61);
	twriter_close(&t);
	life_crash(j, dir);
	assert_int_equal(life_open(dir, &jc_sync, NULL, &j), 0);
	journal_get_stats(j, &st);
	if (!strstr(st.recovery, "61 records (LSN 1..61) in 2 segments; no clean stop"))
		fail_msg("after the record appended at the trusted end: \"%s\"", st.recovery);
	expect_records(j, 61, 30000);
	journal_close(j);
}

/*
 * A clean-stop marker that outlived its life (its removal lost, as the directory sync that makes
 * it durable comes only before the next write; or a copy put back by hand) names an end the
 * journal went on from. Recovery must see that and walk: records appended after it, in the same
 * segment and then in the next, are all there.
 */
static void test_stale_clean_marker(void **state)
{
	static const uint64_t more[] = { 10, 40 }; /* the same segment; on into the next one */
	char dir[128], clean[256], text[80];
	struct journal_stats st;
	struct journal *j;
	struct twriter t;
	(void)state;

	for (size_t k = 0; k < sizeof(more) / sizeof(more[0]); k++) {
		ssize_t len;
		int fd;

		records_then_stop(dir, sizeof(dir), "stale-marker", 20, 30000, false);
		path_of(clean, sizeof(clean), dir, "j.clean");
		fd = open(clean, O_RDONLY | O_CLOEXEC);
		assert_true(fd >= 0);
		len = read(fd, text, sizeof(text));
		close(fd);
		assert_true(len > 0);
		assert_int_equal(life_open(dir, &jc_sync, NULL, &j), 0);
		twriter_open(j, &t);
		for (uint64_t i = 21; i <= 20 + more[k]; i++)
			assert_int_equal(append_wait(&t, i, 30000, NULL), i);
		twriter_close(&t);
		life_crash(j, dir);
		fd = open(clean, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		assert_true(fd >= 0);
		assert_int_equal(write(fd, text, (size_t)len), len);
		close(fd);
		assert_int_equal(life_open(dir, &jc_sync, NULL, &j), 0);
		journal_get_stats(j, &st);
		if (strstr(st.recovery, "clean end"))
			fail_msg("a stale clean-stop marker was taken (%" PRIu64 " records after it): \"%s\"", more[k],
				 st.recovery);
		expect_records(j, 20 + more[k], 30000);
		journal_close(j);
	}
}

/* The order of a life's first file events (journal_fs.h's and jio.h's taps, on any thread). */
static atomic_uint order_next, order_unlink, order_dirsync, order_write;

static void order_fs(void *arg, const struct jfs_event *ev)
{
	unsigned at = atomic_fetch_add(&order_next, 1) + 1, none = 0;

	(void)arg;
	if (ev->op == JFS_UNLINK && strstr(ev->name, ".clean"))
		atomic_compare_exchange_strong(&order_unlink, &none, at);
	else if (ev->op == JFS_DIRSYNC && atomic_load(&order_unlink))
		atomic_compare_exchange_strong(&order_dirsync, &none, at);
}

static void order_io(void *arg, enum jio_tap_event ev, const struct jio_req *req, uint64_t lsn)
{
	unsigned at = atomic_fetch_add(&order_next, 1) + 1, none = 0;

	(void)arg;
	(void)req;
	(void)lsn;
	if (ev == JIO_TAP_SUBMIT)
		atomic_compare_exchange_strong(&order_write, &none, at);
}

/*
 * The clean-stop marker's removal is durable before the life that removed it writes in a segment:
 * else a power failure could bring the marker back while a batch of this life lay after the end
 * it names, never zeroed. Recovery leaves that directory sync to the flusher (off a take-over's
 * pause), which makes it before its first write.
 */
static void test_marker_gone_before_writes(void **state)
{
	char dir[128];
	struct journal *j;
	struct twriter t;
	(void)state;

	records_then_stop(dir, sizeof(dir), "marker-order", 5, 100, false);
	atomic_store(&order_next, 0);
	atomic_store(&order_unlink, 0);
	atomic_store(&order_dirsync, 0);
	atomic_store(&order_write, 0);
	jfs_set_tap(order_fs, NULL);
	jio_set_tap(order_io, NULL);
	assert_int_equal(life_open(dir, &jc_sync, NULL, &j), 0);
	twriter_open(j, &t);
	assert_int_equal(append_wait(&t, 6, 100, NULL), 6);
	twriter_close(&t);
	journal_close(j);
	jfs_set_tap(NULL, NULL);
	jio_set_tap(NULL, NULL);
	if (!order_unlink || !order_dirsync || !order_write || order_dirsync > order_write)
		fail_msg("marker removed at event %u, the directory synced at %u, the first write at %u",
			 atomic_load(&order_unlink), atomic_load(&order_dirsync), atomic_load(&order_write));
}

/* A segment whose reads fail with EINVAL: recovery says so, and which segment it was. */
static void test_read_error_named(void **state)
{
	char dir[128], log[4096];
	struct journal *j;
	struct twriter t;
	int r;
	(void)state;

	fresh_dir(dir, sizeof(dir), "einval");
	assert_int_equal(life_open(dir, &jc_sync, NULL, &j), 0);
	twriter_open(j, &t);
	assert_int_equal(append_wait(&t, 1, 100, NULL), 1);
	twriter_close(&t);
	life_crash(j, dir);

	fail_seg_reads = EINVAL;
	r = open_logged(dir, &jc_sync, NULL, &j, log, sizeof(log));
	fail_seg_reads = 0;
	if (r != -EINVAL)
		fail_msg("journal_open returned %d (%s), not -EINVAL; log:\n%s", r, strerror(-r), log);
	assert_null(j);
	if (!strstr(log, "Invalid argument") || !strstr(log, "segment 0") || strstr(log, "Input/output error"))
		fail_msg("the log does not say which segment failed how:\n%s", log);

	/* and the journal is intact once reads work again */
	assert_int_equal(life_open(dir, &jc_sync, NULL, &j), 0);
	journal_close(j);
}

/* Replace dir's file name with text. */
static void put_file(const char *dir, const char *name, const char *text)
{
	char p[256];
	int fd;

	path_of(p, sizeof(p), dir, name);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

/*
 * The truncation point kept in j.retain is the daemon's own text, read back exactly: "5\n" is
 * LSN 5, but "5 and more\n" (a damaged or foreign file) is no truncation point at all, and the
 * log says it was ignored, instead of strtoull's silent 5.
 */
static void test_retain_marker_strict(void **state)
{
	char dir[128], log[4096];
	struct journal_stats st;
	struct journal *j;
	(void)state;

	records_then_stop(dir, sizeof(dir), "retain", 10, 100, false);

	put_file(dir, "j.retain", "5\n");
	assert_int_equal(life_open(dir, &jc_sync, NULL, &j), 0);
	journal_get_stats(j, &st);
	assert_int_equal(st.retain_lsn, 5);
	journal_close(j);

	put_file(dir, "j.retain", "5 and more\n");
	assert_int_equal(open_logged(dir, &jc_sync, NULL, &j, log, sizeof(log)), 0);
	journal_get_stats(j, &st);
	assert_int_equal(st.retain_lsn, 0);
	if (!strstr(log, "holds no truncation point"))
		fail_msg("the ignored marker is not in the log:\n%s", log);
	journal_close(j);
}

/*
 * A segment's temporary file, left when the daemon stopped while making the segment anew (tmp,
 * fdatasync, rename), is removed at the next open, and said so; the journal is as it was.
 */
static void test_leftover_tmp_removed(void **state)
{
	char dir[128], log[4096], p[256];
	struct journal_stats st;
	struct journal *j;
	(void)state;

	records_then_stop(dir, sizeof(dir), "leftover", 10, 100, false);

	put_file(dir, "j-002.seg.tmp", "half a segment\n");
	assert_int_equal(open_logged(dir, &jc_sync, NULL, &j, log, sizeof(log)), 0);
	path_of(p, sizeof(p), dir, "j-002.seg.tmp");
	if (access(p, F_OK) == 0)
		fail_msg("%s is still there; log:\n%s", p, log);
	if (!strstr(log, "removed 'j-002.seg.tmp'"))
		fail_msg("the removal is not in the log:\n%s", log);
	journal_get_stats(j, &st);
	assert_int_equal(st.durable_lsn, 10);
	journal_close(j);
}

/* Read segment i's header from dir, or write it back with a fresh CRC. */
static void seg_header(const char *dir, unsigned i, struct jformat_seg_hdr *h, bool write)
{
	char p[256], name[16];
	int fd;

	snprintf(name, sizeof(name), "j-%03u.seg", i);
	path_of(p, sizeof(p), dir, name);
	fd = open(p, O_RDWR | O_CLOEXEC);
	assert_true(fd >= 0);
	if (write) {
		struct jformat_seg_hdr n;

		jformat_seg_hdr_init(&n, "j", h->generation, h->first_lsn, h->segment_size, h->created_ns, h->flags);
		assert_int_equal(pwrite(fd, &n, sizeof(n), 0), sizeof(n));
	} else {
		assert_int_equal(pread(fd, h, sizeof(*h), 0), sizeof(*h));
	}
	close(fd);
}

/*
 * The state of the power loss the issue saw: the last batch of segment 0 never reached the
 * disk, the first batch of segment 1 (header and records) did. A segment opened by this
 * version was opened only once everything before it was durable: the hole lost synced records,
 * and the journal is refused. Headers of older versions (no JFORMAT_SEG_ORDERED) wrote the two
 * batches together: neither was acknowledged, so the tail is cut, and says so.
 */
static void test_split_tail(void **state)
{
	char dir[128], seg[256], log[4096];
	struct jformat_seg_hdr h;
	struct journal_stats st;
	struct journal *j;
	struct twriter t;
	struct jrecs got;
	uint64_t off, first, end_first;
	uint8_t *zeros = calloc(1, SEG_SIZE);
	int fd;
	(void)state;

	assert_non_null(zeros);
	snprintf(dir, sizeof(dir), "%s/split", shmdir);
	assert_int_equal(life_open(dir, &jc_sync, NULL, &j), 0);
	twriter_open(j, &t);
	for (uint64_t i = 1; i <= 1025; i++)
		assert_int_equal(append_wait(&t, i, 1000, NULL), i);
	twriter_close(&t);
	life_crash(j, dir);
	seg_header(dir, 1, &h, false);
	first = h.first_lsn;
	assert_true(first > 4 && first < 1025);
	assert_true(h.flags & JFORMAT_SEG_ORDERED);

	/* the last three records of segment 0 are lost */
	find_record(dir, first - 3, seg, sizeof(seg), &off);
	fd = open(seg, O_WRONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, zeros, SEG_SIZE - off, (off_t)off), (ssize_t)(SEG_SIZE - off));
	close(fd);
	assert_int_equal(open_logged(dir, &jc_sync, NULL, &j, log, sizeof(log)), -EUCLEAN);
	if (!strstr(log, "are missing: segment 0 (") || !strstr(log, "j-000.seg') ends at offset ") ||
	    !strstr(log, "j-001.seg'), starts at LSN") || !strstr(log, "move it away"))
		fail_msg("the refusal does not name the hole, the files, the offset and what to do:\n%s", log);

	/* the same state from an older version: cut */
	h.flags = 0;
	seg_header(dir, 1, &h, true);
	if (open_logged(dir, &jc_sync, NULL, &j, log, sizeof(log)) < 0)
		fail_msg("an unacknowledged tail split across a segment switch was refused:\n%s", log);
	if (!strstr(log, "split across a segment switch"))
		fail_msg("the log does not say what was cut:\n%s", log);
	journal_get_stats(j, &st);
	assert_non_null(strstr(st.recovery, "split across a segment switch"));
	journal_records(j, &got);
	end_first = got.next_lsn;
	assert_int_equal(end_first, first - 3);
	assert_int_equal(got.n, first - 4);
	free(got.v);
	/* segment 1 is zeroed: nothing of it can come back */
	seg_header(dir, 1, &h, false);
	assert_int_equal(h.magic, 0);
	twriter_open(j, &t);
	assert_int_equal(append_wait(&t, 5000, 1000, NULL), end_first);
	twriter_close(&t);
	life_crash(j, dir);
	assert_int_equal(life_open(dir, &jc_sync, NULL, &j), 0);
	journal_records(j, &got);
	assert_int_equal(got.next_lsn, end_first + 1);
	free(got.v);
	journal_close(j);
	free(zeros);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_orphans_zeroed),
		cmocka_unit_test(test_end_of_log_words),
		cmocka_unit_test(test_handover_marker),
		cmocka_unit_test(test_clean_end_not_walked),
		cmocka_unit_test(test_stale_clean_marker),
		cmocka_unit_test(test_stop_begun_marks_end),
		cmocka_unit_test(test_marker_gone_before_writes),
		cmocka_unit_test(test_read_error_named),
		cmocka_unit_test(test_retain_marker_strict),
		cmocka_unit_test(test_leftover_tmp_removed),
		cmocka_unit_test(test_split_tail),
	};

	return cmocka_run_group_tests_name("recovery", tests, group_setup, group_teardown);
}
