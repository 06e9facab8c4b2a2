/* SPDX-License-Identifier: MIT */
/* Unit tests of the parallel pre-fault pool: coverage of every range, errors, cancellation. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "prefault.h"

#define MIB (1024u * 1024u)

/* Shared memory the size of len, mapped; not faulted yet. */
static void *shm(size_t len, int *ret_fd)
{
	int fd = memfd_create("test", MFD_CLOEXEC);
	void *p;

	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)len), 0);
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	assert_true(p != MAP_FAILED);
	*ret_fd = fd;
	return p;
}

static size_t resident_pages(void *addr, size_t len)
{
	size_t n = len / 4096, k = 0;
	unsigned char *v = malloc(n);

	assert_int_equal(mincore(addr, len, v), 0);
	for (size_t i = 0; i < n; i++)
		k += v[i] & 1;
	free(v);
	return k;
}

static void test_faults_every_range(void **state)
{
	/* sizes that are not multiples of the chunk, and more threads than chunks */
	const size_t sizes[] = { 4096, 5 * MIB + 8192, 12 * MIB, 4 * MIB, 64 * 1024 };
	struct prefault_range r[5];
	struct prefault_stats st;
	int fds[5];
	(void)state;

	for (int i = 0; i < 5; i++) {
		r[i] = (struct prefault_range){ shm(sizes[i], &fds[i]), sizes[i] };
		assert_int_equal(resident_pages(r[i].addr, r[i].len), 0);
	}
	assert_int_equal(prefault_run(r, 5, 64, 0, NULL, 100, NULL, &st, NULL), 0);
	for (int i = 0; i < 5; i++) {
		assert_int_equal(resident_pages(r[i].addr, r[i].len), r[i].len / 4096);
		munmap(r[i].addr, r[i].len);
		close(fds[i]);
	}
	assert_int_equal(st.bytes, 4096 + 5 * MIB + 8192 + 12 * MIB + 4 * MIB + 64 * 1024);
	/* each range is cut on its own: 1 + 2 + 3 + 1 + 1 chunks; never more workers than chunks */
	assert_true(st.threads >= 1 && st.threads <= 8);
}

static void test_unfaultable_range_is_an_error(void **state)
{
	struct prefault_range r[3];
	size_t failed = 99;
	int fds[3];
	(void)state;

	for (int i = 0; i < 3; i++)
		r[i] = (struct prefault_range){ shm(8 * MIB, &fds[i]), 8 * MIB };
	/* the file behind range 1 shrinks under its mapping: its pages cannot be had (as with a
	 * hugetlb cgroup limit), which must come back as an error, not as SIGBUS */
	assert_int_equal(ftruncate(fds[1], 4096), 0);
	assert_true(prefault_run(r, 3, 2, 0, NULL, 100, NULL, NULL, &failed) < 0);
	assert_int_equal(failed, 1);
	assert_true(prefault_populate(r[1].addr, r[1].len) < 0);
	assert_int_equal(prefault_populate(r[0].addr, r[0].len), 0);
	for (int i = 0; i < 3; i++) {
		munmap(r[i].addr, r[i].len);
		close(fds[i]);
	}
}

static bool stop_now(uint64_t done, uint64_t total, void *ud)
{
	(void)done;
	(void)total;
	++*(int *)ud;
	return false;
}

static void test_cancel(void **state)
{
	/* enough work that the 1 ms progress callback runs before the single worker is done */
	const size_t len = 512 * MIB;
	struct prefault_range r;
	int fd, calls = 0;
	(void)state;

	r = (struct prefault_range){ shm(len, &fd), len };
	assert_int_equal(prefault_run(&r, 1, 1, 0, stop_now, 1, &calls, NULL, NULL), -ECANCELED);
	assert_int_equal(calls, 1);
	/* the worker stopped early: not everything was faulted */
	assert_true(resident_pages(r.addr, r.len) < len / 4096);
	munmap(r.addr, len);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_faults_every_range),
		cmocka_unit_test(test_unfaultable_range_is_an_error),
		cmocka_unit_test(test_cancel),
	};

	return cmocka_run_group_tests_name("prefault", tests, NULL, NULL);
}
