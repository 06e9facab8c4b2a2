/* SPDX-License-Identifier: MIT */
/*
 * journal_unit.h - what the in-process journal tests (tests/unit/test_recovery.c,
 * test_crash_points.c) share: a journal of NSEGS segments of SEG_SIZE in a directory of its own
 * (under /var/tmp, where O_DIRECT works, or /dev/shm, memory-backed and quicker), opened with the
 * real journal_open and stopped as a power loss right after its last ack would (life_crash);
 * writers driving the journal's own rings with jring.c's client half, as libhugepool does; and
 * the records a journal serves, as a reader gets them. Header-only: include it once per test
 * file, after cmocka.h.
 */
#ifndef HP_TEST_JOURNAL_UNIT_H
#define HP_TEST_JOURNAL_UNIT_H

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "config.h"
#include "jformat.h"
#include "jio.h"
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
	const char *path; /* backend = auto: the path the tests choose (jpath_set_test's spec), or NULL */
};

static char topdir[64], shmdir[64];

/* Can files in topdir be opened O_DIRECT? (tmpfs cannot) */
static inline bool o_direct_works(void)
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

static inline int group_setup(void **state)
{
	(void)state;
	snprintf(topdir, sizeof(topdir), "/var/tmp/%s.XXXXXX", program_invocation_short_name);
	if (!mkdtemp(topdir))
		return -1;
	/* memory-backed where there is one: states without O_DIRECT need no real syncs */
	snprintf(shmdir, sizeof(shmdir), access("/dev/shm", W_OK) == 0 ? "/dev/shm/%s.XXXXXX" : "%s/shm.XXXXXX",
		 access("/dev/shm", W_OK) == 0 ? program_invocation_short_name : topdir);
	if (!mkdtemp(shmdir))
		return -1;
	log_set_max_level(getenv("HP_TEST_VERBOSE") ? LOG_DEBUG : LOG_CRIT);
	return 0;
}

static inline int group_teardown(void **state)
{
	char cmd[160];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", topdir, shmdir);
	return system(cmd) == 0 ? 0 : -1;
}

static inline void path_of(char *buf, size_t len, const char *dir, const char *name)
{
	snprintf(buf, len, "%s/%s", dir, name);
}

/* A fresh, empty journal directory under the group's; its path in buf. */
static inline void fresh_dir(char *buf, size_t len, const char *what)
{
	static unsigned n;
	char cmd[256];

	snprintf(buf, len, "%s/%s-%u", topdir, what, n++);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", buf);
	assert_int_equal(system(cmd), 0);
}

static inline void config_of(struct config *cfg, const char *dir, const struct jcase *c, const char *extra)
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
static inline int life_open(const char *dir, const struct jcase *c, const char *extra, struct journal **ret)
{
	struct config cfg;
	char spec[64];

	config_of(&cfg, dir, c, extra);
	*ret = NULL;
	if (c->path)
		snprintf(spec, sizeof(spec), "path:%s", c->path);
	return journal_open(&cfg.journals[0], c->path ? spec : NULL, ret);
}

/* Stop a journal as a power loss right after its last ack would: no clean-stop marker. */
static inline void life_crash(struct journal *j, const char *dir)
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
static inline bool never_gone(void *arg)
{
	(void)arg;
	return false;
}

static inline void twriter_open(struct journal *j, struct twriter *t)
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

static inline void twriter_close(struct twriter *t)
{
	journal_writer_close(t->w);
	munmap(t->c.hdr, JRING_HDR_SIZE + t->ring_size);
	munmap(t->c.wake, JRING_WAKE_SIZE);
	close(t->c.doorbell);
}

/* Append one record of seed's content, wait until it is durable; returns its LSN, or 0 with
 * the error in *ret_err (when ret_err is given). */
static inline uint64_t append_wait(struct twriter *t, uint64_t seed, uint32_t len, int *ret_err)
{
	uint8_t buf[JFORMAT_RECORD_MAX > 65536 ? 65536 : JFORMAT_RECORD_MAX];
	struct iovec iov = { buf, len };
	uint64_t start;
	int r;

	assert_true(len <= sizeof(buf));
	pattern(buf, len, seed);
	r = jring_append(&t->c, &iov, 1, false, &start);
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

static inline uint32_t fingerprint(const void *p, size_t len)
{
	uint64_t h = len;
	const uint8_t *b = p;

	for (size_t i = 0; i < len; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return (uint32_t)(h ^ (h >> 32));
}

static inline int collect(const struct jformat_rec *rec, const void *payload, void *ud)
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
static inline void journal_records(struct journal *j, struct jrecs *ret)
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


/* Run journal_open (as life_open) with the log going to a file; the log's text in buf. */
static inline int open_logged(const char *dir, const struct jcase *c, const char *extra, struct journal **ret, char *buf,
			      size_t len)
{
	FILE *f = tmpfile();
	int saved = dup(STDERR_FILENO), r;
	size_t n;

	assert_non_null(f);
	assert_true(saved >= 0);
	fflush(stderr);
	assert_true(dup2(fileno(f), STDERR_FILENO) >= 0);
	log_set_max_level(LOG_INFO);
	r = life_open(dir, c, extra, ret);
	log_set_max_level(getenv("HP_TEST_VERBOSE") ? LOG_DEBUG : LOG_CRIT);
	assert_true(dup2(saved, STDERR_FILENO) >= 0);
	close(saved);
	rewind(f);
	n = fread(buf, 1, len - 1, f);
	buf[n] = '\0';
	fclose(f);
	return r;
}

#endif
