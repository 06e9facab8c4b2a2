/* SPDX-License-Identifier: MIT */
/*
 * pool.h - the buffer pool: every buffer is its own sealed memfd, mapped in the daemon.
 *
 * pool_create() decides the backing (hugetlb pages of the configured size, or regular shared
 * memory when hugepages = off or, with prefer, when too few are free) and creates every buffer;
 * pool_prefault() faults them all in on a temporary thread pool. Both run on the main thread at
 * boot. Afterwards the pool's layout is immutable; a buffer's fd and mapping change only in
 * pool_buffer_renew(), which the recycler thread calls on a buffer nobody else touches at that
 * moment (the lease table has handed it over, see lease.h). One memfd per buffer means a client
 * can only ever map what it was granted; the seals (shrink, grow, seal) mean no client can
 * truncate a buffer under the daemon or another client.
 */
#ifndef HP_POOL_H
#define HP_POOL_H

#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "prefault.h"

struct pool_buffer {
	int fd; /* sealed memfd, -1 while broken (renewal failed) */
	void *addr; /* the daemon's shared mapping, NULL while broken */
	uint64_t size;
	uint32_t class_index;
	uint32_t index; /* in pool->buffers */
};

struct pool_class {
	char name[CONFIG_CLASS_NAME_MAX + 1];
	uint64_t size;
	uint32_t count;
	uint32_t first; /* index of its first buffer in pool->buffers */
};

struct pool {
	struct pool_class *classes;
	unsigned nclasses;
	struct pool_buffer *buffers;
	uint32_t nbuffers;
	uint64_t bytes;
	uint64_t page_size; /* of the pages really used */
	bool hugetlb;
	bool fallback; /* hugetlb was preferred but not available */
	char fallback_reason[128];
	struct prefault_stats boot; /* filled by pool_prefault */
};

/* Decide the backing, create and seal every buffer. Logs its decisions and errors. */
int pool_create(const struct config *cfg, struct pool **ret);

/* Fault in the whole pool in parallel; logs the figures. */
int pool_prefault(struct pool *p, unsigned threads, prefault_progress_fn progress, void *userdata);

/* Replace a buffer's memory with fresh, zeroed, faulted pages (a new memfd); see pool.c. */
int pool_buffer_renew(struct pool *p, struct pool_buffer *b);

/*
 * Does b still have every page it was given? A holder can punch pages out of its memfd
 * (fallocate PUNCH_HOLE, MADV_REMOVE; the seals do not stop it): hugetlb pages go back to the
 * kernel, where another process may take them. Seen as fewer allocated blocks than the size
 * (one fstat).
 */
bool pool_buffer_intact(const struct pool_buffer *b);
void pool_free(struct pool *p);

/* Hugepages of `page_size` free and not reserved by anyone, from sysfs; 0 if unknown. */
uint64_t pool_hugepages_available(uint64_t page_size);

#endif
