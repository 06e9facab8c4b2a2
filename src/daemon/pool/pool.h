/* SPDX-License-Identifier: MIT */
/*
 * pool.h - the buffer pool: every buffer is its own sealed memfd, whose pages the daemon
 * faults in and then keeps by the fd alone.
 *
 * pool_create() decides each class's backing (hugetlb pages of the size the class asks for,
 * pages.h; with page_size = auto 2 MiB ones when too few 1 GiB ones are free; regular shared
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
#include "fdstore.h"
#include "prefault.h"
#include "warm.h"

struct pool_buffer {
	int fd; /* sealed memfd, -1 while broken (renewal failed) */
	void *addr; /* the daemon's mapping while it faults the buffer in, else NULL (pool.c) */
	uint64_t size;
	uint32_t class_index;
	uint32_t index; /* in pool->buffers */
	uint64_t fd_id; /* the fd store keeps fd as "buf.<fd_id>" (warm.h) */
	/* at boot: CLEAN when created now; adopted ones say what the previous life knew */
	enum warm_buf_state boot_state;
	uid_t boot_uid; /* DIRTY, LEASED */
	bool adopted; /* taken over from the previous life: not faulted again */
	uint32_t prev_record; /* adopted: its record in the previous life's state (warm_prev.bufs) */
	/* adopted, and its fd not looked at yet (pool_buffer_usable does, before it is handed out):
	 * a take-over of thousands of buffers costs no system call for each */
	bool unverified;
};

/*
 * What pool_create may take over from a previous life: its state (NULL: none, start cold) and
 * the fds it left. pool_create takes the buffers that match the configuration out of fds
 * (fdstore_take), closes every other "buf.*" fd there (and has the service manager drop it:
 * their pages may be needed for new buffers), and counts what it did.
 */
struct pool_adopt {
	const struct warm_prev *prev;
	struct fdstore_fd *fds;
	unsigned nfds;
	/*
	 * A take-over's snapshot (takeover.h): a buffer whose record is there but whose fd is not
	 * (renewed at that moment) is adopted without one (fd -1, to be renewed before anyone gets
	 * it) rather than made anew: its new memfd comes with what changed (pool_buffer_replace);
	 * and a buffer's fd no record names stays in fds (the running life holds it anyway, and a
	 * record may name it once that life stopped).
	 */
	bool snapshot;
	uint32_t adopted, created, dropped; /* buffers */
	uint32_t retired; /* of the adopted: held, in classes the configuration no longer has */
	uint64_t adopted_bytes;
};

struct pool_class {
	char name[CONFIG_CLASS_NAME_MAX + 1];
	uint64_t size;
	uint32_t count;
	uint32_t first; /* index of its first buffer in pool->buffers */
	/*
	 * Not in the configuration any more (removed, or its size changed): the buffers a client
	 * held when the previous life of the daemon ended, adopted with their leases. Nobody can
	 * acquire from it; a buffer released goes away. After the configured classes.
	 */
	bool retired;
	/*
	 * Its backing, the same for all its buffers: hugetlb pages of page_size, or regular shared
	 * memory (page_size 4096). want_page is the hugetlb page size it asked for first (0 with
	 * hugepages = off); fallback says it got other pages than those, fallback_reason why.
	 */
	bool hugetlb;
	uint64_t page_size;
	uint64_t want_page;
	bool fallback;
	char fallback_reason[128];
};

struct pool {
	struct pool_class *classes;
	unsigned nclasses;
	struct pool_buffer *buffers;
	uint32_t nbuffers;
	uint64_t bytes;
	/*
	 * The classes' backings summed up for where one word must do (WELCOME, the status header):
	 * the smallest page size of any class (every buffer is a multiple of it), hugetlb when every
	 * class has hugetlb pages, fallback when a class fell back, with the first one's reason.
	 */
	uint64_t page_size;
	bool hugetlb;
	bool fallback;
	char fallback_reason[CONFIG_CLASS_NAME_MAX + 8 + 128]; /* "class NAME: " and the class's */
	struct prefault_stats boot; /* filled by pool_prefault */
};

/*
 * Decide the backing, adopt what adopt (may be NULL) offers that fits, create and seal every
 * other buffer. Logs its decisions and errors.
 */
int pool_create(const struct config *cfg, struct pool_adopt *adopt, struct pool **ret);

/* Keep every buffer's memfd in the fd store (fdstore.h) under its name; returns how many failed. */
unsigned pool_store_fds(struct pool *p);

/*
 * Put fd, a previous life's memfd of b (named by fd_id), in b's place (a take-over's buffer that
 * was renewed after its snapshot), unverified as every adopted buffer is; b's old fd (-1: none)
 * is the caller's in *ret_old.
 */
void pool_buffer_replace(struct pool_buffer *b, int fd, uint64_t fd_id, int *ret_old);
/*
 * May b be handed out as it is? Adopted unverified, its fd is checked first (a sealed memfd of
 * b's size on the pool's file system: a state that names the wrong file is not trusted), then
 * every time: has it still every page (pool_buffer_intact)? false: renew it first.
 */
bool pool_buffer_usable(const struct pool *p, struct pool_buffer *b);

/* Fault in the buffers that were not adopted, in parallel; logs the figures. */
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

#endif
