/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the warm state (src/daemon/restart/warm.h): each buffer's page size survives
 * the round trip from one life's records to the next life's warm_read, a state of the version
 * before (one page size in its header for the whole pool) is still read, and a record naming a
 * page size no kernel has is not trusted. The version 2 layout is written out here by hand: it
 * is what daemons already running wrote, frozen, not something this code base still makes.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "crc32c.h"
#include "warm.h"

#define MiB (UINT64_C(1) << 20)
#define GiB (UINT64_C(1) << 30)

/* The layout of a version 2 state: its header, then its buffer records (no connections, spills). */
struct v2_header {
	char magic[8];
	uint32_t version, header_size, record_size, nbuffers, conn_record_size, nconns, spill_record_size,
		nspills;
	uint64_t id, lives, page_size;
	uint32_t hugetlb, crc;
};
struct v2_record {
	uint32_t seq, crc, state, uid, index, reserved;
	uint64_t size, fd_id;
	char class_name[32];
	uint64_t conn_id, lease_id, since_rt;
};
_Static_assert(sizeof(struct v2_header) == 72 && sizeof(struct v2_record) == 96, "version 2's layout");

/*
 * A state memfd of version `version` in the v2 layout: its header says page_size, its n buffer
 * records have reserved[i] in their spare word (version 3's page shift). The sizes of the other
 * records are taken from a state this daemon makes: they did not change.
 */
static int state_v2(uint32_t version, uint64_t page_size, bool hugetlb, uint32_t n, const uint32_t *reserved)
{
	struct v2_header h;
	struct warm *w = NULL;
	int fd = memfd_create("v2", MFD_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(warm_create(0, 0, 0, 1, &w), 0);
	warm_publish(w); /* a state reads once published (warm.h) */
	assert_int_equal(pread(warm_fd(w), &h, sizeof(h), 0), sizeof(h));
	warm_free(w);
	h.version = version;
	h.nbuffers = n;
	h.id = 7;
	h.lives = 3;
	h.page_size = page_size;
	h.hugetlb = hugetlb;
	h.crc = crc32c(0, &h, offsetof(struct v2_header, crc));
	assert_int_equal(pwrite(fd, &h, sizeof(h), 0), sizeof(h));
	for (uint32_t i = 0; i < n; i++) {
		struct v2_record r = { .seq = 2, .state = WARM_BUF_CLEAN, .index = i, .reserved = reserved[i],
				       .size = 4 * page_size, .fd_id = 100 + i, .class_name = "c" };

		r.crc = crc32c(0, &r.state, sizeof(r) - offsetof(struct v2_record, state));
		assert_int_equal(pwrite(fd, &r, sizeof(r), (off_t)(sizeof(h) + i * sizeof(r))), sizeof(r));
	}
	return fd;
}

/* The sizes the daemon's own records must agree with: a change of layout is a new version. */
static void test_layout_is_version_2s(void **state)
{
	struct warm_prev *prev = NULL;
	struct warm *w = NULL;
	char err[128] = "";
	(void)state;

	assert_int_equal(warm_create(1, 0, 0, 1, &w), 0);
	warm_publish(w); /* a state reads once published (warm.h) */
	/* one record in the v2 layout after a v2-sized header: the daemon's sizes are those */
	assert_int_equal(lseek(warm_fd(w), 0, SEEK_END), sizeof(struct v2_header) + sizeof(struct v2_record));
	assert_int_equal(warm_read(warm_fd(w), &prev, err, sizeof(err)), 0);
	warm_prev_free(prev);
	warm_free(w);
}

/* What one life records of each buffer's pages, the next reads: 4 KiB, 2 MiB and 1 GiB in one pool. */
static void test_page_sizes_round_trip(void **state)
{
	static const uint64_t pages[] = { 4096, 2 * MiB, GiB };
	struct warm_prev *prev = NULL;
	struct warm *w = NULL;
	char err[128] = "";
	(void)state;

	assert_int_equal(warm_create(4, 2, 2, 5, &w), 0);
	warm_publish(w); /* a state reads once published (warm.h) */
	for (uint32_t i = 0; i < 3; i++) {
		struct warm_buf b = { .state = i == 2 ? WARM_BUF_LEASED : WARM_BUF_DIRTY, .uid = 1000, .index = i,
				      .size = 2 * GiB, .page_size = pages[i], .fd_id = 10 + i, .conn_id = 5,
				      .lease_id = 6 };

		snprintf(b.class_name, sizeof(b.class_name), "class%u", i);
		warm_set(w, i, &b);
	}
	/* record 3 is never written: UNKNOWN, no page size */
	assert_int_equal(warm_read(warm_fd(w), &prev, err, sizeof(err)), 0);
	assert_int_equal(prev->lives, 5);
	assert_int_equal(prev->nbuffers, 4);
	for (uint32_t i = 0; i < 3; i++) {
		assert_int_equal(prev->bufs[i].state, i == 2 ? WARM_BUF_LEASED : WARM_BUF_DIRTY);
		assert_true(prev->bufs[i].page_size == pages[i]);
		assert_true(prev->bufs[i].size == 2 * GiB);
	}
	assert_int_equal(prev->bufs[3].state, WARM_BUF_UNKNOWN);
	assert_true(prev->bufs[3].page_size == 0);
	warm_prev_free(prev);
	warm_free(w);
}

/* A daemon upgraded by a warm restart reads its predecessor's version 2 state: the header's page. */
static void test_version_2_state(void **state)
{
	static const uint32_t zero[2] = { 0, 0 };
	struct warm_prev *prev = NULL;
	char err[128] = "";
	int fd;
	(void)state;

	fd = state_v2(2, 2 * MiB, true, 2, zero);
	assert_int_equal(warm_read(fd, &prev, err, sizeof(err)), 0);
	assert_int_equal(prev->lives, 3);
	for (uint32_t i = 0; i < 2; i++) {
		assert_int_equal(prev->bufs[i].state, WARM_BUF_CLEAN);
		assert_true(prev->bufs[i].page_size == 2 * MiB);
		assert_true(prev->bufs[i].fd_id == 100 + i);
	}
	warm_prev_free(prev);
	close(fd);

	/* a pool that had fallen back to regular shared memory: 4 KiB pages */
	fd = state_v2(2, 4096, false, 2, zero);
	assert_int_equal(warm_read(fd, &prev, err, sizeof(err)), 0);
	assert_true(prev->bufs[0].page_size == 4096 && prev->bufs[1].page_size == 4096);
	warm_prev_free(prev);
	close(fd);
}

/* Page sizes no kernel has are not trusted: the buffer is UNKNOWN (renewed or dropped, never served). */
static void test_bad_page_sizes(void **state)
{
	static const uint32_t shifts[2] = { 21, 35 };
	static const uint32_t zero[2] = { 0, 0 };
	struct warm_prev *prev = NULL;
	char err[128] = "";
	int fd;
	(void)state;

	/* version 3: 2 MiB, and 32 GiB which is none */
	fd = state_v2(3, 0, false, 2, shifts);
	assert_int_equal(warm_read(fd, &prev, err, sizeof(err)), 0);
	assert_int_equal(prev->bufs[0].state, WARM_BUF_CLEAN);
	assert_true(prev->bufs[0].page_size == 2 * MiB);
	assert_int_equal(prev->bufs[1].state, WARM_BUF_UNKNOWN);
	warm_prev_free(prev);
	close(fd);

	/* version 3 records that say nothing of their pages (a version 2 header's page is not theirs) */
	fd = state_v2(3, 2 * MiB, true, 2, zero);
	assert_int_equal(warm_read(fd, &prev, err, sizeof(err)), 0);
	assert_int_equal(prev->bufs[0].state, WARM_BUF_UNKNOWN);
	assert_int_equal(prev->bufs[1].state, WARM_BUF_UNKNOWN);
	warm_prev_free(prev);
	close(fd);

	/* version 2 with a page size that is not a power of two */
	fd = state_v2(2, 3 * MiB, true, 2, zero);
	assert_int_equal(warm_read(fd, &prev, err, sizeof(err)), 0);
	assert_int_equal(prev->bufs[0].state, WARM_BUF_UNKNOWN);
	warm_prev_free(prev);
	close(fd);
}

/* A state of a later version than this daemon knows: not read, and said why. */
static void test_later_version_refused(void **state)
{
	static const uint32_t zero[1] = { 0 };
	struct warm_prev *prev = NULL;
	char err[128] = "";
	int fd;
	(void)state;

	fd = state_v2(WARM_VERSION + 1, 2 * MiB, true, 1, zero);
	assert_true(warm_read(fd, &prev, err, sizeof(err)) < 0);
	assert_null(prev);
	assert_non_null(strstr(err, "this daemon reads 2 to 3"));
	close(fd);
	fd = state_v2(1, 2 * MiB, true, 1, zero);
	assert_true(warm_read(fd, &prev, err, sizeof(err)) < 0);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_layout_is_version_2s),
		cmocka_unit_test(test_page_sizes_round_trip),
		cmocka_unit_test(test_version_2_state),
		cmocka_unit_test(test_bad_page_sizes),
		cmocka_unit_test(test_later_version_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
