/* SPDX-License-Identifier: MIT */
/*
 * lease.c - the lease table and its owners (see lease.h for the rules): attach, admission and
 * per-uid accounts, release, detach, adoption after a restart, retired classes, the accessors
 * and statistics. A slot's changes of state are lease_slot.c's, requests lease_acquire.c's, the
 * shared layout lease_internal.h's. Event-loop thread only.
 *
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

	if (s->state != SLOT_FREE || s->clean || s->dirty_uid != o->uid)
		return -EBUSY;
	lt_slot_lease(lt, s, o, lease_id, true, since_rt);
	o->acct->charged += b->size;
	return 0;
}

void lease_owner_unadopt(struct lease_table *lt, struct lease_owner *o)
{
	struct lease_slot *s;

	while ((s = TAILQ_FIRST(&o->leases)))
		lt_slot_unlease(lt, s);
}

int lease_buffer_recast(struct lease_table *lt, struct pool_buffer *b, enum warm_buf_state st, uid_t uid)
{
	struct lease_slot *s = &lt->slots[b->index];

	if (s->state != SLOT_FREE)
		return -EBUSY;
	lt_slot_recast(lt, s, st == WARM_BUF_CLEAN, st == WARM_BUF_DIRTY || st == WARM_BUF_LEASED ? uid : BROKEN_UID);
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
		lt_slot_unlease(lt, s);
		lt->counters.releases++;
	}
	lt_classes_pump(lt, touched);
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
		lt_slot_unlease(lt, s);
		lt->counters.disconnect_releases++;
	}
	if (--o->acct->connections == 0) {
		LIST_REMOVE(o->acct, link);
		free(o->acct);
	}
	o->acct = NULL;
	lt_classes_pump(lt, touched);
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
