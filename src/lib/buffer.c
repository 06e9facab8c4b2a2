/* SPDX-License-Identifier: MIT */
/*
 * buffer.c - libhugepool's leases: hp_acquire maps the granted memfds (MAP_POPULATE, so page
 * tables are filled before the caller touches anything) and closes the fds at once, keeping
 * only the mappings; hp_release unmaps them and tells the daemon (hp_release_keep_range instead
 * replaces each range by private anonymous memory in place, for callers such as a JVM that
 * cannot take back every reference to it). The connection remembers every mapping so
 * hp_disconnect can undo them. An acquire always reads its whole reply (all
 * grant messages) so the stream stays in step even when a mapping fails; on such a failure the
 * buffers granted are released again before the error is returned. A granted fd is mapped only
 * once client_check_fd has seen a sealed memfd of the granted size, so the caller's buffer can
 * never fault past its end (a daemon that lies about it gets -EPROTO).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client.h"
#include "util.h"

static int maps_add(hp_conn *c, uint64_t id, void *addr, size_t size)
{
	if (ARRAY_RESERVE_ONE(c->maps, c->nmaps, c->maps_cap, 16) < 0)
		return -ENOMEM;
	c->maps[c->nmaps++] = (struct hp_mapping){ id, addr, size };
	return 0;
}

static struct hp_mapping *maps_find(hp_conn *c, uint64_t id)
{
	for (size_t i = 0; i < c->nmaps; i++)
		if (c->maps[i].lease_id == id)
			return &c->maps[i];
	return NULL;
}

static void maps_remove(hp_conn *c, struct hp_mapping *m)
{
	*m = c->maps[--c->nmaps];
}

static void unmap_ids(hp_conn *c, const uint64_t *ids, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		struct hp_mapping *m = maps_find(c, ids[i]);

		if (m) {
			munmap(m->addr, m->size);
			maps_remove(c, m);
		}
	}
}

static int send_release(hp_conn *c, const uint64_t *ids, unsigned n)
{
	_cleanup_free_ struct proto_release *rel = malloc(sizeof(*rel) + n * sizeof(uint64_t));

	if (!rel)
		return -ENOMEM;
	*rel = (struct proto_release){ .n = n };
	memcpy(rel + 1, ids, n * sizeof(uint64_t));
	return client_simple_request(c, PROTO_RELEASE, rel, (uint32_t)(sizeof(*rel) + n * sizeof(uint64_t)));
}

/* Map a granted buffer: a sealed memfd of (at least) the size the grant names, or a lie. */
static int map_one(hp_conn *c, int fd, uint64_t size, void **ret)
{
	void *a;
	int r;

	if (size == 0) {
		client_set_error(c, "the daemon sent a buffer of %" PRIu64 " bytes", size);
		return -EPROTO;
	}
	if ((r = client_check_fd(c, fd, CLIENT_FD_MEMORY, size, "a buffer")) < 0)
		return r;
	a = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
	if (a == MAP_FAILED) {
		r = -errno;
		client_set_error(c, "mapping a granted buffer failed: %s", strerror(-r));
		return r;
	}
	*ret = a;
	return 0;
}

int hp_acquire(hp_conn *c, const char *class_name, unsigned n, int64_t timeout_ms, struct hp_buffer *bufs)
{
	struct proto_acquire a = { .count = n, .timeout_ms = timeout_ms };
	_cleanup_free_ uint64_t *ids = NULL;
	unsigned got = 0;
	int r, err = 0;

	if (!c || !class_name || !bufs || n == 0 || n > HP_ACQUIRE_MAX)
		return -EINVAL;
	if (!*class_name || strlen(class_name) >= sizeof(a.class_name) ||
	    !proto_name_valid(class_name, strlen(class_name) + 1))
		return -EINVAL;
	ids = calloc(n, sizeof(*ids));
	if (!ids)
		return -ENOMEM;
	proto_set_name(a.class_name, sizeof(a.class_name), class_name);
	r = client_send(c, PROTO_ACQUIRE, &a, sizeof(a));
	if (r < 0)
		return r;
	while (got < n) {
		struct proto_hdr h;
		_cleanup_free_ void *payload = NULL;
		const struct proto_grant *g;
		const struct proto_grant_entry *e;
		int fds[PROTO_MAX_FDS];

		r = client_recv(c, &h, &payload, fds, PROTO_MAX_FDS);
		if (r <= 0 && got == 0)
			return r < 0 ? r : -EPROTO; /* refused, or nothing granted before the stream broke */
		if (r <= 0) {
			err = r < 0 ? r : -EPROTO;
			goto broken;
		}
		g = payload;
		e = (const void *)(g + 1);
		if (h.type != PROTO_GRANT || g->total != n || g->first != got || g->n != h.nfds ||
		    h.len != sizeof(*g) + g->n * sizeof(*e) || got + g->n > n) {
			for (unsigned i = 0; i < h.nfds; i++)
				close(fds[i]);
			client_set_error(c, "malformed grant from the daemon");
			err = -EPROTO;
			goto broken;
		}
		for (unsigned i = 0; i < g->n; i++, got++) {
			void *addr = NULL;

			ids[got] = e[i].lease_id;
			if (!err)
				err = map_one(c, fds[i], e[i].size, &addr);
			if (!err && (err = maps_add(c, e[i].lease_id, addr, e[i].size)) < 0)
				client_set_error(c, "mapping a granted buffer failed: %s", strerror(-err));
			if (err && addr)
				munmap(addr, e[i].size);
			close(fds[i]);
			bufs[got] = (struct hp_buffer){ .addr = addr, .size = e[i].size, .lease_id = e[i].lease_id };
			proto_set_name(bufs[got].class_name, sizeof(bufs[got].class_name), class_name);
		}
	}
	if (err) {
		/* give back all of them: the caller asked for n or none (the error says why, not the release) */
		char why[sizeof(c->last_error)];

		memcpy(why, c->last_error, sizeof(why));
		unmap_ids(c, ids, n);
		(void)send_release(c, ids, n);
		memcpy(c->last_error, why, sizeof(why));
		return err;
	}
	return 0;

broken:
	/*
	 * The stream is out of step and cannot be trusted again: undo what this acquire mapped and
	 * shut the connection down, which makes the daemon release every lease of it.
	 */
	unmap_ids(c, ids, got);
	shutdown(c->fd, SHUT_RDWR);
	return err;
}

/*
 * Make a buffer's range private anonymous memory, in place: MAP_FIXED replaces the shared
 * mapping in one step, so no thread touching the range ever finds it unmapped.
 */
static int replace_range(void *addr, size_t size)
{
	if (mmap(addr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
		return -errno;
	return 0;
}

/* hp_release and hp_release_keep_range: keep leaves each range mapped to private memory. */
static int release(hp_conn *c, struct hp_buffer *bufs, unsigned n, bool keep)
{
	_cleanup_free_ uint64_t *ids = NULL;
	int r;

	if (!c || !bufs || n == 0 || n > HP_ACQUIRE_MAX)
		return -EINVAL;
	ids = calloc(n, sizeof(*ids));
	if (!ids)
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++) {
		struct hp_mapping *m = maps_find(c, bufs[i].lease_id);

		if (!m || m->addr != bufs[i].addr) {
			client_set_error(c, "buffer %u is not leased through this connection", i);
			return -EINVAL;
		}
		for (unsigned j = 0; j < i; j++)
			if (ids[j] == bufs[i].lease_id) {
				client_set_error(c, "buffer %u is named twice", i);
				return -EINVAL;
			}
		ids[i] = bufs[i].lease_id;
	}
	/* unmap (or replace) first: once released, the memory may be another process's */
	for (unsigned i = 0; keep && i < n; i++) {
		const struct hp_mapping *m = maps_find(c, ids[i]);

		/* the size the library mapped, not the caller's copy of it */
		if ((r = replace_range(m->addr, m->size)) < 0) {
			client_set_error(c, "replacing buffer %u by private memory failed: %s", i, strerror(-r));
			return r; /* nothing released: those before it are private already, still leased */
		}
	}
	for (unsigned i = 0; i < n; i++) {
		struct hp_mapping *m = maps_find(c, ids[i]);

		if (!keep) {
			munmap(m->addr, m->size);
			bufs[i].addr = NULL;
		}
		maps_remove(c, m);
	}
	return send_release(c, ids, n);
}

int hp_release(hp_conn *c, struct hp_buffer *bufs, unsigned n)
{
	return release(c, bufs, n, false);
}

int hp_release_keep_range(hp_conn *c, struct hp_buffer *bufs, unsigned n)
{
	return release(c, bufs, n, true);
}
