/* SPDX-License-Identifier: MIT */
/*
 * svc_status.c - the status service of hugepoold's server: one STATUS_REPLY with the pool,
 * its classes, the clients and leases the asker may see, the journals and the spill figures.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hist.h"
#include "server_internal.h"
#include "util.h"

/* A NUM field of proto.h's journal list, from struct journal_stats (same name); the rest by hand. */
#define STATS_FIELD(kind, type, name) STATS_FIELD_##kind(name)
#define STATS_FIELD_NUM(name) pj.name = js.name;
#define STATS_FIELD_CALC(name)
#define STATS_FIELD_OWN(name)

/*
 * Which clients a status shows to whom: an administrator (root, the daemon's own uid, a member
 * of admin_group) sees every client and lease; anyone else only those of its own uid, and the
 * spill figures of its own uid (another uid's streams would show in the totals). Pool and
 * journal figures are for everyone: they name nobody.
 */
static bool status_shows(const struct peer *to, const struct peer *q)
{
	return to->admin || q->owner.uid == to->owner.uid;
}

int handle_status(struct server *s, struct peer *p, const union proto_request *req)
{
	const struct lease_counters *lc = lease_counters(s->leases);
	struct proto_status_spill spill;
	struct proto_status st = { 0 };
	struct peer *q;
	size_t nleases = 0, size;
	_cleanup_free_ uint8_t *buf = NULL;
	static struct proto_status_batches batches[CONFIG_JOURNALS_MAX]; /* event loop only */
	_cleanup_free_ struct proto_status_heaps *heaps = NULL; /* one per client record */
	uint8_t *w;

	(void)req;
	TAILQ_FOREACH(q, &s->peers, link)
		if (q->attached && status_shows(p, q))
			nleases += q->owner.nleases;
	size = s->pool->nclasses * sizeof(struct proto_status_class) +
	       s->npeers * sizeof(struct proto_status_client) + nleases * sizeof(struct proto_status_lease) +
	       s->njournals * sizeof(struct proto_status_journal) + sizeof(struct proto_status_spill) +
	       sizeof(struct proto_status_start) + s->njournals * sizeof(struct proto_status_batches) +
	       s->npeers * sizeof(struct proto_status_heaps);
	if (size + sizeof(st) > PROTO_REPLY_MAX) {
		send_result(p, -EMSGSIZE, "status is larger than a reply may be");
		return 0;
	}
	buf = malloc(size ? size : 1);
	heaps = calloc(s->npeers ? s->npeers : 1, sizeof(*heaps));
	if (!buf || !heaps) {
		send_result(p, -ENOMEM, "out of memory");
		return 0;
	}
	w = buf;
	st.nclasses = s->pool->nclasses;
	st.pool_flags = (s->pool->hugetlb ? PROTO_POOL_HUGETLB : 0) | (s->pool->fallback ? PROTO_POOL_FALLBACK : 0);
	st.page_size = s->pool->page_size;
	st.pool_bytes = s->pool->bytes;
	st.boot_prefault_ns = s->pool->boot.ns;
	st.boot_threads = s->pool->boot.threads;
	st.pid = (uint32_t)getpid();
	st.started_realtime_ns = s->started_rt;
	st.connections_total = s->connections_total;
	st.acquires = lc->acquires;
	st.grants = lc->grants;
	st.releases = lc->releases;
	st.timeouts = lc->timeouts;
	st.denials = lc->denials;
	st.protocol_errors = s->protocol_errors;
	st.recycled_buffers = lc->renewals;
	st.disconnect_releases = lc->disconnect_releases;
	proto_set_name(st.daemon_version, sizeof(st.daemon_version), VERSION_STRING);
	proto_set_name(st.fallback_reason, sizeof(st.fallback_reason), s->pool->fallback_reason);
	for (unsigned c = 0; c < s->pool->nclasses; c++) {
		struct lease_class_stats cs;
		struct proto_status_class pc = { 0 };

		lease_class_stats(s->leases, c, &cs);
		proto_set_name(pc.name, sizeof(pc.name), s->pool->classes[c].name);
		pc.size = s->pool->classes[c].size;
		pc.flags = s->pool->classes[c].retired ? PROTO_CLASS_RETIRED : 0;
		pc.total = cs.total;
		pc.free = cs.free;
		pc.leased = cs.leased;
		pc.waiters = cs.waiters;
		pc.zeroing = cs.renewing;
		memcpy(w, &pc, sizeof(pc));
		w += sizeof(pc);
	}
	/* reads each client's counters page, once; to a non-administrator, its uid's figures only */
	spill_get_status(s->spill, p->admin ? NULL : &p->owner.uid, &spill);
	TAILQ_FOREACH(q, &s->peers, link) {
		struct proto_status_client pc = { 0 };

		if (!q->attached || !status_shows(p, q))
			continue;
		memcpy(pc.name, q->name, sizeof(pc.name));
		pc.pid = (uint32_t)q->owner.pid;
		pc.uid = q->owner.uid;
		pc.gid = q->owner.gid;
		pc.leases = q->owner.nleases;
		pc.leased_bytes = q->owner.leased_bytes;
		pc.connected_realtime_ns = q->connected_rt;
		pc.waiting = q->owner.req != NULL;
		spill_owner_status(&q->spill, &pc.spill_files, &pc.spill_bytes, &pc.spill_streams_memory,
				   &pc.spill_bytes_memory);
		spill_owner_heaps(&q->spill, &heaps[st.nclients]);
		memcpy(w, &pc, sizeof(pc));
		w += sizeof(pc);
		st.nclients++;
	}
	TAILQ_FOREACH(q, &s->peers, link) {
		struct lease_slot *sl = NULL;

		if (!q->attached || !status_shows(p, q))
			continue;
		while ((sl = lease_owner_next(&q->owner, sl))) {
			struct proto_status_lease pl = { .lease_id = lease_slot_id(sl),
							 .pid = (uint32_t)q->owner.pid,
							 .uid = q->owner.uid,
							 .class_index = lease_slot_buffer(sl)->class_index,
							 .since_realtime_ns = lease_slot_since(sl) };

			memcpy(w, &pl, sizeof(pl));
			w += sizeof(pl);
			st.nleases++;
		}
	}
	for (unsigned i = 0; i < s->njournals; i++) {
		static struct journal_stats js; /* event loop only; large */
		struct proto_status_journal pj = { 0 };

		journal_get_stats(s->journals[i], &js);
		proto_set_name(pj.name, sizeof(pj.name), journal_name(s->journals[i]));
		proto_set_name(pj.backend, sizeof(pj.backend), js.backend);
		PROTO_STATUS_JOURNAL_FIELDS(STATS_FIELD)
		pj.state = js.state;
		pj.error = js.error;
		pj.direct = s->cfg->journals[i].direct;
		pj.sync_p50_ns = hist_quantile(&js.sync_ns, 0.5);
		pj.sync_p99_ns = hist_quantile(&js.sync_ns, 0.99);
		pj.sync_p999_ns = hist_quantile(&js.sync_ns, 0.999);
		pj.sync_max_ns = js.sync_ns.max;
		pj.mean_batch_milli = js.batches ? js.appends * 1000 / js.batches : 0;
		memcpy(batches[i].by_size, js.batch_sizes, sizeof(batches[i].by_size));
		proto_set_name(pj.note, sizeof(pj.note), js.note);
		proto_set_name(pj.recovery, sizeof(pj.recovery), js.recovery);
		memcpy(w, &pj, sizeof(pj));
		w += sizeof(pj);
		st.njournals++;
	}
	memcpy(w, &spill, sizeof(spill));
	w += sizeof(spill);
	st.nspill = 1;
	if (p->version >= 4) {
		memcpy(w, &s->start, sizeof(s->start));
		w += sizeof(s->start);
	}
	for (unsigned i = 0; p->version >= 5 && i < s->njournals; i++) {
		memcpy(w, &batches[i], sizeof(batches[i]));
		w += sizeof(batches[i]);
	}
	if (p->version >= 5) {
		memcpy(w, heaps, st.nclients * sizeof(*heaps));
		w += st.nclients * sizeof(*heaps);
	}
	peer_send(p, PROTO_STATUS_REPLY, &st, sizeof(st), buf, (size_t)(w - buf));
	return 0;
}
