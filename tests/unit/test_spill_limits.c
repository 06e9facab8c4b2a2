/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the daemon's spill accounting (src/daemon/spill/spill.c) without a socket: limits at
 * their exact edges (bytes and files, per uid and for the machine), several owners of one uid,
 * refunds on cuts, closes and release, cuts of a file written or allocated past its charge, a
 * closed file still open elsewhere lingering until its last holder closes it, the page,
 * and the removal of an earlier run's leftover names at open.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "spill.h"
#include "util.h"

#define KiB UINT64_C(1024)

static char dir[64];

static struct spill *open_spill(uint64_t max_bytes, uint32_t max_files, uint64_t max_bytes_uid, uint32_t max_files_uid)
{
	struct config cfg;
	struct spill *sp = NULL;

	config_init(&cfg);
	snprintf(cfg.spill_directory, sizeof(cfg.spill_directory), "%s/spill", dir);
	cfg.spill_max_bytes = max_bytes;
	cfg.spill_max_files = max_files;
	cfg.spill_max_bytes_per_uid = max_bytes_uid;
	cfg.spill_max_files_per_uid = max_files_uid;
	cfg.spill_threshold = 12345;
	if (spill_open(&cfg, false, &sp) < 0)
		fail_msg("spill_open failed (its log line says why)");
	return sp;
}

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/hugepool-unit.XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char path[128];

	(void)state;
	snprintf(path, sizeof(path), "%s/spill", dir);
	rmdir(path);
	rmdir(dir);
	return 0;
}

static uint64_t new_file(struct spill *sp, struct spill_owner *o, int *ret_fd)
{
	char text[256];
	uint64_t id = 0;
	int fd = -1;

	assert_int_equal(spill_create(sp, o, 0, &id, &fd, text, sizeof(text)), 0);
	assert_true(fd >= 0);
	if (ret_fd)
		*ret_fd = fd;
	else
		close(fd);
	return id;
}

static void test_byte_limits(void **state)
{
	struct spill *sp = open_spill(100 * KiB, 0, 60 * KiB, 0);
	struct spill_owner a, b, other;
	struct proto_status_spill st;
	char text[256];
	uint64_t fa, fb, fo;

	(void)state;
	spill_owner_init(sp, &a, 1000, 1);
	spill_owner_init(sp, &b, 1000, 2); /* same uid, another connection */
	spill_owner_init(sp, &other, 2000, 3);
	fa = new_file(sp, &a, NULL);
	fb = new_file(sp, &b, NULL);
	fo = new_file(sp, &other, NULL);
	/* the uid's limit to the byte, shared by its two owners */
	assert_int_equal(spill_charge(sp, &a, fa, 40 * KiB, text, sizeof(text)), 0);
	assert_int_equal(spill_charge(sp, &b, fb, 20 * KiB, text, sizeof(text)), 0);
	assert_int_equal(spill_charge(sp, &b, fb, 20 * KiB + 1, text, sizeof(text)), -EDQUOT);
	assert_non_null(strstr(text, "spill_max_bytes_per_uid"));
	assert_non_null(strstr(text, "uid 1000"));
	/* the other uid may still use the machine's rest: 100 - 60 = 40 KiB */
	assert_int_equal(spill_charge(sp, &other, fo, 40 * KiB + 1, text, sizeof(text)), -EDQUOT);
	assert_non_null(strstr(text, "spill_max_bytes ("));
	assert_int_equal(spill_charge(sp, &other, fo, 40 * KiB, text, sizeof(text)), 0);
	spill_get_status(sp, NULL, &st);
	assert_int_equal(st.bytes, 100 * KiB);
	assert_int_equal(st.files, 3);
	assert_int_equal(st.refusals, 2);
	assert_int_equal(st.threshold, 12345);
	/* a cut gives back; a close gives back the rest */
	assert_int_equal(spill_charge(sp, &a, fa, 10 * KiB, text, sizeof(text)), 0);
	assert_int_equal(spill_charge(sp, &b, fb, 50 * KiB, text, sizeof(text)), 0);
	assert_int_equal(spill_close_file(sp, &b, fb), 0);
	assert_int_equal(spill_close_file(sp, &b, fb), -ENOENT);
	assert_int_equal(spill_charge(sp, &a, fb, 1, text, sizeof(text)), -ENOENT); /* not a's */
	spill_get_status(sp, NULL, &st);
	assert_int_equal(st.bytes, 50 * KiB);
	assert_int_equal(st.files, 2);
	/* release: everything of that owner */
	spill_owner_release(sp, &a);
	spill_owner_release(sp, &b);
	spill_owner_release(sp, &other);
	spill_get_status(sp, NULL, &st);
	assert_int_equal(st.bytes, 0);
	assert_int_equal(st.files, 0);
	assert_int_equal(st.bytes_charged_total, 40 * KiB + 20 * KiB + 40 * KiB + 30 * KiB); /* raises only */
	spill_free(sp);
}

static void test_file_limits(void **state)
{
	struct spill *sp = open_spill(0, 3, 0, 2);
	struct spill_owner a, b;
	char text[256];
	uint64_t id;
	int fd;

	(void)state;
	spill_owner_init(sp, &a, 1000, 1);
	spill_owner_init(sp, &b, 2000, 2);
	new_file(sp, &a, NULL);
	id = new_file(sp, &a, NULL);
	assert_int_equal(spill_create(sp, &a, 0, &id, &fd, text, sizeof(text)), -EDQUOT);
	assert_non_null(strstr(text, "spill_max_files_per_uid"));
	new_file(sp, &b, NULL);
	assert_int_equal(spill_create(sp, &b, 0, &id, &fd, text, sizeof(text)), -EDQUOT);
	assert_non_null(strstr(text, "spill_max_files reached"));
	spill_owner_release(sp, &a);
	new_file(sp, &b, NULL);
	spill_owner_release(sp, &b);
	spill_free(sp);
	/* a file charged at creation: within the limit, charged at once; over it, not created */
	sp = open_spill(0, 0, 100 * KiB, 0);
	spill_owner_init(sp, &a, 1000, 1);
	assert_int_equal(spill_create(sp, &a, 60 * KiB, &id, &fd, text, sizeof(text)), 0);
	close(fd);
	assert_int_equal(spill_create(sp, &a, 40 * KiB + 1, &id, &fd, text, sizeof(text)), -EDQUOT);
	assert_non_null(strstr(text, "spill_max_bytes_per_uid"));
	{
		struct proto_status_spill st;

		spill_get_status(sp, NULL, &st);
		assert_int_equal(st.files, 1);
		assert_int_equal(st.bytes, 60 * KiB);
	}
	spill_owner_release(sp, &a);
	spill_free(sp);
}

static void test_truncation(void **state)
{
	struct spill *sp = open_spill(0, 0, 0, 0);
	struct proto_status_spill st;
	struct spill_owner a;
	char buf[4096] = { 1 }, text[256];
	struct stat sb;
	uint64_t id;
	int fd;

	(void)state;
	spill_owner_init(sp, &a, 1000, 1);
	id = new_file(sp, &a, &fd);
	assert_int_equal(spill_charge(sp, &a, id, 1000, text, sizeof(text)), 0);
	assert_int_equal(pwrite(fd, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
	/* not yet due (forced: no); forced: cut to the charge */
	spill_audit(sp, 0, false);
	assert_int_equal(spill_audit(sp, 1, true), 1 + 1000000000ull);
	assert_int_equal(fstat(fd, &sb), 0);
	assert_int_equal(sb.st_size, 1000);
	spill_get_status(sp, NULL, &st);
	assert_int_equal(st.truncated, 1);
	/* a cut truncates, and so does a close, though the client keeps its fd */
	assert_int_equal(spill_charge(sp, &a, id, 10, text, sizeof(text)), 0);
	assert_int_equal(fstat(fd, &sb), 0);
	assert_int_equal(sb.st_size, 10);
	assert_int_equal(spill_close_file(sp, &a, id), 0);
	assert_int_equal(fstat(fd, &sb), 0);
	assert_int_equal(sb.st_size, 0);
	/* ... and since we still hold it open, it lingers: a file, kept empty */
	spill_get_status(sp, NULL, &st);
	assert_int_equal(st.files, 1);
	assert_int_equal(st.lingering, 1);
	assert_int_equal(st.bytes, 0);
	/* charged nothing, it may hold nothing: not even the metadata slack an open file gets */
	assert_int_equal(fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 16 << 10), 0);
	assert_int_equal(spill_audit(sp, 2, true), 2 + 1000000000ull);
	assert_int_equal(fstat(fd, &sb), 0);
	assert_int_equal(sb.st_blocks, 0);
	spill_get_status(sp, NULL, &st);
	assert_int_equal(st.truncated, 2);
	/* our fd closed, the next audit lets it go */
	close(fd);
	assert_int_equal(spill_audit(sp, 3, true), UINT64_MAX); /* no files: no audits */
	spill_get_status(sp, NULL, &st);
	assert_int_equal(st.files, 0);
	assert_int_equal(st.lingering, 0);
	spill_owner_release(sp, &a);
	spill_free(sp);
}

static void test_page_and_leftovers(void **state)
{
	struct spill *sp = open_spill(0, 0, 0, 0);
	struct proto_status_spill st;
	struct proto_counters_page *page;
	struct proto_status_heaps heaps;
	struct spill_owner a;
	uint64_t threshold = 0, b, m;
	uint32_t files;
	char path[128];
	int fd, f2;

	(void)state;
	spill_owner_init(sp, &a, 1000, 1);
	assert_int_equal(spill_attach(sp, &a, &fd, &threshold), 0);
	assert_int_equal(threshold, 12345);
	assert_int_equal(spill_attach(sp, &a, &f2, &threshold), -EEXIST);
	page = mmap(NULL, sizeof(*page), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	assert_true(page != MAP_FAILED);
	close(fd);
	page->streams_memory = 3;
	page->bytes_memory = 777;
	page->heaps = 2;
	page->heap_buffers = 5;
	page->heap_bytes = 999;
	spill_get_status(sp, NULL, &st);
	assert_int_equal(st.streams_memory, 3);
	assert_int_equal(st.bytes_memory, 777);
	/* the heaps' words as read for this status: a rewrite afterwards changes nothing reported */
	page->heaps = 1000000;
	page->heap_bytes = UINT64_MAX;
	spill_owner_heaps(&a, &heaps);
	assert_int_equal(heaps.heaps, 2);
	assert_int_equal(heaps.heap_buffers, 5);
	assert_int_equal(heaps.heap_bytes, 999);
	spill_owner_status(&a, &files, &b, &m, &threshold);
	assert_int_equal(files, 0);
	assert_int_equal(m, 3);
	assert_int_equal(threshold, 777);
	spill_owner_release(sp, &a);
	spill_get_status(sp, NULL, &st);
	assert_int_equal(st.streams_memory, 0);
	munmap(page, sizeof(*page));
	spill_free(sp);
	/* names like the fallback's, left by a daemon that died between create and unlink */
	snprintf(path, sizeof(path), "%s/spill/spill-1-1", dir);
	fd = open(path, O_CREAT | O_WRONLY, 0600);
	assert_true(fd >= 0);
	close(fd);
	sp = open_spill(0, 0, 0, 0);
	assert_int_equal(access(path, F_OK), -1);
	spill_free(sp);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_byte_limits),
		cmocka_unit_test(test_file_limits),
		cmocka_unit_test(test_truncation),
		cmocka_unit_test(test_page_and_leftovers),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
