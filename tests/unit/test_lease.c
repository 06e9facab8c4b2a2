/* SPDX-License-Identifier: MIT */
/* Unit tests for the lease table: grants, FIFO, all-or-nothing, timeouts, limits, uid handover. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lease.h"
#include "pool.h"
#include "proto.h"
#include "util.h"

#define MiB (UINT64_C(1) << 20)
#define MS UINT64_C(1000000)
#define T0 (UINT64_C(1000) * 1000 * MS) /* an arbitrary CLOCK_MONOTONIC "now" */

/* Class "a": buffers 0..3 of 2 MiB; class "b": buffers 4..5 of 64 MiB. */
#define CLASS_A 0u
#define CLASS_B 1u
#define NA 4u
#define NB 2u

#define MAX_EVENTS 64
#define MAX_GRANT 8
#define MAX_OWNERS 16

struct grant_rec {
	struct lease_owner *owner;
	unsigned n;
	uint64_t ids[MAX_GRANT];
	uint32_t idx[MAX_GRANT];
};

struct fail_rec {
	struct lease_owner *owner;
	int err;
	char text[PROTO_TEXT_MAX];
};

struct fx {
	struct pool_class classes[2];
	struct pool_buffer buffers[NA + NB];
	struct pool pool;
	struct lease_table *lt;
	struct lease_owner own[MAX_OWNERS]; /* owners live here so teardown can detach them */
	unsigned nown;
	struct grant_rec grants[MAX_EVENTS];
	unsigned ngrants;
	struct fail_rec fails[MAX_EVENTS];
	unsigned nfails;
	struct pool_buffer *renews[MAX_EVENTS];
	unsigned nrenews;
	bool overflow; /* more events than the arrays hold */
	bool hold_delivery; /* leave granted slots undelivered (a GRANT still queued) */
	struct lease_slot *undelivered[MAX_GRANT];
	unsigned nundelivered;
	bool punched[NA + NB]; /* ops->intact says false for these buffers */
	bool renew_sync; /* complete renewals from inside ops->renew */
	int renew_err; /* ... with this result */
	char text[PROTO_TEXT_MAX];
	/* what ops->changed said last of each buffer, and whether it said it before the grant */
	enum warm_buf_state warm[NA + NB];
	uid_t warm_uid[NA + NB];
	bool leased_before_grant[NA + NB];
	bool retired[NA + NB]; /* ops->retire was called for it */
};

static void on_granted(struct lease_owner *o, struct lease_slot *const *slots, unsigned n, void *ud)
{
	struct fx *f = ud;
	struct grant_rec *g;

	if (f->ngrants == MAX_EVENTS || n > MAX_GRANT) {
		f->overflow = true;
		return;
	}
	g = &f->grants[f->ngrants++];
	g->owner = o;
	g->n = n;
	for (unsigned i = 0; i < n; i++) {
		g->ids[i] = lease_slot_id(slots[i]);
		g->idx[i] = lease_slot_buffer(slots[i])->index;
		f->leased_before_grant[g->idx[i]] = f->warm[g->idx[i]] == WARM_BUF_LEASED &&
						    f->warm_uid[g->idx[i]] == o->uid;
		/* as the server does once the GRANT is sent, which is at once unless held back */
		if (!f->hold_delivery)
			lease_slot_delivered(slots[i]);
		else if (f->nundelivered < MAX_GRANT)
			f->undelivered[f->nundelivered++] = slots[i];
	}
}

static void on_failed(struct lease_owner *o, int err, const char *text, void *ud)
{
	struct fx *f = ud;
	struct fail_rec *r;

	if (f->nfails == MAX_EVENTS) {
		f->overflow = true;
		return;
	}
	r = &f->fails[f->nfails++];
	r->owner = o;
	r->err = err;
	snprintf(r->text, sizeof(r->text), "%s", text ? text : "");
}

static void on_renew(struct pool_buffer *b, void *ud)
{
	struct fx *f = ud;

	if (f->nrenews == MAX_EVENTS)
		f->overflow = true;
	else
		f->renews[f->nrenews++] = b;
	if (f->renew_sync)
		lease_renewed(f->lt, b, f->renew_err);
}

static bool on_intact(struct pool_buffer *b, void *ud)
{
	const struct fx *f = ud;

	return !f->punched[b->index];
}

static void on_changed(struct pool_buffer *b, const struct lease_note *n, void *ud)
{
	struct fx *f = ud;

	f->warm[b->index] = n->state;
	f->warm_uid[b->index] = n->uid;
}

static void on_retire(struct pool_buffer *b, void *ud)
{
	struct fx *f = ud;

	f->retired[b->index] = true;
}

static const struct lease_ops test_ops = { on_granted, on_failed, on_renew, on_intact, on_changed, on_retire };

static void make_table(struct fx *f, uint64_t max_bytes, uint32_t max_conns)
{
	struct lease_limits lim = { .max_bytes_per_uid = max_bytes, .max_connections_per_uid = max_conns };

	lease_table_free(f->lt);
	f->lt = NULL;
	assert_int_equal(lease_table_new(&f->pool, &lim, &test_ops, f, &f->lt), 0);
	assert_non_null(f->lt);
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	f->classes[0] = (struct pool_class){ .name = "a", .size = 2 * MiB, .count = NA, .first = 0 };
	f->classes[1] = (struct pool_class){ .name = "b", .size = 64 * MiB, .count = NB, .first = NA };
	for (uint32_t i = 0; i < NA + NB; i++) {
		uint32_t c = i < NA ? CLASS_A : CLASS_B;

		f->buffers[i] = (struct pool_buffer){ .fd = -1, .addr = NULL, .size = f->classes[c].size,
						      .class_index = c, .index = i, .boot_state = WARM_BUF_CLEAN };
	}
	f->pool = (struct pool){ .classes = f->classes, .nclasses = 2, .buffers = f->buffers,
				 .nbuffers = NA + NB, .bytes = NA * 2 * MiB + NB * 64 * MiB,
				 .page_size = 2 * MiB, .hugetlb = true };
	make_table(f, 0, 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	/* owners first (as the server does), then the table: ASan then sees every allocation freed */
	for (unsigned i = 0; f->lt && i < f->nown; i++)
		lease_owner_detach(f->lt, &f->own[i]);
	lease_table_free(f->lt);
	free(f);
	return 0;
}

/* Attach a fresh owner of uid (gid 100 + uid, pid 1000 + index); must succeed. */
static struct lease_owner *attach(struct fx *f, uid_t uid)
{
	struct lease_owner *o;
	char text[PROTO_TEXT_MAX] = "";
	int r;

	assert_true(f->nown < MAX_OWNERS);
	o = &f->own[f->nown++];
	r = lease_owner_attach(f->lt, o, uid, (gid_t)(100 + uid), (pid_t)(1000 + f->nown), text, sizeof(text));
	if (r != 0)
		fail_msg("attach of uid %u failed with %d: %s", (unsigned)uid, r, text);
	return o;
}

static int acq(struct fx *f, struct lease_owner *o, const char *cls, unsigned n, int64_t timeout_ms, uint64_t now)
{
	f->text[0] = '\0';
	return lease_acquire(f->lt, o, cls, n, timeout_ms, now, f->text, sizeof(f->text));
}

static int rel(struct fx *f, struct lease_owner *o, const uint64_t *ids, unsigned n)
{
	f->text[0] = '\0';
	return lease_release(f->lt, o, ids, n, f->text, sizeof(f->text));
}

/* Release every lease o holds, in its lease list order (so the last one is the warmest). */
static void rel_all(struct fx *f, struct lease_owner *o)
{
	uint64_t ids[NA + NB];
	unsigned n = 0;

	for (struct lease_slot *s = NULL; (s = lease_owner_next(o, s));) {
		assert_true(n < NA + NB);
		ids[n++] = lease_slot_id(s);
	}
	assert_int_equal(rel(f, o, ids, n), 0);
}

/* Acquire that must be granted at once without renewal; returns the grant. */
static const struct grant_rec *acq_now(struct fx *f, struct lease_owner *o, const char *cls, unsigned n)
{
	unsigned before = f->ngrants, renews = f->nrenews;
	int r = acq(f, o, cls, n, 0, T0);

	if (r != 0)
		fail_msg("acquire of %u \"%s\" failed with %d: %s", n, cls, r, f->text);
	assert_int_equal(f->nrenews, renews);
	assert_int_equal(f->ngrants, before + 1);
	assert_ptr_equal(f->grants[before].owner, o);
	assert_int_equal(f->grants[before].n, n);
	assert_null(o->req);
	return &f->grants[before];
}

/* An acquire that must be accepted and left waiting. */
static void acq_wait(struct fx *f, struct lease_owner *o, const char *cls, unsigned n, int64_t timeout_ms,
		     uint64_t now)
{
	unsigned grants = f->ngrants, fails = f->nfails;
	int r = acq(f, o, cls, n, timeout_ms, now);

	if (r != 0)
		fail_msg("acquire of %u \"%s\" failed with %d: %s", n, cls, r, f->text);
	assert_int_equal(f->ngrants, grants);
	assert_int_equal(f->nfails, fails);
	assert_non_null(o->req);
}

#define assert_stats(f, c, fr, le, wa, rn) check_stats(f, c, fr, le, wa, rn, __LINE__)

static void check_stats(struct fx *f, unsigned c, uint32_t fr, uint32_t le, uint32_t wa, uint32_t rn, int line)
{
	struct lease_class_stats s;

	memset(&s, 0xa5, sizeof(s));
	lease_class_stats(f->lt, c, &s);
	if (s.total != f->classes[c].count || s.free != fr || s.leased != le || s.waiters != wa ||
	    s.renewing != rn)
		fail_msg("line %d: class %u: total %u free %u leased %u waiters %u renewing %u; "
			 "want total %u free %u leased %u waiters %u renewing %u",
			 line, c, s.total, s.free, s.leased, s.waiters, s.renewing, f->classes[c].count, fr, le, wa,
			 rn);
}

static bool grant_has(const struct grant_rec *g, uint32_t idx)
{
	for (unsigned i = 0; i < g->n; i++)
		if (g->idx[i] == idx)
			return true;
	return false;
}

static void test_attach_detach(void **state)
{
	struct fx *f = *state;
	struct lease_owner *a = attach(f, 1), *b = attach(f, 1), *c = attach(f, 2);

	assert_int_equal(a->uid, 1);
	assert_int_equal(a->gid, 101);
	assert_int_equal(a->pid, 1001);
	assert_non_null(a->acct);
	assert_ptr_equal(a->acct, b->acct); /* one account per uid */
	assert_ptr_not_equal(a->acct, c->acct);
	assert_int_equal(a->nleases, 0);
	assert_true(a->leased_bytes == 0);
	assert_null(a->req);
	assert_null(lease_owner_next(a, NULL));

	lease_owner_detach(f->lt, a);
	assert_null(a->acct);
	lease_owner_detach(f->lt, a); /* a second detach is a no-op */
	assert_null(a->acct);

	/* the uid's other connection still works */
	acq_now(f, b, "a", 1);
	assert_stats(f, CLASS_A, NA - 1, 1, 0, 0);
	lease_owner_detach(f->lt, b);
	assert_stats(f, CLASS_A, NA, 0, 0, 0);
	assert_int_equal(lease_counters(f->lt)->disconnect_releases, 1);
}

static void test_grant_n_at_once(void **state)
{
	struct fx *f = *state;
	struct lease_owner *a = attach(f, 1);
	const struct grant_rec *g;
	uint64_t ids[5], before_rt = realtime_ns(), after_rt;
	unsigned n = 0;

	g = acq_now(f, a, "a", 3);
	after_rt = realtime_ns();
	for (unsigned i = 0; i < 3; i++) {
		assert_true(g->idx[i] < NA); /* class a's buffers */
		for (unsigned j = 0; j < i; j++) {
			assert_true(g->ids[i] != g->ids[j]);
			assert_true(g->idx[i] != g->idx[j]);
		}
		ids[n++] = g->ids[i];
	}
	assert_int_equal(a->nleases, 3);
	assert_true(a->leased_bytes == 6 * MiB);
	assert_stats(f, CLASS_A, 1, 3, 0, 0);
	assert_stats(f, CLASS_B, NB, 0, 0, 0);

	/* the owner's lease list holds the same leases */
	unsigned seen = 0;

	for (struct lease_slot *s = NULL; (s = lease_owner_next(a, s)); seen++) {
		bool found = false;

		for (unsigned i = 0; i < 3; i++)
			found |= lease_slot_id(s) == g->ids[i] && lease_slot_buffer(s)->index == g->idx[i];
		assert_true(found);
		assert_int_equal(lease_slot_buffer(s)->class_index, CLASS_A);
		assert_true(lease_slot_since(s) >= before_rt && lease_slot_since(s) <= after_rt);
	}
	assert_int_equal(seen, 3);

	g = acq_now(f, a, "b", 2);
	for (unsigned i = 0; i < 2; i++) {
		assert_true(g->idx[i] >= NA && g->idx[i] < NA + NB);
		for (unsigned j = 0; j < n; j++)
			assert_true(g->ids[i] != ids[j]);
		ids[n++] = g->ids[i];
	}
	assert_true(g->ids[0] != g->ids[1]);
	assert_int_equal(a->nleases, 5);
	assert_true(a->leased_bytes == 6 * MiB + 128 * MiB);
	assert_stats(f, CLASS_B, 0, 2, 0, 0);

	/* every id works with lease_release, all in one call */
	assert_int_equal(rel(f, a, ids, n), 0);
	assert_int_equal(a->nleases, 0);
	assert_true(a->leased_bytes == 0);
	assert_null(lease_owner_next(a, NULL));
	assert_stats(f, CLASS_A, NA, 0, 0, 0);
	assert_stats(f, CLASS_B, NB, 0, 0, 0);
	assert_true(lease_counters(f->lt)->releases == 5);
	assert_true(lease_counters(f->lt)->grants == 2);

	/* and are dead afterwards */
	assert_int_equal(rel(f, a, &ids[0], 1), -EINVAL);
	assert_int_equal(f->nfails, 0);
	assert_int_equal(f->nrenews, 0);
}

static void test_lease_ids_unique(void **state)
{
	struct fx *f = *state;
	struct lease_owner *a = attach(f, 1);
	uint64_t seen[16];

	for (unsigned k = 0; k < 16; k++) {
		const struct grant_rec *g = acq_now(f, a, "a", 1);

		/* the same warm buffer every time, under a new id */
		assert_int_equal(g->idx[0], f->grants[0].idx[0]);
		seen[k] = g->ids[0];
		for (unsigned j = 0; j < k; j++) {
			assert_true(seen[j] != seen[k]);
			/* an old id of the same buffer no longer releases it */
			assert_int_equal(rel(f, a, &seen[j], 1), -EINVAL);
			assert_int_equal(a->nleases, 1);
		}
		assert_int_equal(rel(f, a, &seen[k], 1), 0);
		assert_int_equal(a->nleases, 0);
	}
}

/*
 * A grant still queued (its GRANT not sent) cannot be released, even by its holder with the
 * right id: otherwise the buffer could be renewed and granted to another uid while the first
 * grant waits in the reply queue. And ids are not a counter: a later id is not the earlier + 1.
 */
static void test_undelivered_not_releasable(void **state)
{
	struct fx *f = *state;
	struct lease_owner *a = attach(f, 1), *b = attach(f, 2);
	uint64_t id, id2;

	f->hold_delivery = true;
	id = acq_now(f, a, "a", 1)->ids[0];
	assert_int_equal(rel(f, a, &id, 1), -EINVAL);
	assert_int_equal(a->nleases, 1);
	/* nobody else can get it meanwhile */
	assert_int_equal(lease_acquire(f->lt, b, "a", NA, 0, 0, f->text, sizeof(f->text)), -EAGAIN);
	lease_slot_delivered(f->undelivered[0]);
	assert_int_equal(rel(f, a, &id, 1), 0);
	f->hold_delivery = false;
	id2 = acq_now(f, a, "a", 1)->ids[0];
	assert_true((uint32_t)id2 == (uint32_t)id); /* the same warm buffer */
	assert_true(id2 >> 32 != (id >> 32) + 1 && id2 != id);
	assert_int_equal(rel(f, a, &id2, 1), 0);
}

static void test_release_foreign_or_twice(void **state)
{
	struct fx *f = *state;
	struct lease_owner *a = attach(f, 1), *b = attach(f, 1); /* same uid: ownership is per connection */
	uint64_t ia0, ia1, ib;
	const struct grant_rec *g;

	g = acq_now(f, a, "a", 2);
	ia0 = g->ids[0];
	ia1 = g->ids[1];
	ib = acq_now(f, b, "a", 1)->ids[0];

	const struct {
		uint64_t ids[3];
		unsigned n;
	} bad[] = {
		{ { ib }, 1 }, /* b's lease */
		{ { ia0, ib }, 2 }, /* one good, one foreign */
		{ { ia0, ia0 }, 2 }, /* twice */
		{ { ia1, ia0, ia1 }, 3 }, /* twice, not adjacent */
		{ { 0 }, 1 },
		{ { UINT64_MAX }, 1 },
		{ { ia0 ^ (UINT64_C(1) << 32) }, 1 }, /* right buffer, wrong generation */
		{ { ia0, ia1 + 1 }, 2 },
	};

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		int r = rel(f, a, bad[i].ids, bad[i].n);

		if (r != -EINVAL)
			fail_msg("case %zu: release returned %d, want -EINVAL", i, r);
		assert_true(f->text[0] != '\0');
		/* nothing released */
		assert_int_equal(a->nleases, 2);
		assert_int_equal(b->nleases, 1);
		assert_stats(f, CLASS_A, 1, 3, 0, 0);
	}
	assert_true(lease_counters(f->lt)->releases == 0);
	/* b's lease is b's to release */
	assert_int_equal(rel(f, b, &ib, 1), 0);
	uint64_t both[] = { ia1, ia0 };

	assert_int_equal(rel(f, a, both, 2), 0);
	assert_stats(f, CLASS_A, NA, 0, 0, 0);
	assert_true(lease_counters(f->lt)->releases == 3);
}

static void test_acquire_errors(void **state)
{
	struct fx *f = *state;
	struct lease_owner *h = attach(f, 2), *a = attach(f, 2), *c = attach(f, 3), *d = attach(f, 3);

	assert_int_equal(acq(f, a, "nope", 1, -1, T0), -ENOENT);
	assert_non_null(strstr(f->text, "nope"));
	assert_int_equal(acq(f, a, "", 1, -1, T0), -ENOENT);
	assert_int_equal(acq(f, a, "a", 0, -1, T0), -EINVAL);
	assert_true(f->text[0] != '\0');
	assert_int_equal(acq(f, a, "a", NA + 1, -1, T0), -E2BIG);
	assert_true(f->text[0] != '\0');
	assert_int_equal(acq(f, a, "b", NB + 1, 0, T0), -E2BIG);
	assert_null(a->req);
	assert_stats(f, CLASS_A, NA, 0, 0, 0);
	assert_stats(f, CLASS_B, NB, 0, 0, 0);
	assert_int_equal(f->ngrants + f->nfails + f->nrenews, 0);

	/* -EBUSY: a second acquire while the first waits, even for another class with room */
	acq_now(f, h, "a", NA);
	acq_wait(f, a, "a", 1, -1, T0);
	struct lease_req *pending = a->req;

	assert_int_equal(acq(f, a, "b", 1, 0, T0), -EBUSY);
	assert_true(f->text[0] != '\0');
	assert_int_equal(acq(f, a, "a", 1, -1, T0), -EBUSY);
	assert_ptr_equal(a->req, pending);
	assert_stats(f, CLASS_A, 0, NA, 1, 0);
	assert_stats(f, CLASS_B, NB, 0, 0, 0);

	/* -EAGAIN: nothing free and timeout 0; nothing queued */
	assert_int_equal(acq(f, c, "a", 1, 0, T0), -EAGAIN);
	assert_true(f->text[0] != '\0');
	assert_null(c->req);
	assert_stats(f, CLASS_A, 0, NA, 1, 0);

	/* -EAGAIN: some free but too few; nothing reserved, nothing renewed */
	acq_now(f, d, "b", 1);
	assert_int_equal(acq(f, c, "b", 2, 0, T0), -EAGAIN);
	assert_null(c->req);
	assert_stats(f, CLASS_B, 1, 1, 0, 0);
	assert_int_equal(f->nrenews, 0);
	acq_now(f, c, "b", 1); /* the failed one left the free buffer free */
	assert_stats(f, CLASS_B, 0, 2, 0, 0);

	assert_int_equal(f->nfails, 0);
	/* none of these is a limit denial */
	assert_true(lease_counters(f->lt)->denials == 0);
}

static void test_fifo_head_blocks_later(void **state)
{
	struct fx *f = *state;
	/* one uid, so no renewal gets in the way */
	struct lease_owner *a = attach(f, 1), *b = attach(f, 1), *c = attach(f, 1), *d = attach(f, 1);
	const struct grant_rec *ga = acq_now(f, a, "a", NA);
	uint64_t ida[NA];

	memcpy(ida, ga->ids, sizeof(ida));
	acq_wait(f, b, "a", 3, -1, T0);
	acq_wait(f, c, "a", 1, -1, T0);
	assert_stats(f, CLASS_A, 0, NA, 2, 0);

	/* one free: c would fit, but b is first */
	assert_int_equal(rel(f, a, &ida[0], 1), 0);
	assert_int_equal(f->ngrants, 1);
	assert_non_null(b->req);
	assert_non_null(c->req);
	assert_stats(f, CLASS_A, 1, NA - 1, 2, 0);
	/* a try-once acquire does not jump the queue either */
	assert_int_equal(acq(f, d, "a", 1, 0, T0), -EAGAIN);
	assert_stats(f, CLASS_A, 1, NA - 1, 2, 0);

	/* three free: b gets them, c still waits */
	assert_int_equal(rel(f, a, &ida[1], 2), 0);
	assert_int_equal(f->ngrants, 2);
	assert_ptr_equal(f->grants[1].owner, b);
	assert_int_equal(f->grants[1].n, 3);
	assert_null(b->req);
	assert_non_null(c->req);
	assert_stats(f, CLASS_A, 0, NA, 1, 0);

	/* b releases: c is served, with the buffer b released last (warmest) */
	uint64_t idb[3];
	uint32_t last = f->grants[1].idx[2];

	memcpy(idb, f->grants[1].ids, sizeof(idb));
	assert_int_equal(rel(f, b, idb, 3), 0);
	assert_int_equal(f->ngrants, 3);
	assert_ptr_equal(f->grants[2].owner, c);
	assert_int_equal(f->grants[2].n, 1);
	assert_int_equal(f->grants[2].idx[0], last);
	assert_null(c->req);
	assert_stats(f, CLASS_A, 2, 2, 0, 0);
	assert_int_equal(f->nrenews, 0);
	assert_int_equal(f->nfails, 0);
}

static void test_all_or_nothing(void **state)
{
	struct fx *f = *state;
	struct lease_owner *a = attach(f, 1), *b = attach(f, 2);
	uint64_t ida[NA];

	memcpy(ida, acq_now(f, a, "a", NA)->ids, sizeof(ida));
	acq_wait(f, b, "a", NA, -1, T0);
	for (unsigned k = 1; k < NA; k++) {
		assert_int_equal(rel(f, a, &ida[k - 1], 1), 0);
		/* no partial reservation: every released buffer stays free */
		assert_stats(f, CLASS_A, k, NA - k, 1, 0);
		assert_int_equal(f->nrenews, 0);
		assert_int_equal(f->ngrants, 1);
	}
	/* the last one: b takes all four, each needs renewal (uid 1 wrote them) */
	assert_int_equal(rel(f, a, &ida[NA - 1], 1), 0);
	assert_int_equal(f->nrenews, NA);
	assert_int_equal(f->ngrants, 1);
	assert_non_null(b->req);
	assert_stats(f, CLASS_A, 0, 0, 0, NA);
	for (unsigned k = 0; k < NA - 1; k++) {
		lease_renewed(f->lt, f->renews[k], 0);
		/* renewed ones are b's, not free, not yet leased */
		assert_stats(f, CLASS_A, 0, 0, 0, NA - 1 - k);
		assert_int_equal(f->ngrants, 1);
	}
	lease_renewed(f->lt, f->renews[NA - 1], 0);
	assert_int_equal(f->ngrants, 2);
	assert_ptr_equal(f->grants[1].owner, b);
	assert_int_equal(f->grants[1].n, NA);
	for (unsigned k = 0; k < NA; k++)
		assert_true(grant_has(&f->grants[1], f->renews[k]->index));
	assert_stats(f, CLASS_A, 0, NA, 0, 0);
	assert_true(lease_counters(f->lt)->renewals == NA);
}

static void test_timeouts(void **state)
{
	struct fx *f = *state;
	struct lease_owner *a = attach(f, 1), *b = attach(f, 1), *c = attach(f, 1), *d = attach(f, 1);
	struct lease_owner *fo = attach(f, 1), *g = attach(f, 1), *h = attach(f, 1);
	uint64_t ida[NA];

	assert_true(lease_next_deadline(f->lt) == UINT64_MAX);
	memcpy(ida, acq_now(f, a, "a", NA)->ids, sizeof(ida));
	acq_wait(f, b, "a", 2, 100, T0); /* T0 + 100 ms */
	acq_wait(f, c, "a", 1, 50, T0 + 10 * MS); /* T0 + 60 ms */
	acq_wait(f, d, "a", 1, -1, T0); /* never */
	acq_now(f, fo, "b", NB);
	acq_wait(f, g, "b", 1, 30, T0); /* T0 + 30 ms, another class */
	assert_true(lease_next_deadline(f->lt) == T0 + 30 * MS);

	lease_expire(f->lt, T0 + 30 * MS - 1);
	assert_int_equal(f->nfails, 0);
	lease_expire(f->lt, T0 + 30 * MS);
	assert_int_equal(f->nfails, 1);
	assert_ptr_equal(f->fails[0].owner, g);
	assert_int_equal(f->fails[0].err, -ETIMEDOUT);
	assert_non_null(strstr(f->fails[0].text, "\"b\""));
	assert_null(g->req);
	assert_stats(f, CLASS_B, 0, NB, 0, 0);
	assert_true(lease_next_deadline(f->lt) == T0 + 60 * MS);
	/* a timed-out connection may ask again */
	assert_int_equal(acq(f, g, "b", 1, 0, T0 + 30 * MS), -EAGAIN);

	/* one free: b (head) wants 2, so neither b nor those behind it get anything */
	assert_int_equal(rel(f, a, &ida[0], 1), 0);
	assert_int_equal(f->ngrants, 2);

	/* c times out behind b: d still waits behind b although one is free */
	lease_expire(f->lt, T0 + 60 * MS);
	assert_int_equal(f->nfails, 2);
	assert_ptr_equal(f->fails[1].owner, c);
	assert_int_equal(f->fails[1].err, -ETIMEDOUT);
	assert_true(f->fails[1].text[0] != '\0');
	assert_null(c->req);
	assert_stats(f, CLASS_A, 1, NA - 1, 2, 0);
	assert_int_equal(f->ngrants, 2);
	assert_true(lease_next_deadline(f->lt) == T0 + 100 * MS);

	/* b times out: d, now at the head, fits and is served right away */
	lease_expire(f->lt, T0 + 200 * MS);
	assert_int_equal(f->nfails, 3);
	assert_ptr_equal(f->fails[2].owner, b);
	assert_int_equal(f->fails[2].err, -ETIMEDOUT);
	assert_int_equal(f->ngrants, 3);
	assert_ptr_equal(f->grants[2].owner, d);
	assert_stats(f, CLASS_A, 0, NA, 0, 0);
	assert_true(lease_next_deadline(f->lt) == UINT64_MAX);

	/* a negative timeout never expires */
	acq_wait(f, h, "a", 1, -1, T0);
	assert_true(lease_next_deadline(f->lt) == UINT64_MAX);
	lease_expire(f->lt, UINT64_MAX - 1);
	assert_int_equal(f->nfails, 3);
	assert_non_null(h->req);
	assert_stats(f, CLASS_A, 0, NA, 1, 0);
	assert_true(lease_counters(f->lt)->timeouts == 3);
}

/*
 * An event loop that comes late to the deadlines (a busy machine) must not time out a waiter
 * that the head's departure would have served: the head wants 2 of the one free buffer, the
 * one behind it wants 1, and both deadlines have passed when lease_expire runs. The head goes;
 * the second, now at the head, is served, not failed.
 */
static void test_late_expiry_serves_what_fits(void **state)
{
	struct fx *f = *state;
	struct lease_owner *a = attach(f, 1), *b = attach(f, 1), *c = attach(f, 1);
	uint64_t ida[NA];

	memcpy(ida, acq_now(f, a, "a", NA)->ids, sizeof(ida));
	acq_wait(f, b, "a", 2, 100, T0); /* T0 + 100 ms */
	acq_wait(f, c, "a", 1, 110, T0); /* T0 + 110 ms */
	assert_int_equal(rel(f, a, &ida[0], 1), 0);
	assert_int_equal(f->ngrants, 1); /* b, at the head, wants 2: nothing for c yet */
	lease_expire(f->lt, T0 + 500 * MS);
	assert_int_equal(f->nfails, 1);
	assert_ptr_equal(f->fails[0].owner, b);
	assert_int_equal(f->fails[0].err, -ETIMEDOUT);
	assert_int_equal(f->ngrants, 2);
	assert_ptr_equal(f->grants[1].owner, c);
	assert_null(c->req);
	assert_true(lease_next_deadline(f->lt) == UINT64_MAX);
}

/*
 * A finite timeout must not wrap around: timeout_ms comes from the wire as an int64_t, and
 * INT64_MAX ms * 1e6 overflows 64 bits to 2^64 - 1e6, i.e. a deadline 1 ms in the past.
 */
static void test_huge_timeout_does_not_wrap(void **state)
{
	struct fx *f = *state;
	struct lease_owner *a = attach(f, 1), *b = attach(f, 1), *c = attach(f, 1);

	acq_now(f, a, "a", NA);
	acq_wait(f, b, "a", 1, INT64_MAX, T0);
	acq_wait(f, c, "a", 1, 18446744073710 /* ~585 years, wraps to 0.45 ms */, T0);
	if (lease_next_deadline(f->lt) < T0 + 1000 * MS)
		fail_msg("deadline of a timeout of INT64_MAX ms is %" PRIu64 " ns, now is %" PRIu64 " ns",
			 lease_next_deadline(f->lt), T0);
	lease_expire(f->lt, T0 + 1000 * MS);
	assert_int_equal(f->nfails, 0);
	assert_non_null(b->req);
	assert_non_null(c->req);
	assert_stats(f, CLASS_A, 0, NA, 2, 0);
}

static void test_byte_limit(void **state)
{
	struct fx *f = *state;
	struct lease_owner *a, *a2, *a3, *b;

	make_table(f, 6 * MiB, 0); /* three buffers of class a */
	a = attach(f, 1);
	a2 = attach(f, 1);
	b = attach(f, 2);

	/* over the limit: refused at once, even when the caller would wait forever */
	assert_int_equal(acq(f, a, "a", 4, -1, T0), -EDQUOT);
	assert_non_null(strstr(f->text, "max_bytes_per_uid"));
	assert_null(a->req);
	assert_int_equal(acq(f, a, "b", 1, -1, T0), -EDQUOT);
	assert_stats(f, CLASS_A, NA, 0, 0, 0);
	assert_true(lease_counters(f->lt)->denials == 2);

	/* two connections of one uid share the limit */
	acq_now(f, a, "a", 2);
	assert_int_equal(acq(f, a2, "a", 2, -1, T0), -EDQUOT);
	acq_now(f, a2, "a", 1);
	assert_int_equal(acq(f, a2, "a", 1, -1, T0), -EDQUOT); /* one is free, but not for uid 1 */
	assert_null(a2->req);
	assert_stats(f, CLASS_A, 1, 3, 0, 0);
	/* another uid has its own */
	acq_now(f, b, "a", 1);
	assert_true(lease_counters(f->lt)->denials == 4);

	/* refunded on release */
	rel_all(f, a);
	acq_now(f, a2, "a", 2); /* uid 1's own buffers back, no renewal */
	assert_int_equal(acq(f, a2, "a", 1, -1, T0), -EDQUOT);

	/* refunded on detach */
	lease_owner_detach(f->lt, a2);
	assert_int_equal(lease_counters(f->lt)->disconnect_releases, 3);
	a3 = attach(f, 1);
	acq_now(f, a3, "a", 3);
	assert_int_equal(f->nrenews, 0);
	assert_stats(f, CLASS_A, 0, NA, 0, 0);
}

static void test_byte_limit_refund_on_timeout(void **state)
{
	struct fx *f = *state;
	struct lease_owner *a, *a2, *b;

	make_table(f, 6 * MiB, 0);
	a = attach(f, 1);
	a2 = attach(f, 1);
	b = attach(f, 2);
	acq_now(f, b, "a", 3);
	acq_wait(f, a, "a", 3, 10, T0);
	lease_expire(f->lt, T0 + 10 * MS);
	assert_int_equal(f->nfails, 1);
	assert_int_equal(f->fails[0].err, -ETIMEDOUT);
	/* the whole limit is there again */
	acq_wait(f, a, "a", 3, -1, T0 + 10 * MS);
	rel_all(f, b);
	/* a is served with the clean one and two of b's, renewed first */
	assert_int_equal(f->nrenews, 2);
	for (unsigned i = 0; i < 2; i++)
		lease_renewed(f->lt, f->renews[i], 0);
	assert_int_equal(f->ngrants, 2);
	assert_ptr_equal(f->grants[1].owner, a);
	assert_int_equal(acq(f, a2, "a", 1, -1, T0), -EDQUOT);
}

/* The limit holds when a waiter is served, not only when it asks. */
static void test_byte_limit_at_grant_time(void **state)
{
	struct fx *f = *state;
	struct lease_owner *a, *a2, *a3, *a4, *b;

	make_table(f, 6 * MiB, 0);
	a = attach(f, 1);
	a2 = attach(f, 1);
	a3 = attach(f, 1);
	a4 = attach(f, 1);
	b = attach(f, 2);
	acq_now(f, b, "a", 3);
	acq_now(f, a3, "a", 1); /* uid 1: 2 MiB held */
	acq_wait(f, a, "a", 1, -1, T0); /* 2 MiB: fits */
	acq_wait(f, a2, "a", 2, -1, T0); /* 4 MiB: fine when asked, too much once a has its own */
	acq_wait(f, a4, "a", 1, -1, T0); /* 2 MiB: still fits after a */
	rel_all(f, b);
	assert_int_equal(f->nfails, 1);
	assert_ptr_equal(f->fails[0].owner, a2);
	assert_int_equal(f->fails[0].err, -EDQUOT);
	assert_non_null(strstr(f->fails[0].text, "max_bytes_per_uid"));
	assert_null(a2->req);
	assert_true(lease_counters(f->lt)->denials == 1);
	/* a and a4 each got one of b's buffers to renew; one stays free */
	assert_int_equal(f->nrenews, 2);
	assert_stats(f, CLASS_A, 1, 1, 0, 2);
	for (unsigned i = 0; i < 2; i++)
		lease_renewed(f->lt, f->renews[i], 0);
	assert_int_equal(f->ngrants, 4);
	assert_ptr_equal(f->grants[2].owner, a);
	assert_ptr_equal(f->grants[3].owner, a4);
	/* uid 1 is at its limit now */
	assert_int_equal(acq(f, a2, "a", 1, -1, T0), -EDQUOT);
	assert_stats(f, CLASS_A, 1, 3, 0, 0);
}

static void test_byte_limit_refund_on_renew_failure(void **state)
{
	struct fx *f = *state;
	struct lease_owner *a, *a2, *b;

	make_table(f, 6 * MiB, 0);
	a = attach(f, 1);
	a2 = attach(f, 1);
	b = attach(f, 2);
	acq_now(f, b, "a", 3); /* 0, 1, 2 */
	rel_all(f, b); /* dirty for uid 2, 2 warmest */
	/* a: the clean one (3), then two of b's to renew (2 and 1) */
	assert_int_equal(acq(f, a, "a", 3, -1, T0), 0);
	assert_int_equal(f->nrenews, 2);
	assert_int_equal(f->renews[0]->index, 2);
	assert_int_equal(f->renews[1]->index, 1);
	assert_stats(f, CLASS_A, 1, 0, 0, 2);

	lease_renewed(f->lt, f->renews[1], -ENOMEM);
	assert_int_equal(f->nfails, 1);
	assert_ptr_equal(f->fails[0].owner, a);
	assert_int_equal(f->fails[0].err, -ENOMEM);
	assert_null(a->req);
	/* buffer 2 is still with the recycler, for nobody: renewing, not yet free */
	assert_stats(f, CLASS_A, NA - 1, 0, 0, 1);
	lease_renewed(f->lt, f->renews[0], 0);
	assert_stats(f, CLASS_A, NA, 0, 0, 0);
	assert_int_equal(f->ngrants, 1);

	/* the full limit again: clean 3 and 2, then b's 0 renewed (the broken 1 last) */
	assert_int_equal(acq(f, a, "a", 3, -1, T0), 0);
	assert_int_equal(f->nrenews, 3);
	assert_int_equal(f->renews[2]->index, 0);
	lease_renewed(f->lt, f->renews[2], 0);
	assert_int_equal(f->ngrants, 2);
	assert_ptr_equal(f->grants[1].owner, a);
	assert_true(grant_has(&f->grants[1], 3) && grant_has(&f->grants[1], 2) && grant_has(&f->grants[1], 0));
	assert_int_equal(acq(f, a2, "a", 1, -1, T0), -EDQUOT);
}

static void test_connection_limit(void **state)
{
	struct fx *f = *state;
	struct lease_owner *a1, *a2, *x, *b;
	char text[PROTO_TEXT_MAX] = "";

	make_table(f, 0, 2);
	a1 = attach(f, 1);
	a2 = attach(f, 1);
	x = &f->own[f->nown++];
	assert_int_equal(lease_owner_attach(f->lt, x, 1, 1, 99, text, sizeof(text)), -EUSERS);
	assert_non_null(strstr(text, "max_connections_per_uid"));
	assert_null(x->acct); /* not attached: detach is a no-op */
	lease_owner_detach(f->lt, x);
	assert_true(lease_counters(f->lt)->denials == 1);
	b = attach(f, 2); /* another uid is not affected */
	(void)b;

	lease_owner_detach(f->lt, a1);
	assert_int_equal(lease_owner_attach(f->lt, x, 1, 1, 99, text, sizeof(text)), 0);
	assert_int_equal(lease_owner_attach(f->lt, a1, 1, 1, 98, text, sizeof(text)), -EUSERS);
	assert_true(lease_counters(f->lt)->denials == 2);

	/* every connection of the uid gone: its account starts over */
	lease_owner_detach(f->lt, a2);
	lease_owner_detach(f->lt, x);
	assert_int_equal(lease_owner_attach(f->lt, a1, 1, 1, 98, text, sizeof(text)), 0);
	assert_int_equal(lease_owner_attach(f->lt, a2, 1, 1, 97, text, sizeof(text)), 0);
	assert_int_equal(lease_owner_attach(f->lt, x, 1, 1, 99, text, sizeof(text)), -EUSERS);
}

static void test_same_uid_gets_warm_buffer(void **state)
{
	struct fx *f = *state;
	struct lease_owner *a = attach(f, 1), *a2 = attach(f, 1);
	const struct grant_rec *g = acq_now(f, a, "a", 2);
	uint64_t ids[2] = { g->ids[0], g->ids[1] };
	uint32_t idx[2] = { g->idx[0], g->idx[1] };

	assert_int_equal(rel(f, a, &ids[0], 1), 0);
	assert_int_equal(rel(f, a, &ids[1], 1), 0);
	/* uid 1 gets its own used buffers back before clean ones, most recently released first */
	assert_int_equal(acq_now(f, a2, "a", 1)->idx[0], idx[1]);
	assert_int_equal(acq_now(f, a, "a", 1)->idx[0], idx[0]);
	assert_int_equal(f->nrenews, 0);
	assert_stats(f, CLASS_A, 2, 2, 0, 0);
}

/* A warm buffer whose pages a holder punched out is renewed, not handed back as it is. */
static void test_punched_buffer_renewed(void **state)
{
	struct fx *f = *state;
	struct lease_owner *a = attach(f, 1);
	const struct grant_rec *g = acq_now(f, a, "a", 1);
	uint64_t id = g->ids[0];
	uint32_t idx = g->idx[0];

	assert_int_equal(rel(f, a, &id, 1), 0);
	f->punched[idx] = true;
	assert_int_equal(lease_acquire(f->lt, a, "a", 1, 0, 0, f->text, sizeof(f->text)), 0);
	/* not the warm path: fresh pages for some buffer, never the punched one as it is */
	assert_true(f->nrenews == 1 || f->grants[f->ngrants - 1].idx[0] != idx);
	if (f->nrenews == 1) {
		f->punched[f->renews[0]->index] = false;
		lease_renewed(f->lt, f->renews[0], 0);
	}
	assert_int_equal(lease_counters(f->lt)->punched, 1);
}

static void test_other_uid_needs_renewal(void **state)
{
	struct fx *f = *state;
	struct lease_owner *a = attach(f, 1), *b = attach(f, 2);

	acq_now(f, a, "a", NA);
	rel_all(f, a);
	uint32_t warmest = f->grants[0].idx[NA - 1];

	/* timeout 0 is fine: the buffers are free, they only need renewal */
	assert_int_equal(acq(f, b, "a", 1, 0, T0), 0);
	assert_int_equal(f->ngrants, 1);
	assert_int_equal(f->nrenews, 1);
	assert_int_equal(f->renews[0]->index, warmest);
	assert_non_null(b->req);
	assert_stats(f, CLASS_A, NA - 1, 0, 0, 1);
	assert_int_equal(acq(f, b, "a", 1, 0, T0), -EBUSY);

	lease_renewed(f->lt, f->renews[0], 0);
	assert_int_equal(f->ngrants, 2);
	assert_ptr_equal(f->grants[1].owner, b);
	assert_int_equal(f->grants[1].idx[0], warmest);
	assert_null(b->req);
	assert_stats(f, CLASS_A, NA - 1, 1, 0, 0);
	assert_true(lease_counters(f->lt)->renewals == 1);
	assert_int_equal(f->nfails, 0);
}

static void test_clean_preferred_over_dirty(void **state)
{
	struct fx *f = *state;
	struct lease_owner *a = attach(f, 1), *b = attach(f, 2), *c = attach(f, 3);
	const struct grant_rec *g = acq_now(f, a, "a", 2);
	uint32_t ia[2] = { g->idx[0], g->idx[1] };

	rel_all(f, a);
	/* b gets the two clean ones at once: no renewal when clean ones suffice */
	g = acq_now(f, b, "a", 2);
	assert_false(grant_has(g, ia[0]));
	assert_false(grant_has(g, ia[1]));
	/* c needs one of a's */
	assert_int_equal(acq(f, c, "a", 1, 0, T0), 0);
	assert_int_equal(f->nrenews, 1);
	assert_true(f->renews[0]->index == ia[0] || f->renews[0]->index == ia[1]);
	lease_renewed(f->lt, f->renews[0], 0);
	assert_int_equal(f->ngrants, 3);
	assert_ptr_equal(f->grants[2].owner, c);
}

static void test_detach_returns_leases(void **state)
{
	struct fx *f = *state;
	struct lease_owner *a = attach(f, 1);

	acq_now(f, a, "a", 3);
	acq_now(f, a, "b", 1);
	assert_stats(f, CLASS_A, 1, 3, 0, 0);
	assert_stats(f, CLASS_B, 1, 1, 0, 0);
	lease_owner_detach(f->lt, a);
	assert_null(a->acct);
	assert_stats(f, CLASS_A, NA, 0, 0, 0);
	assert_stats(f, CLASS_B, NB, 0, 0, 0);
	assert_true(lease_counters(f->lt)->disconnect_releases == 4);
	assert_true(lease_counters(f->lt)->releases == 0);
	assert_int_equal(f->nfails, 0);
}

static void test_detach_waiting(void **state)
{
	struct fx *f = *state;
	struct lease_owner *a = attach(f, 1), *b = attach(f, 1), *c = attach(f, 1), *d = attach(f, 1);
	uint64_t ida[NA];

	memcpy(ida, acq_now(f, a, "a", NA)->ids, sizeof(ida));
	acq_wait(f, b, "a", NA, -1, T0);
	acq_wait(f, c, "a", 1, 10, T0);
	acq_wait(f, d, "a", 1, -1, T0);
	assert_int_equal(rel(f, a, &ida[0], 1), 0);
	assert_int_equal(f->ngrants, 1);
	/* a waiter in the middle leaves: no effect on the others, its deadline is gone */
	lease_owner_detach(f->lt, c);
	assert_stats(f, CLASS_A, 1, NA - 1, 2, 0);
	assert_true(lease_next_deadline(f->lt) == UINT64_MAX);
	/* the head leaves: the next one is served at once */
	lease_owner_detach(f->lt, b);
	assert_int_equal(f->ngrants, 2);
	assert_ptr_equal(f->grants[1].owner, d);
	assert_stats(f, CLASS_A, 0, NA, 0, 0);
	assert_int_equal(f->nfails, 0); /* nobody is told about its own disconnect */
}

static void test_detach_while_renewing(void **state)
{
	struct fx *f = *state;
	struct lease_owner *a = attach(f, 1), *b = attach(f, 2), *c = attach(f, 3), *d = attach(f, 4);

	acq_now(f, a, "a", NA);
	rel_all(f, a);
	assert_int_equal(acq(f, b, "a", 2, -1, T0), 0);
	assert_int_equal(f->nrenews, 2);
	struct pool_buffer *r0 = f->renews[0], *r1 = f->renews[1];

	acq_wait(f, c, "a", 3, -1, T0);
	lease_owner_detach(f->lt, b);
	/* the two with the recycler belong to nobody now: renewing, free only once back */
	assert_stats(f, CLASS_A, NA - 2, 0, 1, 2);
	assert_int_equal(f->ngrants, 1);

	/* one comes back clean: c can be served now (it plus two of a's to renew) */
	lease_renewed(f->lt, r0, 0);
	assert_int_equal(f->ngrants, 1);
	assert_int_equal(f->nrenews, 4);
	assert_true(f->renews[2] != r1 && f->renews[3] != r1 && f->renews[2] != r0 && f->renews[3] != r0);
	assert_stats(f, CLASS_A, 0, 0, 0, 3);
	/* the other one comes back for nobody: free and clean */
	lease_renewed(f->lt, r1, 0);
	assert_stats(f, CLASS_A, 1, 0, 0, 2);
	lease_renewed(f->lt, f->renews[2], 0);
	lease_renewed(f->lt, f->renews[3], 0);
	assert_int_equal(f->ngrants, 2);
	assert_ptr_equal(f->grants[1].owner, c);
	assert_true(grant_has(&f->grants[1], r0->index));
	assert_stats(f, CLASS_A, 1, 3, 0, 0);
	/* r1 is clean: another uid gets it without a renewal */
	assert_int_equal(acq_now(f, d, "a", 1)->idx[0], r1->index);
	for (unsigned i = 0; i < f->ngrants; i++)
		assert_ptr_not_equal(f->grants[i].owner, b);
	assert_int_equal(f->nfails, 0);
}

static void test_renew_failure(void **state)
{
	struct fx *f = *state;
	struct lease_owner *a = attach(f, 1), *b = attach(f, 2), *c = attach(f, 3);
	uint32_t broken = acq_now(f, a, "a", 1)->idx[0];

	rel_all(f, a);
	/* b: three clean ones and a's, which needs renewal */
	assert_int_equal(acq(f, b, "a", NA, -1, T0), 0);
	assert_int_equal(f->nrenews, 1);
	assert_int_equal(f->renews[0]->index, broken);
	assert_stats(f, CLASS_A, 0, 0, 0, 1);

	lease_renewed(f->lt, f->renews[0], -ENOMEM);
	assert_int_equal(f->nfails, 1);
	assert_ptr_equal(f->fails[0].owner, b);
	assert_int_equal(f->fails[0].err, -ENOMEM);
	assert_non_null(strstr(f->fails[0].text, "\"a\""));
	assert_null(b->req);
	assert_int_equal(f->ngrants, 1);
	/* the three reserved ones are free again, and so is the broken one */
	assert_stats(f, CLASS_A, NA, 0, 0, 0);
	assert_true(lease_counters(f->lt)->renewals == 0);

	/* the broken one is the last choice */
	const struct grant_rec *g = acq_now(f, b, "a", NA - 1);

	assert_false(grant_has(g, broken));
	/* and tried again when it is needed */
	assert_int_equal(acq(f, c, "a", 1, 0, T0), 0);
	assert_int_equal(f->nrenews, 2);
	assert_int_equal(f->renews[1]->index, broken);
	lease_renewed(f->lt, f->renews[1], 0);
	assert_int_equal(f->ngrants, 3);
	assert_ptr_equal(f->grants[2].owner, c);
	assert_int_equal(f->grants[2].idx[0], broken);
	assert_stats(f, CLASS_A, 0, NA, 0, 0);
}

/*
 * A failed renewal gives the request's other buffers back: a waiter queued behind must be
 * served with them, as after any other event that frees buffers.
 */
static void test_renew_failure_serves_waiter(void **state)
{
	struct fx *f = *state;
	struct lease_owner *a = attach(f, 1), *b = attach(f, 2), *c = attach(f, 3);

	acq_now(f, a, "a", 1);
	rel_all(f, a);
	assert_int_equal(acq(f, b, "a", NA, -1, T0), 0);
	assert_int_equal(f->nrenews, 1);
	acq_wait(f, c, "a", 2, -1, T0);
	lease_renewed(f->lt, f->renews[0], -ENOMEM);
	assert_int_equal(f->nfails, 1);
	assert_ptr_equal(f->fails[0].owner, b);
	/* three clean buffers are free: c must not be left waiting */
	if (f->ngrants != 2 || c->req) {
		struct lease_class_stats st;

		lease_class_stats(f->lt, CLASS_A, &st);
		fail_msg("c still waits for 2 buffers while %u of %u are free (%u waiting)", st.free, st.total,
			 st.waiters);
	}
	assert_ptr_equal(f->grants[1].owner, c);
	assert_stats(f, CLASS_A, 2, 2, 0, 0);
}

/* Same with a renewal nobody waits for any more: a broken free buffer is still a buffer. */
static void test_orphan_renew_failure_serves_waiter(void **state)
{
	struct fx *f = *state;
	struct lease_owner *a = attach(f, 1), *b = attach(f, 2), *c = attach(f, 3);

	acq_now(f, a, "a", NA);
	rel_all(f, a);
	assert_int_equal(acq(f, b, "a", NA, -1, T0), 0);
	assert_int_equal(f->nrenews, NA);
	acq_wait(f, c, "a", 1, -1, T0);
	lease_owner_detach(f->lt, b);
	for (unsigned i = 0; i < NA; i++)
		lease_renewed(f->lt, f->renews[i], -ENOMEM);
	assert_int_equal(f->nfails, 0);
	/* four free (broken) buffers and a waiter: its renewal must be tried again */
	if (f->nrenews != NA + 1)
		fail_msg("c waits for 1 with %u buffers free and no renewal under way", NA);
	assert_stats(f, CLASS_A, NA - 1, 0, 0, 1);
	lease_renewed(f->lt, f->renews[NA], 0);
	assert_int_equal(f->ngrants, 2);
	assert_ptr_equal(f->grants[1].owner, c);
}

/* Renewals completed from inside ops->renew: the grant arrives before the call returns. */
static void test_sync_renew(void **state)
{
	struct fx *f = *state;
	struct lease_owner *a = attach(f, 1), *b = attach(f, 2), *c = attach(f, 3), *d = attach(f, 4);

	f->renew_sync = true;
	acq_now(f, a, "a", NA);
	rel_all(f, a);

	/* from lease_acquire */
	assert_int_equal(acq(f, b, "a", 2, 0, T0), 0);
	assert_int_equal(f->nrenews, 2);
	assert_int_equal(f->ngrants, 2);
	assert_ptr_equal(f->grants[1].owner, b);
	assert_int_equal(f->grants[1].n, 2);
	assert_null(b->req);
	assert_stats(f, CLASS_A, 2, 2, 0, 0);

	/* from lease_release, through the queue */
	acq_wait(f, c, "a", 3, -1, T0);
	rel_all(f, b);
	assert_int_equal(f->nrenews, 5);
	assert_int_equal(f->ngrants, 3);
	assert_ptr_equal(f->grants[2].owner, c);
	assert_int_equal(f->grants[2].n, 3);
	assert_null(c->req);
	assert_stats(f, CLASS_A, 1, 3, 0, 0);
	rel_all(f, c);

	/* failing at once: the request is gone after the first renewal, the others still run */
	f->renew_err = -ENOMEM;
	assert_int_equal(acq(f, d, "a", NA, 0, T0), 0);
	assert_int_equal(f->nrenews, 5 + NA);
	assert_int_equal(f->nfails, 1);
	assert_ptr_equal(f->fails[0].owner, d);
	assert_int_equal(f->fails[0].err, -ENOMEM);
	assert_null(d->req);
	assert_stats(f, CLASS_A, NA, 0, 0, 0);

	/* and working again */
	f->renew_err = 0;
	assert_int_equal(acq(f, d, "a", NA, 0, T0), 0);
	assert_int_equal(f->ngrants, 4);
	assert_ptr_equal(f->grants[3].owner, d);
	assert_int_equal(f->grants[3].n, NA);
	assert_stats(f, CLASS_A, 0, NA, 0, 0);
	assert_true(lease_counters(f->lt)->renewals == 5 + NA);
}

static void test_counters(void **state)
{
	struct fx *f = *state;
	struct lease_owner *a, *a2, *b, *c, *x;
	char text[PROTO_TEXT_MAX];
	const struct lease_counters *lc;

	make_table(f, 4 * MiB, 2); /* two buffers of class a per uid */
	lc = lease_counters(f->lt);
	assert_true(lc->acquires == 0 && lc->grants == 0 && lc->releases == 0 && lc->timeouts == 0 &&
		    lc->denials == 0 && lc->renewals == 0 && lc->disconnect_releases == 0);
	a = attach(f, 1);
	a2 = attach(f, 1);
	x = &f->own[f->nown++];
	assert_int_equal(lease_owner_attach(f->lt, x, 1, 1, 1, text, sizeof(text)), -EUSERS); /* denial 1 */
	b = attach(f, 2);
	c = attach(f, 3);
	acq_now(f, a, "a", 1); /* acquire 1, grant 1 */
	assert_int_equal(acq(f, a2, "a", 2, -1, T0), -EDQUOT); /* acquire 2, denial 2 */
	assert_int_equal(acq(f, a2, "zz", 1, -1, T0), -ENOENT); /* acquire 3 */
	acq_now(f, b, "a", 2); /* acquire 4, grant 2 */
	acq_now(f, c, "a", 1); /* acquire 5, grant 3 */
	acq_wait(f, a2, "a", 1, -1, T0); /* acquire 6 */
	acq_wait(f, a, "a", 1, -1, T0); /* acquire 7: fits when asked */
	acq_wait(f, c, "a", 1, 5, T0); /* acquire 8 */
	lease_expire(f->lt, T0 + 5 * MS); /* timeout 1 */
	assert_int_equal(f->nfails, 1);
	rel_all(f, c); /* release 1: a2 takes c's buffer, to renew */
	assert_int_equal(f->nrenews, 1);
	rel_all(f, b); /* releases 2, 3: a is over uid 1's limit now, denial 3 */
	assert_int_equal(f->nfails, 2);
	assert_ptr_equal(f->fails[1].owner, a);
	assert_int_equal(f->fails[1].err, -EDQUOT);
	lease_renewed(f->lt, f->renews[0], 0); /* renewal 1, grant 4 */
	assert_int_equal(f->ngrants, 4);
	assert_ptr_equal(f->grants[3].owner, a2);
	lease_owner_detach(f->lt, a2); /* disconnect release 1 */
	assert_int_equal(lc->acquires, 8);
	assert_int_equal(lc->grants, 4);
	assert_int_equal(lc->releases, 3);
	assert_int_equal(lc->timeouts, 1);
	assert_int_equal(lc->denials, 3);
	assert_int_equal(lc->renewals, 1);
	assert_int_equal(lc->disconnect_releases, 1);
	assert_int_equal(f->ngrants, 4);
}

/* The server frees the table with requests still queued; nothing may leak. */
static void test_table_free_with_waiters(void **state)
{
	struct fx *f = *state;
	struct lease_owner *a = attach(f, 1), *b = attach(f, 1), *c = attach(f, 2);

	acq_now(f, a, "a", NA);
	acq_wait(f, b, "a", 1, -1, T0);
	acq_wait(f, c, "a", 2, 100, T0);
	lease_table_free(f->lt);
	f->lt = NULL; /* owners are gone with it */
	assert_null(b->req);
	assert_null(c->req);
}

/*
 * A retired class (gone from the configuration; its buffers taken over by a restart): nobody
 * can acquire from it, a buffer its holder had comes back to that holder under its id, and
 * each buffer goes (ops->retire) once nobody holds it, the unheld ones at once.
 */
static void test_retired_class(void **state)
{
	struct fx *f = *state;
	struct lease_class_stats cs;
	struct lease_owner *a;
	uint64_t id = (uint64_t)0x1234 << 32 | 77; /* low bits need not be the buffer's index */

	f->classes[CLASS_B].retired = true;
	f->buffers[NA] = (struct pool_buffer){ .fd = -1, .size = 64 * MiB, .class_index = CLASS_B, .index = NA,
					       .boot_state = WARM_BUF_LEASED, .boot_uid = 1 };
	f->buffers[NA + 1] = (struct pool_buffer){ .fd = -1, .size = 64 * MiB, .class_index = CLASS_B,
						   .index = NA + 1, .boot_state = WARM_BUF_DIRTY, .boot_uid = 2 };
	make_table(f, 0, 0);
	a = attach(f, 1);
	assert_int_equal(lease_adopt(f->lt, a, &f->buffers[NA], id, 5), 0);
	assert_int_equal(f->warm[NA], WARM_BUF_LEASED);
	/* another uid's buffer cannot be given back to this one */
	assert_int_equal(lease_adopt(f->lt, a, &f->buffers[NA + 1], id + 1, 5), -EBUSY);
	lease_retire_unheld(f->lt);
	assert_false(f->retired[NA]);
	assert_true(f->retired[NA + 1]);
	assert_int_equal(f->warm[NA + 1], WARM_BUF_UNKNOWN);
	lease_class_stats(f->lt, CLASS_B, &cs);
	assert_int_equal(cs.total, 1);
	assert_int_equal(cs.leased, 1);
	assert_int_equal(cs.free, 0);
	/* not a class anybody can ask for */
	assert_int_equal(lease_acquire(f->lt, a, "b", 1, 0, T0, f->text, sizeof(f->text)), -ENOENT);
	/* released under the id it had: gone */
	assert_int_equal(lease_release(f->lt, a, &id, 1, f->text, sizeof(f->text)), 0);
	assert_true(f->retired[NA]);
	lease_class_stats(f->lt, CLASS_B, &cs);
	assert_int_equal(cs.total, 0);
	assert_int_equal(cs.free, 0);
	f->classes[CLASS_B].retired = false;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_attach_detach, setup, teardown),
		cmocka_unit_test_setup_teardown(test_retired_class, setup, teardown),
		cmocka_unit_test_setup_teardown(test_grant_n_at_once, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lease_ids_unique, setup, teardown),
		cmocka_unit_test_setup_teardown(test_undelivered_not_releasable, setup, teardown),
		cmocka_unit_test_setup_teardown(test_release_foreign_or_twice, setup, teardown),
		cmocka_unit_test_setup_teardown(test_acquire_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fifo_head_blocks_later, setup, teardown),
		cmocka_unit_test_setup_teardown(test_all_or_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_timeouts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_late_expiry_serves_what_fits, setup, teardown),
		cmocka_unit_test_setup_teardown(test_huge_timeout_does_not_wrap, setup, teardown),
		cmocka_unit_test_setup_teardown(test_byte_limit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_byte_limit_refund_on_timeout, setup, teardown),
		cmocka_unit_test_setup_teardown(test_byte_limit_at_grant_time, setup, teardown),
		cmocka_unit_test_setup_teardown(test_byte_limit_refund_on_renew_failure, setup, teardown),
		cmocka_unit_test_setup_teardown(test_connection_limit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_same_uid_gets_warm_buffer, setup, teardown),
		cmocka_unit_test_setup_teardown(test_punched_buffer_renewed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_other_uid_needs_renewal, setup, teardown),
		cmocka_unit_test_setup_teardown(test_clean_preferred_over_dirty, setup, teardown),
		cmocka_unit_test_setup_teardown(test_detach_returns_leases, setup, teardown),
		cmocka_unit_test_setup_teardown(test_detach_waiting, setup, teardown),
		cmocka_unit_test_setup_teardown(test_detach_while_renewing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_renew_failure, setup, teardown),
		cmocka_unit_test_setup_teardown(test_renew_failure_serves_waiter, setup, teardown),
		cmocka_unit_test_setup_teardown(test_orphan_renew_failure_serves_waiter, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sync_renew, setup, teardown),
		cmocka_unit_test_setup_teardown(test_counters, setup, teardown),
		cmocka_unit_test_setup_teardown(test_table_free_with_waiters, setup, teardown),
	};

	return cmocka_run_group_tests_name("lease", tests, NULL, NULL);
}
