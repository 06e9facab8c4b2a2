/* SPDX-License-Identifier: MIT */
/*
 * views_spill.c - hugepoolctl spill: the daemon's spill directory, its limits and what is
 * charged against them, then each uid's and each client's spill streams, as text or JSON. The
 * per-uid totals are added up in one pass over the clients, which spill_order sorts by uid.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "format.h"
#include "size.h"
#include "views.h"

/* The spill numbers of the clients of one uid, added up. */
struct spill_uid {
	uid_t uid;
	uint32_t clients;
	uint64_t files, bytes, streams_memory, bytes_memory;
};

/* A client with spill streams: in memory, or in files. */
static bool client_spills(const struct hp_client_status *c)
{
	return c->spill_files || c->spill_bytes || c->spill_streams_memory || c->spill_bytes_memory;
}

/* By uid, then by pid. */
static int client_compare(const void *a, const void *b)
{
	const struct hp_client_status *x = a, *y = b;

	if (x->uid != y->uid)
		return x->uid < y->uid ? -1 : 1;
	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

/*
 * The totals of the next uid among the clients with spill streams, from client *i on (the clients
 * are sorted by uid); *i moves past them. False when no such client is left.
 */
static bool spill_next_uid(const struct hp_status *st, uint32_t *i, struct spill_uid *u)
{
	while (*i < st->nclients && !client_spills(st->clients[*i]))
		(*i)++;
	if (*i >= st->nclients)
		return false;
	*u = (struct spill_uid){ .uid = st->clients[*i]->uid };
	for (; *i < st->nclients && st->clients[*i]->uid == u->uid; (*i)++) {
		const struct hp_client_status *c = st->clients[*i];

		if (!client_spills(c))
			continue;
		u->clients++;
		u->files += c->spill_files;
		u->bytes += c->spill_bytes;
		u->streams_memory += c->spill_streams_memory;
		u->bytes_memory += c->spill_bytes_memory;
	}
	return true;
}

void spill_order(struct hp_status *st)
{
	qsort(st->clients, st->nclients, sizeof(*st->clients), client_compare);
}

/* "12.0 MiB of 16.0 GiB", "12.0 MiB/unlimited" */
static const char *spill_bytes_of(uint64_t used, uint64_t limit, const char *sep, char *buf, size_t len)
{
	char a[32], b[32];

	snprintf(buf, len, "%s%s%s", size_format(used, a, sizeof(a)), sep,
		 limit ? size_format(limit, b, sizeof(b)) : "unlimited");
	return buf;
}

/* "3 of 4096", "3/unlimited" */
static const char *spill_files_of(uint64_t used, uint64_t limit, const char *sep, char *buf, size_t len)
{
	if (limit)
		snprintf(buf, len, "%" PRIu64 "%s%" PRIu64, used, sep, limit);
	else
		snprintf(buf, len, "%" PRIu64 "%sunlimited", used, sep);
	return buf;
}

void spill_text(const struct hp_status *st)
{
	const struct hp_spill_status *sp = &st->spill;
	char b1[64], b2[64], b3[32];
	struct spill_uid u;
	uint32_t i = 0;

	printf("Directory:   %s (nameless files: %s)\n", ESCAPED(sp->directory), ESCAPED(sp->method));
	printf("Threshold:   %s in memory per stream, unless the stream sets its own\n",
	       size_format(sp->threshold, b1, sizeof(b1)));
	printf("On disk:     %s (spill_max_bytes), %s files (spill_max_files)\n",
	       spill_bytes_of(sp->bytes, sp->max_bytes, " of ", b1, sizeof(b1)),
	       spill_files_of(sp->files, sp->max_files, " of ", b2, sizeof(b2)));
	if (sp->lingering)
		printf("Lingering:   %" PRIu64 " of those files closed by their streams but still open "
		       "in some process (kept empty)\n",
		       sp->lingering);
	printf("Uid limits:  %s%s (spill_max_bytes_per_uid), ",
	       sp->max_bytes_per_uid ? size_format(sp->max_bytes_per_uid, b1, sizeof(b1)) : "unlimited",
	       sp->max_bytes_per_uid ? "" : " bytes");
	if (sp->max_files_per_uid)
		printf("%" PRIu32 " files (spill_max_files_per_uid)\n", sp->max_files_per_uid);
	else
		printf("unlimited files (spill_max_files_per_uid)\n");
	printf("In memory:   %" PRIu64 " streams holding %s, as the clients report\n", sp->streams_memory,
	       size_format(sp->bytes_memory, b1, sizeof(b1)));
	printf("Since start: files created %" PRIu64 ", bytes charged %s, refusals %" PRIu64 ", truncated %" PRIu64
	       "\n\n",
	       sp->files_created, size_format(sp->bytes_charged_total, b1, sizeof(b1)), sp->refusals, sp->truncated);
	if (!spill_next_uid(st, &i, &u)) {
		printf("No spill streams.\n");
		return;
	}
	printf("%8s %7s %14s %22s %10s %12s\n", "UID", "CLIENTS", "FILES", "BYTES", "MEM_STRMS", "MEM_BYTES");
	do
		printf("%8u %7" PRIu32 " %14s %22s %10" PRIu64 " %12s\n", (unsigned)u.uid, u.clients,
		       spill_files_of(u.files, sp->max_files_per_uid, "/", b1, sizeof(b1)),
		       spill_bytes_of(u.bytes, sp->max_bytes_per_uid, "/", b2, sizeof(b2)), u.streams_memory,
		       size_format(u.bytes_memory, b3, sizeof(b3)));
	while (spill_next_uid(st, &i, &u));
	printf("\n%8s %-16s %8s %6s %12s %10s %12s\n", "PID", "NAME", "UID", "FILES", "BYTES", "MEM_STRMS",
	       "MEM_BYTES");
	for (i = 0; i < st->nclients; i++) {
		const struct hp_client_status *c = st->clients[i];

		if (!client_spills(c))
			continue;
		printf("%8d %-16s %8u %6" PRIu32 " %12s %10" PRIu64 " %12s\n", (int)c->pid, c->name[0] ? ESCAPED(c->name) : "-",
		       (unsigned)c->uid, c->spill_files, size_format(c->spill_bytes, b1, sizeof(b1)),
		       c->spill_streams_memory, size_format(c->spill_bytes_memory, b2, sizeof(b2)));
	}
}

void spill_json(struct json *j, const struct hp_status *st)
{
	const struct hp_spill_status *src = &st->spill;
	struct spill_uid u;
	uint32_t i = 0;

	json_str(j, "directory", src->directory);
	json_str(j, "method", src->method);
	PROTO_STATUS_SPILL_FIELDS(JSON_FIELD)
	json_open(j, "uids", '[');
	while (spill_next_uid(st, &i, &u)) {
		json_open(j, NULL, '{');
		json_u64(j, "uid", u.uid);
		json_u64(j, "clients", u.clients);
		json_u64(j, "files", u.files);
		json_u64(j, "bytes", u.bytes);
		json_u64(j, "streams_memory", u.streams_memory);
		json_u64(j, "bytes_memory", u.bytes_memory);
		json_close(j, '}');
	}
	json_close(j, ']');
	json_open(j, "clients", '[');
	for (i = 0; i < st->nclients; i++)
		if (client_spills(st->clients[i]))
			client_json(j, st, i, CLIENT_SPILL);
	json_close(j, ']');
}
