/* SPDX-License-Identifier: MIT */
/*
 * lease.c - the lease table, its owners and slots (see lease.h for the rules; requests are
 * lease_acquire.c's, the shared layout lease_internal.h's). Event-loop thread only.
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

#include "lease_internal.h"
#include "proto.h"
#include "size.h"
#include "util.h"

void lt_slot_free(struct lease_table *lt, struct lease_slot *s);

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
		lt_slot_free(lt, s);
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

struct lease_class *lt_class_of(struct lease_table *lt, const struct lease_slot *s)
{
	return &lt->classes[s->pb->class_index];
}

/* Tell the server what the next life must know of s's buffer (lease_ops.changed). */
void lt_slot_note(struct lease_table *lt, const struct lease_slot *s)
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
void lt_slot_free(struct lease_table *lt, struct lease_slot *s)
{
	struct lease_class *lc = lt_class_of(lt, s);

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
	lt_slot_note(lt, s);
}

void lt_slot_unlist(struct lease_table *lt, struct lease_slot *s)
{
	struct lease_class *lc = lt_class_of(lt, s);

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

int lease_owner_admit(struct lease_table *lt, uid_t uid, char *err, size_t errlen)
{
	const struct lease_uid *u = uid_find(lt, uid);

	if (!u || !lt->limits.max_connections_per_uid || u->connections < lt->limits.max_connections_per_uid)
		return 0;
	snprintf(err, errlen, "uid %u already has %" PRIu32 " connections (max_connections_per_uid)", (unsigned)uid,
		 u->connections);
	lt->counters.denials++;
	return -EUSERS;
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

const char *lt_class_name(const struct lease_table *lt, unsigned c)
{
	return lt->pool->classes[c].name;
}

uint64_t lt_class_size(const struct lease_table *lt, unsigned c)
{
	return lt->pool->classes[c].size;
}

/* Would charging `bytes` more to o's uid break its limit? Explains why in err. */
bool lt_over_byte_limit(const struct lease_table *lt, const struct lease_owner *o, uint64_t bytes,
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

int lease_adopt(struct lease_table *lt, struct lease_owner *o, struct pool_buffer *b, uint64_t lease_id,
		uint64_t since_rt)
{
	struct lease_slot *s = &lt->slots[b->index];
	struct lease_class *lc = lt_class_of(lt, s);

	if (s->state != SLOT_FREE || s->clean || s->dirty_uid != o->uid)
		return -EBUSY;
	lt_slot_unlist(lt, s);
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
	lt_slot_note(lt, s);
	return 0;
}

void lease_retire_unheld(struct lease_table *lt)
{
	for (unsigned c = 0; c < lt->pool->nclasses; c++)
		if (lt->pool->classes[c].retired)
			lt_class_pump(lt, c);
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
	lt_class_of(lt, s)->nleased--;
	lt_slot_free(lt, s);
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
			lt_class_pump(lt, c);
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
		lt->classes[r->class_index].counted.cancelled++;
		if (r->queued) {
			TAILQ_REMOVE(&lt->classes[r->class_index].waiters, r, link);
			lt->classes[r->class_index].nwaiters--;
		}
		lt_req_unreserve(lt, r);
		lt_req_finish(lt, r);
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
			lt_class_pump(lt, c);
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

const struct proto_status_acquire *lease_class_acquires(const struct lease_table *lt, unsigned c)
{
	return &lt->classes[c].counted;
}

const struct lease_counters *lease_counters(const struct lease_table *lt)
{
	return &lt->counters;
}
