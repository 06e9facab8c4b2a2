/* SPDX-License-Identifier: MIT */
/*
 * hugepoolctl.c - look at a running hugepoold: its state, its classes, its leases, its counters,
 * its spill streams and its journals; replay, check and truncate a journal.
 *
 * The commands live in tables. An entry names a command, the arguments it takes (checked here,
 * before anything is sent to the daemon), the options that apply to it, and the function that
 * runs it; or it holds a table of subcommands instead ("journal list", "journal dump NAME").
 * The views of the daemon's state are one hp_status() call each, printed either as text for
 * people or (--json) as one JSON object for programs; the journal commands that read records go
 * through libhugepool's journal reader, so they see exactly what a client would. main only
 * parses options, resolves the command in the tables, connects and dispatches.
 * Data goes to stdout, diagnostics to stderr. Exit status: 0 success, 1 usage error, 2 cannot
 * connect, 3 the daemon answered with an error or broke the protocol, or the journal that
 * journal verify replayed is damaged (see hugepoolctl(1)).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hugepool.h"
#include "format.h"
#include "json.h"
#include "size.h"
#include "util.h"

#define EXIT_USAGE 1 /* bad options or command */
#define EXIT_CONNECT 2 /* no daemon to talk to, or not allowed to talk to it */
#define EXIT_DAEMON 3 /* the daemon answered with an error, the protocol broke, or a journal is damaged */

/* --- formatting helpers ------------------------------------------------------------------ */

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
	return l->class_index < st->nclasses ? st->classes[l->class_index].name : "?";
}

static int class_name_width(const struct hp_status *st, int min)
{
	int w = min;

	for (uint32_t i = 0; i < st->nclasses; i++)
		w = MAX(w, (int)strlen(st->classes[i].name));
	return w;
}

/* The daemon's counters (all uint64_t in struct hp_status), in the order stats prints them. */
static const struct {
	const char *name;
	size_t offset;
} counters[] = {
#define COUNTER(f) { #f, offsetof(struct hp_status, f) }
	COUNTER(connections_total), COUNTER(acquires),	      COUNTER(grants),
	COUNTER(releases),	    COUNTER(timeouts),	      COUNTER(denials),
	COUNTER(protocol_errors),   COUNTER(recycled_buffers), COUNTER(disconnect_releases),
#undef COUNTER
};

static uint64_t counter_value(const struct hp_status *st, size_t i)
{
	uint64_t v;

	memcpy(&v, (const char *)st + counters[i].offset, sizeof(v));
	return v;
}

/* --- the commands ------------------------------------------------------------------------ */

static void classes_text(const struct hp_status *st)
{
	int w = class_name_width(st, 5);
	char b[32];

	printf("%-*s %10s %8s %8s %8s %8s %8s\n", w, "CLASS", "SIZE", "TOTAL", "FREE", "LEASED", "WAITERS",
	       "ZEROING");
	for (uint32_t i = 0; i < st->nclasses; i++) {
		const struct hp_class_status *c = &st->classes[i];

		printf("%-*s %10s %8" PRIu32 " %8" PRIu32 " %8" PRIu32 " %8" PRIu32 " %8" PRIu32 "\n", w, c->name,
		       size_format(c->size, b, sizeof(b)), c->total, c->free, c->leased, c->waiters, c->zeroing);
	}
}

static void classes_json_array(struct json *j, const struct hp_status *st)
{
	json_open(j, "classes", '[');
	for (uint32_t i = 0; i < st->nclasses; i++) {
		const struct hp_class_status *c = &st->classes[i];

		json_open(j, NULL, '{');
		json_str(j, "name", c->name);
		json_u64(j, "size", c->size);
		json_u64(j, "total", c->total);
		json_u64(j, "free", c->free);
		json_u64(j, "leased", c->leased);
		json_u64(j, "waiters", c->waiters);
		json_u64(j, "zeroing", c->zeroing);
		json_close(j, '}');
	}
	json_close(j, ']');
}

static void status_text(const struct hp_status *st)
{
	char b1[32], b2[32], b3[64];
	uint64_t buffers = 0;

	for (uint32_t i = 0; i < st->nclasses; i++)
		buffers += st->classes[i].total;
	printf("hugepoold %s, pid %d, up %s (since %s)\n", st->daemon_version, (int)st->daemon_pid,
	       duration_format((uint64_t)uptime_seconds(st), b1, sizeof(b1)),
	       time_format(st->started_ns, b3, sizeof(b3)));
	printf("Pool:        %s in %" PRIu64 " buffers, page size %s\n",
	       size_format(st->pool_bytes, b1, sizeof(b1)), buffers, size_format(st->page_size, b2, sizeof(b2)));
	if (st->hugetlb)
		printf("Backing:     hugetlb pages\n");
	else if (st->fallback)
		printf("Backing:     regular shared memory (fallback: %s)\n", st->fallback_reason);
	else
		printf("Backing:     regular shared memory (hugepages = off)\n");
	printf("Boot:        pre-faulted in %.3f s with %" PRIu32 " threads (%.2f GB/s)\n",
	       (double)st->boot_prefault_ns / 1e9, st->boot_threads, boot_gbps(st));
	printf("Connections: %" PRIu32 " now, %" PRIu64 " since start\n\n", st->nclients, st->connections_total);
	classes_text(st);
}

static void status_json(struct json *j, const struct hp_status *st)
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
	json_u64(j, "connections", st->nclients);
	json_u64(j, "connections_total", st->connections_total);
	classes_json_array(j, st);
}

static void classes_json(struct json *j, const struct hp_status *st)
{
	classes_json_array(j, st);
}

static void leases_text(const struct hp_status *st)
{
	int w = class_name_width(st, 5);
	char b[64];

	if (st->nleases == 0) {
		printf("No leases.\n");
	} else {
		printf("%-18s %-*s %8s %8s  %s\n", "LEASE", w, "CLASS", "PID", "UID", "SINCE");
		for (uint32_t i = 0; i < st->nleases; i++) {
			const struct hp_lease_status *l = &st->leases[i];

			printf("%#-18" PRIx64 " %-*s %8d %8u  %s\n", l->lease_id, w, lease_class_name(st, l),
			       (int)l->pid, (unsigned)l->uid, time_format(l->since_ns, b, sizeof(b)));
		}
	}
	printf("\n%8s %8s %-16s %8s %12s %s\n", "PID", "UID", "NAME", "LEASES", "LEASED", "WAITING");
	for (uint32_t i = 0; i < st->nclients; i++) {
		const struct hp_client_status *c = &st->clients[i];

		printf("%8d %8u %-16s %8" PRIu32 " %12s %s\n", (int)c->pid, (unsigned)c->uid,
		       c->name[0] ? c->name : "-", c->leases, size_format(c->leased_bytes, b, sizeof(b)),
		       c->waiting ? "yes" : "no");
	}
}

static void leases_json(struct json *j, const struct hp_status *st)
{
	char b[64];

	json_open(j, "leases", '[');
	for (uint32_t i = 0; i < st->nleases; i++) {
		const struct hp_lease_status *l = &st->leases[i];

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
	for (uint32_t i = 0; i < st->nclients; i++) {
		const struct hp_client_status *c = &st->clients[i];

		json_open(j, NULL, '{');
		json_u64(j, "pid", (uint64_t)c->pid);
		json_u64(j, "uid", c->uid);
		json_u64(j, "gid", c->gid);
		json_str(j, "name", c->name);
		json_u64(j, "leases", c->leases);
		json_u64(j, "leased_bytes", c->leased_bytes);
		json_bool(j, "waiting", c->waiting);
		json_str(j, "connected", time_format(c->connected_ns, b, sizeof(b)));
		json_close(j, '}');
	}
	json_close(j, ']');
}

static void stats_text(const struct hp_status *st)
{
	for (size_t i = 0; i < ARRAY_SIZE(counters); i++)
		printf("%-20s %" PRIu64 "\n", counters[i].name, counter_value(st, i));
}

static void stats_json(struct json *j, const struct hp_status *st)
{
	for (size_t i = 0; i < ARRAY_SIZE(counters); i++)
		json_u64(j, counters[i].name, counter_value(st, i));
}

/* --- spill streams ------------------------------------------------------------------------- */

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

/* By uid, then by pid: the order in which spill prints clients (see run_spill). */
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
	while (*i < st->nclients && !client_spills(&st->clients[*i]))
		(*i)++;
	if (*i >= st->nclients)
		return false;
	*u = (struct spill_uid){ .uid = st->clients[*i].uid };
	for (; *i < st->nclients && st->clients[*i].uid == u->uid; (*i)++) {
		const struct hp_client_status *c = &st->clients[*i];

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

static void spill_text(const struct hp_status *st)
{
	const struct hp_spill_status *sp = &st->spill;
	char b1[64], b2[64], b3[32];
	struct spill_uid u;
	uint32_t i = 0;

	printf("Directory:   %s (nameless files: %s)\n", sp->directory, sp->method);
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
		const struct hp_client_status *c = &st->clients[i];

		if (!client_spills(c))
			continue;
		printf("%8d %-16s %8u %6" PRIu32 " %12s %10" PRIu64 " %12s\n", (int)c->pid, c->name[0] ? c->name : "-",
		       (unsigned)c->uid, c->spill_files, size_format(c->spill_bytes, b1, sizeof(b1)),
		       c->spill_streams_memory, size_format(c->spill_bytes_memory, b2, sizeof(b2)));
	}
}

static void spill_json(struct json *j, const struct hp_status *st)
{
	const struct hp_spill_status *sp = &st->spill;
	struct spill_uid u;
	uint32_t i = 0;

	json_str(j, "directory", sp->directory);
	json_str(j, "method", sp->method);
	json_u64(j, "threshold", sp->threshold);
	json_u64(j, "max_bytes", sp->max_bytes);
	json_u64(j, "max_files", sp->max_files);
	json_u64(j, "max_bytes_per_uid", sp->max_bytes_per_uid);
	json_u64(j, "max_files_per_uid", sp->max_files_per_uid);
	json_u64(j, "bytes", sp->bytes);
	json_u64(j, "files", sp->files);
	json_u64(j, "streams_memory", sp->streams_memory);
	json_u64(j, "bytes_memory", sp->bytes_memory);
	json_u64(j, "files_created", sp->files_created);
	json_u64(j, "bytes_charged_total", sp->bytes_charged_total);
	json_u64(j, "refusals", sp->refusals);
	json_u64(j, "truncated", sp->truncated);
	json_u64(j, "lingering", sp->lingering);
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
	for (i = 0; i < st->nclients; i++) {
		const struct hp_client_status *c = &st->clients[i];

		if (!client_spills(c))
			continue;
		json_open(j, NULL, '{');
		json_u64(j, "pid", (uint64_t)c->pid);
		json_str(j, "name", c->name);
		json_u64(j, "uid", c->uid);
		json_u64(j, "files", c->spill_files);
		json_u64(j, "bytes", c->spill_bytes);
		json_u64(j, "streams_memory", c->spill_streams_memory);
		json_u64(j, "bytes_memory", c->spill_bytes_memory);
		json_close(j, '}');
	}
	json_close(j, ']');
}


/* --- journals: the daemon's view ------------------------------------------------------------ */

static const char *journal_state_name(int state)
{
	static const char *const names[] = { "ok", "full", "failed" };

	return state >= 0 && (size_t)state < ARRAY_SIZE(names) ? names[state] : "unknown";
}

static double us_of(uint64_t ns)
{
	return (double)ns / 1e3;
}

static const struct hp_journal_status *journal_find(const struct hp_status *st, const char *name)
{
	for (uint32_t i = 0; i < st->njournals; i++)
		if (strcmp(st->journals[i].name, name) == 0)
			return &st->journals[i];
	return NULL;
}

static void journals_text(const struct hp_status *st)
{
	int w = 7;
	char segs[32];

	if (st->njournals == 0) {
		printf("No journals.\n");
		return;
	}
	for (uint32_t i = 0; i < st->njournals; i++)
		w = MAX(w, (int)strlen(st->journals[i].name));
	printf("%-*s %-6s %-8s %10s %7s %8s %10s %9s %6s %9s %9s %9s\n", w, "JOURNAL", "STATE", "BACKEND",
	       "DURABLE", "WRITERS", "SEGMENTS", "APPENDS", "BATCHES", "MEAN", "P50(us)", "P99(us)", "P999(us)");
	for (uint32_t i = 0; i < st->njournals; i++) {
		const struct hp_journal_status *js = &st->journals[i];

		snprintf(segs, sizeof(segs), "%" PRIu32 "/%" PRIu32, js->segments_used, js->segments);
		printf("%-*s %-6s %-8s %10" PRIu64 " %7" PRIu32 " %8s %10" PRIu64 " %9" PRIu64
		       " %6.1f %9.1f %9.1f %9.1f\n",
		       w, js->name, journal_state_name(js->state), js->backend, js->durable_lsn, js->writers, segs,
		       js->appends, js->batches, js->mean_batch, us_of(js->sync_p50_ns), us_of(js->sync_p99_ns),
		       us_of(js->sync_p999_ns));
	}
}

/* Every member of struct hp_journal_status, under its own name (state as a word). */
static void journal_json_members(struct json *j, const struct hp_journal_status *js)
{
	json_str(j, "name", js->name);
	json_str(j, "state", journal_state_name(js->state));
	json_int(j, "error", js->error);
	json_str(j, "error_text", js->error < 0 ? strerror(-js->error) : "");
	json_str(j, "backend", js->backend);
	json_bool(j, "direct", js->direct);
	json_u64(j, "segment_size", js->segment_size);
	json_u64(j, "segments", js->segments);
	json_u64(j, "segments_used", js->segments_used);
	json_u64(j, "next_lsn", js->next_lsn);
	json_u64(j, "durable_lsn", js->durable_lsn);
	json_u64(j, "retain_lsn", js->retain_lsn);
	json_u64(j, "writers", js->writers);
	json_u64(j, "appends", js->appends);
	json_u64(j, "bytes", js->bytes);
	json_u64(j, "batches", js->batches);
	json_u64(j, "syncs", js->syncs);
	json_double(j, "mean_batch", js->mean_batch);
	json_u64(j, "sync_p50_ns", js->sync_p50_ns);
	json_u64(j, "sync_p99_ns", js->sync_p99_ns);
	json_u64(j, "sync_p999_ns", js->sync_p999_ns);
	json_u64(j, "sync_max_ns", js->sync_max_ns);
	json_u64(j, "recovered_records", js->recovered_records);
	json_str(j, "note", js->note);
	json_str(j, "recovery", js->recovery);
}

static void journals_json(struct json *j, const struct hp_status *st)
{
	json_open(j, "journals", '[');
	for (uint32_t i = 0; i < st->njournals; i++) {
		json_open(j, NULL, '{');
		journal_json_members(j, &st->journals[i]);
		json_close(j, '}');
	}
	json_close(j, ']');
}

static void journal_stat_text(const struct hp_journal_status *js)
{
	char b[32];

	printf("Journal:      %s\n", js->name);
	if (js->state == 1)
		printf("State:        full (every segment holds records not truncated yet; appends wait)\n");
	else if (js->state == 2)
		printf("State:        failed, read-only until the daemon restarts: %s\n",
		       js->error < 0 ? strerror(-js->error) : "unknown error");
	else
		printf("State:        %s\n", journal_state_name(js->state));
	printf("Backend:      %s, %s\n", js->backend, js->direct ? "O_DIRECT" : "page cache");
	printf("Note:         %s\n", js->note[0] ? js->note : "-");
	printf("Segments:     %" PRIu32 " of %" PRIu32 " in use, %s each\n", js->segments_used, js->segments,
	       size_format(js->segment_size, b, sizeof(b)));
	printf("LSNs:         next %" PRIu64 ", durable up to %" PRIu64 "%s\n", js->next_lsn, js->durable_lsn,
	       js->durable_lsn ? "" : " (none yet)");
	if (js->retain_lsn)
		printf("Truncated:    below LSN %" PRIu64 "\n", js->retain_lsn);
	else
		printf("Truncated:    never\n");
	printf("Writers:      %" PRIu32 "\n", js->writers);
	printf("Appends:      %" PRIu64 " records, %s on disk with their headers\n", js->appends,
	       size_format(js->bytes, b, sizeof(b)));
	printf("Batches:      %" PRIu64 ", %.2f records each on average; %" PRIu64 " syncs\n", js->batches,
	       js->mean_batch, js->syncs);
	printf("Sync latency: p50 %.1f us, p99 %.1f us, p99.9 %.1f us, max %.1f us\n", us_of(js->sync_p50_ns),
	       us_of(js->sync_p99_ns), us_of(js->sync_p999_ns), us_of(js->sync_max_ns));
	printf("Recovery:     %s (%" PRIu64 " records)\n", js->recovery[0] ? js->recovery : "-",
	       js->recovered_records);
}

/* --- command lines ------------------------------------------------------------------------- */

/* Options beyond -s, -h and -V: a command says which of them apply to it. */
enum {
	OPT_JSON = 1u << 0,
	OPT_FROM = 1u << 1,
	OPT_MAX = 1u << 2,
	OPT_HEX = 1u << 3,
};

/* getopt values of the options without a short form */
enum { LONGOPT_FROM = 256, LONGOPT_MAX, LONGOPT_HEX };

static const struct option_info {
	unsigned bit;
	int val; /* getopt's */
	const char *name;
} option_infos[] = {
	{ OPT_JSON, 'j', "--json" },
	{ OPT_FROM, LONGOPT_FROM, "--from" },
	{ OPT_MAX, LONGOPT_MAX, "--max" },
	{ OPT_HEX, LONGOPT_HEX, "--hex" },
};

/* What positional arguments are, so that main checks them before connecting. */
enum arg_kind {
	ARG_JOURNAL, /* a journal name: 1..HP_NAME_MAX-1 of [A-Za-z0-9_.-] */
	ARG_LSN, /* a positive decimal integer */
};

#define ARGS_MAX 2

struct arg {
	const char *name; /* as --help and the errors show it */
	enum arg_kind kind;
};

/* One run: the options given, the command's checked arguments and the connection. */
struct invocation {
	char cmd[64]; /* the command's words, "journal dump" */
	unsigned given; /* OPT_* seen on the command line */
	bool json, hex;
	uint64_t from, max; /* --from, --max; 0 when not given */
	const char *journal; /* ARG_JOURNAL */
	uint64_t lsn; /* ARG_LSN */
	const char *path; /* the daemon's socket */
	hp_conn *conn;
};

struct command {
	const char *name;
	const char *help;
	/* a group: the next word names one of these, and they hold the rest */
	const struct command *sub;
	size_t nsub;
	struct arg args[ARGS_MAX]; /* positional, all required; name NULL ends the list */
	unsigned opts; /* OPT_* that apply */
	int (*run)(const struct command *cmd, struct invocation *inv); /* returns the exit status */
	/* for run_status: print one hp_status (json: members of the top-level object) */
	void (*text)(const struct hp_status *st);
	void (*json)(struct json *j, const struct hp_status *st);
};

static void report(int err, const char *detail, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* "hugepoolctl: WHAT: <hp_strerror text> (<detail: the daemon's own words, or a hint>)" */
static void report(int err, const char *detail, const char *fmt, ...)
{
	va_list ap;

	fputs("hugepoolctl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, ": %s", hp_strerror(err));
	if (detail && *detail)
		fprintf(stderr, " (%s)", detail);
	fputc('\n', stderr);
}

static int get_status(struct invocation *inv, struct hp_status **ret)
{
	int r = hp_status(inv->conn, ret);

	if (r < 0) {
		report(r, hp_last_error(inv->conn), "cannot get the status of the daemon at '%s'", inv->path);
		return EXIT_DAEMON;
	}
	return 0;
}

static int no_journal(const struct invocation *inv)
{
	fprintf(stderr, "hugepoolctl: no journal \"%s\"\n", inv->journal);
	return EXIT_DAEMON;
}

/* What the reader's own errors mean (the daemon gives no text for them). */
static const char *reader_hint(int err)
{
	switch (err) {
	case -ESTALE:
		return "the records were recycled while being read";
	case -EUCLEAN:
		return "a segment is corrupt before the durable end";
	}
	return NULL;
}

/* A journal call failed: say why (the daemon's words first) and return the exit status. */
static int journal_failed(const struct invocation *inv, int err, const char *what)
{
	const char *detail = hp_last_error(inv->conn);

	if (err == -ENOENT) {
		/* the daemon says: no journal "x" */
		if (*detail)
			fprintf(stderr, "hugepoolctl: %s\n", detail);
		else
			no_journal(inv);
		return EXIT_DAEMON;
	}
	report(err, *detail ? detail : reader_hint(err), "%s journal \"%s\"", what, inv->journal);
	return EXIT_DAEMON;
}

/* --- the commands ------------------------------------------------------------------------ */

/* Print st with the command's printers, then free it. */
static int print_status(const struct command *cmd, struct invocation *inv, struct hp_status *st)
{
	if (inv->json) {
		struct json j;

		json_line_begin(&j);
		cmd->json(&j, st);
		json_line_end(&j);
	} else {
		cmd->text(st);
	}
	hp_status_free(st);
	return 0;
}

/* A view of the daemon's state: one hp_status, printed by the command's printers. */
static int run_status(const struct command *cmd, struct invocation *inv)
{
	struct hp_status *st;
	int r = get_status(inv, &st);

	if (r)
		return r;
	return print_status(cmd, inv, st);
}

/* The same, with the clients sorted by uid and pid, so that the printers add up each uid's in one pass. */
static int run_spill(const struct command *cmd, struct invocation *inv)
{
	struct hp_status *st;
	int r = get_status(inv, &st);

	if (r)
		return r;
	qsort(st->clients, st->nclients, sizeof(*st->clients), client_compare);
	return print_status(cmd, inv, st);
}

static int run_journal_stat(const struct command *cmd, struct invocation *inv)
{
	const struct hp_journal_status *js;
	struct hp_status *st;
	int r = get_status(inv, &st);

	(void)cmd;
	if (r)
		return r;
	js = journal_find(st, inv->journal);
	if (!js) {
		hp_status_free(st);
		return no_journal(inv);
	}
	if (inv->json) {
		struct json j;

		json_line_begin(&j);
		journal_json_members(&j, js);
		json_line_end(&j);
	} else {
		journal_stat_text(js);
	}
	hp_status_free(st);
	return 0;
}

/*
 * Replay every durable record through the reader and check that the LSNs follow each other with
 * no gap and reach what was durable when the check began (the reader checks each record's CRC).
 * A reader that stops short with 0 ("nothing more right now") below that point means damage too:
 * the reader reports a bad record at the end of the segments it holds that way.
 */
static int run_journal_verify(const struct command *cmd, struct invocation *inv)
{
	uint64_t durable, first = 0, last = 0, records = 0, bytes = 0;
	const struct hp_journal_status *js;
	hp_journal_reader *rd;
	struct hp_status *st;
	char problem[256] = "";
	bool damaged = true; /* false: the check could not finish (recycled meanwhile, daemon gone) */
	int r = get_status(inv, &st), err = 0;

	(void)cmd;
	if (r)
		return r;
	js = journal_find(st, inv->journal);
	durable = js ? js->durable_lsn : 0;
	hp_status_free(st);
	if (!js)
		return no_journal(inv);
	r = hp_journal_reader_open(inv->conn, inv->journal, 1, &rd);
	if (r < 0)
		return journal_failed(inv, r, "cannot read");
	for (;;) {
		const void *data;
		uint64_t lsn;
		size_t len;

		r = hp_journal_reader_next(rd, &lsn, &data, &len);
		if (r < 0) {
			const char *hint = reader_hint(r);

			err = r;
			damaged = r == -EUCLEAN;
			snprintf(problem, sizeof(problem), "reading after LSN %" PRIu64 " failed: %s%s%s%s", last,
				 hp_strerror(r), hint ? " (" : "", hint ? hint : "", hint ? ")" : "");
			break;
		}
		if (r == 0)
			break;
		if (records && lsn != last + 1) {
			snprintf(problem, sizeof(problem),
				 "LSN %" PRIu64 " follows LSN %" PRIu64 ": records %" PRIu64 "..%" PRIu64 " are missing",
				 lsn, last, last + 1, lsn - 1);
			break;
		}
		if (!records)
			first = lsn;
		last = lsn;
		records++;
		bytes += len;
	}
	hp_journal_reader_close(rd);
	if (!problem[0] && last < durable)
		snprintf(problem, sizeof(problem),
			 "the records end at LSN %" PRIu64 " but the journal was durable up to LSN %" PRIu64
			 " when the check began",
			 last, durable);

	if (inv->json) {
		struct json j;

		json_line_begin(&j);
		json_str(&j, "journal", inv->journal);
		json_bool(&j, "intact", !problem[0]);
		json_str(&j, "result", !problem[0] ? "intact" : damaged ? "damaged" : "incomplete");
		json_u64(&j, "records", records);
		json_u64(&j, "bytes", bytes);
		json_u64(&j, "first_lsn", first);
		json_u64(&j, "last_lsn", last);
		json_u64(&j, "durable_lsn", durable);
		json_int(&j, "error", err);
		json_str(&j, "problem", problem);
		json_line_end(&j);
	} else {
		printf("Journal:  %s\n", inv->journal);
		if (records)
			printf("Records:  %" PRIu64 ", LSN %" PRIu64 " to %" PRIu64 "%s\n", records, first, last,
			       first > 1 ? " (those before were truncated and their space reused)" : "");
		else
			printf("Records:  none\n");
		printf("Payload:  %" PRIu64 " bytes\n", bytes);
		printf("Durable:  up to LSN %" PRIu64 " when the check began\n", durable);
		printf("Result:   %s%s\n", !problem[0] ? "intact" : damaged ? "damaged: " : "incomplete: ", problem);
	}
	if (problem[0]) {
		fprintf(stderr, "hugepoolctl: journal \"%s\" %s: %s\n", inv->journal,
			damaged ? "is damaged" : "could not be verified", problem);
		return EXIT_DAEMON;
	}
	return 0;
}

/* Print records from --from on (default 1), at most --max of them (default all). */
static int run_journal_dump(const struct command *cmd, struct invocation *inv)
{
	uint64_t from = inv->from ? inv->from : 1, n = 0;
	hp_journal_reader *rd;
	int r;

	(void)cmd;
	r = hp_journal_reader_open(inv->conn, inv->journal, from, &rd);
	if (r < 0)
		return journal_failed(inv, r, "cannot read");
	while (!inv->max || n < inv->max) {
		const unsigned char *p;
		const void *data;
		uint64_t lsn;
		size_t len;

		if (ferror(stdout))
			break; /* main says so */
		r = hp_journal_reader_next(rd, &lsn, &data, &len);
		if (r <= 0)
			break;
		p = data;
		if (n++ == 0 && inv->from && lsn > inv->from)
			fprintf(stderr, "hugepoolctl: records %" PRIu64 "..%" PRIu64 " are no longer kept; starting at LSN %" PRIu64 "\n",
				inv->from, lsn - 1, lsn);
		if (inv->json) {
			struct json j;

			json_line_begin(&j);
			json_u64(&j, "lsn", lsn);
			json_u64(&j, "len", len);
			json_str(&j, "encoding", inv->hex ? "hex" : "base64");
			json_key(&j, "payload");
			fputc('"', stdout);
			if (inv->hex)
				print_hex(stdout, p, len);
			else
				print_base64(stdout, p, len);
			fputc('"', stdout);
			json_line_end(&j);
		} else {
			printf("%" PRIu64 " %zu", lsn, len);
			if (inv->hex) {
				/* an empty payload is an empty third field */
				if (len)
					fputc(' ', stdout);
				print_hex(stdout, p, len);
			} else {
				fputc(' ', stdout);
				print_escaped(stdout, p, len);
			}
			fputc('\n', stdout);
		}
	}
	hp_journal_reader_close(rd);
	if (r < 0)
		return journal_failed(inv, r, "reading");
	return 0;
}

static int run_journal_truncate(const struct command *cmd, struct invocation *inv)
{
	const struct hp_journal_status *js;
	struct hp_status *st;
	int r;

	(void)cmd;
	r = hp_journal_truncate(inv->conn, inv->journal, inv->lsn);
	if (r < 0)
		return journal_failed(inv, r, "cannot truncate");
	/* the daemon keeps what is not durable yet, and never takes a truncation back: say where it is */
	r = get_status(inv, &st);
	if (r)
		return r;
	js = journal_find(st, inv->journal);
	if (!js) {
		hp_status_free(st);
		return no_journal(inv);
	}
	if (js->durable_lsn == 0)
		printf("Journal \"%s\" has no durable record yet: nothing was truncated.\n", js->name);
	else if (js->retain_lsn == inv->lsn)
		printf("Journal \"%s\" truncated: the records below LSN %" PRIu64 " may be discarded.\n", js->name,
		       js->retain_lsn);
	else if (js->retain_lsn < inv->lsn)
		printf("Journal \"%s\" truncated below LSN %" PRIu64 ", not %" PRIu64
		       ": the records after the last durable one, LSN %" PRIu64 ", are kept.\n",
		       js->name, js->retain_lsn, inv->lsn, js->durable_lsn);
	else
		printf("Journal \"%s\" was already truncated below LSN %" PRIu64 "; nothing changed.\n", js->name,
		       js->retain_lsn);
	hp_status_free(st);
	return 0;
}

static const struct command journal_commands[] = {
	{ .name = "list",
	  .help = "each journal: state, LSNs, batches, sync latency",
	  .opts = OPT_JSON,
	  .run = run_status,
	  .text = journals_text,
	  .json = journals_json },
	{ .name = "stat",
	  .help = "everything the daemon reports about a journal",
	  .args = { { "NAME", ARG_JOURNAL } },
	  .opts = OPT_JSON,
	  .run = run_journal_stat },
	{ .name = "verify",
	  .help = "replay the durable records, check none is missing",
	  .args = { { "NAME", ARG_JOURNAL } },
	  .opts = OPT_JSON,
	  .run = run_journal_verify },
	{ .name = "dump",
	  .help = "print the durable records (--from, --max, --hex)",
	  .args = { { "NAME", ARG_JOURNAL } },
	  .opts = OPT_JSON | OPT_FROM | OPT_MAX | OPT_HEX,
	  .run = run_journal_dump },
	{ .name = "truncate",
	  .help = "let the daemon reuse the space below LSN",
	  .args = { { "NAME", ARG_JOURNAL }, { "LSN", ARG_LSN } },
	  .run = run_journal_truncate },
};

static const struct command commands[] = {
	{ .name = "status",
	  .help = "the daemon, its pool, its boot and its classes",
	  .opts = OPT_JSON,
	  .run = run_status,
	  .text = status_text,
	  .json = status_json },
	{ .name = "classes",
	  .help = "the buffer classes and how many buffers are free",
	  .opts = OPT_JSON,
	  .run = run_status,
	  .text = classes_text,
	  .json = classes_json },
	{ .name = "leases",
	  .help = "who holds which buffer, and the connected clients",
	  .opts = OPT_JSON,
	  .run = run_status,
	  .text = leases_text,
	  .json = leases_json },
	{ .name = "stats",
	  .help = "the daemon's counters since it started",
	  .opts = OPT_JSON,
	  .run = run_status,
	  .text = stats_text,
	  .json = stats_json },
	{ .name = "spill",
	  .help = "spill files, bytes and limits, per uid and client",
	  .opts = OPT_JSON,
	  .run = run_spill,
	  .text = spill_text,
	  .json = spill_json },
	{ .name = "journal", .sub = journal_commands, .nsub = ARRAY_SIZE(journal_commands) },
};

/* --- main -------------------------------------------------------------------------------- */

/* "journal truncate NAME LSN" */
static void command_synopsis(const char *prefix, const struct command *c, char *buf, size_t len)
{
	size_t n = (size_t)snprintf(buf, len, "%s%s%s", prefix, *prefix ? " " : "", c->name);

	for (unsigned a = 0; a < ARGS_MAX && c->args[a].name && n < len; a++)
		n += (size_t)snprintf(buf + n, len - n, " %s", c->args[a].name);
}

static void usage_commands(FILE *f, const char *prefix, const struct command *table, size_t n)
{
	char b[64];

	for (size_t i = 0; i < n; i++) {
		command_synopsis(prefix, &table[i], b, sizeof(b));
		if (table[i].sub)
			usage_commands(f, b, table[i].sub, table[i].nsub);
		else
			fprintf(f, "  %-26s %s\n", b, table[i].help);
	}
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: hugepoolctl [OPTION]... COMMAND [ARGUMENT]...\n"
		"Show the state of hugepoold, the pre-faulted hugepage buffer pool, and look\n"
		"after its journals.\n"
		"\n"
		"Commands:\n");
	usage_commands(f, "", commands, ARRAY_SIZE(commands));
	fprintf(f,
		"\n"
		"Options:\n"
		"  -s, --socket=PATH  the daemon's socket (default $HUGEPOOL_SOCKET, else\n"
		"                     " HP_DEFAULT_SOCKET ")\n"
		"  -j, --json         print JSON instead of text (all but journal truncate;\n"
		"                     journal dump prints one object per record and line)\n"
		"      --from=LSN     journal dump: start at record LSN (default 1)\n"
		"      --max=N        journal dump: print at most N records\n"
		"      --hex          journal dump: print the payloads in hexadecimal\n"
		"  -h, --help         show this help and exit\n"
		"  -V, --version      show the version and exit\n"
		"\n"
		"Exit status: 0 success, 1 usage error, 2 cannot connect to the daemon,\n"
		"3 the daemon returned an error (such as no such journal), a protocol error\n"
		"occurred, or journal verify found the journal damaged.\n"
		"See hugepoolctl(1).\n");
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs("hugepoolctl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\nTry 'hugepoolctl --help' for more information.\n", stderr);
	return EXIT_USAGE;
}

/* A positive decimal integer: digits only, no sign, no blank, no overflow. */
static bool parse_positive(const char *s, uint64_t *ret)
{
	uint64_t v = 0;

	if (!*s)
		return false;
	for (; *s; s++) {
		unsigned d = (unsigned)(*s - '0');

		if (d > 9 || v > (UINT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	*ret = v;
	return v > 0;
}

static bool journal_name_valid(const char *s)
{
	size_t n = strlen(s);

	return n > 0 && n < HP_NAME_MAX &&
	       strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") == n;
}

static const char *option_name(int val)
{
	for (size_t i = 0; i < ARRAY_SIZE(option_infos); i++)
		if (option_infos[i].val == val)
			return option_infos[i].name;
	return val == 's' ? "-s/--socket" : "?";
}

/*
 * Find the command that words[0..] name, walking into groups; check its arguments and options
 * into inv. Returns 0 or the usage error's exit status.
 */
static int resolve(char **words, int nwords, const struct command **ret, struct invocation *inv)
{
	const struct command *table = commands, *cmd = NULL;
	size_t n = ARRAY_SIZE(commands);
	int w = 0;
	unsigned nargs = 0;

	inv->cmd[0] = '\0';
	while (!cmd || cmd->sub) {
		const char *group = inv->cmd;

		if (w >= nwords) {
			char names[128] = "";

			for (size_t i = 0, used = 0; i < n && used < sizeof(names); i++)
				used += (size_t)snprintf(names + used, sizeof(names) - used, "%s%s", i ? ", " : "",
							 table[i].name);
			return *group ? usage_error("missing %s command (one of: %s)", group, names)
				      : usage_error("missing command");
		}
		cmd = NULL;
		for (size_t i = 0; i < n; i++)
			if (strcmp(words[w], table[i].name) == 0)
				cmd = &table[i];
		if (!cmd)
			return *group ? usage_error("unknown %s command '%s'", group, words[w])
				      : usage_error("unknown command '%s'", words[w]);
		snprintf(inv->cmd + strlen(inv->cmd), sizeof(inv->cmd) - strlen(inv->cmd), "%s%s",
			 *group ? " " : "", cmd->name);
		w++;
		table = cmd->sub;
		n = cmd->nsub;
	}
	while (nargs < ARGS_MAX && cmd->args[nargs].name)
		nargs++;
	if ((unsigned)(nwords - w) < nargs) {
		char synopsis[64];

		command_synopsis("", cmd, synopsis, sizeof(synopsis));
		return usage_error("missing %s (usage: %s %s)", cmd->args[nwords - w].name, inv->cmd,
				   strchr(synopsis, ' ') + 1);
	}
	if ((unsigned)(nwords - w) > nargs)
		return usage_error("unexpected argument '%s'", words[w + (int)nargs]);
	for (unsigned a = 0; a < nargs; a++) {
		const char *v = words[w + (int)a];

		switch (cmd->args[a].kind) {
		case ARG_JOURNAL:
			if (!journal_name_valid(v))
				return usage_error("invalid journal name '%s': 1 to %d letters, digits, '_', '.' or '-'",
						   v, HP_NAME_MAX - 1);
			inv->journal = v;
			break;
		case ARG_LSN:
			if (!parse_positive(v, &inv->lsn))
				return usage_error("invalid %s '%s': must be a positive integer", cmd->args[a].name, v);
			break;
		}
	}
	for (size_t i = 0; i < ARRAY_SIZE(option_infos); i++)
		if ((inv->given & option_infos[i].bit) && !(cmd->opts & option_infos[i].bit))
			return usage_error("option '%s' does not apply to '%s'", option_infos[i].name, inv->cmd);
	*ret = cmd;
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' }, { "json", no_argument, NULL, 'j' },
		{ "from", required_argument, NULL, LONGOPT_FROM }, { "max", required_argument, NULL, LONGOPT_MAX },
		{ "hex", no_argument, NULL, LONGOPT_HEX },	    { "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },	    { NULL, 0, NULL, 0 },
	};
	struct invocation inv = { 0 };
	const struct command *cmd = NULL;
	int c, r;

	opterr = 0; /* say it ourselves, as "hugepoolctl: ..." whatever argv[0] is */
	while ((c = getopt_long(argc, argv, ":s:jhV", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			if (!*optarg)
				return usage_error("the socket path is empty");
			inv.path = optarg;
			break;
		case 'j':
			inv.json = true;
			inv.given |= OPT_JSON;
			break;
		case LONGOPT_FROM:
			if (!parse_positive(optarg, &inv.from))
				return usage_error("invalid LSN '%s' for --from: must be a positive integer", optarg);
			inv.given |= OPT_FROM;
			break;
		case LONGOPT_MAX:
			if (!parse_positive(optarg, &inv.max))
				return usage_error("invalid count '%s' for --max: must be a positive integer", optarg);
			inv.given |= OPT_MAX;
			break;
		case LONGOPT_HEX:
			inv.hex = true;
			inv.given |= OPT_HEX;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("hugepoolctl %s\n", HUGEPOOL_VERSION);
			return 0;
		case ':':
			return usage_error("option '%s' requires an argument", option_name(optopt));
		default:
			/* a bad short option sets optopt to itself; a bad long one to 0 or to its val */
			if (optopt >= '0' && optopt <= '9')
				return usage_error("invalid option '-%c' (LSNs and counts are positive integers)", optopt);
			if (optopt > 0 && optopt < 128 && !strchr("jhV", optopt))
				return usage_error("invalid option '-%c'", optopt);
			return usage_error("invalid option '%s'", argv[optind - 1]);
		}
	}
	r = resolve(argv + optind, argc - optind, &cmd, &inv);
	if (r)
		return r;

	if (!inv.path)
		inv.path = getenv("HUGEPOOL_SOCKET");
	if (!inv.path || !*inv.path)
		inv.path = HP_DEFAULT_SOCKET;
	r = hp_connect(inv.path, &inv.conn);
	if (r < 0) {
		/* the library's words: the daemon's reason for a refusal, or the path and system error */
		fprintf(stderr, "hugepoolctl: %s\n", *hp_last_error(NULL) ? hp_last_error(NULL) : hp_strerror(r));
		/* a daemon that answered and refused (limits, protocol) is running: that is not 2 */
		return r == -EUSERS || r == -EPROTONOSUPPORT || r == -EPROTO ? EXIT_DAEMON : EXIT_CONNECT;
	}
	r = cmd->run(cmd, &inv);
	hp_disconnect(inv.conn);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "hugepoolctl: cannot write the output: %s\n", strerror(errno));
		return r ? r : EXIT_USAGE;
	}
	return r;
}
