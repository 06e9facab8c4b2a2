/* SPDX-License-Identifier: MIT */
/*
 * bench_acquire.c - "A client getting 4 GiB of buffers ready to use", through a real hugepoold.
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
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

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
	printf("\n");
	return 0;
}
