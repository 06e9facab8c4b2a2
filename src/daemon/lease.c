/* SPDX-License-Identifier: MIT */
/*
 * lease.c - see lease.h for the rules. Event-loop thread only.
 *
 * Every pool buffer has one slot, in exactly one state:
 *   FREE      in its class's clean list (fresh pages) or dirty list (last held by dirty_uid,
 *             or dirty_uid = BROKEN_UID when its renewal failed and must be retried);
 *   RESERVED  taken by a request that is still waiting for other slots to be renewed;
 *   RENEWING  with the recycler; req says which request it is for (NULL: nobody any more);
 *   LEASED    held by owner under lease_id, in the owner's lease list;
 *   GONE      a retired class's buffer (pool.h) that was let go: handed to ops->retire, never
 *             granted again.
 * A request holds its slots in req->held until all are ready, then they all become LEASED at
 * once (all-or-nothing). A uid is charged for a request's bytes when its slots are reserved.
 * Lease ids are (random << 32 | slot index): O(1) to look up, not guessable, and never the id
 * the same slot had before. A LEASED slot is releasable only once delivered (see lease.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "lease.h"
#include "proto.h"
#include "size.h"
#include "util.h"

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

static void slot_free(struct lease_table *lt, struct lease_slot *s);

int lease_table_new(struct pool *pool, const struct lease_limits *limits, const struct lease_ops *ops,
		    void *userdata, struct lease_table **ret)
{
	struct lease_table *lt = calloc(1, sizeof(*lt));

	if (!lt)
		return -ENOMEM;
	lt->pool = pool;
	lt->limits = *limits;
	lt->ops = *ops;
	lt->ud = userdata;
	lt->slots = calloc(pool->nbuffers ? pool->nbuffers : 1, sizeof(*lt->slots));
	lt->classes = calloc(pool->nclasses ? pool->nclasses : 1, sizeof(*lt->classes));
	if (!lt->slots || !lt->classes) {
		lease_table_free(lt);
		return -ENOMEM;
	}
	for (unsigned c = 0; c < pool->nclasses; c++) {
		TAILQ_INIT(&lt->classes[c].clean);
		TAILQ_INIT(&lt->classes[c].dirty);
		TAILQ_INIT(&lt->classes[c].waiters);
	}
	for (uint32_t i = 0; i < pool->nbuffers; i++) {
		struct lease_slot *s = &lt->slots[i];
		const struct pool_buffer *b = &pool->buffers[i];

		s->pb = &pool->buffers[i];
		/* a buffer adopted from the previous life: held then or not, its pages are who wrote
		 * them last (its holder, if still connected, gets it again as any warm buffer) */
		switch (b->boot_state) {
		case WARM_BUF_CLEAN:
			s->clean = true;
			break;
		case WARM_BUF_DIRTY:
		case WARM_BUF_LEASED:
			s->dirty_uid = b->boot_uid;
			break;
		default: /* not trusted: fresh pages before anyone gets it */
			s->dirty_uid = BROKEN_UID;
			break;
		}
		slot_free(lt, s);
	}
	*ret = lt;
	return 0;
}

void lease_table_free(struct lease_table *lt)
{
	if (!lt)
		return;
	/* requests still queued belong to owners the server is tearing down */
	for (unsigned c = 0; lt->classes && c < lt->pool->nclasses; c++) {
		struct lease_req *r;

		while ((r = TAILQ_FIRST(&lt->classes[c].waiters))) {
			TAILQ_REMOVE(&lt->classes[c].waiters, r, link);
			r->owner->req = NULL;
			free(r);
		}
	}
	while (!LIST_EMPTY(&lt->uids)) {
		struct lease_uid *u = LIST_FIRST(&lt->uids);

		LIST_REMOVE(u, link);
		free(u);
	}
	free(lt->slots);
	free(lt->classes);
	free(lt);
}

static struct lease_class *class_of(struct lease_table *lt, const struct lease_slot *s)
{
	return &lt->classes[s->pb->class_index];
}

/* Tell the server what the next life must know of s's buffer (lease_ops.changed). */
static void slot_note(struct lease_table *lt, const struct lease_slot *s)
{
	struct lease_note n = { .uid = s->clean ? 0 : s->dirty_uid };

	if (!lt->ops.changed)
		return;
	if (s->state == SLOT_GONE)
		n.state = WARM_BUF_UNKNOWN; /* nothing for the next life */
	else if (s->state == SLOT_RENEWING || (!s->clean && s->dirty_uid == BROKEN_UID))
		n.state = WARM_BUF_BROKEN;
	else if (s->clean)
		n.state = WARM_BUF_CLEAN;
	else if (s->state != SLOT_LEASED)
		n.state = WARM_BUF_DIRTY;
	else
		n = (struct lease_note){ .state = WARM_BUF_LEASED, .uid = s->dirty_uid, .owner = s->owner,
					 .lease_id = s->lease_id, .since_rt = s->since_rt };
	lt->ops.changed(s->pb, &n, lt->ud);
}

/* Put a slot back among the free ones of its class. */
static void slot_free(struct lease_table *lt, struct lease_slot *s)
{
	struct lease_class *lc = class_of(lt, s);

	s->state = SLOT_FREE;
	s->owner = NULL;
	s->req = NULL;
	if (s->clean) {
		TAILQ_INSERT_TAIL(&lc->clean, s, link);
		lc->nclean++;
	} else if (s->dirty_uid == BROKEN_UID) {
		/* last choice: taking it means trying its renewal again */
		TAILQ_INSERT_TAIL(&lc->dirty, s, link);
		lc->ndirty++;
	} else {
		/* most recently released first: its pages are the warmest */
		TAILQ_INSERT_HEAD(&lc->dirty, s, link);
		lc->ndirty++;
	}
	slot_note(lt, s);
}

static void slot_unlist(struct lease_table *lt, struct lease_slot *s)
{
	struct lease_class *lc = class_of(lt, s);

	if (s->clean) {
		TAILQ_REMOVE(&lc->clean, s, link);
		lc->nclean--;
	} else {
		TAILQ_REMOVE(&lc->dirty, s, link);
		lc->ndirty--;
	}
}

static struct lease_uid *uid_find(struct lease_table *lt, uid_t uid)
{
	struct lease_uid *u;

	LIST_FOREACH(u, &lt->uids, link)
		if (u->uid == uid)
			return u;
	return NULL;
}

int lease_owner_attach(struct lease_table *lt, struct lease_owner *o, uid_t uid, gid_t gid, pid_t pid,
		       char *err, size_t errlen)
{
	struct lease_uid *u = uid_find(lt, uid);

	if (!u) {
		u = calloc(1, sizeof(*u));
		if (!u) {
			snprintf(err, errlen, "out of memory");
			return -ENOMEM;
		}
		u->uid = uid;
		LIST_INSERT_HEAD(&lt->uids, u, link);
	}
	if (lt->limits.max_connections_per_uid && u->connections >= lt->limits.max_connections_per_uid) {
		snprintf(err, errlen, "uid %u already has %" PRIu32 " connections (max_connections_per_uid)",
			 (unsigned)uid, u->connections);
		lt->counters.denials++;
		if (u->connections == 0) {
			LIST_REMOVE(u, link);
			free(u);
		}
		return -EUSERS;
	}
	u->connections++;
	*o = (struct lease_owner){ .uid = uid, .gid = gid, .pid = pid, .acct = u };
	TAILQ_INIT(&o->leases);
	return 0;
}

static const char *class_name(const struct lease_table *lt, unsigned c)
{
	return lt->pool->classes[c].name;
}

static uint64_t class_size(const struct lease_table *lt, unsigned c)
{
	return lt->pool->classes[c].size;
}

/* Would charging `bytes` more to o's uid break its limit? Explains why in err. */
static bool over_byte_limit(const struct lease_table *lt, const struct lease_owner *o, uint64_t bytes,
			    char *err, size_t errlen)
{
	uint64_t max = lt->limits.max_bytes_per_uid;
	char a[32], b[32], c[32];

	if (!max || (o->acct->charged <= max && bytes <= max - o->acct->charged))
		return false;
	snprintf(err, errlen, "uid %u would exceed max_bytes_per_uid (%s): %s held, %s asked",
		 (unsigned)o->uid, size_format(max, a, sizeof(a)), size_format(o->acct->charged, b, sizeof(b)),
		 size_format(bytes, c, sizeof(c)));
	return true;
}

static void req_finish(struct lease_table *lt, struct lease_req *r)
{
	(void)lt;
	r->owner->req = NULL;
	free(r);
}

/* Undo a request's reservations (it failed or its owner left). */
static void req_unreserve(struct lease_table *lt, struct lease_req *r)
{
	for (unsigned i = 0; i < r->held; i++) {
		struct lease_slot *s = r->slots[i];

		if (s->state == SLOT_RENEWING)
			s->req = NULL; /* lease_renewed() frees it when it comes back */
		else
			slot_free(lt, s);
	}
	if (r->charged)
		r->owner->acct->charged -= (uint64_t)r->count * class_size(lt, r->class_index);
	r->charged = false;
	r->held = r->renewing = 0;
}

static void req_fail(struct lease_table *lt, struct lease_req *r, int err, const char *text)
{
	struct lease_owner *o = r->owner;

	req_unreserve(lt, r);
	req_finish(lt, r);
	lt->ops.failed(o, err, text, lt->ud);
}

/* n random 32-bit numbers; getrandom(2) never fails after early boot, but if it did, the
 * clock still makes ids differ (only guessable then) */
static void random_u32(uint32_t *out, unsigned n)
{
	size_t got = 0, want = n * sizeof(*out);

	while (got < want) {
		ssize_t k = getrandom((char *)out + got, want - got, 0);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			for (unsigned i = 0; i < n; i++)
				out[i] ^= (uint32_t)(now_ns() * 0x9e3779b97f4a7c15ull >> 32) + i;
			return;
		}
		got += (size_t)k;
	}
}

static void req_grant(struct lease_table *lt, struct lease_req *r)
{
	struct lease_owner *o = r->owner;
	struct lease_class *lc = &lt->classes[r->class_index];
	uint64_t now = realtime_ns();
	uint32_t rnd[r->held];

	random_u32(rnd, r->held);
	for (unsigned i = 0; i < r->held; i++) {
		struct lease_slot *s = r->slots[i];
		uint64_t id = (uint64_t)(rnd[i] | 1u) << 32 | s->pb->index;

		s->state = SLOT_LEASED;
		s->req = NULL;
		s->owner = o;
		/* never the slot's previous id: a stale id must not release the new lease */
		s->lease_id = id != s->lease_id ? id : id + (2ull << 32);
		s->delivered = false;
		s->since_rt = now;
		s->clean = false;
		s->dirty_uid = o->uid;
		TAILQ_INSERT_TAIL(&o->leases, s, link);
		o->nleases++;
		o->leased_bytes += s->pb->size;
		lc->nleased++;
		/* before the GRANT leaves: a restart must never take the buffer for fresh */
		slot_note(lt, s);
	}
	lt->counters.grants++;
	o->req = NULL;
	lt->ops.granted(o, r->slots, r->held, lt->ud);
	free(r);
}

int lease_adopt(struct lease_table *lt, struct lease_owner *o, struct pool_buffer *b, uint64_t lease_id,
		uint64_t since_rt)
{
	struct lease_slot *s = &lt->slots[b->index];
	struct lease_class *lc = class_of(lt, s);

	if (s->state != SLOT_FREE || s->clean || s->dirty_uid != o->uid)
		return -EBUSY;
	slot_unlist(lt, s);
	s->state = SLOT_LEASED;
	s->owner = o;
	s->lease_id = lease_id;
	s->delivered = true;
	s->since_rt = since_rt;
	TAILQ_INSERT_TAIL(&o->leases, s, link);
	o->nleases++;
	o->leased_bytes += b->size;
	o->acct->charged += b->size;
	lc->nleased++;
	slot_note(lt, s);
	return 0;
}

/*
 * Reserve r's buffers if the class has enough free ones (counting those that need renewal).
 * Returns false, reserving nothing, when it has not. On true the request is either granted or
 * failed already, or waits for renewals: in every case it left the queue's hands.
 */
static bool req_try(struct lease_table *lt, struct lease_req *r)
{
	struct lease_class *lc = &lt->classes[r->class_index];
	struct lease_owner *o = r->owner;
	struct lease_slot *s, *next;
	char text[PROTO_TEXT_MAX];

	if (lc->nclean + lc->ndirty < r->count)
		return false;
	if (over_byte_limit(lt, o, (uint64_t)r->count * class_size(lt, r->class_index), text, sizeof(text))) {
		lt->counters.denials++;
		req_fail(lt, r, -EDQUOT, text);
		return true;
	}
	o->acct->charged += (uint64_t)r->count * class_size(lt, r->class_index);
	r->charged = true;
	/* the uid's own used buffers first (warm, no renewal), then fresh ones, then others' */
	TAILQ_FOREACH_SAFE(s, &lc->dirty, link, next) {
		if (r->held == r->count)
			break;
		if (s->dirty_uid != o->uid)
			continue;
		if (lt->ops.intact && !lt->ops.intact(s->pb, lt->ud)) {
			/* pages punched out: not warm any more, and with hugetlb maybe not there to
			 * fault in again; it gets fresh pages like any buffer of another uid */
			slot_unlist(lt, s);
			s->dirty_uid = BROKEN_UID;
			slot_free(lt, s);
			lt->counters.punched++;
			continue;
		}
		slot_unlist(lt, s);
		s->state = SLOT_RESERVED;
		s->req = r;
		r->slots[r->held++] = s;
	}
	while (r->held < r->count && (s = TAILQ_FIRST(&lc->clean))) {
		slot_unlist(lt, s);
		s->state = SLOT_RESERVED;
		s->req = r;
		r->slots[r->held++] = s;
	}
	while (r->held < r->count && (s = TAILQ_FIRST(&lc->dirty))) {
		slot_unlist(lt, s);
		s->state = SLOT_RENEWING;
		s->req = r;
		r->slots[r->held++] = s;
		r->renewing++;
		lc->nrenewing++;
		slot_note(lt, s);
	}
	if (r->renewing == 0) {
		req_grant(lt, r);
		return true;
	}
	/*
	 * Hand them over only now, from a copy: a renewal may complete (and grant, freeing r)
	 * from inside ops->renew.
	 */
	struct pool_buffer *todo[r->count];
	unsigned ntodo = 0;

	for (unsigned i = 0; i < r->held; i++)
		if (r->slots[i]->state == SLOT_RENEWING)
			todo[ntodo++] = r->slots[i]->pb;
	for (unsigned i = 0; i < ntodo; i++)
		lt->ops.renew(todo[i], lt->ud);
	return true;
}

/* Serve a class's waiters in order for as long as the head can be served. */
static void class_pump(struct lease_table *lt, unsigned c)
{
	struct lease_class *lc = &lt->classes[c];
	struct lease_req *r;
	struct lease_slot *s;

	if (lt->pool->classes[c].retired) {
		/* nobody waits here: every buffer let go goes for good */
		while ((s = TAILQ_FIRST(&lc->clean)) || (s = TAILQ_FIRST(&lc->dirty))) {
			slot_unlist(lt, s);
			s->state = SLOT_GONE;
			lc->ngone++;
			slot_note(lt, s);
			if (lt->ops.retire)
				lt->ops.retire(s->pb, lt->ud);
		}
		return;
	}
	while ((r = TAILQ_FIRST(&lc->waiters))) {
		TAILQ_REMOVE(&lc->waiters, r, link);
		lc->nwaiters--;
		r->queued = false;
		if (!req_try(lt, r)) {
			TAILQ_INSERT_HEAD(&lc->waiters, r, link);
			lc->nwaiters++;
			r->queued = true;
			break;
		}
	}
}

static int find_class(const struct lease_table *lt, const char *name)
{
	for (unsigned c = 0; c < lt->pool->nclasses; c++)
		if (!lt->pool->classes[c].retired && strcmp(lt->pool->classes[c].name, name) == 0)
			return (int)c;
	return -1;
}

void lease_retire_unheld(struct lease_table *lt)
{
	for (unsigned c = 0; c < lt->pool->nclasses; c++)
		if (lt->pool->classes[c].retired)
			class_pump(lt, c);
}

int lease_acquire(struct lease_table *lt, struct lease_owner *o, const char *name, unsigned n,
		  int64_t timeout_ms, uint64_t now, char *err, size_t errlen)
{
	int c = find_class(lt, name);
	struct lease_class *lc;
	struct lease_req *r;

	lt->counters.acquires++;
	if (o->req) {
		snprintf(err, errlen, "an acquire is already in progress on this connection");
		return -EBUSY;
	}
	if (c < 0) {
		snprintf(err, errlen, "no buffer class \"%s\"", name);
		return -ENOENT;
	}
	lc = &lt->classes[c];
	if (n == 0) {
		snprintf(err, errlen, "asked for zero buffers");
		return -EINVAL;
	}
	if (n > lt->pool->classes[c].count) {
		snprintf(err, errlen, "class \"%s\" has only %" PRIu32 " buffers, %u asked", name,
			 lt->pool->classes[c].count, n);
		return -E2BIG;
	}
	if (over_byte_limit(lt, o, (uint64_t)n * class_size(lt, (unsigned)c), err, errlen)) {
		lt->counters.denials++;
		return -EDQUOT;
	}
	r = calloc(1, sizeof(*r) + n * sizeof(r->slots[0]));
	if (!r) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	*r = (struct lease_req){ .owner = o, .class_index = (unsigned)c, .count = n, .deadline = UINT64_MAX };
	o->req = r;
	if (TAILQ_EMPTY(&lc->waiters) && req_try(lt, r))
		return 0;
	if (timeout_ms == 0) {
		snprintf(err, errlen, "%u buffers of class \"%s\" are not free now (%" PRIu32 " free, %" PRIu32
			 " waiting before you)", n, name, lc->nclean + lc->ndirty, lc->nwaiters);
		o->req = NULL;
		free(r);
		return -EAGAIN;
	}
	/* a client may ask for centuries: saturate rather than wrap into the past */
	if (timeout_ms > 0)
		r->deadline = (uint64_t)timeout_ms < (UINT64_MAX - now) / 1000000ull
				      ? now + (uint64_t)timeout_ms * 1000000ull
				      : UINT64_MAX;
	r->queued = true;
	TAILQ_INSERT_TAIL(&lc->waiters, r, link);
	lc->nwaiters++;
	return 0;
}

static struct lease_slot *slot_by_id(struct lease_table *lt, const struct lease_owner *o, uint64_t id)
{
	uint32_t idx = (uint32_t)id;
	struct lease_slot *s = idx < lt->pool->nbuffers ? &lt->slots[idx] : NULL;

	/* undelivered: the holder cannot know the id yet, so it must have guessed it */
	if (s && s->state == SLOT_LEASED && s->lease_id == id && s->owner == o && s->delivered)
		return s;
	/* a lease a previous life of the daemon granted, on a buffer whose place in the pool moved
	 * since (a class before it changed its count): found among the holder's own */
	TAILQ_FOREACH(s, &o->leases, link)
		if (s->lease_id == id && s->delivered)
			return s;
	return NULL;
}

static void slot_unlease(struct lease_table *lt, struct lease_owner *o, struct lease_slot *s)
{
	TAILQ_REMOVE(&o->leases, s, link);
	o->nleases--;
	o->leased_bytes -= s->pb->size;
	o->acct->charged -= s->pb->size;
	class_of(lt, s)->nleased--;
	slot_free(lt, s);
}

int lease_release(struct lease_table *lt, struct lease_owner *o, const uint64_t *ids, unsigned n,
		  char *err, size_t errlen)
{
	bool touched[CONFIG_CLASSES_MAX] = { false };

	for (unsigned i = 0; i < n; i++) {
		if (!slot_by_id(lt, o, ids[i])) {
			snprintf(err, errlen, "lease %#" PRIx64 " is not held by this connection", ids[i]);
			return -EINVAL;
		}
		for (unsigned j = 0; j < i; j++)
			if (ids[j] == ids[i]) {
				snprintf(err, errlen, "lease %#" PRIx64 " is named twice", ids[i]);
				return -EINVAL;
			}
	}
	for (unsigned i = 0; i < n; i++) {
		struct lease_slot *s = slot_by_id(lt, o, ids[i]);

		touched[s->pb->class_index] = true;
		slot_unlease(lt, o, s);
		lt->counters.releases++;
	}
	for (unsigned c = 0; c < lt->pool->nclasses; c++)
		if (touched[c])
			class_pump(lt, c);
	return 0;
}

void lease_owner_detach(struct lease_table *lt, struct lease_owner *o)
{
	bool touched[CONFIG_CLASSES_MAX] = { false };
	struct lease_slot *s;

	if (!o->acct)
		return;
	if (o->req) {
		struct lease_req *r = o->req;

		touched[r->class_index] = true;
		if (r->queued) {
			TAILQ_REMOVE(&lt->classes[r->class_index].waiters, r, link);
			lt->classes[r->class_index].nwaiters--;
		}
		req_unreserve(lt, r);
		req_finish(lt, r);
	}
	while ((s = TAILQ_FIRST(&o->leases))) {
		touched[s->pb->class_index] = true;
		slot_unlease(lt, o, s);
		lt->counters.disconnect_releases++;
	}
	if (--o->acct->connections == 0) {
		LIST_REMOVE(o->acct, link);
		free(o->acct);
	}
	o->acct = NULL;
	for (unsigned c = 0; c < lt->pool->nclasses; c++)
		if (touched[c])
			class_pump(lt, c);
}

/*
 * Time out the waiters whose deadline passed, in queue order. When the head goes, the class is
 * pumped before the rest are looked at: a waiter behind it that fits now is served, even if the
 * loop came to its deadline late (a busy machine), instead of timing out beside a free buffer.
 */
void lease_expire(struct lease_table *lt, uint64_t now)
{
	for (unsigned c = 0; c < lt->pool->nclasses; c++) {
		struct lease_class *lc = &lt->classes[c];
		struct lease_req *r, *next;

	again:
		TAILQ_FOREACH_SAFE(r, &lc->waiters, link, next) {
			char text[PROTO_TEXT_MAX];
			bool was_head = r == TAILQ_FIRST(&lc->waiters);

			if (r->deadline > now)
				continue;
			TAILQ_REMOVE(&lc->waiters, r, link);
			lc->nwaiters--;
			r->queued = false;
			lt->counters.timeouts++;
			snprintf(text, sizeof(text), "timed out waiting for %u buffers of class \"%s\"", r->count,
				 class_name(lt, c));
			req_fail(lt, r, -ETIMEDOUT, text);
			if (was_head) {
				class_pump(lt, c);
				goto again; /* the pump may have served and dequeued any of the rest */
			}
		}
	}
}

uint64_t lease_next_deadline(const struct lease_table *lt)
{
	uint64_t min = UINT64_MAX;

	for (unsigned c = 0; c < lt->pool->nclasses; c++) {
		const struct lease_req *r;

		TAILQ_FOREACH(r, &lt->classes[c].waiters, link)
			min = MIN(min, r->deadline);
	}
	return min;
}

void lease_renewed(struct lease_table *lt, struct pool_buffer *b, int err)
{
	struct lease_slot *s = &lt->slots[b->index];
	struct lease_class *lc = class_of(lt, s);
	struct lease_req *r = s->req;

	lc->nrenewing--;
	lt->counters.renewals += err == 0;
	if (err < 0) {
		char text[PROTO_TEXT_MAX];

		s->clean = false;
		s->dirty_uid = BROKEN_UID;
		slot_free(lt, s);
		if (r) {
			s->req = NULL;
			/* the slot is not r's any more: drop it from r before undoing the rest */
			for (unsigned i = 0; i < r->held; i++)
				if (r->slots[i] == s)
					r->slots[i] = r->slots[--r->held];
			snprintf(text, sizeof(text), "could not give a buffer of class \"%s\" fresh pages: %s",
				 class_name(lt, s->pb->class_index), strerror(-err));
			req_fail(lt, r, -ENOMEM, text);
		}
		/* buffers came back (this one to be retried, and r's reservations): serve the queue */
		class_pump(lt, s->pb->class_index);
		return;
	}
	s->clean = true;
	s->state = SLOT_RESERVED; /* not RENEWING any more: fresh pages, whoever gets them */
	slot_note(lt, s);
	if (!r) {
		slot_free(lt, s);
		class_pump(lt, s->pb->class_index);
		return;
	}
	s->state = SLOT_RESERVED;
	if (--r->renewing == 0)
		req_grant(lt, r);
}

void lease_slot_delivered(struct lease_slot *s)
{
	if (s->state == SLOT_LEASED)
		s->delivered = true;
}

uint64_t lease_slot_id(const struct lease_slot *s)
{
	return s->lease_id;
}

struct pool_buffer *lease_slot_buffer(const struct lease_slot *s)
{
	return s->pb;
}

uint64_t lease_slot_since(const struct lease_slot *s)
{
	return s->since_rt;
}

struct lease_slot *lease_owner_next(const struct lease_owner *o, struct lease_slot *prev)
{
	return prev ? TAILQ_NEXT(prev, link) : TAILQ_FIRST(&o->leases);
}

void lease_class_stats(const struct lease_table *lt, unsigned c, struct lease_class_stats *ret)
{
	const struct lease_class *lc = &lt->classes[c];

	/* free counts exactly what an acquire could take now; renewing ones show as renewing */
	*ret = (struct lease_class_stats){ .total = lt->pool->classes[c].count - lc->ngone,
					   .free = lc->nclean + lc->ndirty,
					   .leased = lc->nleased,
					   .waiters = lc->nwaiters,
					   .renewing = lc->nrenewing };
}

const struct lease_counters *lease_counters(const struct lease_table *lt)
{
	return &lt->counters;
}
