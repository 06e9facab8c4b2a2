/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of a journal's recovery, in process (journal.h and the flusher of libdaemon, no
 * daemon, no socket): disk states edited or built by hand, then the real journal_open on them.
 *
 *   - records left after the recovered end of the last segment (a later batch that reached the
 *     disk while an earlier one did not) are zeroed, whatever stopped the walk, so a later life
 *     cannot resurrect them;
 *   - a segment that cannot be read is reported with the error that stopped it (EINVAL from an
 *     unaligned O_DIRECT read is not "Input/output error") and the segment it concerns;
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
#include "jformat.h"
#include "journal.h"
#include "jring.h"
#include "log.h"
#include "util.h"

#define SEG_SIZE (1u << 20)
#define NSEGS 4u

/* --- a journal in a directory of its own ------------------------------------------------- */

struct jcase {
	const char *backend;
	bool direct;
};

static const struct jcase jc_sync = { "sync", false };

static char topdir[64];

static int group_setup(void **state)
{
	(void)state;
	snprintf(topdir, sizeof(topdir), "/var/tmp/test_recovery.XXXXXX");
	if (!mkdtemp(topdir))
		return -1;
	log_set_max_level(getenv("HP_TEST_VERBOSE") ? LOG_DEBUG : LOG_CRIT);
	return 0;
}

static int group_teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", topdir);
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
	return journal_open(&cfg.journals[0], ret);
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

static void twriter_open(struct journal *j, struct twriter *t)
{
	int ring_fd, doorbell, wake_fd;
	void *ring, *wake;

	assert_int_equal(journal_writer_new(j, getuid(), getpid(), 0, &t->w, &ring_fd, &doorbell, &wake_fd), 0);
	t->ring_size = journal_writer_ring_size(t->w);
	ring = mmap(NULL, JRING_HDR_SIZE + t->ring_size, PROT_READ | PROT_WRITE, MAP_SHARED, ring_fd, 0);
	wake = mmap(NULL, JRING_WAKE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, wake_fd, 0);
	assert_true(ring != MAP_FAILED && wake != MAP_FAILED);
	close(ring_fd);
	close(wake_fd);
	jring_client_init(&t->c, ring, t->ring_size, wake, doorbell, NULL, NULL);
}

static void twriter_close(struct twriter *t)
{
	journal_writer_close(t->w);
	munmap(t->c.hdr, JRING_HDR_SIZE + t->ring_size);
	munmap(t->c.wake, JRING_WAKE_SIZE);
	close(t->c.doorbell);
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

/* The content of a record: len bytes determined by seed. */
static void pattern(void *buf, size_t len, uint64_t seed)
{
	uint8_t *p = buf;
	uint64_t s = mix(seed ^ 0x9e3779b97f4a7c15ull);

	for (size_t i = 0; i < len; i += 8) {
		s = mix(s + i);
		memcpy(p + i, &s, MIN(len - i, (size_t)8));
	}
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_orphans_zeroed),
		cmocka_unit_test(test_read_error_named),
	};

	return cmocka_run_group_tests_name("recovery", tests, group_setup, group_teardown);
}
