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
 *   - the crash-point harness (below): every crash state of a recorded workload recovers;
 *   - a segment that cannot be read is reported with the error that stopped it (EINVAL from an
 *     unaligned O_DIRECT read is not "Input/output error") and the segment it concerns;
 *   - the truncation point's marker file is read strictly: a damaged one is ignored, and said so;
 *
 * Writers are the journal's own rings, driven with jring.c's client half as libhugepool drives
 * them. Every record's content is a function of its seed, so a test checks every byte.
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
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "config.h"
#include "jio.h"
#include "jformat.h"
#include "journal.h"
#include "jring.h"
#include "log.h"
#include "util.h"
#include "../integration/pattern.h"

#define SEG_SIZE (1u << 20)
#define NSEGS 4u

/* --- a journal in a directory of its own ------------------------------------------------- */

struct jcase {
	const char *backend;
	bool direct;
};

static const struct jcase jc_sync = { "sync", false };

static char topdir[64], shmdir[64];

/* Can files in topdir be opened O_DIRECT? (tmpfs cannot) */
static bool o_direct_works(void)
{
	char p[128];
	int fd;

	snprintf(p, sizeof(p), "%s/direct-probe", topdir);
	fd = open(p, O_RDWR | O_CREAT | O_DIRECT | O_CLOEXEC, 0600);
	if (fd >= 0) {
		close(fd);
		unlink(p);
	}
	return fd >= 0;
}

static int group_setup(void **state)
{
	(void)state;
	snprintf(topdir, sizeof(topdir), "/var/tmp/test_recovery.XXXXXX");
	if (!mkdtemp(topdir))
		return -1;
	/* memory-backed where there is one: states without O_DIRECT need no real syncs */
	snprintf(shmdir, sizeof(shmdir), access("/dev/shm", W_OK) == 0 ? "/dev/shm/test_recovery.XXXXXX" : "%s/shm.XXXXXX", topdir);
	if (!mkdtemp(shmdir))
		return -1;
	log_set_max_level(getenv("HP_TEST_VERBOSE") ? LOG_DEBUG : LOG_CRIT);
	return 0;
}

static int group_teardown(void **state)
{
	char cmd[160];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", topdir, shmdir);
	return system(cmd) == 0 ? 0 : -1;
}

static void path_of(char *buf, size_t len, const char *dir, const char *name)
{
	snprintf(buf, len, "%s/%s", dir, name);
}

/* A fresh, empty journal directory under the group's; its path in buf. */
static void fresh_dir(char *buf, size_t len, const char *what)
{
	static unsigned n;
	char cmd[256];

	snprintf(buf, len, "%s/%s-%u", topdir, what, n++);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", buf);
	assert_int_equal(system(cmd), 0);
}

static void config_of(struct config *cfg, const char *dir, const struct jcase *c, const char *extra)
{
	char text[1024], err[256];

	snprintf(text, sizeof(text),
		 "[journal j]\ndirectory = %s\nsegment_size = 1M\nsegments = %u\nmax_batch_bytes = 64K\n"
		 "ring_size = 256K\nbackend = %s\ndirect = %s\n%s",
		 dir, NSEGS, c->backend, c->direct ? "on" : "off", extra ? extra : "");
	if (config_parse("test", text, cfg, err, sizeof(err)) < 0)
		fail_msg("config: %s", err);
}

/* journal_open on dir; returns its result, the journal in *ret. */
static int life_open(const char *dir, const struct jcase *c, const char *extra, struct journal **ret)
{
	struct config cfg;

	config_of(&cfg, dir, c, extra);
	*ret = NULL;
	return journal_open(&cfg.journals[0], NULL, ret);
}

/* Stop a journal as a power loss right after its last ack would: no clean-stop marker. */
static void life_crash(struct journal *j, const char *dir)
{
	char p[256];

	journal_close(j);
	path_of(p, sizeof(p), dir, "j.clean");
	assert_int_equal(unlink(p), 0);
}

/* --- writers ----------------------------------------------------------------------------- */

struct twriter {
	struct journal_writer *w;
	struct jring_client c;
	uint64_t ring_size;
};

/* The daemon is this process: never gone. */
static bool never_gone(void *arg)
{
	(void)arg;
	return false;
}

static void twriter_open(struct journal *j, struct twriter *t)
{
	int ring_fd, doorbell, wake_fd;
	const char *why;
	void *ring, *wake;

	assert_int_equal(journal_writer_new(j, getuid(), getpid(), 0, &t->w, &ring_fd, &doorbell, &wake_fd), 0);
	t->ring_size = journal_writer_ring_size(t->w);
	ring = mmap(NULL, JRING_HDR_SIZE + t->ring_size, PROT_READ | PROT_WRITE, MAP_SHARED, ring_fd, 0);
	wake = mmap(NULL, JRING_WAKE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, wake_fd, 0);
	assert_true(ring != MAP_FAILED && wake != MAP_FAILED);
	close(ring_fd);
	close(wake_fd);
	assert_int_equal(jring_client_init(&t->c, ring, t->ring_size, wake, doorbell, never_gone, NULL, &why), 0);
}

static void twriter_close(struct twriter *t)
{
	journal_writer_close(t->w);
	munmap(t->c.hdr, JRING_HDR_SIZE + t->ring_size);
	munmap(t->c.wake, JRING_WAKE_SIZE);
	close(t->c.doorbell);
}

/* Append one record of seed's content, wait until it is durable; returns its LSN, or 0 with
 * the error in *ret_err (when ret_err is given). */
static uint64_t append_wait(struct twriter *t, uint64_t seed, uint32_t len, int *ret_err)
{
	uint8_t buf[JFORMAT_RECORD_MAX > 65536 ? 65536 : JFORMAT_RECORD_MAX];
	struct iovec iov = { buf, len };
	uint64_t start;
	int r;

	assert_true(len <= sizeof(buf));
	pattern(buf, len, seed);
	r = jring_append(&t->c, &iov, 1, &start);
	if (r == 0)
		r = jring_wait(&t->c, jring_durable_past, t->c.tail, now_ns() + 30 * 1000000000ull);
	if (r < 0) {
		if (!ret_err)
			fail_msg("append of %u bytes: %s", len, strerror(-r));
		*ret_err = r;
		return 0;
	}
	return jring_entry_lsn(&t->c, start);
}

/* --- what a journal holds ---------------------------------------------------------------- */

struct jrec {
	uint64_t lsn;
	uint32_t len, crc; /* crc32c-free fingerprint: mix of the payload */
};

struct jrecs {
	struct jrec *v;
	size_t n, cap;
	uint64_t next_lsn; /* from the stats: where appending goes on */
};

static uint32_t fingerprint(const void *p, size_t len)
{
	uint64_t h = len;
	const uint8_t *b = p;

	for (size_t i = 0; i < len; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return (uint32_t)(h ^ (h >> 32));
}

static int collect(const struct jformat_rec *rec, const void *payload, void *ud)
{
	struct jrecs *r = ud;

	if (r->n == r->cap) {
		r->cap = r->cap ? 2 * r->cap : 1024;
		r->v = realloc(r->v, r->cap * sizeof(*r->v));
		assert_non_null(r->v);
	}
	r->v[r->n++] = (struct jrec){ rec->lsn, rec->len, fingerprint(payload, rec->len) };
	return 0;
}

/* Every record the journal serves, oldest first, as a reader gets them (up to durable). */
static void journal_records(struct journal *j, struct jrecs *ret)
{
	int fds[NSEGS];
	struct journal_segment_info infos[NSEGS];
	struct journal_stats st;
	unsigned n = 0;
	uint64_t durable;

	memset(ret, 0, sizeof(*ret));
	assert_int_equal(journal_read_segments(j, 1, NSEGS, fds, infos, &n, &durable), 0);
	for (unsigned i = 0; i < n; i++) {
		uint8_t *map = mmap(NULL, infos[i].size, PROT_READ, MAP_SHARED, fds[i], 0);
		struct jformat_seg_hdr h;
		struct jformat_scan scan;

		assert_true(map != MAP_FAILED);
		memcpy(&h, map, sizeof(h));
		assert_int_equal(jformat_seg_hdr_check(&h, "j", NULL), 0);
		if (ret->n)
			assert_int_equal(h.first_lsn, ret->v[ret->n - 1].lsn + 1);
		jformat_scan_segment(map, infos[i].size, &h, collect, ret, &scan);
		munmap(map, infos[i].size);
		close(fds[i]);
	}
	while (ret->n && ret->v[ret->n - 1].lsn > durable)
		ret->n--;
	journal_get_stats(j, &st);
	ret->next_lsn = st.next_lsn;
	assert_int_equal(durable, st.next_lsn - 1);
}

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

/* Run journal_open with the log going to a file; the log's text in buf. */
static int open_logged(const char *dir, const struct jcase *c, struct journal **ret, char *buf, size_t len)
{
	FILE *f = tmpfile();
	int saved = dup(STDERR_FILENO), r;
	size_t n;

	assert_non_null(f);
	assert_true(saved >= 0);
	fflush(stderr);
	assert_true(dup2(fileno(f), STDERR_FILENO) >= 0);
	log_set_max_level(LOG_INFO);
	r = life_open(dir, c, NULL, ret);
	log_set_max_level(getenv("HP_TEST_VERBOSE") ? LOG_DEBUG : LOG_CRIT);
	assert_true(dup2(saved, STDERR_FILENO) >= 0);
	close(saved);
	rewind(f);
	n = fread(buf, 1, len - 1, f);
	buf[n] = '\0';
	fclose(f);
	return r;
}

/* --- records after the recovered end ------------------------------------------------------ */

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

	fresh_dir(dir, sizeof(dir), "orphans");
	assert_int_equal(life_open(dir, &jc_sync, NULL, &j), 0);
	twriter_open(j, &t);
	for (uint64_t i = 1; i <= 20; i++)
		assert_int_equal(append_wait(&t, i, 1000, NULL), i);
	twriter_close(&t);
	life_crash(j, dir);

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
	r = open_logged(dir, &jc_sync, &j, log, sizeof(log));
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
	struct twriter t;
	(void)state;

	fresh_dir(dir, sizeof(dir), "retain");
	assert_int_equal(life_open(dir, &jc_sync, NULL, &j), 0);
	twriter_open(j, &t);
	for (uint64_t i = 1; i <= 10; i++)
		assert_int_equal(append_wait(&t, i, 100, NULL), i);
	twriter_close(&t);
	journal_close(j);

	put_file(dir, "j.retain", "5\n");
	assert_int_equal(life_open(dir, &jc_sync, NULL, &j), 0);
	journal_get_stats(j, &st);
	assert_int_equal(st.retain_lsn, 5);
	journal_close(j);

	put_file(dir, "j.retain", "5 and more\n");
	assert_int_equal(open_logged(dir, &jc_sync, &j, log, sizeof(log)), 0);
	journal_get_stats(j, &st);
	assert_int_equal(st.retain_lsn, 0);
	if (!strstr(log, "holds no truncation point"))
		fail_msg("the ignored marker is not in the log:\n%s", log);
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
	assert_int_equal(open_logged(dir, &jc_sync, &j, log, sizeof(log)), -EUCLEAN);
	if (!strstr(log, "missing before segment 1"))
		fail_msg("the refusal does not name the hole:\n%s", log);

	/* the same state from an older version: cut */
	h.flags = 0;
	seg_header(dir, 1, &h, true);
	if (open_logged(dir, &jc_sync, &j, log, sizeof(log)) < 0)
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

/* --- the crash-point harness ------------------------------------------------------------- */

/*
 * In the spirit of ALICE and CrashMonkey: a workload runs on a real journal whose jio reports
 * every write it is asked for (with the bytes), every completion and every acknowledgement
 * (jio_set_tap). Then, for crash points in that recording, the disk state a power loss there
 * could leave is built: the writes of every completed request (a completed request is durable),
 * and of the requests still in flight none, all, or a random subset of their 4 KiB pieces, in
 * any file (a segment header without its records, records without the batch before them,
 * writes reordered across files). The real recovery runs on each state, and:
 *   - it must not refuse it (every acknowledged record is in it: nothing refusable happened);
 *   - every acknowledged record still kept is there, byte for byte, and so is every record it
 *     returns at all (no garbage, each LSN once: the walk is consecutive);
 *   - recovering again after a crash right then gives the same journal;
 *   - a later life that appends records of the same sizes where the cut tail was, then
 *     crashes, recovers exactly its own records after the first recovery's: nothing cut comes
 *     back.
 * The number of crash points is bounded for `make check`; HP_CRASH_POINTS=all (check-all
 * sets it) takes every one.
 */

#define CP_WRITERS 32
#define CP_RECORDS 220 /* per writer: about 5 MiB through 4 segments of 1 MiB, so they are reused */
#define CP_PIECE 4096u

enum cp_kind { CP_WRITE, CP_DONE, CP_ACK };

struct cp_op {
	enum cp_kind kind;
	unsigned req; /* request number */
	unsigned file; /* segment file index (CP_WRITE) */
	uint64_t off; /* CP_WRITE: file offset; CP_ACK: the LSN acknowledged */
	uint32_t len;
	int res; /* CP_DONE */
	uint8_t *data; /* CP_WRITE: a copy of what was written */
};

struct cp_log {
	struct cp_op *v;
	size_t n, cap;
	unsigned nreq;
	struct {
		const struct jio_req *req;
		unsigned id;
	} inflight[JIO_DEPTH + 1];
	int fd_of[NSEGS];
};

/* seeds and lengths by LSN: what every record must hold */
struct cp_expect {
	uint64_t *seed;
	uint32_t *len;
	uint64_t n; /* LSNs 1..n-1 */
};

static void cp_push(struct cp_log *l, struct cp_op op)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 4096;
		l->v = realloc(l->v, l->cap * sizeof(*l->v));
		if (!l->v)
			abort();
	}
	l->v[l->n++] = op;
}

static unsigned cp_file(struct cp_log *l, int fd)
{
	char link[64], target[256];
	ssize_t len;
	unsigned idx;

	for (unsigned i = 0; i < NSEGS; i++)
		if (l->fd_of[i] == fd)
			return i;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	len = readlink(link, target, sizeof(target) - 1);
	if (len < 8)
		abort();
	target[len] = '\0';
	if (sscanf(target + len - 7, "%3u.seg", &idx) != 1 || idx >= NSEGS)
		abort();
	l->fd_of[idx] = fd;
	return idx;
}

/* The tap: on the flusher thread only, so no lock. */
static void cp_tap(void *arg, enum jio_tap_event ev, const struct jio_req *req, uint64_t lsn)
{
	struct cp_log *l = arg;

	if (ev == JIO_TAP_ACKED) {
		cp_push(l, (struct cp_op){ .kind = CP_ACK, .off = lsn });
		return;
	}
	if (ev == JIO_TAP_SUBMIT) {
		unsigned id = l->nreq++;

		for (unsigned i = 0; i <= JIO_DEPTH; i++)
			if (!l->inflight[i].req) {
				l->inflight[i].req = req;
				l->inflight[i].id = id;
				break;
			}
		for (unsigned i = 0; i < req->niov; i++) {
			uint8_t *copy = malloc(req->iov[i].len ? req->iov[i].len : 1);

			if (!copy)
				abort();
			memcpy(copy, req->iov[i].buf, req->iov[i].len);
			cp_push(l, (struct cp_op){ .kind = CP_WRITE, .req = id, .file = cp_file(l, req->fd),
						   .off = req->iov[i].off, .len = (uint32_t)req->iov[i].len,
						   .data = copy });
		}
		return;
	}
	for (unsigned i = 0; i <= JIO_DEPTH; i++)
		if (l->inflight[i].req == req) {
			cp_push(l, (struct cp_op){ .kind = CP_DONE, .req = l->inflight[i].id, .res = req->res });
			l->inflight[i].req = NULL;
			return;
		}
	abort(); /* completed without being submitted: an injected write fault, not used here */
}

struct cp_writer {
	pthread_t t;
	struct twriter tw;
	unsigned id;
	struct cp_expect *e;
	int err;
};

static uint64_t cp_seed(unsigned id, unsigned seq)
{
	return ((uint64_t)(id + 1) << 32) | seq; /* never 0: 0 is "not appended" */
}

static uint32_t cp_len(uint64_t seed)
{
	uint64_t m = mix(seed);

	return m % 8 == 0 ? 0 : (uint32_t)(m % 1500);
}

static void *cp_writer_main(void *arg)
{
	struct cp_writer *w = arg;

	for (unsigned seq = 0; seq < CP_RECORDS && !w->err; seq++) {
		uint64_t seed = cp_seed(w->id, seq), lsn;
		uint32_t len = cp_len(seed);

		lsn = append_wait(&w->tw, seed, len, &w->err);
		if (lsn && lsn < w->e->n) {
			w->e->seed[lsn] = seed;
			w->e->len[lsn] = len;
		}
	}
	return NULL;
}

/* Run the workload on a fresh journal in dir, recording it. */
static void cp_record(const char *dir, const struct jcase *c, struct cp_log *log, struct cp_expect *e)
{
	struct cp_writer w[CP_WRITERS];
	struct journal *j;

	memset(log, 0, sizeof(*log));
	for (unsigned i = 0; i < NSEGS; i++)
		log->fd_of[i] = -1;
	e->n = CP_WRITERS * CP_RECORDS + 1;
	e->seed = calloc(e->n, sizeof(*e->seed));
	e->len = calloc(e->n, sizeof(*e->len));
	assert_true(e->seed && e->len);
	jio_set_tap(cp_tap, log);
	assert_int_equal(life_open(dir, c, "when_full = recycle\n", &j), 0);
	jio_set_tap(NULL, NULL);
	for (unsigned i = 0; i < CP_WRITERS; i++) {
		w[i] = (struct cp_writer){ .id = i, .e = e };
		twriter_open(j, &w[i].tw);
	}
	for (unsigned i = 0; i < CP_WRITERS; i++)
		assert_int_equal(pthread_create(&w[i].t, NULL, cp_writer_main, &w[i]), 0);
	for (unsigned i = 0; i < CP_WRITERS; i++) {
		pthread_join(w[i].t, NULL);
		assert_int_equal(w[i].err, 0);
		twriter_close(&w[i].tw);
	}
	/* the recording ends with the last publish; the clean stop's marker is not in it */
	journal_close(j);
}

static void cp_log_free(struct cp_log *l, struct cp_expect *e)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i].data);
	free(l->v);
	free(e->seed);
	free(e->len);
}

/* The disk a power loss just before op `at` leaves: completed requests' writes, and of the
 * requests in flight, each 4 KiB piece with probability 1/2 (variant 2 and up), all (1), or
 * none (0). */
static void cp_image(const struct cp_log *l, size_t at, unsigned variant, unsigned *rnd, uint8_t **img,
		     uint64_t *ret_acked)
{
	bool *done = calloc(l->nreq + 1, sizeof(bool));

	assert_non_null(done);
	*ret_acked = 0;
	for (size_t i = 0; i < at; i++) {
		if (l->v[i].kind == CP_DONE && l->v[i].res == 0)
			done[l->v[i].req] = true;
		if (l->v[i].kind == CP_ACK)
			*ret_acked = l->v[i].off;
	}
	for (unsigned f = 0; f < NSEGS; f++)
		memset(img[f], 0, SEG_SIZE);
	for (size_t i = 0; i < at; i++) {
		const struct cp_op *op = &l->v[i];

		if (op->kind != CP_WRITE)
			continue;
		if (done[op->req] || variant == 1) {
			memcpy(img[op->file] + op->off, op->data, op->len);
			continue;
		}
		if (variant == 0)
			continue;
		for (uint64_t p = op->off; p < op->off + op->len;) {
			uint64_t end = MIN((p / CP_PIECE + 1) * CP_PIECE, op->off + op->len);

			if (rand_r(rnd) & 1)
				memcpy(img[op->file] + p, op->data + (p - op->off), end - p);
			p = end;
		}
	}
	free(done);
}

/* Make dir hold the image's segment files and nothing else (no markers of an earlier state). */
static void cp_write_dir(const char *dir, uint8_t **img)
{
	static const char *const markers[] = { "j.clean", "j.retain", "j.clean.tmp", "j.retain.tmp" };
	char p[256];

	if (mkdir(dir, 0700) < 0)
		assert_int_equal(errno, EEXIST);
	for (size_t i = 0; i < ARRAY_SIZE(markers); i++) {
		path_of(p, sizeof(p), dir, markers[i]);
		if (unlink(p) < 0)
			assert_int_equal(errno, ENOENT);
	}
	for (unsigned f = 0; f < NSEGS; f++) {
		char name[16];
		int fd;

		snprintf(name, sizeof(name), "j-%03u.seg", f);
		path_of(p, sizeof(p), dir, name);
		fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
		assert_true(fd >= 0);
		assert_int_equal(pwrite(fd, img[f], SEG_SIZE, 0), SEG_SIZE);
		close(fd);
	}
}

/* The lowest first LSN of a valid header in the image: acknowledged records from there on
 * must all be kept (those before went with reused segments). */
static uint64_t cp_kept_from(uint8_t **img)
{
	uint64_t from = UINT64_MAX;

	for (unsigned f = 0; f < NSEGS; f++) {
		struct jformat_seg_hdr h;

		memcpy(&h, img[f], sizeof(h));
		if (jformat_seg_hdr_check(&h, "j", NULL) == 0)
			from = MIN(from, h.first_lsn);
	}
	return from;
}

/* Every record of r is the one appended at its LSN (expected content), byte for byte. */
static void cp_check_content(struct journal *j, const struct cp_expect *e, uint64_t alt_from, uint64_t alt_base,
			     const char *what)
{
	int fds[NSEGS];
	struct journal_segment_info infos[NSEGS];
	unsigned n = 0;
	uint64_t durable;

	assert_int_equal(journal_read_segments(j, 1, NSEGS, fds, infos, &n, &durable), 0);
	for (unsigned i = 0; i < n; i++) {
		uint8_t *map = mmap(NULL, infos[i].size, PROT_READ, MAP_SHARED, fds[i], 0);
		uint64_t off = JFORMAT_BLOCK, lsn = infos[i].first_lsn;
		struct jformat_rec rec;
		struct jformat_seg_hdr h;

		assert_true(map != MAP_FAILED);
		memcpy(&h, map, sizeof(h));
		while (off < infos[i].size && lsn <= durable &&
		       jformat_rec_check(map + off, infos[i].size - off, lsn, h.generation, &rec, NULL) == 0) {
			if (rec.type == JREC_DATA) {
				uint8_t want[1500];
				uint64_t seed = lsn >= alt_from ? alt_base + lsn : lsn < e->n ? e->seed[lsn] : 0;
				uint32_t len = lsn < e->n ? e->len[lsn] : UINT32_MAX;

				if (lsn >= e->n || (!seed && lsn < alt_from) || rec.len != len)
					fail_msg("%s: record %" PRIu64 " (%u bytes) was never appended with that length",
						 what, lsn, rec.len);
				pattern(want, len, seed);
				if (memcmp(want, map + off + JFORMAT_REC_HDR, len) != 0)
					fail_msg("%s: record %" PRIu64 " holds other bytes than appended", what, lsn);
				lsn++;
			}
			off += jformat_rec_size(rec.len);
		}
		munmap(map, infos[i].size);
		close(fds[i]);
	}
}

static bool jrecs_equal(const struct jrecs *a, const struct jrecs *b)
{
	return a->n == b->n && a->next_lsn == b->next_lsn && (a->n == 0 || !memcmp(a->v, b->v, a->n * sizeof(*a->v)));
}

/* Check one crash state (the files are in dir). Returns whether recovery cut anything. */
static void cp_check_state(const char *dir, const struct jcase *c, const struct cp_expect *e, uint64_t acked,
			   uint64_t kept_from, const char *what)
{
	struct jrecs r1, r2, r3;
	struct journal *j;
	struct twriter t;
	struct iovec iov[8];
	uint8_t buf[8][1500];
	uint64_t start, first;
	unsigned n = 0;
	int r;

	r = life_open(dir, c, "when_full = recycle\n", &j);
	if (r < 0)
		fail_msg("%s: recovery refused a state holding every acknowledged record (LSN ..%" PRIu64 "): %s",
			 what, acked, strerror(-r));
	journal_records(j, &r1);
	cp_check_content(j, e, UINT64_MAX, 0, what);
	first = r1.n ? r1.v[0].lsn : r1.next_lsn;
	if (r1.next_lsn <= acked)
		fail_msg("%s: recovered up to LSN %" PRIu64 ", %" PRIu64 " was acknowledged", what, r1.next_lsn - 1,
			 acked);
	if (kept_from != UINT64_MAX && first > MAX(kept_from, 1) && first <= acked)
		fail_msg("%s: the journal starts at LSN %" PRIu64 ", acknowledged records from %" PRIu64 " are kept",
			 what, first, kept_from);

	/* a crash right after recovery: the same journal */
	life_crash(j, dir);
	assert_int_equal(life_open(dir, c, "when_full = recycle\n", &j), 0);
	journal_records(j, &r2);
	if (!jrecs_equal(&r1, &r2))
		fail_msg("%s: a second recovery gives another journal (%zu records to %" PRIu64 ", then %zu to %" PRIu64 ")",
			 what, r1.n, r1.next_lsn - 1, r2.n, r2.next_lsn - 1);

	/* a later life writes what the cut tail held, sizes alike, other bytes, and crashes */
	for (uint64_t lsn = r1.next_lsn; lsn < e->n && n < 8; lsn++, n++) {
		pattern(buf[n], e->len[lsn], (1ull << 62) + lsn);
		iov[n] = (struct iovec){ buf[n], e->len[lsn] };
	}
	if (n) {
		twriter_open(j, &t);
		assert_int_equal(jring_append(&t.c, iov, n, &start), 0);
		assert_int_equal(jring_wait(&t.c, jring_durable_past, t.c.tail, now_ns() + 30 * 1000000000ull), 0);
		assert_int_equal(jring_entry_lsn(&t.c, start), r1.next_lsn);
		twriter_close(&t);
	}
	life_crash(j, dir);
	assert_int_equal(life_open(dir, c, "when_full = recycle\n", &j), 0);
	journal_records(j, &r3);
	if (r3.next_lsn != r1.next_lsn + n)
		fail_msg("%s: after a later life appended LSN %" PRIu64 "..%" PRIu64 " and crashed, recovery ends at %" PRIu64
			 ": records cut before came back", what, r1.next_lsn, r1.next_lsn + n - 1, r3.next_lsn - 1);
	cp_check_content(j, e, r1.next_lsn, 1ull << 62, what);
	journal_close(j);
	free(r1.v);
	free(r2.v);
	free(r3.v);
}

/* Crash points for this run: before each completion (the largest set in flight). */
static size_t cp_points(const struct cp_log *l, bool all, unsigned *rnd, size_t **ret)
{
	size_t *pts = malloc((l->n + 1) * sizeof(*pts)), n = 0, keep = 0;
	bool *pick;

	assert_non_null(pts);
	for (size_t i = 0; i < l->n; i++)
		if (l->v[i].kind == CP_DONE)
			pts[n++] = i;
	pts[n++] = l->n;
	if (all) {
		*ret = pts;
		return n;
	}
	/* from every segment header's write to a few completions after it, and a random sample */
	pick = calloc(n, sizeof(bool));
	assert_non_null(pick);
	for (size_t i = 0, k = 0; i < l->n; i++) {
		while (k < n && pts[k] <= i)
			k++;
		if (l->v[i].kind == CP_WRITE && l->v[i].off == 0 && l->v[i].len == JFORMAT_BLOCK)
			for (size_t d = k; d < MIN(n, k + 3); d++)
				pick[d] = true;
	}
	for (unsigned extra = 0; extra < 6; extra++)
		pick[(size_t)rand_r(rnd) % n] = true;
	for (size_t k = 0; k < n; k++)
		if (pick[k])
			pts[keep++] = pts[k];
	free(pick);
	*ret = pts;
	return keep;
}

static const struct jcase jc_cp[] = {
	{ "io_uring", false }, { "libaio", false }, { "sync", false },
	{ "io_uring", true },  { "libaio", true },  { "sync", true },
};

static void test_crash_points(void **state)
{
	const char *mode = getenv("HP_CRASH_POINTS");
	bool all = mode && !strcmp(mode, "all");
	unsigned variants = all ? 4 : 3;
	(void)state;

	for (size_t k = 0; k < ARRAY_SIZE(jc_cp); k++) {
		const struct jcase *c = &jc_cp[k];
		char dir[128], sdir[160];
		struct cp_log log;
		struct cp_expect e;
		uint8_t *img[NSEGS];
		unsigned rnd = 0x5eed + (unsigned)k, states = 0;
		size_t *pts, npts;

		if (c->direct && !o_direct_works()) {
			print_message("crash points %s direct: skipped, /var/tmp refuses O_DIRECT\n", c->backend);
			continue;
		}
		fresh_dir(dir, sizeof(dir), "cp-workload");
		cp_record(dir, c, &log, &e);
		/* states are written to memory-backed files where O_DIRECT is not needed: quicker */
		snprintf(sdir, sizeof(sdir), "%s/state", c->direct ? topdir : shmdir);
		for (unsigned f = 0; f < NSEGS; f++)
			assert_non_null(img[f] = malloc(SEG_SIZE));
		npts = cp_points(&log, all, &rnd, &pts);
		for (size_t p = 0; p < npts; p++)
			for (unsigned v = 0; v < variants; v++) {
				char what[160];
				uint64_t acked;

				cp_image(&log, pts[p], v, &rnd, img, &acked);
				cp_write_dir(sdir, img);
				snprintf(what, sizeof(what), "%s direct=%s, crash before op %zu of %zu, variant %u",
					 c->backend, c->direct ? "on" : "off", pts[p], log.n, v);
				cp_check_state(sdir, c, &e, acked, cp_kept_from(img), what);
				states++;
			}
		print_message("crash points %s direct=%s: %u states checked (%zu crash points of %u requests, "
			      "%u variants each)\n",
			      c->backend, c->direct ? "on" : "off", states, npts, log.nreq, variants);
		for (unsigned f = 0; f < NSEGS; f++)
			free(img[f]);
		free(pts);
		cp_log_free(&log, &e);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_orphans_zeroed),
		cmocka_unit_test(test_read_error_named),
		cmocka_unit_test(test_retain_marker_strict),
		cmocka_unit_test(test_split_tail),
		cmocka_unit_test(test_crash_points),
	};

	return cmocka_run_group_tests_name("recovery", tests, group_setup, group_teardown);
}
