/* SPDX-License-Identifier: MIT */
/*
 * prefault.h - fault in memory ranges in parallel on a temporary pthread pool.
 *
 * The pool exists only for the duration of one prefault_run() call: the caller's thread starts
 * the workers, waits (reporting progress), joins them and returns. Work is cut into chunks of
 * at least PREFAULT_MIN_CHUNK that workers take by an atomic counter, so a fast worker simply
 * takes more chunks. A chunk is faulted with MADV_POPULATE_WRITE where the kernel has it (5.14+),
 * else by touching every page under a SIGBUS guard: either way a page that cannot be had (a
 * hugetlb cgroup limit, a poisoned page) becomes an error return, never a crash.
 */
#ifndef HP_PREFAULT_H
#define HP_PREFAULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PREFAULT_MIN_CHUNK (4u << 20)

struct prefault_range {
	void *addr; /* page-aligned */
	size_t len; /* a multiple of the range's page size */
};

struct prefault_stats {
	uint64_t bytes;
	uint64_t ns; /* wall time from first worker start to last join */
	unsigned threads;
	bool used_madvise; /* MADV_POPULATE_WRITE (else touching) */
};

/*
 * Called on the caller's thread about every interval_ms while workers run. Returning false
 * cancels the run: workers stop after their current chunk and prefault_run returns -ECANCELED.
 */
typedef bool (*prefault_progress_fn)(uint64_t done, uint64_t total, void *userdata);

/*
 * Fault in all ranges with `threads` workers (0 = one per online CPU, never more than there are
 * chunks). chunk is the granularity (rounded up to PREFAULT_MIN_CHUNK; pass the page size for
 * 1 GiB pages). On failure returns a negative errno and sets *ret_failed to the index of a range
 * that could not be faulted (the other workers stop at their next chunk), or to n when the run
 * could not start: no memory for its tables, or no worker thread (pthread_create's error).
 */
int prefault_run(const struct prefault_range *ranges, size_t n, unsigned threads, size_t chunk,
		 prefault_progress_fn progress, unsigned interval_ms, void *userdata,
		 struct prefault_stats *ret_stats, size_t *ret_failed);

/* Fault in one range on the calling thread (the same method as the workers). */
int prefault_populate(void *addr, size_t len);

/* Number of workers prefault_run would start for `threads` = 0. */
unsigned prefault_default_threads(void);

#endif
