/* SPDX-License-Identifier: MIT */
/*
 * bench_prefault.c - "Boot pre-fault of several GiB": how fast hugepoold makes its pool ready.
 *
 * $HP_BENCH_GIB GiB (default 4) in buffers of 256 MiB, for 2 MiB hugetlb pages (when enough are
 * free) and for 4 KiB pages, each figure the best of 3 runs (order of the steps rotated per run):
 *  - baseline: one thread allocating buffer after buffer the way a JVM allocates direct buffers
 *    in a loop (Apache Druid before PR 19025): mmap anonymous, memset to zero, next buffer;
 *  - ours: the daemon's real pool_create() + pool_prefault() (one sealed memfd per buffer,
 *    faulted by a temporary pool of one thread per CPU), and again with prefault_threads = 1;
 *  - ceiling: memset of the same memory once faulted (the pool's own mappings), N and 1 threads.
 * Prints GB/s with ours/serial, ours/ceiling and ours-N-threads/ours-1-thread.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "benchutil.h"
#include "config.h"
#include "log.h"
#include "pool.h"

#define BUF_SIZE (256 * BENCH_MIB)

struct kind {
	const char *name;
	bool hugetlb;
	uint64_t page;
};

struct results {
	struct bench_series serial, ours_n, ours_1, create_n, ceil_n, ceil_1;
	unsigned threads_used; /* by pool_prefault with prefault_threads = 0 */
	bool used_madvise;
};

/* The baseline: allocate and zero n buffers one after the other on this thread; unmap after. */
static int run_serial(const struct kind *k, uint32_t n, uint64_t *ret_ns)
{
	void **bufs = calloc(n, sizeof(*bufs));
	int flags = MAP_PRIVATE | MAP_ANONYMOUS | (k->hugetlb ? MAP_HUGETLB : 0);
	uint64_t t0, t1;
	uint32_t done = 0;
	int r = 0;

	if (!bufs)
		return -ENOMEM;
	t0 = bench_now_ns();
	for (; done < n; done++) {
		void *p = mmap(NULL, BUF_SIZE, PROT_READ | PROT_WRITE, flags, -1, 0);

		if (p == MAP_FAILED) {
			r = -errno;
			break;
		}
		memset(p, 0, BUF_SIZE);
		bench_clobber(p);
		bufs[done] = p;
	}
	t1 = bench_now_ns();
	for (uint32_t i = 0; i < done; i++)
		munmap(bufs[i], BUF_SIZE);
	free(bufs);
	*ret_ns = t1 - t0;
	return r;
}

/* Ours: the daemon's boot path, timed around pool_create + pool_prefault. */
static int run_ours(const struct kind *k, uint32_t n, unsigned threads, struct pool **ret, uint64_t *ret_ns,
		    uint64_t *ret_create_ns)
{
	struct config cfg;
	struct pool *p = NULL;
	uint64_t t0, t1, t2;
	int r;

	config_init(&cfg);
	cfg.hugepages = k->hugetlb ? HUGEPAGES_REQUIRE : HUGEPAGES_OFF;
	cfg.page_size = BENCH_HUGE_2M;
	cfg.prefault_threads = threads;
	cfg.nclasses = 1;
	snprintf(cfg.classes[0].name, sizeof(cfg.classes[0].name), "bench");
	cfg.classes[0].size = BUF_SIZE;
	cfg.classes[0].count = n;

	t0 = bench_now_ns();
	r = pool_create(&cfg, NULL, &p);
	if (r < 0)
		return r;
	t1 = bench_now_ns();
	r = pool_prefault(p, cfg.prefault_threads, NULL, NULL);
	t2 = bench_now_ns();
	if (r < 0) {
		pool_free(p);
		return r;
	}
	if (p->hugetlb != k->hugetlb) {
		printf("   pool came out %s, not %s: not comparable\n", p->hugetlb ? "hugetlb" : "4K", k->name);
		pool_free(p);
		return -EINVAL;
	}
	*ret = p;
	*ret_ns = t2 - t0;
	*ret_create_ns = t1 - t0;
	return 0;
}

enum step { STEP_SERIAL, STEP_OURS_N, STEP_OURS_1 };

static int run_step(const struct kind *k, uint32_t n, unsigned cpus, enum step step, struct results *res)
{
	struct pool *p = NULL;
	uint64_t ns = 0, create_ns = 0;
	int r;

	/* 4 KiB pages come from the free lists each time; hugetlb ones stay in the hugetlb pool */
	if (!k->hugetlb)
		bench_settle();
	switch (step) {
	case STEP_SERIAL:
		r = run_serial(k, n, &ns);
		if (r < 0) {
			printf("   serial baseline failed: %s\n", strerror(-r));
			return r;
		}
		bench_series_add(&res->serial, ns);
		return 0;
	case STEP_OURS_1:
		r = run_ours(k, n, 1, &p, &ns, &create_ns);
		if (r < 0) {
			printf("   pool_create/pool_prefault (1 thread) failed: %s\n", strerror(-r));
			return r;
		}
		bench_series_add(&res->ours_1, ns);
		pool_free(p);
		return 0;
	case STEP_OURS_N: {
		struct bench_range *ranges;

		r = run_ours(k, n, 0, &p, &ns, &create_ns);
		if (r < 0) {
			printf("   pool_create/pool_prefault failed: %s\n", strerror(-r));
			return r;
		}
		bench_series_add(&res->ours_n, ns);
		bench_series_add(&res->create_n, create_ns);
		res->threads_used = p->boot.threads;
		res->used_madvise = p->boot.used_madvise;
		/* the ceiling: the pool's own mappings, already faulted, written again */
		ranges = calloc(p->nbuffers, sizeof(*ranges));
		if (!ranges) {
			pool_free(p);
			return -ENOMEM;
		}
		for (uint32_t i = 0; i < p->nbuffers; i++)
			ranges[i] = (struct bench_range){ p->buffers[i].addr, p->buffers[i].size };
		bench_series_add(&res->ceil_n, bench_memset(ranges, p->nbuffers, cpus, 0));
		bench_series_add(&res->ceil_1, bench_memset(ranges, p->nbuffers, 1, 0));
		free(ranges);
		pool_free(p);
		return 0;
	}
	}
	return -EINVAL;
}

static void report(const struct kind *k, uint64_t bytes, unsigned cpus, const struct results *res)
{
	double serial = bench_gbps(bytes, bench_series_best(&res->serial));
	double ours_n = bench_gbps(bytes, bench_series_best(&res->ours_n));
	double ours_1 = bench_gbps(bytes, bench_series_best(&res->ours_1));
	double ceil_n = bench_gbps(bytes, bench_series_best(&res->ceil_n));
	double ceil_1 = bench_gbps(bytes, bench_series_best(&res->ceil_1));
	char what[64], base[64], b[5][96];

	printf("   %-51s | %-43s | %s\n", "figure (GB/s = 10^9 bytes/s)", "baseline or reference", "ratio (> 1: ours faster)");
	snprintf(what, sizeof(what), "ours, %u thread%s", res->threads_used, res->threads_used == 1 ? "" : "s");
	bench_row(what, ours_n, "serial mmap+memset, 1 thread", serial, "GB/s", "ours/serial", ours_n / serial);
	bench_row("ours, prefault_threads = 1", ours_1, "serial mmap+memset, 1 thread", serial, "GB/s",
		  "ours-1/serial", ours_1 / serial);
	bench_row(what, ours_n, "ours, 1 thread", ours_1, "GB/s", "ours-N/ours-1", ours_n / ours_1);
	snprintf(base, sizeof(base), "memset faulted, %u thread%s", cpus, cpus == 1 ? "" : "s");
	bench_row(what, ours_n, base, ceil_n, "GB/s", "ours/ceiling", ours_n / ceil_n);
	bench_row("ours, prefault_threads = 1", ours_1, "memset faulted, 1 thread", ceil_1, "GB/s",
		  "ours-1/ceil-1", ours_1 / ceil_1);
	bench_note("ours = pool_create + pool_prefault; pool_create alone (memfd_create, ftruncate, seals, mmap%s): "
		   "best %.1f ms of it; pages faulted with %s",
		   k->hugetlb ? ", hugetlb reservation" : "", (double)bench_series_best(&res->create_n) / 1e6,
		   res->used_madvise ? "MADV_POPULATE_WRITE" : "one write per page");
	bench_note("all runs, s: serial %s | ours-N %s | ours-1 %s | ceiling-N %s | ceiling-1 %s",
		   bench_series_str(&res->serial, false, b[0], sizeof(b[0])),
		   bench_series_str(&res->ours_n, false, b[1], sizeof(b[1])),
		   bench_series_str(&res->ours_1, false, b[2], sizeof(b[2])),
		   bench_series_str(&res->ceil_n, false, b[3], sizeof(b[3])),
		   bench_series_str(&res->ceil_1, false, b[4], sizeof(b[4])));
}

static void run_kind(const struct kind *k, uint32_t n, unsigned cpus)
{
	static const enum step order[3] = { STEP_SERIAL, STEP_OURS_N, STEP_OURS_1 };
	uint64_t bytes = (uint64_t)n * BUF_SIZE;
	struct results res;
	char why[256];

	memset(&res, 0, sizeof(res));
	bench_title("%s pages: %" PRIu64 " GiB in %" PRIu32 " buffers of 256 MiB, best of %d runs", k->name,
		    bytes / BENCH_GIB, n, BENCH_REPS);
	if (k->hugetlb && !bench_hugetlb_ok(bytes, k->page, why, sizeof(why))) {
		bench_note("skipped: %s", why);
		return;
	}
	if (k->hugetlb) {
		uint64_t ns;
		int r = bench_hugetlb_warmup(bytes, &ns);

		if (r < 0) {
			bench_note("skipped: could not fault in %" PRIu64 " GiB of hugetlb memory: %s", bytes / BENCH_GIB,
				   strerror(-r));
			return;
		}
		bench_note("warm-up, untimed: first touch of the hugetlb pages took %.2f s; they stay in the hugetlb "
			   "pool between runs, so every run below finds them already touched", (double)ns / 1e9);
	} else {
		bench_thp_settings(why, sizeof(why));
		bench_note("%s (the baseline's anonymous memory and the pool's shmem both use 4 KiB pages "
			   "unless THP applies to them)", why);
	}
	for (unsigned rep = 0; rep < BENCH_REPS; rep++)
		/* rotate the order so no step always runs first (on fresh memory) or last */
		for (unsigned s = 0; s < 3; s++)
			if (run_step(k, n, cpus, order[(s + rep) % 3], &res) < 0) {
				bench_note("stopped this page kind after the failure above");
				return;
			}
	report(k, bytes, cpus, &res);
}

int main(void)
{
	static const struct kind kinds[] = {
		{ "2 MiB hugetlb", true, BENCH_HUGE_2M },
		{ "4 KiB", false, BENCH_SMALL_PAGE },
	};
	unsigned gib = bench_env_gib(4), cpus = bench_cpus();
	uint32_t n = gib * 4;

	log_set_max_level(LOG_WARNING);
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("bench_prefault: boot pre-fault of %u GiB ($HP_BENCH_GIB) in %" PRIu32 " x 256 MiB buffers, "
	       "%u CPUs\n", gib, n, cpus);
	printf("  serial   = 1 thread: mmap(MAP_PRIVATE|MAP_ANONYMOUS[|MAP_HUGETLB]) + memset 0, buffer after buffer "
	       "(a JVM allocating direct buffers in a loop)\n");
	printf("  ours     = hugepoold's pool_create() + pool_prefault(): sealed memfd per buffer, prefault_threads = 0 "
	       "(one per CPU), and = 1\n");
	printf("  ceiling  = memset 0 of the pool's mappings once faulted (no page faults left): the bandwidth of "
	       "zero stores, which is what faulting a page in costs besides the fault itself\n");
	bench_settle_init();
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		run_kind(&kinds[i], n, cpus);
	printf("\n");
	return 0;
}
