/* SPDX-License-Identifier: MIT */
/*
 * heap.c - libhugepool-heap: a jemalloc arena whose extents are carved from buffers leased
 * from hugepoold (hugepool-heap.h is the contract).
 *
 * DESIGN. hp_heap_create makes an arena with experimental.arenas_create_ext: our extent hooks
 * for the objects, jemalloc's default hooks for its metadata (metadata_use_hooks = false), so
 * the arena, extent and bin descriptors live in jemalloc's private anonymous memory and the
 * buffers hold objects only (safe across fork for jemalloc itself, and no 2 MiB base block
 * taken from the first buffer). Allocations name the arena and the calling thread's cache of
 * this heap (MALLOCX_ARENA | MALLOCX_TCACHE, "Thread caches" below), so the process's malloc
 * and jemalloc's automatic arenas never see them.
 *
 * The hooks. alloc carves from the heap's buffers with a bump offset per buffer (first buffer
 * with room for the aligned size, else a new lease while within max_bytes; a refused lease is
 * NULL) and answers new_addr only at a buffer's bump offset. Buffers are never given back
 * before destroy, so carved memory is always mapped and committed: dalloc keeps it (true, so
 * jemalloc retains the extent for reuse), commit succeeds trivially, decommit and both purges
 * are absent (opted out: a purge inside a hugetlb mapping at a 4 KiB offset fails or does
 * nothing useful; the arena's decay times are -1 so jemalloc does not even try), destroy does
 * nothing (destroy releases whole buffers afterwards). split always succeeds; merge succeeds
 * only within one buffer, so every extent lies inside one buffer even when two buffers happen
 * to be adjacent in the address space. Zeroes: a buffer holds what its previous holder of the
 * same uid left, so alloc zeroes only when jemalloc asks (*zero) and says so.
 *
 * Status: the heap's count, buffers and carved bytes go to the connection's shared counters
 * (hp_conn_report_heaps) where they change (create, lease, carve, destroy), never per
 * allocation; hugepoolctl leases shows them per client.
 *
 * Locking: h->lock guards the buffer table and the counters; the hooks take it (jemalloc may
 * call them from any thread, with its own arena locks held), and so does every use of h->conn.
 * hp_acquire under h->lock may call the process's malloc: that is glibc's (or jemalloc's
 * automatic arenas through its reentrancy guard), never this arena.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/types.h>

#include <jemalloc/jemalloc.h>

#include "hugepool-heap.h"
#include "util.h"

/* jemalloc 5.3's argument of experimental.arenas_create_ext (arena_config_t, not in its header) */
struct heap_arena_config {
	extent_hooks_t *extent_hooks;
	bool metadata_use_hooks;
};

struct heap_buffer {
	struct hp_buffer buf;
	size_t used; /* bytes from buf.addr given to jemalloc (the bump offset) */
};

struct hp_heap {
	extent_hooks_t hooks; /* first: the hooks get a pointer to it and find the heap from it */
	pthread_mutex_t lock;
	hp_conn *conn;
	char class_name[HP_NAME_MAX];
	int64_t timeout_ms; /* for leases: -1 with HP_HEAP_WAIT, else 0 */
	size_t max_bytes, buffer_size;
	struct heap_buffer *bufs; /* guarded by lock */
	unsigned nbufs, bufs_cap;
	uint64_t carved, lease_failures;
	int last_lease_error;
	unsigned arena;
	int mallocx_flags; /* this arena, no thread cache: what a thread without one of its own uses */
	/* thread caches (below), under registry_lock */
	uint64_t gen; /* unique, never reused: names the heap in threads' slots */
	unsigned *tcs; /* the explicit tcaches made for this heap, one per thread that used it */
	unsigned ntcs, tcs_cap;
	TAILQ_ENTRY(hp_heap) live;
};

/*
 * Thread caches. Each thread that allocates from a heap gets an explicit jemalloc tcache
 * (tcache.create) for that heap, found through a few slots of its own, so that small
 * allocations and frees take no arena lock (MALLOCX_TCACHE_NONE costs every call the lock).
 * An explicit tcache may be used by one thread at a time: the slot is the thread's, and only
 * hp_heap_destroy (which may not race with other calls on the heap) or the thread's own exit
 * destroys it. A slot names its heap by gen, so a slot of a destroyed heap never matches a
 * new one at the same address. A thread with all slots taken allocates without a cache.
 */
#define TC_SLOTS 8
struct tc_slot {
	uint64_t gen; /* 0: empty */
	unsigned tc;
};
static __thread struct tc_slot tc_slots[TC_SLOTS];
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static TAILQ_HEAD(, hp_heap) live_heaps = TAILQ_HEAD_INITIALIZER(live_heaps); /* under registry_lock */
static uint64_t next_gen = 1; /* under registry_lock */
static pthread_key_t tc_key;
static pthread_once_t tc_once = PTHREAD_ONCE_INIT;

/* The live heap of generation gen, or NULL. Under registry_lock. */
static struct hp_heap *live_heap(uint64_t gen)
{
	struct hp_heap *h;

	TAILQ_FOREACH(h, &live_heaps, live)
		if (h->gen == gen)
			return h;
	return NULL;
}

static void tcache_destroy(unsigned tc)
{
	(void)mallctl("tcache.destroy", NULL, NULL, &tc, sizeof(tc));
}

/* A thread exits: its caches of heaps still alive go (a destroyed heap's went with it). */
static void tc_thread_exit(void *unused)
{
	(void)unused;
	pthread_mutex_lock(&registry_lock);
	for (unsigned i = 0; i < TC_SLOTS; i++) {
		struct hp_heap *h = tc_slots[i].gen ? live_heap(tc_slots[i].gen) : NULL;

		for (unsigned k = 0; h && k < h->ntcs; k++)
			if (h->tcs[k] == tc_slots[i].tc) {
				h->tcs[k] = h->tcs[--h->ntcs];
				tcache_destroy(tc_slots[i].tc);
				break;
			}
		tc_slots[i].gen = 0;
	}
	pthread_mutex_unlock(&registry_lock);
}

static void tc_init(void)
{
	(void)pthread_key_create(&tc_key, tc_thread_exit);
}

/* The flags for h in this thread: its own cache, made on first use (no cache if none can be). */
static int __attribute__((noinline)) heap_flags_slow(struct hp_heap *h)
{
	size_t sz = sizeof(unsigned);
	unsigned tc, slot = TC_SLOTS;
	int flags = h->mallocx_flags;

	pthread_once(&tc_once, tc_init);
	pthread_mutex_lock(&registry_lock);
	for (unsigned i = 0; i < TC_SLOTS && slot == TC_SLOTS; i++)
		if (!tc_slots[i].gen || !live_heap(tc_slots[i].gen))
			slot = i; /* empty, or of a heap destroyed since */
	if (slot < TC_SLOTS && ARRAY_RESERVE_ONE(h->tcs, h->ntcs, h->tcs_cap, 4) == 0) {
		if (mallctl("tcache.create", &tc, &sz, NULL, 0) == 0) {
			h->tcs[h->ntcs++] = tc;
			tc_slots[slot] = (struct tc_slot){ h->gen, tc };
			(void)pthread_setspecific(tc_key, tc_slots); /* non-NULL: tc_thread_exit runs */
			flags = MALLOCX_ARENA(h->arena) | MALLOCX_TCACHE(tc);
		}
	}
	pthread_mutex_unlock(&registry_lock);
	return flags;
}

static inline int heap_flags(struct hp_heap *h)
{
	for (unsigned i = 0; i < TC_SLOTS; i++)
		if (tc_slots[i].gen == h->gen)
			return MALLOCX_ARENA(h->arena) | MALLOCX_TCACHE(tc_slots[i].tc);
	return heap_flags_slow(h);
}

/*
 * After a refusal: what this thread's cache of h holds goes back to the arena, so that memory
 * it freed serves the next request of any size (the retry uses no cache).
 */
static void heap_flush_mine(struct hp_heap *h)
{
	for (unsigned i = 0; i < TC_SLOTS; i++)
		if (tc_slots[i].gen == h->gen)
			(void)mallctl("tcache.flush", NULL, NULL, &tc_slots[i].tc, sizeof(tc_slots[i].tc));
}

static struct hp_heap *heap_of(extent_hooks_t *hooks)
{
	return (struct hp_heap *)hooks;
}

static uintptr_t align_up(uintptr_t x, size_t alignment)
{
	return (x + alignment - 1) & ~(uintptr_t)(alignment - 1);
}

/* The buffer holding [addr, addr + size), or NULL. Under h->lock. */
static struct heap_buffer *buffer_of(struct hp_heap *h, const void *addr, size_t size)
{
	uintptr_t a = (uintptr_t)addr;

	for (unsigned i = 0; i < h->nbufs; i++) {
		uintptr_t base = (uintptr_t)h->bufs[i].buf.addr;

		if (a >= base && a - base <= h->bufs[i].buf.size && size <= h->bufs[i].buf.size - (a - base))
			return &h->bufs[i];
	}
	return NULL;
}

/* Lease one more buffer within max_bytes. Under h->lock. Returns 0 or a negative errno. */
static int heap_lease(struct hp_heap *h)
{
	struct hp_buffer b;
	int r;

	if (h->buffer_size && (size_t)(h->nbufs + 1) * h->buffer_size > h->max_bytes)
		return -ENOSPC;
	if (ARRAY_RESERVE_ONE(h->bufs, h->nbufs, h->bufs_cap, 8) < 0)
		return -ENOMEM;
	r = hp_acquire(h->conn, h->class_name, 1, h->timeout_ms, &b);
	if (r < 0)
		return r;
	h->bufs[h->nbufs++] = (struct heap_buffer){ .buf = b };
	(void)hp_conn_report_heaps(h->conn, 0, 1, 0); /* for status only: a failure changes nothing */
	return 0;
}

/* Carve size bytes aligned to alignment from b, at want when want is not NULL. Under h->lock. */
static void *buffer_carve(struct heap_buffer *b, void *want, size_t size, size_t alignment)
{
	uintptr_t base = (uintptr_t)b->buf.addr;
	uintptr_t p = align_up(base + b->used, alignment);

	if (want && (uintptr_t)want != base + b->used)
		return NULL;
	if (p - base > b->buf.size || size > b->buf.size - (p - base))
		return NULL;
	/* an alignment gap stays unused: extents are only ever handed out at the bump offset */
	b->used = p - base + size;
	return (void *)p;
}

static void *hook_alloc(extent_hooks_t *hooks, void *new_addr, size_t size, size_t alignment, bool *zero,
			bool *commit, unsigned arena_ind)
{
	struct hp_heap *h = heap_of(hooks);
	void *p = NULL;
	int r;

	(void)arena_ind;
	pthread_mutex_lock(&h->lock);
	for (unsigned i = 0; i < h->nbufs && !p; i++)
		p = buffer_carve(&h->bufs[i], new_addr, size, alignment);
	/* a new buffer cannot extend an extent in place, and one too small for size never helps */
	if (!p && !new_addr && size <= h->buffer_size) {
		r = heap_lease(h);
		if (r == 0) {
			p = buffer_carve(&h->bufs[h->nbufs - 1], NULL, size, alignment);
		} else if (r != -ENOSPC) { /* -ENOSPC: max_bytes reached, the daemon was not asked */
			h->lease_failures++;
			h->last_lease_error = r;
		}
	}
	if (p) {
		h->carved += size;
		(void)hp_conn_report_heaps(h->conn, 0, 0, (int64_t)size);
	}
	pthread_mutex_unlock(&h->lock);
	if (!p)
		return NULL;
	if (*zero)
		memset(p, 0, size);
	*commit = true;
	return p;
}

static bool hook_dalloc(extent_hooks_t *hooks, void *addr, size_t size, bool committed, unsigned arena_ind)
{
	(void)hooks, (void)addr, (void)size, (void)committed, (void)arena_ind;
	return true; /* keep it: jemalloc retains the extent and reuses it */
}

static void hook_destroy(extent_hooks_t *hooks, void *addr, size_t size, bool committed, unsigned arena_ind)
{
	/* the whole buffers are released by hp_heap_destroy once the arena is gone */
	(void)hooks, (void)addr, (void)size, (void)committed, (void)arena_ind;
}

static bool hook_commit(extent_hooks_t *hooks, void *addr, size_t size, size_t offset, size_t length,
			unsigned arena_ind)
{
	/* never decommitted (no decommit hook), so always committed already */
	(void)hooks, (void)addr, (void)size, (void)offset, (void)length, (void)arena_ind;
	return false;
}

static bool hook_split(extent_hooks_t *hooks, void *addr, size_t size, size_t size_a, size_t size_b,
		       bool committed, unsigned arena_ind)
{
	/* both parts stay in the buffer the whole was in */
	(void)hooks, (void)addr, (void)size, (void)size_a, (void)size_b, (void)committed, (void)arena_ind;
	return false;
}

static bool hook_merge(extent_hooks_t *hooks, void *addr_a, size_t size_a, void *addr_b, size_t size_b,
		       bool committed, unsigned arena_ind)
{
	struct hp_heap *h = heap_of(hooks);
	struct heap_buffer *b;

	(void)committed, (void)arena_ind;
	if ((char *)addr_a + size_a != addr_b)
		return true;
	pthread_mutex_lock(&h->lock);
	b = buffer_of(h, addr_a, size_a + size_b);
	pthread_mutex_unlock(&h->lock);
	return b == NULL; /* an extent never spans two buffers, adjacent or not */
}

static const extent_hooks_t heap_hooks = {
	.alloc = hook_alloc,
	.dalloc = hook_dalloc,
	.destroy = hook_destroy,
	.commit = hook_commit,
	.decommit = NULL,
	.purge_lazy = NULL,
	.purge_forced = NULL,
	.split = hook_split,
	.merge = hook_merge,
};

/* mallctl "arena.<i>.<name>" */
static int arena_ctl(unsigned arena, const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen)
{
	char key[64];

	snprintf(key, sizeof(key), "arena.%u.%s", arena, name);
	return -mallctl(key, oldp, oldlenp, newp, newlen);
}

static void heap_release_all(struct hp_heap *h)
{
	struct hp_buffer bufs[64];
	unsigned n = 0;

	/* batches: a failed release (a lost connection) still unmaps, and the rest go on */
	for (unsigned i = 0; i < h->nbufs; i++) {
		bufs[n++] = h->bufs[i].buf;
		if (n == sizeof(bufs) / sizeof(bufs[0]) || i + 1 == h->nbufs) {
			(void)hp_release(h->conn, bufs, n);
			n = 0;
		}
	}
	(void)hp_conn_report_heaps(h->conn, 0, -(int64_t)h->nbufs, -(int64_t)h->carved);
	h->nbufs = 0;
	h->carved = 0;
}

static void heap_free(struct hp_heap *h)
{
	heap_release_all(h);
	free(h->bufs);
	pthread_mutex_destroy(&h->lock);
	free(h);
}

int hp_heap_create(hp_conn *conn, const char *class_name, size_t max_bytes, unsigned flags, hp_heap **ret)
{
	struct hp_heap *h;
	struct heap_arena_config config;
	ssize_t never = -1;
	size_t sz = sizeof(unsigned);
	int r;

	if (!conn || !class_name || !ret || strlen(class_name) >= HP_NAME_MAX || max_bytes == 0 ||
	    (flags & ~HP_HEAP_WAIT))
		return -EINVAL;
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->hooks = heap_hooks;
	pthread_mutex_init(&h->lock, NULL);
	h->conn = conn;
	snprintf(h->class_name, sizeof(h->class_name), "%s", class_name);
	h->timeout_ms = (flags & HP_HEAP_WAIT) ? -1 : 0;
	h->max_bytes = max_bytes;

	/* the first buffer names the class's size (and whether the class exists at all) */
	r = heap_lease(h);
	if (r < 0)
		goto out_free;
	h->buffer_size = h->bufs[0].buf.size;
	if (h->buffer_size > max_bytes) {
		r = -EINVAL;
		goto out_free;
	}

	config = (struct heap_arena_config){ .extent_hooks = &h->hooks, .metadata_use_hooks = false };
	r = -mallctl("experimental.arenas_create_ext", &h->arena, &sz, &config, sizeof(config));
	if (r == -ENOENT)
		r = -ENOTSUP;
	if (r < 0)
		goto out_free;
	/* freed pages are never purged: the memory stays the heap's until destroy */
	r = arena_ctl(h->arena, "dirty_decay_ms", NULL, NULL, &never, sizeof(never));
	if (r == 0)
		r = arena_ctl(h->arena, "muzzy_decay_ms", NULL, NULL, &never, sizeof(never));
	/* jemalloc grows by ever larger extents (2 MiB, 2.5, 3...): no larger than a buffer, so
	 * once grown that far each growth takes one whole buffer and leaves no tail behind */
	if (r == 0)
		r = arena_ctl(h->arena, "retain_grow_limit", NULL, NULL, &h->buffer_size, sizeof(h->buffer_size));
	if (r < 0) {
		(void)arena_ctl(h->arena, "destroy", NULL, NULL, NULL, 0);
		goto out_free;
	}
	h->mallocx_flags = MALLOCX_ARENA(h->arena) | MALLOCX_TCACHE_NONE;
	pthread_mutex_lock(&registry_lock);
	h->gen = next_gen++;
	TAILQ_INSERT_TAIL(&live_heaps, h, live);
	pthread_mutex_unlock(&registry_lock);
	(void)hp_conn_report_heaps(conn, 1, 0, 0);
	*ret = h;
	return 0;

out_free:
	heap_free(h);
	return r;
}

void hp_heap_destroy(hp_heap *h)
{
	if (!h)
		return;
	/* every thread's cache of it first: jemalloc requires them flushed before the arena goes */
	pthread_mutex_lock(&registry_lock);
	TAILQ_REMOVE(&live_heaps, h, live);
	for (unsigned i = 0; i < h->ntcs; i++)
		tcache_destroy(h->tcs[i]);
	pthread_mutex_unlock(&registry_lock);
	free(h->tcs);
	/* ends every allocation, gives the extents to hook_destroy and the metadata back to the
	 * kernel; only then may the buffers go */
	(void)arena_ctl(h->arena, "destroy", NULL, NULL, NULL, 0);
	(void)hp_conn_report_heaps(h->conn, -1, 0, 0);
	heap_free(h);
}

static void *nomem(void)
{
	errno = ENOMEM;
	return NULL;
}

/* mallocx with h's flags for this thread; after a refusal, once more with its cache flushed */
static void *heap_mallocx(hp_heap *h, size_t size, int extra)
{
	void *p = mallocx(size ? size : 1, heap_flags(h) | extra);

	if (!p) {
		heap_flush_mine(h);
		p = mallocx(size ? size : 1, h->mallocx_flags | extra);
	}
	return p ? p : nomem();
}

void *hp_heap_alloc(hp_heap *h, size_t size)
{
	return heap_mallocx(h, size, 0);
}

void *hp_heap_calloc(hp_heap *h, size_t n, size_t size)
{
	size_t total;

	if (__builtin_mul_overflow(n, size, &total))
		return nomem();
	return heap_mallocx(h, total, MALLOCX_ZERO);
}

void *hp_heap_realloc(hp_heap *h, void *p, size_t size)
{
	void *q;

	if (!p)
		return hp_heap_alloc(h, size);
	if (size == 0) {
		dallocx(p, heap_flags(h));
		return NULL;
	}
	q = rallocx(p, size, heap_flags(h));
	if (!q) {
		heap_flush_mine(h);
		q = rallocx(p, size, h->mallocx_flags);
	}
	return q ? q : nomem();
}

void *hp_heap_aligned_alloc(hp_heap *h, size_t alignment, size_t size)
{
	if (alignment == 0 || (alignment & (alignment - 1))) {
		errno = EINVAL;
		return NULL;
	}
	return heap_mallocx(h, size, MALLOCX_ALIGN(alignment));
}

void hp_heap_free(hp_heap *h, void *p)
{
	if (p)
		dallocx(p, heap_flags(h));
}

size_t hp_heap_usable_size(hp_heap *h, const void *p)
{
	return p ? sallocx(p, h->mallocx_flags) : 0;
}

int hp_heap_stats(hp_heap *h, struct hp_heap_stats *ret)
{
	uint64_t epoch = 1;
	size_t small = 0, large = 0, sz = sizeof(epoch);
	char key[64];
	int r;

	if (!h || !ret)
		return -EINVAL;
	/* what this thread freed into its cache is free, not allocated (other threads' caches
	 * count as allocated until they flush) */
	heap_flush_mine(h);
	/* jemalloc's statistics are a snapshot taken at the last epoch: take a new one */
	r = -mallctl("epoch", &epoch, &sz, &epoch, sz);
	sz = sizeof(size_t);
	snprintf(key, sizeof(key), "stats.arenas.%u.small.allocated", h->arena);
	if (r == 0)
		r = -mallctl(key, &small, &sz, NULL, 0);
	snprintf(key, sizeof(key), "stats.arenas.%u.large.allocated", h->arena);
	if (r == 0)
		r = -mallctl(key, &large, &sz, NULL, 0);
	if (r < 0)
		return r;
	pthread_mutex_lock(&h->lock);
	*ret = (struct hp_heap_stats){
		.max_bytes = h->max_bytes,
		.buffer_size = h->buffer_size,
		.buffers = h->nbufs,
		.leased_bytes = (uint64_t)h->nbufs * h->buffer_size,
		.carved_bytes = h->carved,
		.allocated_bytes = small + large,
		.lease_failures = h->lease_failures,
		.last_lease_error = h->last_lease_error,
		.arena = h->arena,
	};
	pthread_mutex_unlock(&h->lock);
	return 0;
}
