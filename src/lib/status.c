/* SPDX-License-Identifier: MIT */
/*
 * status.c - hp_status: ask the daemon for its state and decode the wire form (fixed records,
 * see proto.h) into struct hp_status, checking every count against the bytes received, every
 * index against what it indexes, every error code against errno's range, and ending every
 * string within its field.
 */
#include <errno.h>
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
 * must be at least as wide (the build fails otherwise); OWN fields are decoded by hand below.
 */
#define COPY_FIELD(kind, type, name) COPY_##kind(type, name)
#define COPY_OWN(type, name)
#define COPY_CALC(type, name) COPY_NUM(type, name)
#define COPY_NUM(type, name)                                                                 \
	_Static_assert(sizeof(dst->name) >= sizeof(type), "public field " #name " holds the wire's"); \
	dst->name = src.name;

_Static_assert(HP_BATCH_BUCKETS == PROTO_BATCH_BUCKETS, "the public batch buckets are the wire's");

int status_decode(const void *buf, size_t len, struct hp_status **ret)
{
	const uint8_t *p = buf;
	struct proto_status w;
	struct hp_status *st;
	size_t need;

	if (len < sizeof(w))
		return -EPROTO;
	memcpy(&w, p, sizeof(w));
	need = sizeof(w) + (size_t)w.nclasses * sizeof(struct proto_status_class) +
	       (size_t)w.nclients * sizeof(struct proto_status_client) +
	       (size_t)w.nleases * sizeof(struct proto_status_lease) +
	       (size_t)w.njournals * sizeof(struct proto_status_journal) +
	       (size_t)w.nspill * sizeof(struct proto_status_spill) + sizeof(struct proto_status_start) +
	       (size_t)w.njournals * sizeof(struct proto_status_batches) +
	       (size_t)w.nclients * sizeof(struct proto_status_heaps);
	if (need != len || w.nclasses > 65536 || w.njournals > 65536 || w.nspill > 1)
		return -EPROTO;
	st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	st->classes = calloc(w.nclasses + 1, sizeof(*st->classes));
	st->clients = calloc(w.nclients + 1, sizeof(*st->clients));
	st->leases = calloc(w.nleases + 1, sizeof(*st->leases));
	st->journals = calloc(w.njournals + 1, sizeof(*st->journals));
	st->journal_batches = calloc(w.njournals + 1, sizeof(*st->journal_batches));
	st->client_heaps = calloc(w.nclients + 1, sizeof(*st->client_heaps));
	if (!st->classes || !st->clients || !st->leases || !st->journals || !st->journal_batches ||
	    !st->client_heaps) {
		hp_status_free(st);
		return -ENOMEM;
	}
	copy_name(st->daemon_version, sizeof(st->daemon_version), w.daemon_version, sizeof(w.daemon_version));
	copy_name(st->fallback_reason, sizeof(st->fallback_reason), w.fallback_reason, sizeof(w.fallback_reason));
	st->daemon_pid = (pid_t)w.pid;
	st->started_ns = w.started_realtime_ns;
	st->page_size = w.page_size;
	st->hugetlb = !!(w.pool_flags & PROTO_POOL_HUGETLB);
	st->fallback = !!(w.pool_flags & PROTO_POOL_FALLBACK);
	st->pool_bytes = w.pool_bytes;
	st->boot_prefault_ns = w.boot_prefault_ns;
	st->boot_threads = w.boot_threads;
	st->connections_total = w.connections_total;
	st->acquires = w.acquires;
	st->grants = w.grants;
	st->releases = w.releases;
	st->timeouts = w.timeouts;
	st->denials = w.denials;
	st->protocol_errors = w.protocol_errors;
	st->recycled_buffers = w.recycled_buffers;
	st->disconnect_releases = w.disconnect_releases;
	st->nclasses = w.nclasses;
	st->nclients = w.nclients;
	st->nleases = w.nleases;
	st->njournals = w.njournals;
	p += sizeof(w);
	for (uint32_t i = 0; i < w.nclasses; i++, p += sizeof(struct proto_status_class)) {
		struct proto_status_class src;
		struct hp_class_status *dst = &st->classes[i];

		memcpy(&src, p, sizeof(src));
		copy_name(dst->name, sizeof(dst->name), src.name, sizeof(src.name));
		PROTO_STATUS_CLASS_FIELDS(COPY_FIELD)
		dst->retired = !!(src.flags & PROTO_CLASS_RETIRED);
	}
	for (uint32_t i = 0; i < w.nclients; i++, p += sizeof(struct proto_status_client)) {
		struct proto_status_client src;
		struct hp_client_status *dst = &st->clients[i];

		memcpy(&src, p, sizeof(src));
		copy_name(dst->name, sizeof(dst->name), src.name, sizeof(src.name));
		PROTO_STATUS_CLIENT_FIELDS(COPY_FIELD)
		dst->pid = (pid_t)src.pid;
		dst->connected_ns = src.connected_realtime_ns;
		dst->waiting = !!src.waiting;
	}
	for (uint32_t i = 0; i < w.nleases; i++, p += sizeof(struct proto_status_lease)) {
		struct proto_status_lease l;

		memcpy(&l, p, sizeof(l));
		if (l.class_index >= w.nclasses) {
			hp_status_free(st);
			return -EPROTO;
		}
		st->leases[i].lease_id = l.lease_id;
		st->leases[i].pid = (pid_t)l.pid;
		st->leases[i].uid = l.uid;
		st->leases[i].class_index = l.class_index;
		st->leases[i].since_ns = l.since_realtime_ns;
	}
	for (uint32_t i = 0; i < w.njournals; i++, p += sizeof(struct proto_status_journal)) {
		struct proto_status_journal src;
		struct hp_journal_status *dst = &st->journals[i];

		memcpy(&src, p, sizeof(src));
		copy_name(dst->name, sizeof(dst->name), src.name, sizeof(src.name));
		copy_name(dst->backend, sizeof(dst->backend), src.backend, sizeof(src.backend));
		copy_name(dst->note, sizeof(dst->note), src.note, sizeof(src.note));
		copy_name(dst->recovery, sizeof(dst->recovery), src.recovery, sizeof(src.recovery));
		PROTO_STATUS_JOURNAL_FIELDS(COPY_FIELD)
		if (!ERRNO_VALID(src.error)) {
			hp_status_free(st);
			return -EPROTO;
		}
		dst->state = (int)src.state;
		dst->error = src.error;
		dst->direct = !!src.direct;
		dst->mean_batch = (double)src.mean_batch_milli / 1000.0;
	}
	if (w.nspill) {
		struct proto_status_spill src;
		struct hp_spill_status *dst = &st->spill;

		memcpy(&src, p, sizeof(src));
		copy_name(dst->directory, sizeof(dst->directory), src.directory, sizeof(src.directory));
		copy_name(dst->method, sizeof(dst->method), src.method, sizeof(src.method));
		PROTO_STATUS_SPILL_FIELDS(COPY_FIELD)
		p += sizeof(src);
	}
	{
		struct proto_status_start src;
		struct hp_start_status *dst = &st->start;

		memcpy(&src, p, sizeof(src));
		PROTO_STATUS_START_FIELDS(COPY_FIELD)
		p += sizeof(src);
	}
	for (uint32_t i = 0; i < w.njournals; i++) {
		struct proto_status_batches src;

		memcpy(&src, p, sizeof(src));
		memcpy(st->journal_batches[i].by_size, src.by_size, sizeof(src.by_size));
		p += sizeof(src);
	}
	for (uint32_t i = 0; i < w.nclients; i++) {
		struct proto_status_heaps src;
		struct hp_client_heaps *dst = &st->client_heaps[i];

		memcpy(&src, p, sizeof(src));
		PROTO_STATUS_HEAPS_FIELDS(COPY_FIELD)
		p += sizeof(src);
	}
	*ret = st;
	return 0;
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
	free(st->journal_batches);
	free(st->client_heaps);
	free(st);
}
