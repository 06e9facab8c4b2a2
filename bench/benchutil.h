/* SPDX-License-Identifier: MIT */
/*
 * benchutil.h - helpers shared by hugepool's benchmarks (bench/bench_*.c).
 *
 * Every benchmark prints each figure beside a baseline measured in the same run, with their
 * ratio, because absolute timings on a shared or virtual machine are too noisy to compare
 * across runs. This header gives them a monotonic clock, GB/s (10^9 bytes per second, while
 * sizes are in binary GiB/MiB), a best-of-N series, the "figure | baseline | ratio" row, a
 * parallel memset (the memory bandwidth ceiling), a one-byte-per-page toucher, the check of
 * free hugepages (the daemon's own pages_available), hugepages reserved for one part of a
 * benchmark and given back right after, and a hardware event counter (perf_event_open) where
 * the machine has one. Benchmarks print, never assert.
 */
#ifndef HP_BENCHUTIL_H
#define HP_BENCHUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BENCH_REPS 3 /* every figure is the best (fastest) of this many runs */
#define BENCH_MIB (UINT64_C(1) << 20)
#define BENCH_GIB (UINT64_C(1) << 30)
#define BENCH_HUGE_2M (UINT64_C(2) << 20)
#define BENCH_HUGE_1G (UINT64_C(1) << 30)
#define BENCH_SMALL_PAGE UINT64_C(4096)

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t bench_now_ns(void);

/* 10^9 bytes per second. */
double bench_gbps(uint64_t bytes, uint64_t ns);

/* $name as a whole number from min to max; def when unset, or (said on stdout) not such a number. */
unsigned bench_env_uint(const char *name, unsigned def, unsigned min, unsigned max);
/* Is word one of the comma-separated words of $name (e.g. HP_BENCH_ONLY=ours,limit), or is $name unset? */
bool bench_env_has(const char *name, const char *word);
/* $HP_BENCH_GIB (a whole number of GiB, 1 to 1024), else def. */
unsigned bench_env_gib(unsigned def);

/* Threads "one per CPU" means: the daemon's own default (online CPUs). */
unsigned bench_cpus(void);

/*
 * Are `bytes` worth of hugepages of page_size free (and not reserved by someone else)?
 * If not, writes the reason (free vs needed, and how to reserve more) into why.
 */
bool bench_hugetlb_ok(uint64_t bytes, uint64_t page_size, char *why, size_t whylen);

/*
 * Make n hugepages of page_size free for a part of a benchmark: as root, the shortfall is added
 * to the kernel's persistent pool (as hugeadm counts it; memory is compacted once if the kernel
 * finds too few) and remembered; bench_hugepages_give_back takes exactly that back, by the
 * difference (others may change the pool meanwhile), and is also run at exit and on SIGINT and
 * SIGTERM. Returns how many are free now, n or fewer (the reason in why: not root, memory too
 * fragmented), or -errno with the reason in why (no such pages in this kernel).
 */
long bench_hugepages_reserve(uint64_t page_size, uint64_t n, char *why, size_t whylen);
void bench_hugepages_give_back(void);

/*
 * A counter of a hardware event for the calling thread, user space only (perf_event_open(2)):
 * type and config as perf_event_attr has them, e.g. PERF_TYPE_HW_CACHE and the dTLB read-miss
 * config. -errno with the reason in why where the machine counts none (a VM without a virtual
 * PMU: perf stat -e instructions says "not supported"). Reset and read it around the code.
 */
int bench_counter_open(uint32_t type, uint64_t config, char *why, size_t whylen);
void bench_counter_reset(int fd);
uint64_t bench_counter_read(int fd);

/*
 * Free page reporting: a virtio-balloon with VIRTIO_BALLOON_F_REPORTING hands memory freed in
 * the guest back to the host about 2 s later, and the next touch of that memory pays a host-side
 * fault too (several times the guest's own cost of a 4 KiB fault). Which state a run meets
 * would then depend on how long ago the previous run freed its memory, so a benchmark calls
 * bench_settle() before every timed step that takes memory from the kernel's free lists: every
 * run starts from the same state (handed back). The wait is $HP_BENCH_SETTLE_MS, default 3000
 * ms when reporting is on, 0 when it is off. bench_settle_init() decides and says so.
 */
void bench_settle_init(void);
void bench_settle(void);
unsigned bench_settle_ms(void);

/* Fault in `bytes` of MAP_HUGETLB memory once and give it back (untimed warm-up); returns ns. */
int bench_hugetlb_warmup(uint64_t bytes, uint64_t *ret_ns);

/* The THP settings for anonymous memory and for shmem, e.g. "anon [madvise], shmem [never]". */
void bench_thp_settings(char *buf, size_t len);

/* Stop the compiler from assuming memory behind p is never read (keeps memsets alive). */
static inline void bench_clobber(void *p)
{
	__asm__ __volatile__("" : : "r"(p) : "memory");
}

struct bench_range {
	void *addr;
	size_t len;
};

/* memset(c) all ranges with `threads` threads, the total cut into equal contiguous parts. */
uint64_t bench_memset(const struct bench_range *r, size_t n, unsigned threads, int c);

/* Write one byte every `stride` bytes of every range on the calling thread; returns ns. */
uint64_t bench_touch(const struct bench_range *r, size_t n, size_t stride);

/* The runs of one figure; best = the smallest time. */
struct bench_series {
	uint64_t ns[BENCH_REPS];
	unsigned n;
};

void bench_series_add(struct bench_series *s, uint64_t ns);
uint64_t bench_series_best(const struct bench_series *s);
/* "1.23 1.19 1.31" (seconds or milliseconds by `ms`), for the all-runs line. */
const char *bench_series_str(const struct bench_series *s, bool ms, char *buf, size_t len);

/* The median of v[0..n-1], which it sorts; 0 when n is 0. */
double bench_median(double *v, unsigned n);

/* A section title. */
void bench_title(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* An indented note line. */
void bench_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * One row: "what  figure unit | baseline_what  baseline unit | ratio_name  ratio x".
 * The caller computes ratio (ours/baseline for GB/s, baseline/ours for ms: > 1 is ours faster).
 */
void bench_row(const char *what, double figure, const char *baseline_what, double baseline,
	       const char *unit, const char *ratio_name, double ratio);

#endif
