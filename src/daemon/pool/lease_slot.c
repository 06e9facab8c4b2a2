/* SPDX-License-Identifier: MIT */
/*
 * lease_slot.c - the state machine of the lease table's slots: every change of a slot's state is
 * one function here, and only here (lease_internal.h declares them; lease.c's owners and
 * lease_acquire.c's requests call them). Event-loop thread only.
 *
 * Every pool buffer has one slot, in exactly one state:
 *   FREE      in its class's clean list (fresh pages) or dirty list (last held by dirty_uid,
 *             or dirty_uid = BROKEN_UID when its renewal failed and must be retried);
 *   RESERVED  taken by a request that is still waiting for other slots to be renewed;
 *   RENEWING  with the recycler; req says which request it is for (NULL: nobody any more);
 *   LEASED    held by owner under lease_id, in the owner's lease list;
 *   GONE      a retired class's buffer (pool.h) that was let go: handed to ops->retire, never
 *             granted again.
 *
 *              reserve               lease (grant)
 *     FREE ---------------> RESERVED ---------------> LEASED
 *      |  \                    ^                       |  ^
 *      |   \ renew             | renewed (fresh pages) |  |
 *      |    '-----> RENEWING --'                       |  | lease (adopted after a restart)
 *      |               | renewed (failed): FREE, broken |  |
 *      |<--------------'                               |  |
 *      |<---------- free (request undone) -- RESERVED   |  |
 *      |<---------- unlease -----------------------------'  |
 *      '----------------------------------------------------'
 *     FREE --retire--> GONE (a retired class)      FREE --break--> FREE (pages punched: broken)
 *     FREE --recast--> FREE (clean, dirty or broken: what a take-over's record says now)
 *
 * Each change tells the server what the next life must know of the buffer (lt_slot_note), and
 * keeps the class's counts and lists and the owner's list and figures with the state.
 */
#include <stdint.h>

#include "lease_internal.h"

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

/* A FREE slot off its class's list, for the change that follows. */
static void slot_unlist(struct lease_table *lt, struct lease_slot *s)
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

void lt_slot_reserve(struct lease_table *lt, struct lease_slot *s, struct lease_req *r)
{
	slot_unlist(lt, s);
	s->state = SLOT_RESERVED;
	s->req = r;
	r->slots[r->held++] = s;
}

void lt_slot_renew(struct lease_table *lt, struct lease_slot *s, struct lease_req *r)
{
	slot_unlist(lt, s);
	s->state = SLOT_RENEWING;
	s->req = r;
	r->slots[r->held++] = s;
	r->renewing++;
	lt_class_of(lt, s)->nrenewing++;
	lt_slot_note(lt, s);
}

bool lt_slot_renewed(struct lease_table *lt, struct lease_slot *s, int err)
{
	lt_class_of(lt, s)->nrenewing--;
	if (err < 0) {
		s->clean = false;
		s->dirty_uid = BROKEN_UID;
		lt_slot_free(lt, s);
		return false;
	}
	s->clean = true;
	s->state = SLOT_RESERVED; /* not RENEWING any more: fresh pages, whoever gets them */
	lt_slot_note(lt, s);
	return true;
}

void lt_slot_break(struct lease_table *lt, struct lease_slot *s)
{
	slot_unlist(lt, s);
	s->dirty_uid = BROKEN_UID;
	lt_slot_free(lt, s);
}

void lt_slot_recast(struct lease_table *lt, struct lease_slot *s, bool clean, uid_t dirty_uid)
{
	slot_unlist(lt, s);
	s->clean = clean;
	s->dirty_uid = clean ? 0 : dirty_uid;
	lt_slot_free(lt, s);
}

void lt_slot_lease(struct lease_table *lt, struct lease_slot *s, struct lease_owner *o, uint64_t lease_id,
		   bool delivered, uint64_t since_rt)
{
	if (s->state == SLOT_FREE)
		slot_unlist(lt, s);
	s->state = SLOT_LEASED;
	s->req = NULL;
	s->owner = o;
	s->lease_id = lease_id;
	s->delivered = delivered;
	s->since_rt = since_rt;
	s->clean = false;
	s->dirty_uid = o->uid;
	TAILQ_INSERT_TAIL(&o->leases, s, link);
	o->nleases++;
	o->leased_bytes += s->pb->size;
	lt_class_of(lt, s)->nleased++;
	/* before the GRANT leaves: a restart must never take the buffer for fresh */
	lt_slot_note(lt, s);
}

void lt_slot_unlease(struct lease_table *lt, struct lease_slot *s)
{
	struct lease_owner *o = s->owner;

	TAILQ_REMOVE(&o->leases, s, link);
	o->nleases--;
	o->leased_bytes -= s->pb->size;
	o->acct->charged -= s->pb->size;
	lt_class_of(lt, s)->nleased--;
	lt_slot_free(lt, s);
}

void lt_slot_retire(struct lease_table *lt, struct lease_slot *s)
{
	slot_unlist(lt, s);
	s->state = SLOT_GONE;
	lt_class_of(lt, s)->ngone++;
	lt_slot_note(lt, s);
	if (lt->ops.retire)
		lt->ops.retire(s->pb, lt->ud);
}
