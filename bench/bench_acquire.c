/* SPDX-License-Identifier: MIT */
/*
 * bench_acquire.c - "A client getting 4 GiB of buffers ready to use", through a real hugepoold,
 * and what the size of their pages does to the acquire and to random access over them.
 *
 * Starts $HP_BUILD/hugepoold (tests/integration/harness.c) with one class of 64 MiB buffers,
 * $HP_BENCH_GIB GiB in all (default 4: 64 buffers), for 2 MiB hugetlb pages (hugepages =
 * require, when enough are free) and for 4 KiB pages (hugepages = off), and times:
 *  - ours: hp_connect + hp_acquire of every buffer (mapped with MAP_POPULATE) + a write of one
 *    byte per page, then hp_release + hp_acquire + the same writes (a restarted engine of the
 *    same uid gets its buffers back warm);
 *  - baseline: the client allocating the same buffers itself: mmap anonymous (MAP_HUGETLB for
 *    hugetlb) + memset, one after the other, plus the same writes.
 * Prints ms and baseline/ours, best of 3 runs (a fresh daemon for each run).
 *
 * Then page sizes (issue 44): 8 buffers of 1 GiB ($HP_BENCH_PAGES_BUFFERS) on 1 GiB pages
 * (page_size = 1G), on 2 MiB pages and on 4 KiB pages (hugepages = off), one daemon each, in
 * the same run:
 *  - connect + acquire of all of them (mapped with MAP_POPULATE: the page-table entries the
 *    mapping needs, 8 for 1 GiB pages, 4096 for 2 MiB ones, 2 million for 4 KiB), then a write
 *    per 4 KiB; best of 3 acquires by the same client uid (release and acquire again: the same
 *    buffers, warm); the 1 GiB figure beside the 2 MiB one as its baseline, and the 4 KiB one;
 *  - random 8-byte updates over all of them (an xorshift index into the buffers, as a hash
 *    aggregation's probes are: one TLB miss per update where the TLB covers less than the
 *    buffers), ns per update: 3 runs of $HP_BENCH_PAGES_UPDATES million (default 16) in
 *    chunks of a million, each run's figure its fastest chunk (the two CPUs are shared: a
 *    chunk nobody else disturbed is the workload's own speed), the best run's; each page size
 *    beside 4 KiB pages and 1 GiB beside 2 MiB; dTLB-load-misses per update counted with
 *    perf_event_open where the machine has hardware counters, else the time ratio is the page
 *    walks' cost and the note says why not counted.
 * The hugepages each part needs are reserved (as root) just before its daemon starts and given
 * back right after it stops (bench_hugepages_reserve); without them that page size is skipped
 * saying why, and the others run. 1 GiB pages need 1 GiB of contiguous free memory each: where
 * the kernel finds fewer than asked, every page size is measured with as many buffers as it
 * found, said in the title.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <linux/perf_event.h>

#include "../tests/integration/harness.h"
#include "benchutil.h"
#include "hugepool.h"

#define BUF_SIZE (64 * BENCH_MIB)

struct kind {
	const char *name;
	bool hugetlb;
	uint64_t page;
	const char *globals; /* for the daemon's configuration */
};

struct results {
	struct bench_series base, first, again, release;
	uint64_t boot_ns; /* the daemon's own pre-fault at boot (hp_status), best run */
	unsigned boot_threads;
};

/* The baseline: the client allocates, zeroes and touches its buffers itself. */
static int run_baseline(const struct kind *k, unsigned n, uint64_t *ret_ns)
{
	struct bench_range *r = calloc(n, sizeof(*r));
	int flags = MAP_PRIVATE | MAP_ANONYMOUS | (k->hugetlb ? MAP_HUGETLB : 0);
	unsigned done = 0;
	uint64_t t0, t1;
	int err = 0;

	if (!r)
		return -ENOMEM;
	t0 = bench_now_ns();
	for (; done < n; done++) {
		void *p = mmap(NULL, BUF_SIZE, PROT_READ | PROT_WRITE, flags, -1, 0);

		if (p == MAP_FAILED) {
			err = -errno;
			break;
		}
		memset(p, 0, BUF_SIZE);
		bench_clobber(p);
		r[done] = (struct bench_range){ p, BUF_SIZE };
	}
	if (!err)
		bench_touch(r, n, k->page);
	t1 = bench_now_ns();
	for (unsigned i = 0; i < done; i++)
		munmap(r[i].addr, r[i].len);
	free(r);
	*ret_ns = t1 - t0;
	return err;
}

static void to_ranges(const struct hp_buffer *b, unsigned n, struct bench_range *r)
{
	for (unsigned i = 0; i < n; i++)
		r[i] = (struct bench_range){ b[i].addr, b[i].size };
}

/* Ours: a fresh daemon, then connect + acquire + touch, release + acquire + touch. */
static int run_ours(const struct kind *k, unsigned n, struct results *res)
{
	struct hp_buffer *bufs = calloc(n, sizeof(*bufs));
	struct bench_range *r = calloc(n, sizeof(*r));
	struct hp_status *st = NULL;
	char classes[128];
	struct daemon d;
	hp_conn *c = NULL;
	uint64_t t0, t1, t2, t3;
	int ret;

	if (!bufs || !r) {
		free(bufs);
		free(r);
		return -ENOMEM;
	}
	snprintf(classes, sizeof(classes), "[class bench]\nsize = 64M\ncount = %u\n", n);
	ret = harness_start(&d, k->globals, classes);
	if (ret < 0) {
		printf("   could not start hugepoold: %s%s\n", strerror(-ret),
		       ret == -ECHILD ? " (it exited; its log follows)" : "");
		if (ret == -ECHILD) {
			harness_dump_log(&d);
			harness_cleanup(&d);
		}
		free(bufs);
		free(r);
		return ret;
	}

	t0 = bench_now_ns();
	ret = hp_connect(d.socket, &c);
	if (ret == 0)
		ret = hp_acquire(c, "bench", n, 10000, bufs);
	if (ret < 0) {
		printf("   connect/acquire failed: %s (%s)\n", hp_strerror(ret), c ? hp_last_error(c) : "");
		goto out;
	}
	to_ranges(bufs, n, r);
	bench_touch(r, n, k->page);
	t1 = bench_now_ns();

	ret = hp_release(c, bufs, n);
	t2 = bench_now_ns();
	if (ret == 0)
		ret = hp_acquire(c, "bench", n, 10000, bufs);
	if (ret < 0) {
		printf("   release/re-acquire failed: %s (%s)\n", hp_strerror(ret), hp_last_error(c));
		goto out;
	}
	to_ranges(bufs, n, r);
	bench_touch(r, n, k->page);
	t3 = bench_now_ns();

	bench_series_add(&res->first, t1 - t0);
	bench_series_add(&res->again, t3 - t1);
	bench_series_add(&res->release, t2 - t1);

	/* the daemon must really serve the page kind we claim to measure */
	ret = hp_status(c, &st);
	if (ret == 0) {
		if ((st->hugetlb != 0) != k->hugetlb) {
			printf("   the daemon serves %s pages, not %s: not comparable\n", st->hugetlb ? "hugetlb" : "4K",
			       k->name);
			ret = -EINVAL;
		} else if (!res->boot_ns || st->boot_prefault_ns < res->boot_ns) {
			res->boot_ns = st->boot_prefault_ns;
			res->boot_threads = st->boot_threads;
		}
		hp_status_free(st);
	}
out:
	hp_disconnect(c);
	if (harness_stop(&d) != 0)
		printf("   hugepoold did not exit cleanly (its log is above)\n");
	free(bufs);
	free(r);
	return ret < 0 ? ret : 0;
}

static void report(const struct kind *k, unsigned n, const struct results *res)
{
	double base = (double)bench_series_best(&res->base) / 1e6;
	double first = (double)bench_series_best(&res->first) / 1e6;
	double again = (double)bench_series_best(&res->again) / 1e6;
	char what[64], bwhat[64], b[4][96];

	printf("   %-51s | %-43s | %s\n", "figure (ms, best run)", "baseline", "ratio (> 1: ours faster)");
	snprintf(what, sizeof(what), "connect + acquire %u + touch", n);
	snprintf(bwhat, sizeof(bwhat), "client mmap+memset %u + touch", n);
	bench_row(what, first, bwhat, base, "ms", "baseline/ours", base / first);
	bench_row("release + re-acquire (warm) + touch", again, bwhat, base, "ms", "baseline/ours", base / again);
	bench_note("touch = a write of one byte per %s page; the warm case is a restarted client, whose baseline "
		   "is allocating again; hp_release alone took %.1f ms of its figure",
		   k->hugetlb ? "2 MiB" : "4 KiB", (double)bench_series_best(&res->release) / 1e6);
	bench_note("paid once by the daemon at boot, before READY=1 (not in the figures): pre-fault %.0f ms with "
		   "%u threads", (double)res->boot_ns / 1e6, res->boot_threads);
	bench_note("all runs, ms: baseline %s | acquire %s | re-acquire %s | release %s",
		   bench_series_str(&res->base, true, b[0], sizeof(b[0])),
		   bench_series_str(&res->first, true, b[1], sizeof(b[1])),
		   bench_series_str(&res->again, true, b[2], sizeof(b[2])),
		   bench_series_str(&res->release, true, b[3], sizeof(b[3])));
}

static void run_kind(const struct kind *k, unsigned n)
{
	uint64_t bytes = (uint64_t)n * BUF_SIZE;
	struct results res;
	char why[256];

	memset(&res, 0, sizeof(res));
	bench_title("%s pages: %u buffers of 64 MiB (%" PRIu64 " GiB), best of %d runs", k->name, n,
		    bytes / BENCH_GIB, BENCH_REPS);
	/* the baseline runs while no daemon holds pages, so one pool's worth is enough */
	if (k->hugetlb) {
		uint64_t ns;
		int r;

		if (!bench_hugetlb_ok(bytes, k->page, why, sizeof(why))) {
			bench_note("skipped: %s", why);
			return;
		}
		r = bench_hugetlb_warmup(bytes, &ns);
		if (r < 0) {
			bench_note("skipped: could not fault in %" PRIu64 " GiB of hugetlb memory: %s",
				   bytes / BENCH_GIB, strerror(-r));
			return;
		}
		bench_note("warm-up, untimed: first touch of the hugetlb pages took %.2f s", (double)ns / 1e9);
	}
	for (unsigned rep = 0; rep < BENCH_REPS; rep++) {
		uint64_t ns = 0;
		int r;

		/* alternate which side runs first */
		for (unsigned s = 0; s < 2; s++) {
			if (!k->hugetlb)
				bench_settle();
			if ((s + rep) % 2 == 0) {
				r = run_baseline(k, n, &ns);
				if (r < 0) {
					bench_note("baseline failed: %s; stopped this page kind", strerror(-r));
					return;
				}
				bench_series_add(&res.base, ns);
			} else if (run_ours(k, n, &res) < 0) {
				bench_note("stopped this page kind after the failure above");
				return;
			}
		}
	}
	report(k, n, &res);
}

/* --- page sizes: 8 x 1 GiB on 1 GiB, 2 MiB and 4 KiB pages ------------------------------- */

struct page_kind {
	const char *name;
	uint64_t page; /* BENCH_SMALL_PAGE: regular shared memory */
	const char *globals;
};

static const struct page_kind page_kinds[] = {
	{ "1 GiB", BENCH_HUGE_1G, "hugepages = require\npage_size = 1G\n" },
	{ "2 MiB", BENCH_HUGE_2M, "hugepages = require\npage_size = 2M\n" },
	{ "4 KiB", BENCH_SMALL_PAGE, "hugepages = off\n" },
};
#define NKINDS (sizeof(page_kinds) / sizeof(page_kinds[0]))

struct page_results {
	bool ran;
	char why[256]; /* when it did not */
	struct bench_series acquire, touch, random;
	double misses; /* dTLB-load-misses per update of the best random run; < 0: not counted */
	uint64_t boot_ns;
};

#define CHUNK_UPDATES (UINT64_C(1) << 20)

/*
 * n random 8-byte updates over nbuf buffers of size bytes (a power of two): xorshift64 (its
 * state in *x) picks the buffer (the high half, scaled) and the 8-byte word in it. The updates
 * are independent, as a hash aggregation's are: the CPU overlaps their cache and TLB misses as
 * it can.
 */
static void random_updates(uint64_t *const *base, unsigned nbuf, uint64_t size, uint64_t n, uint64_t *x)
{
	uint64_t words = size / 8, v = *x;

	for (uint64_t i = 0; i < n; i++) {
		v ^= v << 13;
		v ^= v >> 7;
		v ^= v << 17;
		base[((v >> 32) * nbuf) >> 32][v & (words - 1)] += i;
	}
	*x = v;
	bench_clobber(base[0]);
}

/* A run of n updates in chunks of CHUNK_UPDATES: the fastest chunk's ns, scaled to n. */
static uint64_t random_run(uint64_t *const *base, unsigned nbuf, uint64_t n, uint64_t *x)
{
	uint64_t best = UINT64_MAX;

	for (uint64_t done = 0; done < n; done += CHUNK_UPDATES) {
		uint64_t t0 = bench_now_ns(), ns;

		random_updates(base, nbuf, BENCH_GIB, CHUNK_UPDATES, x);
		ns = bench_now_ns() - t0;
		if (ns < best)
			best = ns;
	}
	return best * (n / CHUNK_UPDATES);
}

/* The class's pages, as the daemon says: the kind measured must be the kind served. */
static bool served_on(hp_conn *c, uint64_t page, char *why, size_t len)
{
	struct hp_status *st = NULL;
	bool ok;

	if (hp_status(c, &st) < 0 || st->nclasses < 1) {
		snprintf(why, len, "no status");
		hp_status_free(st);
		return false;
	}
	ok = st->classes[0]->pages.page_size == page;
	if (!ok)
		snprintf(why, len, "the daemon serves pages of %" PRIu64 " bytes, not %" PRIu64 ": not comparable",
			 st->classes[0]->pages.page_size, page);
	hp_status_free(st);
	return ok;
}

/* One page size: its daemon, 3 acquires, 3 runs of random updates over the last one's buffers. */
static void run_page_kind(const struct page_kind *k, unsigned nbuf, uint64_t updates, int counter,
			  struct page_results *res)
{
	struct hp_buffer bufs[64];
	struct bench_range r[64];
	uint64_t *base[64];
	char classes[96];
	struct daemon d;
	hp_conn *c = NULL;
	int ret;

	if (k->page != BENCH_SMALL_PAGE &&
	    bench_hugepages_reserve(k->page, nbuf * BENCH_GIB / k->page, res->why, sizeof(res->why)) <
		    (long)(nbuf * BENCH_GIB / k->page)) {
		bench_hugepages_give_back();
		return;
	}
	snprintf(classes, sizeof(classes), "[class gig]\nsize = 1G\ncount = %u\n", nbuf);
	ret = harness_start(&d, k->globals, classes);
	if (ret < 0) {
		snprintf(res->why, sizeof(res->why), "could not start hugepoold: %s", strerror(-ret));
		if (ret == -ECHILD) {
			harness_dump_log(&d);
			harness_cleanup(&d);
		}
		bench_hugepages_give_back();
		return;
	}
	for (unsigned rep = 0; rep < BENCH_REPS; rep++) {
		uint64_t t0 = bench_now_ns(), t1, t2;

		ret = hp_connect(d.socket, &c);
		if (ret == 0)
			ret = hp_acquire(c, "gig", nbuf, 10000, bufs);
		t1 = bench_now_ns();
		if (ret < 0) {
			snprintf(res->why, sizeof(res->why), "connect/acquire failed: %s (%s)", hp_strerror(ret),
				 c ? hp_last_error(c) : "");
			goto out;
		}
		for (unsigned i = 0; i < nbuf; i++)
			r[i] = (struct bench_range){ bufs[i].addr, bufs[i].size };
		bench_touch(r, nbuf, BENCH_SMALL_PAGE);
		t2 = bench_now_ns();
		bench_series_add(&res->acquire, t1 - t0);
		bench_series_add(&res->touch, t2 - t1);
		if (rep + 1 < BENCH_REPS) {
			hp_release(c, bufs, nbuf);
			hp_disconnect(c);
			c = NULL;
		}
	}
	if (!served_on(c, k->page, res->why, sizeof(res->why)))
		goto out;
	for (unsigned i = 0; i < nbuf; i++)
		base[i] = bufs[i].addr;
	res->misses = -1;
	for (unsigned rep = 0; rep < BENCH_REPS; rep++) {
		uint64_t x = 0x9e3779b97f4a7c15ull + rep, ns, m = 0;

		if (counter >= 0)
			bench_counter_reset(counter);
		ns = random_run(base, nbuf, updates, &x);
		if (counter >= 0)
			m = bench_counter_read(counter);
		if (!res->random.n || ns < bench_series_best(&res->random))
			res->misses = counter >= 0 ? (double)m / (double)updates : -1;
		bench_series_add(&res->random, ns);
	}
	res->ran = true;
	{
		struct hp_status *st = NULL;

		if (hp_status(c, &st) == 0)
			res->boot_ns = st->boot_prefault_ns;
		hp_status_free(st);
	}
out:
	if (c)
		hp_release(c, bufs, nbuf);
	hp_disconnect(c);
	if (harness_stop(&d) != 0)
		printf("   hugepoold did not exit cleanly (its log is above)\n");
	bench_hugepages_give_back();
}

/* Figure a of kind i beside figure b of kind j, both in the unit, when both ran. */
static void page_row(const struct page_results *res, size_t i, size_t j, const char *what, bool random,
		     double scale, const char *unit, uint64_t updates)
{
	const struct bench_series *a = random ? &res[i].random : &res[i].acquire;
	const struct bench_series *b = random ? &res[j].random : &res[j].acquire;
	double fa = (double)bench_series_best(a) / scale, fb = (double)bench_series_best(b) / scale;
	char wa[96], wb[96];

	if (!res[i].ran || !res[j].ran)
		return;
	if (random) {
		fa /= (double)updates;
		fb /= (double)updates;
	}
	snprintf(wa, sizeof(wa), "%s, %s pages", what, page_kinds[i].name);
	snprintf(wb, sizeof(wb), "%s pages", page_kinds[j].name);
	bench_row(wa, fa, wb, fb, unit, "baseline/ours", fb / fa);
}

static void run_pages(void)
{
	static struct page_results res[NKINDS];
	unsigned nbuf = bench_env_uint("HP_BENCH_PAGES_BUFFERS", 8, 1, 64);
	uint64_t updates = (uint64_t)bench_env_uint("HP_BENCH_PAGES_UPDATES", 16, 1, 4096) << 20;
	char why[256], thp[96], b[4][96];
	unsigned asked = nbuf;
	long got;
	int counter;

	/* 1 GiB pages first, while memory is least fragmented: as many buffers as there are pages */
	got = bench_hugepages_reserve(BENCH_HUGE_1G, nbuf, why, sizeof(why));
	if (got > 0 && got < (long)nbuf)
		nbuf = (unsigned)got;
	bench_title("page sizes: %u buffers of 1 GiB on 1 GiB, 2 MiB and 4 KiB pages, best of %d runs", nbuf,
		    BENCH_REPS);
	if (nbuf < asked)
		bench_note("%u buffers, not %u: %s", nbuf, asked, why);
	counter = bench_counter_open(PERF_TYPE_HW_CACHE,
				     PERF_COUNT_HW_CACHE_DTLB | (PERF_COUNT_HW_CACHE_OP_READ << 8) |
					     (PERF_COUNT_HW_CACHE_RESULT_MISS << 16),
				     why, sizeof(why));
	for (size_t k = 0; k < NKINDS; k++) {
		run_page_kind(&page_kinds[k], nbuf, updates, counter, &res[k]);
		if (!res[k].ran)
			bench_note("%s pages skipped: %s", page_kinds[k].name, res[k].why);
	}
	printf("   %-51s | %-43s | %s\n", "figure (best run)", "baseline", "ratio (> 1: ours faster)");
	page_row(res, 0, 1, "connect + acquire", false, 1e6, "ms", 0);
	page_row(res, 0, 2, "connect + acquire", false, 1e6, "ms", 0);
	page_row(res, 1, 2, "connect + acquire", false, 1e6, "ms", 0);
	page_row(res, 0, 2, "random 8-byte update", true, 1, "ns", updates);
	page_row(res, 1, 2, "random 8-byte update", true, 1, "ns", updates);
	page_row(res, 0, 1, "random 8-byte update", true, 1, "ns", updates);
	for (size_t k = 0; k < NKINDS; k++) {
		if (!res[k].ran)
			continue;
		bench_note("%s pages: a write per 4 KiB after the acquire took %.1f ms; the daemon's boot pre-fault %.2f s; "
			   "all runs, ms: acquire %s | touch %s; s per %" PRIu64 " million updates (each run's fastest "
			   "chunk): %s",
			   page_kinds[k].name, (double)bench_series_best(&res[k].touch) / 1e6, (double)res[k].boot_ns / 1e9,
			   bench_series_str(&res[k].acquire, true, b[0], sizeof(b[0])),
			   bench_series_str(&res[k].touch, true, b[1], sizeof(b[1])), updates >> 20,
			   bench_series_str(&res[k].random, false, b[2], sizeof(b[2])));
	}
	if (counter >= 0) {
		for (size_t k = 0; k < NKINDS; k++)
			if (res[k].ran)
				bench_note("dTLB-load-misses per update, %s pages: %.3f", page_kinds[k].name, res[k].misses);
		close(counter);
	} else {
		bench_note("dTLB-load-misses not counted (%s): the ratio of the times is the page walks' cost", why);
	}
	bench_thp_settings(thp, sizeof(thp));
	bench_note("random updates: %" PRIu64 " million per run over %u GiB, one thread; 4 KiB pages are regular shared "
		   "memory (%s: with shmem THP on they may be 2 MiB)",
		   updates >> 20, nbuf, thp);
}

int main(void)
{
	static const struct kind kinds[] = {
		{ "2 MiB hugetlb", true, BENCH_HUGE_2M, "hugepages = require\npage_size = 2M\n" },
		{ "4 KiB", false, BENCH_SMALL_PAGE, "hugepages = off\n" },
	};
	unsigned gib = bench_env_gib(4), n = gib * 16;
	const char *build = getenv("HP_BUILD");

	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("bench_acquire: a client getting %u GiB ($HP_BENCH_GIB) of buffers ready to use, %u x 64 MiB, daemon "
	       "%s/hugepoold\n", gib, n, build ? build : "build");
	printf("  ours     = hp_connect + hp_acquire (buffers arrive pre-faulted, mapped MAP_POPULATE) + touch\n");
	printf("  baseline = the client allocates them itself: mmap(MAP_PRIVATE|MAP_ANONYMOUS[|MAP_HUGETLB]) + memset "
	       "0, buffer after buffer, + touch\n");
	bench_settle_init();
	if (n > HP_ACQUIRE_MAX) {
		printf("  %u buffers is more than one hp_acquire takes (%d): lower HP_BENCH_GIB\n", n, HP_ACQUIRE_MAX);
		return 0;
	}
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		run_kind(&kinds[i], n);
	run_pages();
	printf("\n");
	return 0;
}
