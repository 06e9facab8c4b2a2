/* SPDX-License-Identifier: MIT */
/*
 * lease.h - who holds which buffer, who waits for which, and what each uid may take.
 *
 * The lease table is owned by the event-loop thread (server.c) and touched by no other thread,
 * so it needs no lock. It knows nothing about sockets: a connection is a struct lease_owner,
 * and outcomes come back through struct lease_ops callbacks (which may run inside the call that
 * caused them, e.g. a grant inside lease_acquire).
 *
 * Rules it enforces:
 * - FIFO per class: a waiting request blocks later ones even if they would fit, so a large
 *   request is never starved by small ones.
 * - All-or-nothing: a request for n buffers is granted n at once or nothing, so two clients
 *   each holding half of what they want cannot deadlock inside the pool.
 * - A buffer last leased by uid A is given to uid A again as it is (warm, contents kept) if it
 *   still has all its pages (ops->intact), but to any other uid only after renewal: ops->renew hands it to the recycler thread, which gives it
 *   fresh zeroed pages off the event loop, and lease_renewed() brings it back.
 * - Per-uid limits on leased bytes and on connections: over a limit is an immediate error.
 * - A lease is delivered before it can be released: its id travels only in the GRANT that
 *   carries its buffer, so until the server says that message left (lease_slot_delivered), a
 *   release naming it is refused as if the id were unknown. A buffer therefore cannot be
 *   recycled, renewed or granted to anybody else while a grant of it waits in a reply queue.
 * - A buffer starts as the pool says (pool_buffer.boot_state): fresh, or adopted from the
 *   previous life of the daemon as last written by a uid, or to be renewed first. A retired
 *   class (one the configuration no longer has) cannot be acquired from; its buffers go
 *   (ops->retire) as soon as nobody holds them.
 * - Lease ids are the buffer's index in the low 32 bits (O(1) lookup) and 32 random bits above
 *   it (getrandom), so an id cannot be guessed from another one. A lease taken over from a
 *   previous life of the daemon keeps its id even where its buffer's index changed.
 */
#ifndef HP_LEASE_H
#define HP_LEASE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>

#include "pool.h"
#include "proto.h"

struct lease_slot;
struct lease_req;
struct lease_uid;

struct lease_owner {
	uid_t uid;
	gid_t gid;
	pid_t pid;
	struct lease_uid *acct; /* set by lease_owner_attach */
	TAILQ_HEAD(, lease_slot) leases;
	unsigned nleases;
	uint64_t leased_bytes;
	struct lease_req *req; /* the acquire in progress, or NULL */
};

struct lease_limits {
	uint64_t max_bytes_per_uid; /* 0 = unlimited */
	uint32_t max_connections_per_uid; /* 0 = unlimited */
};

/*
 * What a buffer is, for the next life of the daemon: its pages are fresh (CLEAN), last written by
 * uid (DIRTY), held by owner under lease_id since since_rt (LEASED: by uid), or to be renewed
 * before anyone gets them (BROKEN).
 */
struct lease_note {
	enum warm_buf_state state;
	uid_t uid;
	const struct lease_owner *owner;
	uint64_t lease_id;
	uint64_t since_rt;
};

struct lease_ops {
	/* n buffers for o; lease ids and buffers via lease_slot_id/lease_slot_buffer */
	void (*granted)(struct lease_owner *o, struct lease_slot *const *slots, unsigned n, void *ud);
	/* an accepted acquire ended without buffers (timeout, limit at grant time, renewal error) */
	void (*failed)(struct lease_owner *o, int err, const char *text, void *ud);
	/* give b fresh memory, then call lease_renewed() on the event loop */
	void (*renew)(struct pool_buffer *b, void *ud);
	/* may b be handed out as it is: has it still every page it was given (a holder may punch
	 * pages out of its memfd), and is it, taken over unverified, the memfd its record said
	 * (pool_buffer_usable)? NULL: assume so. One that is not is renewed before it is granted. */
	bool (*intact)(struct pool_buffer *b, void *ud);
	/* what the next life must know of b changed (struct lease_note); NULL: not told */
	void (*changed)(struct pool_buffer *b, const struct lease_note *n, void *ud);
	/* b, of a retired class, was let go: it goes for good (close it); NULL: nothing done */
	void (*retire)(struct pool_buffer *b, void *ud);
};

struct lease_counters {
	uint64_t acquires, grants, releases, timeouts, denials, renewals, disconnect_releases;
	uint64_t punched; /* warm buffers found with pages punched out, renewed instead */
	uint64_t unknown_class; /* acquires naming no class */
};

struct lease_class_stats {
	uint32_t total, free, leased, waiters, renewing;
};

struct lease_table;

int lease_table_new(struct pool *pool, const struct lease_limits *limits, const struct lease_ops *ops,
		    void *userdata, struct lease_table **ret);
void lease_table_free(struct lease_table *lt);

/*
 * Would a new connection of uid be within its limit? 0, or -EUSERS with why in err (counted as
 * a denial). Nothing is allocated or held: a connection refused here costs nothing that counts.
 */
int lease_owner_admit(struct lease_table *lt, uid_t uid, char *err, size_t errlen);
/* A new connection of (uid, gid, pid); -EUSERS when the uid is at its connection limit. */
int lease_owner_attach(struct lease_table *lt, struct lease_owner *o, uid_t uid, gid_t gid, pid_t pid,
		       char *err, size_t errlen);
/*
 * A connection the previous life of the daemon served, attached again (lease_owner_attach):
 * give it back buffer b under lease_id, as delivered. b must be free and last written by o's
 * uid (the pool adopted it as LEASED by that uid); -EBUSY otherwise, nothing changed.
 */
int lease_adopt(struct lease_table *lt, struct lease_owner *o, struct pool_buffer *b, uint64_t lease_id,
		uint64_t since_rt);

/*
 * A take-over (takeover.h) takes again a connection whose records changed since the snapshot it
 * prepared from: lease_owner_unadopt lets its leases go as if never adopted (free, last written
 * by its uid; nobody waiting is served and no retired buffer goes), the connection still
 * counted; lease_buffer_recast makes a free buffer what its record says now, as lease_table_new
 * makes it from pool_buffer.boot_state (CLEAN, DIRTY and LEASED by uid, anything else renewed
 * before anyone gets it). -EBUSY: b is not free.
 */
void lease_owner_unadopt(struct lease_table *lt, struct lease_owner *o);
int lease_buffer_recast(struct lease_table *lt, struct pool_buffer *b, enum warm_buf_state st, uid_t uid);

/* Let go of every buffer of a retired class (pool.h) nobody holds: after adoption. */
void lease_retire_unheld(struct lease_table *lt);

/* The connection is gone: cancel its acquire, release every lease it held. */
void lease_owner_detach(struct lease_table *lt, struct lease_owner *o);

/*
 * Ask for n buffers of class_name. timeout_ms: 0 = only what is free now, < 0 = wait forever.
 * Returns a negative errno with a message in err for an immediate refusal (-ENOENT no such
 * class, -EINVAL n = 0, -E2BIG more than the class has, -EDQUOT over the uid's byte limit,
 * -EAGAIN not free now and timeout 0, -EBUSY an acquire already in progress), else 0: the
 * outcome then arrives through ops->granted or ops->failed, possibly before this returns.
 * With timeout 0, buffers that are free but need renewal count as free: the grant follows
 * their renewal.
 */
int lease_acquire(struct lease_table *lt, struct lease_owner *o, const char *class_name, unsigned n,
		  int64_t timeout_ms, uint64_t now_ns, char *err, size_t errlen);

/* Release leases of o; all ids must be o's (-EINVAL otherwise, nothing released). */
int lease_release(struct lease_table *lt, struct lease_owner *o, const uint64_t *ids, unsigned n,
		  char *err, size_t errlen);

/* Fail every waiting acquire whose deadline is <= now with -ETIMEDOUT. */
void lease_expire(struct lease_table *lt, uint64_t now_ns);
/* Earliest deadline of a waiting acquire, UINT64_MAX if none. */
uint64_t lease_next_deadline(const struct lease_table *lt);

/* The recycler finished renewing b (err 0) or failed (negative errno). */
void lease_renewed(struct lease_table *lt, struct pool_buffer *b, int err);

/* The GRANT carrying s has been sent: from now on its holder may release it. */
void lease_slot_delivered(struct lease_slot *s);

uint64_t lease_slot_id(const struct lease_slot *s);
struct pool_buffer *lease_slot_buffer(const struct lease_slot *s);
uint64_t lease_slot_since(const struct lease_slot *s); /* CLOCK_REALTIME ns of the grant */
struct lease_slot *lease_owner_next(const struct lease_owner *o, struct lease_slot *prev);

void lease_class_stats(const struct lease_table *lt, unsigned class_index, struct lease_class_stats *ret);
/*
 * A class's acquires since start by outcome, and the wait of those granted (from lease_acquire's
 * now to the grant): status's own struct, which the table counts in as it goes.
 */
const struct proto_status_acquire *lease_class_acquires(const struct lease_table *lt, unsigned class_index);
const struct lease_counters *lease_counters(const struct lease_table *lt);

#endif
