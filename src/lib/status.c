/* SPDX-License-Identifier: MIT */
/*
 * status.c - hp_status: ask the daemon for its state and decode the wire form (fixed records,
 * see proto.h) into struct hp_status, checking every count against the bytes received, every
 * index against what it indexes, every error code against errno's range, and ending every
 * string within its field.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "util.h"

static void copy_name(char *dst, size_t dstlen, const char *src, size_t srclen)
{
	size_t n = strnlen(src, srclen);

	n = MIN(n, dstlen - 1);
	memcpy(dst, src, n);
	dst[n] = '\0';
}

/*
 * A NUM or CALC field of proto.h's status lists: copied to the public field of the same name, which
 * must be at least as wide (the build fails otherwise); OWN and ENUM fields are decoded by hand
 * below (an ENUM field checked against its table).
 */
#define COPY_FIELD(kind, type, name, metric) COPY_##kind(type, name)
#define COPY_OWN(type, name)
#define COPY_ENUM(type, name)
#define COPY_CALC(type, name) COPY_NUM(type, name)
#define COPY_NUM(type, name)                                                                 \
	_Static_assert(sizeof(dst->name) >= sizeof(type), "public field " #name " holds the wire's"); \
	dst->name = src.name;
/* a struct proto_latency into a struct hp_latency: the same words */
#define COPY_HIST(type, name)                                                                \
	_Static_assert(sizeof(dst->name) == sizeof(type), "public field " #name " is the wire's"); \
	memcpy(&dst->name, &src.name, sizeof(dst->name));

_Static_assert(HP_BATCH_BUCKETS == PROTO_BATCH_BUCKETS, "the public batch buckets are the wire's");
_Static_assert(HP_LATENCY_BUCKETS == PROTO_LATENCY_NBOUNDS, "the public latency buckets are the wire's");

/*
 * Each get_<section> decodes record i of its section (PROTO_STATUS_SECTIONS) from src into st,
 * whose arrays are sized by the header's counts: 0, or -EPROTO for a record that lies.
 */
static int get_class(struct hp_status *st, uint32_t i, const struct proto_status_class *w)
{
	const struct proto_status_class src = *w;
	struct hp_class_status *dst = st->classes[i];

	copy_name(dst->name, sizeof(dst->name), src.name, sizeof(src.name));
	PROTO_STATUS_CLASS_FIELDS(COPY_FIELD)
	dst->retired = !!(src.flags & PROTO_CLASS_RETIRED);
	return 0;
}

static int get_client(struct hp_status *st, uint32_t i, const struct proto_status_client *w)
{
	const struct proto_status_client src = *w;
	struct hp_client_status *dst = st->clients[i];

	copy_name(dst->name, sizeof(dst->name), src.name, sizeof(src.name));
	PROTO_STATUS_CLIENT_FIELDS(COPY_FIELD)
	dst->pid = (pid_t)src.pid;
	dst->connected_ns = src.connected_realtime_ns;
	dst->waiting = !!src.waiting;
	return 0;
}

static int get_lease(struct hp_status *st, uint32_t i, const struct proto_status_lease *w)
{
	const struct proto_status_lease l = *w;

	if (l.class_index >= st->nclasses)
		return -EPROTO;
	*st->leases[i] = (struct hp_lease_status){ .lease_id = l.lease_id, .pid = (pid_t)l.pid, .uid = l.uid,
						  .class_index = l.class_index, .since_ns = l.since_realtime_ns };
	return 0;
}

static int get_journal(struct hp_status *st, uint32_t i, const struct proto_status_journal *w)
{
	const struct proto_status_journal src = *w;
	struct hp_journal_status *dst = st->journals[i];

	if (!ERRNO_VALID(src.error))
		return -EPROTO;
	copy_name(dst->name, sizeof(dst->name), src.name, sizeof(src.name));
	copy_name(dst->backend, sizeof(dst->backend), src.backend, sizeof(src.backend));
	copy_name(dst->note, sizeof(dst->note), src.note, sizeof(src.note));
	copy_name(dst->recovery, sizeof(dst->recovery), src.recovery, sizeof(src.recovery));
	PROTO_STATUS_JOURNAL_FIELDS(COPY_FIELD)
	dst->state = (int)src.state;
	dst->error = src.error;
	dst->direct = !!src.direct;
	dst->mean_batch = (double)src.mean_batch_milli / 1000.0;
	return 0;
}

static int get_spill(struct hp_status *st, uint32_t i, const struct proto_status_spill *w)
{
	const struct proto_status_spill src = *w;
	struct hp_spill_status *dst = &st->spill;

	(void)i;
	copy_name(dst->directory, sizeof(dst->directory), src.directory, sizeof(src.directory));
	copy_name(dst->method, sizeof(dst->method), src.method, sizeof(src.method));
	PROTO_STATUS_SPILL_FIELDS(COPY_FIELD)
	return 0;
}

static int get_start(struct hp_status *st, uint32_t i, const struct proto_status_start *w)
{
	const struct proto_status_start src = *w;
	struct hp_start_status *dst = &st->start;

	(void)i;
	PROTO_STATUS_START_FIELDS(COPY_FIELD)
	return 0;
}

static int get_batches(struct hp_status *st, uint32_t i, const struct proto_status_batches *w)
{
	memcpy(st->journals[i]->batch_sizes.by_size, w->by_size, sizeof(w->by_size));
	return 0;
}

static int get_heaps(struct hp_status *st, uint32_t i, const struct proto_status_heaps *w)
{
	const struct proto_status_heaps src = *w;
	struct hp_client_heaps *dst = &st->clients[i]->heaps;

	PROTO_STATUS_HEAPS_FIELDS(COPY_FIELD)
	return 0;
}

static int get_server(struct hp_status *st, uint32_t i, const struct proto_status_server *w)
{
	const struct proto_status_server src = *w;
	struct hp_server_status *dst = &st->server;

	(void)i;
	PROTO_STATUS_SERVER_FIELDS(COPY_FIELD)
	dst->sees_all = !!(src.view & PROTO_VIEW_ALL);
	return 0;
}

static int get_acquire(struct hp_status *st, uint32_t i, const struct proto_status_acquire *w)
{
	const struct proto_status_acquire src = *w;
	struct hp_class_acquire *dst = &st->classes[i]->acquire;

	PROTO_STATUS_ACQUIRE_FIELDS(COPY_FIELD)
	return 0;
}

static int get_durability(struct hp_status *st, uint32_t i, const struct proto_status_durability *w)
{
	const struct proto_status_durability src = *w;
	struct hp_journal_durability *dst = &st->journals[i]->durability;

	PROTO_STATUS_DURABILITY_FIELDS(COPY_FIELD)
	return 0;
}

static int get_spill_uid(struct hp_status *st, uint32_t i, const struct proto_status_spill_uid *w)
{
	const struct proto_status_spill_uid src = *w;
	struct hp_spill_uid_status *dst = st->spill_uids[i];

	PROTO_STATUS_SPILL_UID_FIELDS(COPY_FIELD)
	dst->uid = (uid_t)src.uid;
	return 0;
}

static int get_pages(struct hp_status *st, uint32_t i, const struct proto_status_pages *w)
{
	const struct proto_status_pages src = *w;
	struct hp_class_pages *dst = &st->classes[i]->pages;

	PROTO_STATUS_PAGES_FIELDS(COPY_FIELD)
	dst->hugetlb = !!src.hugetlb;
	dst->fallback = !!src.fallback;
	copy_name(dst->fallback_reason, sizeof(dst->fallback_reason), src.fallback_reason, sizeof(src.fallback_reason));
	return 0;
}

static int get_jpath(struct hp_status *st, uint32_t i, const struct proto_status_jpath *w)
{
	const struct proto_status_jpath src = *w;
	struct hp_journal_path *dst = &st->journals[i]->path;

	copy_name(dst->path, sizeof(dst->path), src.path, sizeof(src.path));
	copy_name(dst->chosen, sizeof(dst->chosen), src.chosen, sizeof(src.chosen));
	PROTO_STATUS_JPATH_FIELDS(COPY_FIELD)
	copy_name(dst->why, sizeof(dst->why), src.why, sizeof(src.why));
	return 0;
}

/* A journal's configuration: a when_full outside PROTO_JOURNAL_WHEN_FULL is a lie; reserved is not read. */
static int get_jconfig(struct hp_status *st, uint32_t i, const struct proto_status_jconfig *w)
{
	const struct proto_status_jconfig src = *w;
	struct hp_journal_config *dst = &st->journals[i]->config;

	if (src.when_full >= PROTO_JOURNAL_NWHEN_FULL)
		return -EPROTO;
	PROTO_STATUS_JCONFIG_FIELDS(COPY_FIELD)
	dst->when_full = (int)src.when_full;
	return 0;
}

/* The header into st: what it says of the daemon and the pool, and the sections' counts. */
static void get_header(struct hp_status *st, const struct proto_status *w)
{
	copy_name(st->daemon_version, sizeof(st->daemon_version), w->daemon_version, sizeof(w->daemon_version));
	copy_name(st->fallback_reason, sizeof(st->fallback_reason), w->fallback_reason, sizeof(w->fallback_reason));
	st->daemon_pid = (pid_t)w->pid;
	st->started_ns = w->started_realtime_ns;
	st->page_size = w->page_size;
	st->hugetlb = !!(w->pool_flags & PROTO_POOL_HUGETLB);
	st->fallback = !!(w->pool_flags & PROTO_POOL_FALLBACK);
	st->pool_bytes = w->pool_bytes;
	st->boot_prefault_ns = w->boot_prefault_ns;
	st->boot_threads = w->boot_threads;
	{
		const struct proto_status src = *w;
		struct hp_status *dst = st;

		PROTO_STATUS_COUNTERS(COPY_FIELD)
	}
	st->nclasses = w->nclasses;
	st->nclients = w->nclients;
	st->nleases = w->nleases;
	st->njournals = w->njournals;
}

/*
 * n records of size bytes, zeroed, reached through an array of n pointers (and a NULL after
 * them): one allocation, freed with free(). The records follow the pointers, each at a multiple
 * of the largest alignment a record needs.
 */
static void *records(uint32_t n, size_t size)
{
	size_t head = ((size_t)n + 1) * sizeof(void *), align = _Alignof(max_align_t);
	size_t stride = (size + align - 1) / align * align;
	char **v;

	head = (head + align - 1) / align * align;
	v = calloc(1, head + (size_t)n * stride);
	if (!v)
		return NULL;
	for (uint32_t i = 0; i < n; i++)
		v[i] = (char *)v + head + (size_t)i * stride;
	return v;
}

int status_decode(const void *buf, size_t len, struct hp_status **ret)
{
	const uint8_t *p = buf;
	struct proto_status_server srv;
	struct proto_status w;
	struct hp_status *st;
	uint64_t at;
	int r = 0;

	if (len < sizeof(w))
		return -EPROTO;
	memcpy(&w, p, sizeof(w));
	if (w.nclasses > 65536 || w.njournals > 65536 || w.nspill > 1)
		return -EPROTO;
	/* the server section (counts of later sections) is where a version 5 reply would end */
	at = proto_status_size(&w, NULL, 5);
	if (at > len || len - at < sizeof(srv))
		return -EPROTO;
	memcpy(&srv, p + at, sizeof(srv));
	/* libhugepool speaks PROTO_VERSION: every section is there, and nothing else */
	if (proto_status_size(&w, &srv, PROTO_VERSION) != len)
		return -EPROTO;
	st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	st->classes = records(w.nclasses, sizeof(**st->classes));
	st->clients = records(w.nclients, sizeof(**st->clients));
	st->leases = records(w.nleases, sizeof(**st->leases));
	st->journals = records(w.njournals, sizeof(**st->journals));
	st->spill_uids = records(srv.nuids, sizeof(**st->spill_uids));
	if (!st->classes || !st->clients || !st->leases || !st->journals || !st->spill_uids) {
		hp_status_free(st);
		return -ENOMEM;
	}
	get_header(st, &w);
	st->nspill_uids = srv.nuids;
	p += sizeof(w);
	/* each record copied out of the buffer first: the wire has no alignment */
#define GET_SECTION(name, type, count, since)                                 \
	for (uint32_t i = 0; r == 0 && i < PROTO_STATUS_COUNT(&w, &srv, count); i++) { \
		type rec;                                                             \
                                                                                      \
		memcpy(&rec, p, sizeof(rec));                                         \
		p += sizeof(rec);                                                     \
		r = get_##name(st, i, &rec);                                          \
	}
	PROTO_STATUS_SECTIONS(GET_SECTION)
#undef GET_SECTION
	if (r < 0) {
		hp_status_free(st);
		return r;
	}
	*ret = st;
	return 0;
}

_Static_assert((int)HP_JOURNAL_OK == (int)PROTO_JOURNAL_OK && (int)HP_JOURNAL_FULL == (int)PROTO_JOURNAL_FULL &&
		       (int)HP_JOURNAL_FAILED == (int)PROTO_JOURNAL_FAILED,
	       "the public journal states are the wire's");
_Static_assert((int)HP_JOURNAL_BLOCK == (int)PROTO_JOURNAL_BLOCK && (int)HP_JOURNAL_RECYCLE == (int)PROTO_JOURNAL_RECYCLE &&
		       PROTO_JOURNAL_NWHEN_FULL == 2,
	       "the public when_full policies are the wire's");

const char *hp_journal_state_name(int state)
{
	return state < 0 ? "unknown" : proto_journal_state_name((uint32_t)state);
}

int hp_daemon_restart(hp_conn *c)
{
	struct proto_restart req = { 0 };

	if (!c)
		return -EINVAL;
	return client_simple_request(c, PROTO_RESTART, &req, sizeof(req));
}

int hp_status(hp_conn *c, struct hp_status **ret)
{
	struct proto_status_req req = { 0 };
	struct proto_hdr h;
	_cleanup_free_ void *payload = NULL;
	int r;

	if (!c || !ret)
		return -EINVAL;
	r = client_send(c, PROTO_STATUS, &req, sizeof(req));
	if (r < 0)
		return r;
	r = client_recv(c, &h, &payload, NULL, 0);
	if (r < 0)
		return r;
	if (r == 0 || h.type != PROTO_STATUS_REPLY) {
		client_set_error(c, "the daemon answered a status request with a %s", proto_type_name(h.type));
		return -EPROTO;
	}
	r = status_decode(payload, h.len, ret);
	if (r == -EPROTO)
		client_set_error(c, "malformed status reply from the daemon");
	return r;
}

void hp_status_free(struct hp_status *st)
{
	if (!st)
		return;
	free(st->classes);
	free(st->clients);
	free(st->leases);
	free(st->journals);
	free(st->spill_uids);
	free(st);
}
