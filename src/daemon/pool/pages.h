/* SPDX-License-Identifier: MIT */
/*
 * pages.h - hugepage sizes: which ones the kernel offers and has free (sysfs), and which a
 * class of the configuration asks for.
 *
 * A class's page_size is 2M, 1G or auto (config.h). auto asks for 1 GiB pages when the class's
 * buffers are a multiple of 1 GiB and the kernel offers them (it does where the CPU has 1 GiB
 * pages, pdpe1gb on x86), and for 2 MiB pages otherwise or when too few 1 GiB pages are free:
 * pages_candidates() lists what a class may take, best first. pool_create() decides each class's
 * backing from these (pool.c: the fallback rules); --print-hugepages reports pages_needed(), what
 * the pool asks for at best, for the unit that reserves it. Pure reads of sysfs, no state; any
 * thread.
 */
#ifndef HP_PAGES_H
#define HP_PAGES_H

#include <stdbool.h>
#include <stdint.h>

#include "config.h"

#define PAGES_4K UINT64_C(4096) /* regular shared memory: what pool.c calls a small page */
#define PAGES_2M (UINT64_C(2) << 20)
#define PAGES_1G (UINT64_C(1) << 30)
#define PAGES_HUGE_SIZES 2 /* hugetlb page sizes a class may ask for: 2M and 1G */

/* Hugepages of page_size free and not promised to a mapping (free - resv in sysfs); 0 if unknown. */
uint64_t pages_available(uint64_t page_size);

/* Does the kernel offer hugepages of page_size (its sysfs directory exists)? */
bool pages_supported(uint64_t page_size);

/*
 * The hugetlb page sizes class c may be backed by, best first, into ret: its page_size, or for
 * auto 1G (when the kernel offers it and c's size is a multiple of it) then 2M. Returns how many.
 */
unsigned pages_candidates(const struct config_class *c, uint64_t ret[PAGES_HUGE_SIZES]);

/* A count of hugepages of one size. */
struct pages_need {
	uint64_t page_size;
	uint64_t count;
};

/*
 * The hugepages the configured pool asks for, each class on its first candidate: one entry per
 * page size in use, smallest first, into ret; returns how many (0 with hugepages = off).
 */
unsigned pages_needed(const struct config *cfg, struct pages_need ret[PAGES_HUGE_SIZES]);

#endif
