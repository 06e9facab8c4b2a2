/* SPDX-License-Identifier: MIT */
/*
 * views_status.c - hugepoolctl status, classes, leases and stats: the daemon, its pool and its
 * clients as one hp_status shows them, as aligned text for people or as the members of one JSON
 * object for programs (--json). Each view only prints; the verb in hugepoolctl.c fetches.
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "format.h"
#include "size.h"
#include "util.h"
#include "views.h"

static uint64_t now_realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static double uptime_seconds(const struct hp_status *st)
{
	uint64_t now = now_realtime_ns();

	return now > st->started_ns ? (double)(now - st->started_ns) / 1e9 : 0.0;
}

/* Pre-fault speed at boot in GB/s (10^9 bytes per second, as the daemon logs it). */
static double boot_gbps(const struct hp_status *st)
{
	return st->boot_prefault_ns ? (double)st->pool_bytes / (double)st->boot_prefault_ns : 0.0;
}

static const char *backing_name(const struct hp_status *st)
{
	return st->hugetlb ? "hugetlb" : st->fallback ? "fallback" : "regular";
}

static const char *lease_class_name(const struct hp_status *st, const struct hp_lease_status *l)
{
	/* libhugepool checks class_index against nclasses */
	return l->class_index < st->nclasses ? st->classes[l->class_index]->name : "?";
}

/* The width of the class column: the names as printed (escaped), at least min. */
static int class_name_width(const struct hp_status *st, int min)
{
	int w = min;

	for (uint32_t i = 0; i < st->nclasses; i++)
		w = MAX(w, (int)strlen(ESCAPED(st->classes[i]->name)));
	return w;
}

/* The daemon's counters (proto.h's PROTO_STATUS_COUNTERS, the same names in struct hp_status). */
static const struct {
	const char *name;
	size_t offset;
} counters[] = {
#define COUNTER(kind, type, name, metric) { #name, offsetof(struct hp_status, name) },
	PROTO_STATUS_COUNTERS(COUNTER)
#undef COUNTER
};

static uint64_t counter_value(const struct hp_status *st, size_t i)
{
	uint64_t v;

	memcpy(&v, (const char *)st + counters[i].offset, sizeof(v));
	return v;
}

void classes_text(const struct hp_status *st)
{
	int w = class_name_width(st, 5);
	char b[32];

	printf("%-*s %10s %8s %8s %8s %8s %8s\n", w, "CLASS", "SIZE", "TOTAL", "FREE", "LEASED", "WAITERS",
	       "ZEROING");
	for (uint32_t i = 0; i < st->nclasses; i++) {
		const struct hp_class_status *c = st->classes[i];

		printf("%-*s %10s %8" PRIu32 " %8" PRIu32 " %8" PRIu32 " %8" PRIu32 " %8" PRIu32 "%s\n", w, ESCAPED(c->name),
		       size_format(c->size, b, sizeof(b)), c->total, c->free, c->leased, c->waiters, c->zeroing,
		       c->retired ? "  retired" : "");
	}
}

/* A class's acquires by outcome and their wait (version 6), as the member "acquire". */
static void acquire_json(struct json *j, const struct hp_class_acquire *src)
{
	json_open(j, "acquire", '{');
	PROTO_STATUS_ACQUIRE_FIELDS(JSON_FIELD)
	json_close(j, '}');
}

void classes_json(struct json *j, const struct hp_status *st)
{
	json_open(j, "classes", '[');
	for (uint32_t i = 0; i < st->nclasses; i++) {
		const struct hp_class_status *src = st->classes[i];

		json_open(j, NULL, '{');
		json_str(j, "name", src->name);
		PROTO_STATUS_CLASS_FIELDS(JSON_FIELD)
		json_bool(j, "retired", src->retired);
		acquire_json(j, &st->classes[i]->acquire);
		json_close(j, '}');
	}
	json_close(j, ']');
}

void start_text(const struct hp_status *st)
{
	const struct hp_start_status *s = &st->start;

	if (s->warm)
		printf("Start:       warm (life %" PRIu64 "): adopted %" PRIu32 " buffers, faulted %" PRIu32
		       ", dropped %" PRIu32 "; %" PRIu32 " connections served on, %" PRIu32 " closed; ready in %.3f s\n",
		       s->lives, s->adopted_buffers, s->faulted_buffers, s->dropped_buffers, s->adopted_connections,
		       s->closed_connections, (double)s->ready_ns / 1e9);
	else
		printf("Start:       cold (life %" PRIu64 "): faulted %" PRIu32 " buffers, dropped %" PRIu32
		       "; ready in %.3f s\n",
		       s->lives, s->faulted_buffers, s->dropped_buffers, (double)s->ready_ns / 1e9);
}

void start_json(struct json *j, const struct hp_status *st)
{
	const struct hp_start_status *src = &st->start;

	json_open(j, "start", '{');
	PROTO_STATUS_START_FIELDS(JSON_FIELD)
	json_close(j, '}');
}

void status_text(const struct hp_status *st)
{
	char b1[32], b2[32], b3[64];
	uint64_t buffers = 0;

	for (uint32_t i = 0; i < st->nclasses; i++)
		buffers += st->classes[i]->total;
	printf("hugepoold %s, pid %d, up %s (since %s)\n", ESCAPED(st->daemon_version), (int)st->daemon_pid,
	       duration_format((uint64_t)uptime_seconds(st), b1, sizeof(b1)),
	       time_format(st->started_ns, b3, sizeof(b3)));
	printf("Pool:        %s in %" PRIu64 " buffers, page size %s\n",
	       size_format(st->pool_bytes, b1, sizeof(b1)), buffers, size_format(st->page_size, b2, sizeof(b2)));
	if (st->hugetlb)
		printf("Backing:     hugetlb pages\n");
	else if (st->fallback)
		printf("Backing:     regular shared memory (fallback: %s)\n", ESCAPED(st->fallback_reason));
	else
		printf("Backing:     regular shared memory (hugepages = off)\n");
	if (st->start.faulted_buffers || !st->start.warm)
		printf("Boot:        pre-faulted in %.3f s with %" PRIu32 " threads (%.2f GB/s)\n",
		       (double)st->boot_prefault_ns / 1e9, st->boot_threads, boot_gbps(st));
	else
		printf("Boot:        nothing to fault: the whole pool was taken over\n");
	start_text(st);
	printf("Connections: %" PRIu32 " now, %" PRIu64 " since start\n\n", st->nclients, st->connections_total);
	classes_text(st);
}

void status_json(struct json *j, const struct hp_status *st)
{
	char b[64];

	json_str(j, "daemon_version", st->daemon_version);
	json_u64(j, "pid", (uint64_t)st->daemon_pid);
	json_str(j, "started", time_format(st->started_ns, b, sizeof(b)));
	json_u64(j, "started_ns", st->started_ns);
	json_double(j, "uptime_s", uptime_seconds(st));
	json_u64(j, "pool_bytes", st->pool_bytes);
	json_u64(j, "page_size", st->page_size);
	json_str(j, "backing", backing_name(st));
	json_bool(j, "hugetlb", st->hugetlb);
	json_bool(j, "fallback", st->fallback);
	json_str(j, "fallback_reason", st->fallback_reason);
	json_open(j, "boot", '{');
	json_double(j, "prefault_s", (double)st->boot_prefault_ns / 1e9);
	json_u64(j, "threads", st->boot_threads);
	json_double(j, "gb_per_s", boot_gbps(st));
	json_close(j, '}');
	start_json(j, st);
	json_u64(j, "connections", st->nclients);
	json_u64(j, "connections_total", st->connections_total);
	classes_json(j, st);
}


void leases_text(const struct hp_status *st)
{
	int w = class_name_width(st, 5);
	char b[64];

	if (st->nleases == 0) {
		printf("No leases.\n");
	} else {
		printf("%-18s %-*s %8s %8s  %s\n", "LEASE", w, "CLASS", "PID", "UID", "SINCE");
		for (uint32_t i = 0; i < st->nleases; i++) {
			const struct hp_lease_status *l = st->leases[i];

			printf("%#-18" PRIx64 " %-*s %8d %8u  %s\n", l->lease_id, w, ESCAPED(lease_class_name(st, l)),
			       (int)l->pid, (unsigned)l->uid, time_format(l->since_ns, b, sizeof(b)));
		}
	}
	printf("\n%8s %8s %-16s %8s %12s %7s %5s %9s %12s\n", "PID", "UID", "NAME", "LEASES", "LEASED", "WAITING",
	       "HEAPS", "HEAP-BUFS", "HEAP-CARVED");
	for (uint32_t i = 0; i < st->nclients; i++) {
		const struct hp_client_status *c = st->clients[i];
		const struct hp_client_heaps *h = &st->clients[i]->heaps;
		char hb[32];

		printf("%8d %8u %-16s %8" PRIu32 " %12s %7s %5" PRIu64 " %9" PRIu64 " %12s\n", (int)c->pid,
		       (unsigned)c->uid, c->name[0] ? ESCAPED(c->name) : "-", c->leases,
		       size_format(c->leased_bytes, b, sizeof(b)), c->waiting ? "yes" : "no", h->heaps, h->heap_buffers,
		       size_format(h->heap_bytes, hb, sizeof(hb)));
	}
}

void leases_json(struct json *j, const struct hp_status *st)
{
	char b[64];

	json_open(j, "leases", '[');
	for (uint32_t i = 0; i < st->nleases; i++) {
		const struct hp_lease_status *l = st->leases[i];

		/* a string: lease ids use all 64 bits, more than a JSON number keeps exactly */
		snprintf(b, sizeof(b), "%#" PRIx64, l->lease_id);
		json_open(j, NULL, '{');
		json_str(j, "lease_id", b);
		json_str(j, "class", lease_class_name(st, l));
		json_u64(j, "pid", (uint64_t)l->pid);
		json_u64(j, "uid", l->uid);
		json_str(j, "since", time_format(l->since_ns, b, sizeof(b)));
		json_u64(j, "since_ns", l->since_ns);
		json_close(j, '}');
	}
	json_close(j, ']');
	json_open(j, "clients", '[');
	for (uint32_t i = 0; i < st->nclients; i++)
		client_json(j, st, i, CLIENT_LEASES | CLIENT_HEAPS);
	json_close(j, ']');
}

void client_json(struct json *j, const struct hp_status *st, uint32_t i, unsigned parts)
{
	const struct hp_client_status *c = st->clients[i];
	char b[64];

	json_open(j, NULL, '{');
	json_u64(j, "pid", (uint64_t)c->pid);
	json_u64(j, "uid", c->uid);
	json_u64(j, "gid", c->gid);
	json_str(j, "name", c->name);
	json_str(j, "connected", time_format(c->connected_ns, b, sizeof(b)));
	if (parts & CLIENT_LEASES) {
		json_u64(j, "leases", c->leases);
		json_u64(j, "leased_bytes", c->leased_bytes);
		json_bool(j, "waiting", c->waiting);
	}
	if (parts & CLIENT_HEAPS) {
		const struct hp_client_heaps *src = &st->clients[i]->heaps;

		PROTO_STATUS_HEAPS_FIELDS(JSON_FIELD)
	}
	if (parts & CLIENT_SPILL) {
		json_u64(j, "files", c->spill_files);
		json_u64(j, "bytes", c->spill_bytes);
		json_u64(j, "streams_memory", c->spill_streams_memory);
		json_u64(j, "bytes_memory", c->spill_bytes_memory);
	}
	json_close(j, '}');
}

void stats_text(const struct hp_status *st)
{
	const struct hp_server_status *src = &st->server;

	for (size_t i = 0; i < ARRAY_SIZE(counters); i++)
		printf("%-32s %" PRIu64 "\n", counters[i].name, counter_value(st, i));
	PROTO_STATUS_SERVER_FIELDS(TEXT_FIELD)
	for (uint32_t c = 0; c < st->nclasses; c++) {
		const struct hp_class_acquire *a = &st->classes[c]->acquire;

		printf("\nclass %s: %" PRIu64 " acquires, %" PRIu64 " granted (%" PRIu64 " buffers), refused: %" PRIu64
		       " limit, %" PRIu64 " timeout, %" PRIu64 " all-or-nothing, %" PRIu64 " too large, %" PRIu64
		       " renewal; %" PRIu64 " cancelled; mean wait %.1f us\n",
		       ESCAPED(st->classes[c]->name), a->acquires, a->granted, a->buffers_granted, a->refused_limit,
		       a->refused_timeout, a->refused_all_or_nothing, a->refused_too_large, a->refused_renewal,
		       a->cancelled, a->wait.count ? (double)a->wait.sum_ns / (double)a->wait.count / 1e3 : 0.0);
	}
}

void stats_json(struct json *j, const struct hp_status *st)
{
	const struct hp_server_status *src = &st->server;

	for (size_t i = 0; i < ARRAY_SIZE(counters); i++)
		json_u64(j, counters[i].name, counter_value(st, i));
	json_open(j, "server", '{');
	PROTO_STATUS_SERVER_FIELDS(JSON_FIELD)
	json_bool(j, "sees_all", src->sees_all);
	json_close(j, '}');
}
