/* SPDX-License-Identifier: MIT */
/*
 * svc_status.c - the status service of hugepoold's server: one STATUS_REPLY with the pool,
 * its classes, the clients and leases the asker may see, the journals and the spill figures.
 * The header counts each section's records; the sections follow in proto.h's
 * PROTO_STATUS_SECTIONS order, each written by its put_<name>, and the reply's size is that
 * table's (proto_status_size) for the asker's protocol version.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hist.h"
#include "log.h"
#include "server_internal.h"
#include "util.h"

/*
 * Which clients a status shows to whom: an administrator (root, the daemon's own uid, a member
 * of admin_group) or a member of monitor_group sees every client and lease; anyone else only
 * those of its own uid, and the spill figures of its own uid (another uid's streams would show
 * in the totals). Pool and journal figures are for everyone: they name nobody.
 */
static bool status_shows(const struct peer *to, const struct peer *q)
{
	return q->attached && (to->sees_all || q->owner.uid == to->owner.uid);
}

/* One status being made: for whom, and what the sections share. */
struct status {
	struct server *s;
	const struct peer *to;
	const uid_t *only; /* the asker's uid when it does not see all; else NULL */
	struct proto_status_spill spill;
	struct proto_status_server server; /* made first: it counts the spill_uid records */
	struct proto_status_batches batches[CONFIG_JOURNALS_MAX]; /* from the journals' stats */
	struct proto_status_durability durability[CONFIG_JOURNALS_MAX]; /* the same */
	struct proto_status_jpath jpath[CONFIG_JOURNALS_MAX]; /* the same */
};

/* The header: the pool, the daemon, the counters, and how many records each section has. */
static void put_header(struct status *ctx, struct proto_status *st)
{
	const struct server *s = ctx->s;
	const struct lease_counters *lc = lease_counters(s->leases);
	const struct peer *q;

	*st = (struct proto_status){
		.nclasses = s->pool->nclasses,
		.pool_flags = (s->pool->hugetlb ? PROTO_POOL_HUGETLB : 0) | (s->pool->fallback ? PROTO_POOL_FALLBACK : 0),
		.njournals = s->njournals,
		.nspill = 1,
		.page_size = s->pool->page_size,
		.pool_bytes = s->pool->bytes,
		.boot_prefault_ns = s->pool->boot.ns,
		.boot_threads = s->pool->boot.threads,
		.pid = (uint32_t)getpid(),
		.started_realtime_ns = s->started_rt,
		.connections_total = s->connections_total,
		.acquires = lc->acquires,
		.grants = lc->grants,
		.releases = lc->releases,
		.timeouts = lc->timeouts,
		.denials = lc->denials,
		.protocol_errors = s->protocol_errors,
		.recycled_buffers = lc->renewals,
		.disconnect_releases = lc->disconnect_releases,
	};
	TAILQ_FOREACH(q, &s->peers, link)
		if (status_shows(ctx->to, q)) {
			st->nclients++;
			st->nleases += q->owner.nleases;
		}
	proto_set_name(st->daemon_version, sizeof(st->daemon_version), VERSION_STRING);
	proto_set_name(st->fallback_reason, sizeof(st->fallback_reason), s->pool->fallback_reason);
}

/* Each put_<section> writes every record of its section at w (as many as the header counts). */
static uint8_t *put_class(struct status *ctx, uint8_t *w)
{
	const struct server *s = ctx->s;

	for (unsigned c = 0; c < s->pool->nclasses; c++, w += sizeof(struct proto_status_class)) {
		struct proto_status_class pc = { 0 };
		struct lease_class_stats cs;

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
	}
	return w;
}

static uint8_t *put_client(struct status *ctx, uint8_t *w)
{
	const struct peer *q;

	TAILQ_FOREACH(q, &ctx->s->peers, link) {
		struct proto_status_client pc = { 0 };

		if (!status_shows(ctx->to, q))
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
		memcpy(w, &pc, sizeof(pc));
		w += sizeof(pc);
	}
	return w;
}

static uint8_t *put_lease(struct status *ctx, uint8_t *w)
{
	const struct peer *q;

	TAILQ_FOREACH(q, &ctx->s->peers, link) {
		struct lease_slot *sl = NULL;

		if (!status_shows(ctx->to, q))
			continue;
		while ((sl = lease_owner_next(&q->owner, sl))) {
			struct proto_status_lease pl = { .lease_id = lease_slot_id(sl),
							 .pid = (uint32_t)q->owner.pid,
							 .uid = q->owner.uid,
							 .class_index = lease_slot_buffer(sl)->class_index,
							 .since_realtime_ns = lease_slot_since(sl) };

			memcpy(w, &pl, sizeof(pl));
			w += sizeof(pl);
		}
	}
	return w;
}

/* A NUM field of proto.h's journal list, from struct journal_stats (same name); the rest by hand. */
#define STATS_FIELD(kind, type, name, metric) STATS_FIELD_##kind(name)
#define STATS_FIELD_NUM(name) pj.name = js.name;
#define STATS_FIELD_CALC(name)
#define STATS_FIELD_OWN(name)

/* The same for proto.h's journal path list, from pointers to both. */
#define JPATH_FIELD(kind, type, name, metric) JPATH_FIELD_##kind(name)
#define JPATH_FIELD_NUM(name) jp->name = js->name;
#define JPATH_FIELD_CALC(name)
#define JPATH_FIELD_OWN(name)

/* The journal's path section from its stats (put_jpath sends it). */
static void jpath_from_stats(struct proto_status_jpath *jp, const struct journal_stats *js)
{
	*jp = (struct proto_status_jpath){ 0 };
	proto_set_name(jp->path, sizeof(jp->path), jpath_name(js->path));
	proto_set_name(jp->chosen, sizeof(jp->chosen), js->chosen);
	PROTO_STATUS_JPATH_FIELDS(JPATH_FIELD)
	proto_set_name(jp->why, sizeof(jp->why), js->path_why);
}

static uint8_t *put_journal(struct status *ctx, uint8_t *w)
{
	const struct server *s = ctx->s;

	for (unsigned i = 0; i < s->njournals; i++, w += sizeof(struct proto_status_journal)) {
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
		memcpy(ctx->batches[i].by_size, js.batch_sizes, sizeof(ctx->batches[i].by_size));
		ctx->durability[i] = js.durability;
		jpath_from_stats(&ctx->jpath[i], &js);
		proto_set_name(pj.note, sizeof(pj.note), js.note);
		proto_set_name(pj.recovery, sizeof(pj.recovery), js.recovery);
		memcpy(w, &pj, sizeof(pj));
	}
	return w;
}

static uint8_t *put_spill(struct status *ctx, uint8_t *w)
{
	memcpy(w, &ctx->spill, sizeof(ctx->spill));
	return w + sizeof(ctx->spill);
}

static uint8_t *put_start(struct status *ctx, uint8_t *w)
{
	memcpy(w, &ctx->s->start, sizeof(ctx->s->start));
	return w + sizeof(ctx->s->start);
}

/* A section of one record per journal, made by put_journal (the stats are taken once, for all). */
static uint8_t *put_per_journal(const struct status *ctx, uint8_t *w, const void *recs, size_t size)
{
	memcpy(w, recs, ctx->s->njournals * size);
	return w + ctx->s->njournals * size;
}

static uint8_t *put_batches(struct status *ctx, uint8_t *w)
{
	return put_per_journal(ctx, w, ctx->batches, sizeof(ctx->batches[0]));
}

static uint8_t *put_jpath(struct status *ctx, uint8_t *w)
{
	return put_per_journal(ctx, w, ctx->jpath, sizeof(ctx->jpath[0]));
}

/* in the order of the client records */
static uint8_t *put_heaps(struct status *ctx, uint8_t *w)
{
	const struct peer *q;

	TAILQ_FOREACH(q, &ctx->s->peers, link)
		if (status_shows(ctx->to, q)) {
			struct proto_status_heaps h;

			spill_owner_heaps(&q->spill, &h);
			memcpy(w, &h, sizeof(h));
			w += sizeof(h);
		}
	return w;
}

static uint8_t *put_server(struct status *ctx, uint8_t *w)
{
	memcpy(w, &ctx->server, sizeof(ctx->server));
	return w + sizeof(ctx->server);
}

static uint8_t *put_acquire(struct status *ctx, uint8_t *w)
{
	for (unsigned c = 0; c < ctx->s->pool->nclasses; c++, w += sizeof(struct proto_status_acquire))
		memcpy(w, lease_class_acquires(ctx->s->leases, c), sizeof(struct proto_status_acquire));
	return w;
}

static uint8_t *put_durability(struct status *ctx, uint8_t *w)
{
	return put_per_journal(ctx, w, ctx->durability, sizeof(ctx->durability[0]));
}

static uint8_t *put_pages(struct status *ctx, uint8_t *w)
{
	const struct pool *pool = ctx->s->pool;

	for (unsigned c = 0; c < pool->nclasses; c++, w += sizeof(struct proto_status_pages)) {
		const struct pool_class *pc = &pool->classes[c];
		struct proto_status_pages pp = { .page_size = pc->page_size,
						 .want_page_size = pc->want_page,
						 .hugetlb = pc->hugetlb,
						 .fallback = pc->fallback };

		proto_set_name(pp.fallback_reason, sizeof(pp.fallback_reason), pc->fallback_reason);
		memcpy(w, &pp, sizeof(pp));
	}
	return w;
}

/* A NUM field of proto.h's journal configuration list, from struct config_journal (same name). */
#define JCONFIG_FIELD(kind, type, name, metric) JCONFIG_FIELD_##kind(name)
#define JCONFIG_FIELD_NUM(name) jc.name = cj->name;
#define JCONFIG_FIELD_ENUM(name)

/*
 * Each journal's configuration: s->cfg's journal i is status journal i (main opens the journals
 * in the configuration's order, and a life's journals and configuration are both its own: a
 * restart re-reads the file, and nothing reloads it in place).
 */
static uint8_t *put_jconfig(struct status *ctx, uint8_t *w)
{
	const struct server *s = ctx->s;

	for (unsigned i = 0; i < s->njournals; i++, w += sizeof(struct proto_status_jconfig)) {
		const struct config_journal *cj = &s->cfg->journals[i];
		struct proto_status_jconfig jc = { .when_full = cj->recycle ? PROTO_JOURNAL_RECYCLE : PROTO_JOURNAL_BLOCK };

		PROTO_STATUS_JCONFIG_FIELDS(JCONFIG_FIELD)
		memcpy(w, &jc, sizeof(jc));
	}
	return w;
}

static uint8_t *put_spill_uid(struct status *ctx, uint8_t *w)
{
	struct proto_status_spill_uid *recs = (struct proto_status_spill_uid *)w; /* malloc'd: aligned */
	unsigned n = spill_uid_status(ctx->s->spill, ctx->only, recs, ctx->server.nuids);

	return w + n * sizeof(*recs);
}

/* The server section: its counters, what it serves now, and how many spill_uid records follow. */
static void make_server(struct status *ctx)
{
	const struct server *s = ctx->s;

	ctx->server = s->counted;
	ctx->server.nuids = spill_uid_count(s->spill, ctx->only);
	ctx->server.view = ctx->to->sees_all ? PROTO_VIEW_ALL : 0;
	ctx->server.connections = s->npeers;
	ctx->server.max_connections = s->cfg->max_connections;
	ctx->server.acquires_unknown_class = lease_counters(s->leases)->unknown_class;
}

int handle_status(struct server *s, struct peer *p, const union proto_request *req)
{
	static struct status ctx; /* event loop only; the journals' batches are large */
	_cleanup_free_ uint8_t *buf = NULL;
	struct proto_status st;
	uint64_t size;
	uint8_t *w;

	(void)req;
	ctx.s = s;
	ctx.to = p;
	ctx.only = p->sees_all ? NULL : &p->owner.uid;
	put_header(&ctx, &st);
	make_server(&ctx);
	size = proto_status_size(&st, &ctx.server, p->version) - sizeof(st);
	if (size + sizeof(st) > PROTO_REPLY_MAX) {
		send_result(p, -EMSGSIZE, "status is larger than a reply may be");
		return 0;
	}
	buf = malloc(size ? size : 1);
	if (!buf) {
		send_result(p, -ENOMEM, "out of memory");
		return 0;
	}
	/* reads each client's counters page, once; to whom does not see all, its uid's figures only */
	spill_get_status(s->spill, ctx.only, &ctx.spill);
	w = buf;
#define PUT_SECTION(name, type, count, since) \
	if (p->version >= (since))            \
		w = put_##name(&ctx, w);
	PROTO_STATUS_SECTIONS(PUT_SECTION)
#undef PUT_SECTION
	if ((uint64_t)(w - buf) != size) { /* a section wrote other than its header's count */
		log_error("Status of %" PRIu64 " bytes came out as %zu; not sent", size, (size_t)(w - buf));
		send_result(p, -EIO, "the status came out of another size than it said");
		return 0;
	}
	peer_send(p, PROTO_STATUS_REPLY, &st, sizeof(st), buf, size);
	return 0;
}
