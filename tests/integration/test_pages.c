/* SPDX-License-Identifier: MIT */
/*
 * test_pages.c - page sizes per class against a real hugepoold: small classes on 2 MiB pages and
 * large ones on 1 GiB pages in one pool (page_size = auto, and a class's own page_size), each
 * class falling back on its own when its pages are short (to 2 MiB pages for auto, to regular
 * memory with prefer, no start with require) and saying so in the log and the status, what
 * --print-hugepages asks the reservation unit for, and a warm restart keeping every class on the
 * pages it had. A client checks the pages it really got in /proc/self/smaps (KernelPageSize).
 *
 * 1 GiB pages: as root the cases reserve what they need at run time (nr_hugepages of
 * hugepages-1048576kB, and 2 MiB ones as run-tests.sh does) and give back what they added after
 * the case (teardown); a case that needs them and cannot have them (not root, the kernel has no
 * 1 GiB pages, memory too fragmented) is skipped saying why, and the others run. With
 * HP_TEST_HUGEPAGES=off only the cases that need no hugepages run.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "hugepool.h"
#include "manager.h"
#include "proto.h"
#include "case.h"

#define MIB (UINT64_C(1) << 20)
#define GIB (UINT64_C(1) << 30)
#define SYSFS "/sys/kernel/mm/hugepages/hugepages-%" PRIu64 "kB/%s"

/* small classes on 2 MiB pages, a large one on 1 GiB pages where they are */
#define MIXED "page_size = auto\n"
#define MIXED_CLASSES "[class small]\nsize = 2M\ncount = 4\n[class big]\nsize = 1G\ncount = 1\n"

static const struct harness_opts with_store = { .fdstore_max = 4096 };

static bool mode_off(void)
{
	const char *m = getenv("HP_TEST_HUGEPAGES");

	return m && strcmp(m, "off") == 0;
}

/* A number from a sysfs file of the hugepages of page_size; -1 if there is none. */
static long sysfs_get(uint64_t page_size, const char *file)
{
	char path[128];
	long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), SYSFS, page_size / 1024, file);
	f = fopen(path, "re");
	if (!f)
		return -1;
	if (fscanf(f, "%ld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

static bool sysfs_set(uint64_t page_size, const char *file, long v)
{
	char path[128];
	FILE *f;
	bool ok;

	snprintf(path, sizeof(path), SYSFS, page_size / 1024, file);
	f = fopen(path, "we");
	if (!f)
		return false;
	ok = fprintf(f, "%ld\n", v) > 0;
	return (fclose(f) == 0) && ok;
}

/* Pages of page_size free and not promised to a mapping, as the daemon counts them. */
static long pages_free(uint64_t page_size)
{
	long f = sysfs_get(page_size, "free_hugepages"), r = sysfs_get(page_size, "resv_hugepages");

	return f < 0 || r < 0 ? 0 : f > r ? f - r : 0;
}

/*
 * The kernel's persistent pool of page_size, as hugeadm counts it: nr_hugepages minus the surplus
 * pages (given back while still mapped, freed when their last user lets go; a larger
 * nr_hugepages turns them back into persistent ones first). -1: no such pages.
 */
static long persistent(uint64_t page_size)
{
	long nr = sysfs_get(page_size, "nr_hugepages"), surplus = sysfs_get(page_size, "surplus_hugepages");

	return nr < 0 || surplus < 0 ? -1 : nr - surplus;
}

/* What the cases added to the kernel's pools, given back by give_back (teardown). */
static long added[2]; /* [0]: 2 MiB pages, [1]: 1 GiB */

/*
 * At least n pages of page_size free: as root, add the shortfall to the kernel's pool. false,
 * having said why on stderr, when they cannot be had.
 */
static bool have_pages(uint64_t page_size, long n)
{
	long free_now = pages_free(page_size), nr = persistent(page_size), got;

	if (free_now >= n)
		return true;
	if (nr < 0) {
		fprintf(stderr, "skipped: this kernel has no hugepages of %" PRIu64 " KiB\n", page_size / 1024);
		return false;
	}
	if (geteuid() != 0) {
		fprintf(stderr, "skipped: %ld free hugepages of %" PRIu64 " KiB, %ld needed, and only root may "
				"reserve more\n", free_now, page_size / 1024, n);
		return false;
	}
	(void)sysfs_set(page_size, "nr_hugepages", nr + (n - free_now));
	got = persistent(page_size) - nr;
	if (got > 0)
		added[page_size == GIB] += got;
	if (pages_free(page_size) >= n)
		return true;
	fprintf(stderr, "skipped: %ld hugepages of %" PRIu64 " KiB wanted free, the kernel found %ld "
			"(memory too fragmented?)\n", n, page_size / 1024, pages_free(page_size));
	return false;
}

/*
 * Give back what have_pages added, by the difference (others may change the count meanwhile).
 * Pages a failed case still maps become surplus, freed when it lets go.
 */
static void give_back(void)
{
	static const uint64_t sizes[2] = { 2 * MIB, GIB };

	for (int k = 0; k < 2; k++)
		if (added[k] > 0) {
			long nr = persistent(sizes[k]);

			(void)sysfs_set(sizes[k], "nr_hugepages", nr > added[k] ? nr - added[k] : 0);
			added[k] = 0;
		}
}

static int teardown_pages(void **state)
{
	teardown(state); /* the daemon first: it holds the pages */
	give_back();
	return 0;
}

/* The page size the kernel maps addr with, from /proc/self/smaps (KernelPageSize); 0 if unmapped. */
static uint64_t kernel_page_size(const void *addr)
{
	uintptr_t a = (uintptr_t)addr, lo, hi;
	unsigned long kb = 0;
	char line[512];
	bool in = false;
	FILE *f = fopen("/proc/self/smaps", "re");

	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " ", &lo, &hi) == 2) {
			in = a >= lo && a < hi;
			continue;
		}
		if (in && sscanf(line, "KernelPageSize: %lu kB", &kb) == 1)
			break;
	}
	fclose(f);
	return (uint64_t)kb * 1024;
}

/* Class name of d has hugetlb pages of page (0: regular memory), asked for want, fell back or not. */
static void expect_pages(const struct daemon *d, const char *name, uint64_t page, uint64_t want, bool fallback)
{
	hp_conn *c = conn(d);
	struct hp_status *st = status(c);
	const struct hp_class_pages *pg = &status_class(st, name)->pages;

	if (pg->page_size != (page ? page : 4096) || pg->hugetlb != (page != 0) || pg->want_page_size != want ||
	    pg->fallback != fallback)
		fail_msg("class %s: pages of %" PRIu64 " (hugetlb %d), asked for %" PRIu64 ", fallback %d (%s); expected "
			 "%" PRIu64 ", %" PRIu64 ", %d",
			 name, pg->page_size, pg->hugetlb, pg->want_page_size, pg->fallback, pg->fallback_reason,
			 page ? page : 4096, want, fallback);
	assert_int_equal(pg->fallback_reason[0] != '\0', fallback);
	hp_status_free(st);
	hp_disconnect(c);
}

/* Acquire one buffer of class name: the kernel maps it with pages of page; it holds byte fill. */
static void expect_mapped(const struct daemon *d, const char *name, uint64_t page, int fill)
{
	struct hp_buffer b;
	hp_conn *c = conn(d);

	assert_int_equal(hp_acquire(c, name, 1, 1000, &b), 0);
	assert_int_equal(kernel_page_size(b.addr), page);
	for (size_t k = 0; k < b.size; k += 4096)
		if (((const uint8_t *)b.addr)[k] != fill)
			fail_msg("class %s: byte %zu is %d, expected %d", name, k, ((const uint8_t *)b.addr)[k], fill);
	assert_int_equal(hp_release(c, &b, 1), 0);
	hp_disconnect(c);
}

/* Fill every buffer of class name (count of them) with byte fill and release them. */
static void fill_class(const struct daemon *d, const char *name, unsigned count, int fill)
{
	struct hp_buffer b[8];
	hp_conn *c = conn(d);

	assert_true(count <= 8);
	assert_int_equal(hp_acquire(c, name, count, 1000, b), 0);
	for (unsigned i = 0; i < count; i++)
		memset(b[i].addr, fill, b[i].size);
	assert_int_equal(hp_release(c, b, count), 0);
	hp_disconnect(c);
}

/* hugepoold --print-hugepages of a configuration: its output, and its exit status returned. */
static int print_hugepages(const char *text, char *out, size_t len)
{
	char conf[] = "/tmp/test_pages.XXXXXX", cmd[512];
	int fd = mkstemp(conf), st;
	size_t n;
	FILE *f;

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	snprintf(cmd, sizeof(cmd), "%s/hugepoold --print-hugepages -c %s", harness_build(), conf);
	f = popen(cmd, "r");
	assert_non_null(f);
	n = fread(out, 1, len - 1, f);
	out[n] = '\0';
	st = pclose(f);
	unlink(conf);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* What the reservation unit asks for: a line per page size, 1 GiB ones for auto where the kernel has them. */
static void test_print_hugepages(void **state)
{
	struct stat st;
	bool gig = stat("/sys/kernel/mm/hugepages/hugepages-1048576kB", &st) == 0;
	char out[256];

	(void)state;
	assert_int_equal(print_hugepages(MIXED "[class small]\nsize = 2M\ncount = 4\n[class big]\nsize = 1G\ncount = 8\n"
					     "[class odd]\nsize = 3G\ncount = 1\npage_size = 2M\n",
					 out, sizeof(out)),
			 0);
	/* auto: 1 GiB pages for big where the kernel has them; odd says 2M itself */
	assert_string_equal(out, gig ? "1540 2097152\n8 1073741824\n" : "5636 2097152\n");
	/* a class's own 1G under a global 2M */
	assert_int_equal(print_hugepages("[class a]\nsize = 4M\ncount = 2\n[class b]\nsize = 2G\ncount = 2\npage_size = 1G\n",
					 out, sizeof(out)),
			 0);
	assert_string_equal(out, "4 2097152\n4 1073741824\n");
	assert_int_equal(print_hugepages("page_size = 1G\n[class b]\nsize = 1G\ncount = 3\n", out, sizeof(out)), 0);
	assert_string_equal(out, "3 1073741824\n");
	/* no hugepages at all: one line of none, as before */
	assert_int_equal(print_hugepages("hugepages = off\n" MIXED_CLASSES, out, sizeof(out)), 0);
	assert_string_equal(out, "0 2097152\n");
	assert_int_equal(print_hugepages("[class a]\nsize = 3M\ncount = 1\n", out, sizeof(out)), 2);
	assert_string_equal(out, "");
}

/* hugepages = off: every class on regular memory, whatever it asks for, and nothing fell back. */
static void test_off_regular_memory(void **state)
{
	static struct daemon d;

	(void)state;
	start(&d, "hugepages = off\n" MIXED,
	      "[class small]\nsize = 2M\ncount = 2\n[class exact]\nsize = 4M\ncount = 1\npage_size = 1G\n");
	/* 1G with hugepages = off: sizes need 4 KiB only, and the class asks for nothing */
	expect_pages(&d, "small", 0, 0, false);
	expect_pages(&d, "exact", 0, 0, false);
	expect_mapped(&d, "small", 4096, 0);
	stop(&d);
}

/* require: a class whose pages are short stops the start, naming the class and the numbers. */
static void test_require_names_the_class(void **state)
{
	static struct daemon d;
	long n = pages_free(GIB) + 1;
	char classes[160], why[160];

	(void)state;
	snprintf(classes, sizeof(classes), "[class small]\nsize = 2M\ncount = 1\n[class big]\nsize = 1G\ncount = %ld\n"
					   "page_size = 1G\n", n);
	snprintf(why, sizeof(why), "Not enough hugepages for class \"big\" (hugepages = require): %ld hugepages of 1.0 GiB "
				   "needed, %ld free", n, n - 1);
	start_refused(&d, "hugepages = require\n", classes, 3, why);
}

/* Small classes on 2 MiB pages and a large one on 1 GiB pages, in one pool: each gets its own. */
static void test_mixed_pool(void **state)
{
	static struct daemon d;

	(void)state;
	if (mode_off() || !have_pages(2 * MIB, 4) || !have_pages(GIB, 1)) {
		if (mode_off())
			fprintf(stderr, "skipped: hugepages = off\n");
		skip();
	}
	start(&d, MIXED, MIXED_CLASSES);
	assert_int_equal(harness_log_count(&d, "Created 5 buffers in 2 classes, 1.0 GiB: 8.0 MiB on 2.0 MiB hugetlb pages, "
					       "1.0 GiB on 1.0 GiB hugetlb pages"),
			 1);
	expect_pages(&d, "small", 2 * MIB, 2 * MIB, false);
	expect_pages(&d, "big", GIB, GIB, false);
	/* what the client maps is what the status says */
	expect_mapped(&d, "small", 2 * MIB, 0);
	expect_mapped(&d, "big", GIB, 0);
	{
		hp_conn *c = conn(&d);
		struct hp_status *st = status(c);

		/* the pool in one word: the smallest pages, all hugetlb, nothing fell back */
		assert_int_equal(st->page_size, 2 * MIB);
		assert_int_equal(st->hugetlb, 1);
		assert_int_equal(st->fallback, 0);
		hp_status_free(st);
		hp_disconnect(c);
	}
	stop(&d);
}

/*
 * Too few 1 GiB pages: an auto class takes 2 MiB pages, a class that says 1G falls back to
 * regular memory (prefer), the small class keeps its 2 MiB pages, and each says why.
 */
static void test_short_of_1g(void **state)
{
	static struct daemon d;
	static char out[1 << 18]; /* the metrics of three classes */
	long f = pages_free(GIB), n = f + 1;
	char classes[256], line[256];

	(void)state;
	if (mode_off()) {
		fprintf(stderr, "skipped: hugepages = off\n");
		skip();
	}
	if (n > 2) {
		fprintf(stderr, "skipped: %ld 1 GiB pages are free here: making them short would take %ld GiB\n", f, 2 * n);
		skip();
	}
	/* the auto class's fallback: n GiB of 2 MiB pages */
	if (!have_pages(2 * MIB, 4 + n * 512))
		skip();
	snprintf(classes, sizeof(classes), "[class small]\nsize = 2M\ncount = 4\n[class big]\nsize = 1G\ncount = %ld\n"
					   "[class exact]\nsize = 1G\ncount = %ld\npage_size = 1G\n", n, n);
	start(&d, MIXED, classes);
	snprintf(line, sizeof(line), "Not enough hugepages for class \"big\": %ld hugepages of 1.0 GiB needed, %ld free; "
				     "it takes 2.0 MiB pages instead (page_size = auto)", n, f);
	assert_int_equal(harness_log_count(&d, line), 1);
	snprintf(line, sizeof(line), "Not enough hugepages for class \"exact\" (%ld.0 GiB of buffers): %ld hugepages of 1.0 "
				     "GiB needed, %ld free; falling back to regular shared memory", n, n, f);
	assert_int_equal(harness_log_count(&d, line), 1);
	expect_pages(&d, "small", 2 * MIB, 2 * MIB, false);
	expect_pages(&d, "big", 2 * MIB, GIB, true);
	expect_pages(&d, "exact", 0, GIB, true);
	expect_mapped(&d, "big", 2 * MIB, 0);
	{
		hp_conn *c = conn(&d);
		struct hp_status *st = status(c);

		assert_int_equal(st->page_size, 4096);
		assert_int_equal(st->hugetlb, 0);
		assert_int_equal(st->fallback, 1);
		assert_non_null(strstr(st->fallback_reason, "class big: "));
		assert_non_null(strstr(status_class(st, "big")->pages.fallback_reason, "of 1.0 GiB needed"));
		hp_status_free(st);
		hp_disconnect(c);
	}
	/* and hugepoolctl says it, class by class */
	assert_int_equal(ctl(&d, "classes", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "PAGES"));
	assert_non_null(strstr(out, "fallback from 1.0 GiB: "));
	assert_int_equal(ctl(&d, "metrics", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "hugepool_class_page_size_bytes{class=\"big\"} 2097152\n"));
	assert_non_null(strstr(out, "hugepool_class_page_fallback{class=\"exact\"} 1\n"));
	stop(&d);
}

/*
 * A warm restart keeps both kinds: every buffer adopted on the pages it had (none faulted
 * again), its content and its lease kept, by SIGTERM and by SIGKILL.
 */
static void test_warm_restart_keeps_both(void **state)
{
	static struct daemon d;
	struct hp_buffer held;
	hp_conn *c;

	(void)state;
	if (mode_off() || !have_pages(2 * MIB, 4) || !have_pages(GIB, 1)) {
		if (mode_off())
			fprintf(stderr, "skipped: hugepages = off\n");
		skip();
	}
	assert_int_equal(start_try(&d, MIXED, MIXED_CLASSES, &with_store), 0);
	fill_class(&d, "small", 4, 0x5a);
	/* the 1 GiB buffer stays leased across the restarts */
	c = conn(&d);
	assert_int_equal(hp_acquire(c, "big", 1, 1000, &held), 0);
	memset(held.addr, 0xa5, held.size);
	assert_int_equal(harness_terminate(&d), 0);
	assert_int_equal(harness_restart(&d), 0);
	assert_int_equal(harness_log_count(&d, "Warm start (life 2): adopted 5 buffers (1.0 GiB), faulted 0, dropped 0"), 1);
	expect_pages(&d, "small", 2 * MIB, 2 * MIB, false);
	expect_pages(&d, "big", GIB, GIB, false);
	expect_mapped(&d, "small", 2 * MIB, 0x5a);
	/* the connection and its lease are served on: releasing it gives the daemon's buffer back */
	assert_int_equal(hp_release(c, &held, 1), 0);
	expect_mapped(&d, "big", GIB, 0xa5);
	assert_int_equal(harness_kill(&d), 128 + SIGKILL);
	assert_int_equal(harness_restart(&d), 0);
	assert_int_equal(harness_log_count(&d, "Warm start (life 3): adopted 5 buffers (1.0 GiB), faulted 0, dropped 0"), 1);
	expect_pages(&d, "big", GIB, GIB, false);
	expect_mapped(&d, "big", GIB, 0xa5);
	hp_disconnect(c);
	stop(&d);
}

/*
 * An auto class that fell back to 2 MiB pages stays on them across a warm restart when 1 GiB
 * pages have come meanwhile (its buffers and leases are kept); a cold start takes 1 GiB pages.
 */
static void test_warm_restart_keeps_fallback(void **state)
{
	static struct daemon d;

	(void)state;
	if (mode_off()) {
		fprintf(stderr, "skipped: hugepages = off\n");
		skip();
	}
	if (pages_free(GIB) > 0) {
		fprintf(stderr, "skipped: a 1 GiB page is free here already: the class would not fall back\n");
		skip();
	}
	if (!have_pages(2 * MIB, 4 + 512))
		skip();
	assert_int_equal(start_try(&d, MIXED, MIXED_CLASSES, &with_store), 0);
	expect_pages(&d, "big", 2 * MIB, GIB, true);
	fill_class(&d, "big", 1, 0x3c);
	if (!have_pages(GIB, 1)) {
		stop(&d);
		skip();
	}
	assert_int_equal(harness_terminate(&d), 0);
	assert_int_equal(harness_restart(&d), 0);
	assert_int_equal(harness_log_count(&d, "Warm start (life 2): adopted 5 buffers (1.0 GiB), faulted 0, dropped 0"), 1);
	/* what it has is what it asks for now: no fallback */
	expect_pages(&d, "big", 2 * MIB, 2 * MIB, false);
	expect_mapped(&d, "big", 2 * MIB, 0x3c);
	/* cold (the store emptied, as systemctl stop does): 1 GiB pages */
	assert_int_equal(harness_terminate(&d), 0);
	manager_flush(d.mgr);
	assert_int_equal(harness_restart(&d), 0);
	expect_pages(&d, "big", GIB, GIB, false);
	expect_mapped(&d, "big", GIB, 0);
	stop(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_print_hugepages),
		cmocka_unit_test_teardown(test_off_regular_memory, teardown_pages),
		cmocka_unit_test_teardown(test_require_names_the_class, teardown_pages),
		cmocka_unit_test_teardown(test_mixed_pool, teardown_pages),
		cmocka_unit_test_teardown(test_short_of_1g, teardown_pages),
		cmocka_unit_test_teardown(test_warm_restart_keeps_both, teardown_pages),
		cmocka_unit_test_teardown(test_warm_restart_keeps_fallback, teardown_pages),
	};

	return run_cases("pages", tests);
}
