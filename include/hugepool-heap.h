/* SPDX-License-Identifier: MIT */
/*
 * hugepool-heap.h - libhugepool-heap, a malloc-style heap whose memory is leased from hugepoold.
 *
 * A heap is a jemalloc arena of its own (jemalloc 5.3, linked by this library only; libhugepool
 * itself does not depend on jemalloc) whose extents are carved from buffers of one class leased
 * through libhugepool: pre-faulted hugepage memory, so the hash tables, dictionaries and small
 * objects an engine builds after its start neither fault page after page nor miss the TLB all
 * day. The process's own malloc is neither replaced nor mixed with the heap: every call names
 * the heap's arena and a thread cache of the heap's own (one per thread that uses the heap,
 * made on its first call, ended by hp_heap_destroy or the thread's exit), and only pointers of
 * a heap may be given to that heap's functions. Memory a thread frees stays in its cache for
 * that thread's next allocations of the size; an allocation refused empties the calling
 * thread's cache and tries once more.
 *
 * Memory: hp_heap_create leases one buffer of the class; when jemalloc needs more room the
 * heap leases further whole buffers, one at a time, as long as the buffers held stay within
 * max_bytes. A lease the daemon refuses (the class is exhausted, the uid's max_bytes_per_uid,
 * the connection lost) makes that allocation return NULL; later allocations try again.
 * Every extent jemalloc gets lies within one buffer, so no single allocation can be larger than
 * a buffer of the class (minus jemalloc's own rounding; choose the class by the largest object).
 * Freed memory stays in the heap for reuse: nothing is given back to the daemon before
 * hp_heap_destroy, and nothing is ever madvised or unmapped inside a buffer.
 *
 * jemalloc's metadata about the heap (its arena, extent and bin descriptors) lives in jemalloc's
 * own private anonymous memory, not in the leased buffers: the buffers hold only the caller's
 * objects.
 *
 * The connection: the heap leases through conn, and only while holding the heap's own lock. So
 * while the heap may allocate, conn must not be used for anything else concurrently (another
 * heap, hp_acquire, hp_status...) unless the caller serialises those calls with the heap's
 * allocations; a connection per heap is simplest. hp_disconnect(conn) unmaps every buffer
 * leased through it: destroy the heap first, or every pointer into it becomes invalid (a
 * fault on the next access).
 *
 * What happens to pointers:
 *   - hp_heap_destroy, hp_disconnect: invalid at once (their memory is unmapped and released).
 *   - the daemon's warm restart (hugepoold(8), WARM RESTART): nothing; the connection and its
 *     leases live on and so do the pointers.
 *   - the daemon stops, crashes or restarts cold: the connection is lost, but the buffers stay
 *     mapped in this process, so every pointer stays valid and its content intact; the heap
 *     only cannot lease more buffers (allocations that need a new one return NULL). Destroy it
 *     and create a new heap on a new connection to go on leasing. The daemon no longer counts
 *     that memory; it is the kernel's until the heap is destroyed.
 *   - the process exits or is killed: the daemon ends the connection's leases, as for any buffer.
 *
 * fork: the buffers are MAP_SHARED, so a child shares the heap's objects with its parent (a
 * write by either is seen by both), while jemalloc's metadata, being private, is copied: the
 * child must not allocate from, free to, or destroy an inherited heap (it would hand the same
 * memory out twice, or release the parent's leases). It may read objects, and exec or exit.
 *
 * Thread safety: all functions may be called from any thread at once on the same heap, except
 * that hp_heap_destroy must not race with any other call on that heap.
 *
 * Conventions as in hugepool.h: hp_heap_create and hp_heap_stats return 0 or a negative errno;
 * the allocation functions return NULL on failure and, like malloc, set errno to ENOMEM
 * (EINVAL for a bad alignment). The library never prints and never exits.
 *
 * Loading: jemalloc as Debian ships it (libjemalloc.so.2) uses initial-exec TLS, so this
 * library, unlike libhugepool, may fail to dlopen() ("cannot allocate memory in static TLS
 * block"): link it into the program (pkg-config hugepool-heap) or preload libjemalloc.so.2.
 */
#ifndef HUGEPOOL_HEAP_H
#define HUGEPOOL_HEAP_H

#include <stddef.h>
#include <stdint.h>

#include <hugepool.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hp_heap hp_heap;

/* hp_heap_create flags */
#define HP_HEAP_WAIT 0x1u /* when the class has no free buffer, wait for one (else NULL at once) */

/*
 * Create a heap over buffers of class class_name leased through conn, holding at most
 * max_bytes of them (at least one buffer). Leases the first buffer now.
 * Errors: those of hp_acquire (-ENOENT no such class, -EAGAIN none free, -EDQUOT...),
 * -EINVAL a bad argument or max_bytes smaller than a buffer of the class, -ENOTSUP a jemalloc
 * without experimental.arenas_create_ext (older than 5.3), -ENOMEM.
 */
int hp_heap_create(hp_conn *conn, const char *class_name, size_t max_bytes, unsigned flags, hp_heap **ret);

/* Destroy the heap: every allocation ends, every buffer is released. NULL is fine. */
void hp_heap_destroy(hp_heap *h);

/* As malloc, calloc, realloc and aligned_alloc (alignment a power of two) on the heap. */
void *hp_heap_alloc(hp_heap *h, size_t size);
void *hp_heap_calloc(hp_heap *h, size_t n, size_t size);
/* p NULL: hp_heap_alloc; size 0: frees p and returns NULL; on failure p is left as it was. */
void *hp_heap_realloc(hp_heap *h, void *p, size_t size);
void *hp_heap_aligned_alloc(hp_heap *h, size_t alignment, size_t size);

/* Free p (NULL is fine); p must come from this heap. */
void hp_heap_free(hp_heap *h, void *p);

/* The bytes usable at p (at least what was asked for). */
size_t hp_heap_usable_size(hp_heap *h, const void *p);

struct hp_heap_stats {
	uint64_t max_bytes; /* as given to hp_heap_create */
	uint64_t buffer_size; /* bytes per buffer of the class */
	uint32_t buffers; /* buffers held */
	uint64_t leased_bytes; /* buffers * buffer_size */
	uint64_t carved_bytes; /* of those, given to jemalloc as extents */
	uint64_t allocated_bytes; /* in live allocations, as jemalloc counts them */
	uint64_t lease_failures; /* leases the daemon refused (allocations that returned NULL) */
	int last_lease_error; /* the last refusal's negative errno (0: none) */
	unsigned arena; /* jemalloc's arena index */
};

/* The heap's counters, read at one moment (allocated_bytes refreshes jemalloc's statistics). */
int hp_heap_stats(hp_heap *h, struct hp_heap_stats *ret);

#ifdef __cplusplus
}
#endif
#endif
