/* SPDX-License-Identifier: MIT */
/*
 * svc_lease.c - the lease service of hugepoold's server: acquire and release requests, and
 * the lease table's callbacks that answer an acquire (a GRANT whose queued fds are dups of
 * the buffers', see peer.c) or renew a buffer through the recycler thread.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <unistd.h>

#include "fdstore.h"
#include "log.h"
#include "server_internal.h"
#include "util.h"

static void on_granted(struct lease_owner *o, struct lease_slot *const *slots, unsigned n, void *ud)
{
	struct peer *p = (struct peer *)((char *)o - offsetof(struct peer, owner));
	(void)ud;

	p->busy = false; /* answered (send_result says why now) */
	for (unsigned first = 0; first < n; first += PROTO_MAX_FDS) {
		unsigned k = MIN(n - first, (unsigned)PROTO_MAX_FDS);
		struct proto_grant g = { .total = n, .first = first, .n = k };
		struct proto_grant_entry e[PROTO_MAX_FDS];
		int fds[PROTO_MAX_FDS];

		for (unsigned i = 0; i < k; i++) {
			struct pool_buffer *b = lease_slot_buffer(slots[first + i]);

			e[i] = (struct proto_grant_entry){ .lease_id = lease_slot_id(slots[first + i]), .size = b->size };
			fds[i] = b->fd;
		}
		peer_send_fds(p, PROTO_GRANT, &g, sizeof(g), e, k * sizeof(e[0]), fds, k, 0, slots + first);
	}
	log_debug("Granted %u buffers of class \"%s\" to pid %d (uid %u)", n,
		  p->srv->pool->classes[lease_slot_buffer(slots[0])->class_index].name, (int)o->pid,
		  (unsigned)o->uid);
}

static void on_failed(struct lease_owner *o, int err, const char *text, void *ud)
{
	struct peer *p = (struct peer *)((char *)o - offsetof(struct peer, owner));
	(void)ud;

	log_debug("Acquire of pid %d (uid %u) failed: %s", (int)o->pid, (unsigned)o->uid, text);
	send_result(p, err, text);
}

static void on_renew(struct pool_buffer *b, void *ud)
{
	struct server *s = ud;

	recycler_submit(s->recycler, b);
}

static bool on_intact(struct pool_buffer *b, void *ud)
{
	static struct log_ratelimit rl = LOG_RATELIMIT(10, 5);
	struct server *s = ud;
	bool checked = !b->unverified, ok = pool_buffer_usable(s->pool, b);

	if (!ok)
		log_msg_ratelimited(&rl, LOG_NOTICE,
				    "Buffer %u of class \"%s\" %s; it gets fresh pages before its next lease", b->index,
				    s->pool->classes[b->class_index].name,
				    checked || !b->unverified ? "has pages punched out by a holder"
							      : "is not the memfd the previous life recorded");
	return ok;
}

void svc_lease_renewed(struct pool_buffer *b, int err, void *ud)
{
	struct server *s = ud;

	lease_renewed(s->leases, b, err);
}

/* Keep the warm state's record of b current: the next life trusts nothing else about it. */
static void on_changed(struct pool_buffer *b, const struct lease_note *n, void *ud)
{
	struct server *s = ud;
	struct warm_buf wb = { .state = n->state, .uid = n->uid, .size = b->size,
			       .page_size = s->pool->classes[b->class_index].page_size, .fd_id = b->fd_id,
			       .index = b->index - s->pool->classes[b->class_index].first,
			       .lease_id = n->lease_id, .since_rt = n->since_rt };

	if (!s->warm || s->sealed)
		return;
	if (n->owner)
		wb.conn_id = ((const struct peer *)((const char *)n->owner - offsetof(struct peer, owner)))->conn_id;
	snprintf(wb.class_name, sizeof(wb.class_name), "%s", s->pool->classes[b->class_index].name);
	warm_set(s->warm, b->index, &wb);
}

/* A buffer of a class the configuration no longer has, let go by its last holder: gone. */
static void on_retire(struct pool_buffer *b, void *ud)
{
	struct server *s = ud;
	char name[WARM_NAME_MAX];

	log_debug("Buffer %u of retired class \"%s\" let go: closing it", b->index,
		  s->pool->classes[b->class_index].name);
	if (b->fd >= 0) {
		warm_name(WARM_NAME_BUF, b->fd_id, name);
		fdstore_remove(name);
		close(b->fd);
		b->fd = -1;
	}
}

const struct lease_ops svc_lease_ops = { on_granted, on_failed, on_renew, on_intact, on_changed, on_retire };

int handle_acquire(struct server *s, struct peer *p, const union proto_request *req)
{
	static struct log_ratelimit rl = LOG_RATELIMIT(10, 5);
	const struct proto_acquire *a = &req->acquire;
	int64_t timeout_ms = a->timeout_ms, cap_ms = (int64_t)(s->cfg->max_acquire_wait_ns / 1000000);
	char text[PROTO_TEXT_MAX];
	int r;

	if (a->count == 0 || a->count > PROTO_ACQUIRE_MAX) {
		snprintf(text, sizeof(text), "count %" PRIu32 " is outside 1..%u", a->count, PROTO_ACQUIRE_MAX);
		send_result(p, -EINVAL, text);
		return 0;
	}
	/* a waiter holds back its class: nobody may wait longer than max_acquire_wait */
	if (cap_ms && (timeout_ms < 0 || timeout_ms > cap_ms))
		timeout_ms = cap_ms;
	/* what a next life needs to queue it again, should it still wait then */
	snprintf(p->wait.class_name, sizeof(p->wait.class_name), "%.*s", (int)sizeof(a->class_name), a->class_name);
	p->wait.count = a->count;
	p->wait.deadline = timeout_ms < 0 ? UINT64_MAX : now_ns() + (uint64_t)timeout_ms * 1000000u;
	r = lease_acquire(s->leases, &p->owner, a->class_name, a->count, timeout_ms, now_ns(), text, sizeof(text));
	if (r < 0) {
		if (r == -EDQUOT)
			log_msg_ratelimited(&rl, LOG_NOTICE, "Refused pid %d (uid %u): %s", (int)p->owner.pid,
					    (unsigned)p->owner.uid, text);
		send_result(p, r, text);
	}
	return 0;
}

int handle_release(struct server *s, struct peer *p, const union proto_request *req)
{
	char text[PROTO_TEXT_MAX];
	int r;

	r = lease_release(s->leases, &p->owner, req->release.ids, req->release.hdr.n, text, sizeof(text));
	send_result(p, r, r < 0 ? text : NULL);
	return 0;
}
