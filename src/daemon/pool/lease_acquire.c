/* SPDX-License-Identifier: MIT */
/*
 * lease_acquire.c - the lease table's requests (see lease.h for the rules, lease_internal.h for
 * the layout): an acquire reserves all its buffers or none, waits in its class's FIFO queue when
 * it cannot, is granted once every reserved buffer is ready (renewals come back through
 * lease_renewed), and fails at its deadline. Event-loop thread only.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "lease_internal.h"
#include "proto.h"
#include "util.h"

void lt_req_finish(struct lease_table *lt, struct lease_req *r)
{
	(void)lt;
	r->owner->req = NULL;
	free(r);
}

/* Undo a request's reservations (it failed or its owner left). */
void lt_req_unreserve(struct lease_table *lt, struct lease_req *r)
{
	for (unsigned i = 0; i < r->held; i++) {
		struct lease_slot *s = r->slots[i];

		if (s->state == SLOT_RENEWING)
			s->req = NULL; /* lease_renewed() frees it when it comes back */
		else
			lt_slot_free(lt, s);
	}
	if (r->charged)
		r->owner->acct->charged -= (uint64_t)r->count * lt_class_size(lt, r->class_index);
	r->charged = false;
	r->held = r->renewing = 0;
}

static void req_fail(struct lease_table *lt, struct lease_req *r, int err, const char *text)
{
	struct proto_status_acquire *counted = &lt->classes[r->class_index].counted;
	struct lease_owner *o = r->owner;

	/* after the request was taken: its deadline, the limit at grant time, or renewal */
	if (err == -ETIMEDOUT)
		counted->refused_timeout++;
	else if (err == -EDQUOT)
		counted->refused_limit++;
	else
		counted->refused_renewal++;

	lt_req_unreserve(lt, r);
	lt_req_finish(lt, r);
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
	uint64_t now = realtime_ns(), t;
	uint32_t rnd[r->held];

	random_u32(rnd, r->held);
	for (unsigned i = 0; i < r->held; i++) {
		struct lease_slot *s = r->slots[i];
		uint64_t id = (uint64_t)(rnd[i] | 1u) << 32 | s->pb->index;

		/* never the slot's previous id: a stale id must not release the new lease */
		lt_slot_lease(lt, s, o, id != s->lease_id ? id : id + (2ull << 32), false, now);
	}
	lt->counters.grants++;
	lc->counted.granted++;
	lc->counted.buffers_granted += r->held;
	t = now_ns();
	proto_latency_add(&lc->counted.wait, t > r->arrived ? t - r->arrived : 0, 1);
	o->req = NULL;
	lt->ops.granted(o, r->slots, r->held, lt->ud);
	free(r);
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
	if (lt_over_byte_limit(lt, o, (uint64_t)r->count * lt_class_size(lt, r->class_index), text, sizeof(text))) {
		lt->counters.denials++;
		req_fail(lt, r, -EDQUOT, text); /* counted there */
		return true;
	}
	o->acct->charged += (uint64_t)r->count * lt_class_size(lt, r->class_index);
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
			lt_slot_break(lt, s);
			lt->counters.punched++;
			continue;
		}
		lt_slot_reserve(lt, s, r);
	}
	while (r->held < r->count && (s = TAILQ_FIRST(&lc->clean))) {
		/* taken over and not looked at yet (pool_buffer.unverified): checked before it goes */
		if (s->pb->unverified && lt->ops.intact && !lt->ops.intact(s->pb, lt->ud)) {
			lt_slot_break(lt, s);
			continue;
		}
		lt_slot_reserve(lt, s, r);
	}
	while (r->held < r->count && (s = TAILQ_FIRST(&lc->dirty)))
		lt_slot_renew(lt, s, r);
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
void lt_class_pump(struct lease_table *lt, unsigned c)
{
	struct lease_class *lc = &lt->classes[c];
	struct lease_req *r;
	struct lease_slot *s;

	if (lt->pool->classes[c].retired) {
		/* nobody waits here: every buffer let go goes for good */
		while ((s = TAILQ_FIRST(&lc->clean)) || (s = TAILQ_FIRST(&lc->dirty)))
			lt_slot_retire(lt, s);
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

void lt_classes_pump(struct lease_table *lt, const bool touched[CONFIG_CLASSES_MAX])
{
	for (unsigned c = 0; c < lt->pool->nclasses; c++)
		if (touched[c])
			lt_class_pump(lt, c);
}

static int find_class(const struct lease_table *lt, const char *name)
{
	for (unsigned c = 0; c < lt->pool->nclasses; c++)
		if (!lt->pool->classes[c].retired && strcmp(lt->pool->classes[c].name, name) == 0)
			return (int)c;
	return -1;
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
		lt->counters.unknown_class++;
		snprintf(err, errlen, "no buffer class \"%s\"", name);
		return -ENOENT;
	}
	lc = &lt->classes[c];
	lc->counted.acquires++;
	if (n == 0) {
		snprintf(err, errlen, "asked for zero buffers");
		return -EINVAL;
	}
	if (n > lt->pool->classes[c].count) {
		lc->counted.refused_too_large++;
		snprintf(err, errlen, "class \"%s\" has only %" PRIu32 " buffers, %u asked", name,
			 lt->pool->classes[c].count, n);
		return -E2BIG;
	}
	if (lt_over_byte_limit(lt, o, (uint64_t)n * lt_class_size(lt, (unsigned)c), err, errlen)) {
		lt->counters.denials++;
		lc->counted.refused_limit++;
		return -EDQUOT;
	}
	r = calloc(1, sizeof(*r) + n * sizeof(r->slots[0]));
	if (!r) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	*r = (struct lease_req){ .owner = o, .class_index = (unsigned)c, .count = n, .arrived = now, .deadline = UINT64_MAX };
	o->req = r;
	if (TAILQ_EMPTY(&lc->waiters) && req_try(lt, r))
		return 0;
	if (timeout_ms == 0) {
		lc->counted.refused_all_or_nothing++;
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
				 lt_class_name(lt, c));
			req_fail(lt, r, -ETIMEDOUT, text);
			if (was_head) {
				lt_class_pump(lt, c);
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
	struct lease_req *r = s->req;

	lt->counters.renewals += err == 0;
	if (!lt_slot_renewed(lt, s, err)) {
		char text[PROTO_TEXT_MAX];

		if (r) {
			/* the slot is not r's any more: drop it from r before undoing the rest */
			for (unsigned i = 0; i < r->held; i++)
				if (r->slots[i] == s)
					r->slots[i] = r->slots[--r->held];
			snprintf(text, sizeof(text), "could not give a buffer of class \"%s\" fresh pages: %s",
				 lt_class_name(lt, s->pb->class_index), strerror(-err));
			req_fail(lt, r, -ENOMEM, text);
		}
		/* buffers came back (this one to be retried, and r's reservations): serve the queue */
		lt_class_pump(lt, s->pb->class_index);
		return;
	}
	if (!r) {
		lt_slot_free(lt, s);
		lt_class_pump(lt, s->pb->class_index);
		return;
	}
	if (--r->renewing == 0)
		req_grant(lt, r);
}
