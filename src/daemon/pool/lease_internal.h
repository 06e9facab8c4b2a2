/* SPDX-License-Identifier: MIT */
/*
 * lease_internal.h - what the lease table's three files share: its structs (a slot per buffer, a
 * request, a class's lists, a uid's account) and the helpers they call.
 *
 *   lease.c          the table and its owners: attach, release, detach, adoption after a
 *                    restart, retired classes, the accessors and statistics
 *   lease_slot.c     the slots' state machine: every change of a slot's state (its diagram)
 *   lease_acquire.c  requests: acquire, reservation (all or nothing), grant, the per-class
 *                    FIFO queue, deadlines, and renewals coming back
 *
 * Event-loop thread only, as lease.h says.
 */
#ifndef HP_LEASE_INTERNAL_H
#define HP_LEASE_INTERNAL_H

#include "lease.h"

#define BROKEN_UID ((uid_t)-1)

#ifndef TAILQ_FOREACH_SAFE /* BSD has it, glibc's sys/queue.h does not */
#define TAILQ_FOREACH_SAFE(var, head, field, tvar) \
	for ((var) = TAILQ_FIRST(head); (var) && ((tvar) = TAILQ_NEXT(var, field), 1); (var) = (tvar))
#endif

enum slot_state { SLOT_FREE, SLOT_RESERVED, SLOT_RENEWING, SLOT_LEASED, SLOT_GONE };

struct lease_slot {
	struct pool_buffer *pb;
	enum slot_state state;
	bool clean; /* FREE/RESERVED: fresh pages, nobody wrote them */
	uid_t dirty_uid; /* !clean: who wrote them last (BROKEN_UID: no pages at all) */
	uint64_t lease_id; /* LEASED; kept after, so that the next id differs */
	bool delivered; /* LEASED: its GRANT has left the daemon */
	uint64_t since_rt; /* LEASED */
	struct lease_owner *owner; /* LEASED */
	struct lease_req *req; /* RESERVED, RENEWING */
	TAILQ_ENTRY(lease_slot) link; /* class clean/dirty list (FREE) or owner->leases (LEASED) */
};

TAILQ_HEAD(slot_list, lease_slot);

struct lease_req {
	struct lease_owner *owner;
	unsigned class_index;
	unsigned count;
	uint64_t arrived; /* CLOCK_MONOTONIC ns, lease_acquire's now: the wait is counted from it */
	uint64_t deadline; /* CLOCK_MONOTONIC ns; UINT64_MAX = none */
	bool queued;
	bool charged; /* its bytes are charged to the uid */
	unsigned held; /* slots in slots[] */
	unsigned renewing; /* of which still with the recycler */
	TAILQ_ENTRY(lease_req) link;
	struct lease_slot *slots[];
};

struct lease_class {
	struct slot_list clean, dirty;
	uint32_t nclean, ndirty, nleased, nrenewing, ngone;
	TAILQ_HEAD(, lease_req) waiters;
	uint32_t nwaiters;
	struct proto_status_acquire counted; /* its acquires by outcome, and their wait */
};

struct lease_uid {
	uid_t uid;
	uint32_t connections;
	uint64_t charged; /* leased + reserved bytes */
	LIST_ENTRY(lease_uid) link;
};

struct lease_table {
	struct pool *pool;
	struct lease_limits limits;
	struct lease_ops ops;
	void *ud;
	struct lease_slot *slots; /* one per pool buffer, same index */
	struct lease_class *classes;
	LIST_HEAD(, lease_uid) uids; /* uids with a connection; few, so a list */
	struct lease_counters counters;
};

/* lease.c */
const char *lt_class_name(const struct lease_table *lt, unsigned c);
uint64_t lt_class_size(const struct lease_table *lt, unsigned c);
bool lt_over_byte_limit(const struct lease_table *lt, const struct lease_owner *o, uint64_t bytes, char *err,
			size_t errlen);

/* lease_slot.c: a slot's changes of state, each keeping the lists, counts and warm state with it */
struct lease_class *lt_class_of(struct lease_table *lt, const struct lease_slot *s);
void lt_slot_note(struct lease_table *lt, const struct lease_slot *s);
/* any state but GONE -> FREE, in its class's clean or dirty list as its pages say */
void lt_slot_free(struct lease_table *lt, struct lease_slot *s);
/* FREE -> RESERVED for r (its pages need nothing) */
void lt_slot_reserve(struct lease_table *lt, struct lease_slot *s, struct lease_req *r);
/* FREE -> RENEWING for r (another uid's pages: the recycler gives it fresh ones) */
void lt_slot_renew(struct lease_table *lt, struct lease_slot *s, struct lease_req *r);
/* RENEWING -> RESERVED with fresh pages (true), or FREE and broken when renewal failed (false) */
bool lt_slot_renewed(struct lease_table *lt, struct lease_slot *s, int err);
/* FREE (its pages punched out) -> FREE and broken: renewed before anyone gets it */
void lt_slot_break(struct lease_table *lt, struct lease_slot *s);
/* FREE -> FREE as a take-over's record now says: clean, or last written by dirty_uid (BROKEN_UID) */
void lt_slot_recast(struct lease_table *lt, struct lease_slot *s, bool clean, uid_t dirty_uid);
/* RESERVED (a grant) or FREE (adopted after a restart) -> LEASED to o; charges nothing */
void lt_slot_lease(struct lease_table *lt, struct lease_slot *s, struct lease_owner *o, uint64_t lease_id,
		   bool delivered, uint64_t since_rt);
/* LEASED -> FREE, its bytes no longer charged to its owner's uid */
void lt_slot_unlease(struct lease_table *lt, struct lease_slot *s);
/* FREE -> GONE, handed to ops->retire (a retired class's buffer) */
void lt_slot_retire(struct lease_table *lt, struct lease_slot *s);

/* lease_acquire.c */
void lt_class_pump(struct lease_table *lt, unsigned c);
/* lt_class_pump of each class marked in touched (buffers came back to it) */
void lt_classes_pump(struct lease_table *lt, const bool touched[CONFIG_CLASSES_MAX]);
void lt_req_unreserve(struct lease_table *lt, struct lease_req *r);
void lt_req_finish(struct lease_table *lt, struct lease_req *r);

#endif
