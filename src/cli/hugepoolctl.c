/* SPDX-License-Identifier: MIT */
/*
 * hugepoolctl.c - look at a running hugepoold: its state, its classes, its leases, its counters.
 *
 * Every command is one hp_status() call through libhugepool's public API, printed either as
 * text tables for people or (--json) as one JSON object for programs. The commands table below
 * pairs each command with its two printers; main only parses options, connects and dispatches.
 * Data goes to stdout, diagnostics to stderr. Exit status: 0 success, 1 usage error, 2 cannot
 * connect, 3 the daemon answered with an error or broke the protocol (see hugepoolctl(1)).
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
#include "size.h"
#include "util.h"

#define EXIT_USAGE 1 /* bad options or command */
#define EXIT_CONNECT 2 /* no daemon to talk to, or not allowed to talk to it */
#define EXIT_DAEMON 3 /* the daemon answered with an error, or the protocol broke */

/* --- a tiny JSON writer ------------------------------------------------------------------- */

struct json {
	FILE *f;
	bool comma; /* a value was written at this level: the next one needs a comma */
};

/* A JSON string. Bytes >= 0x80 are escaped one by one, so the output is valid even for bad UTF-8. */
static void json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p == '\n')
			fputs("\\n", f);
		else if (*p == '\t')
			fputs("\\t", f);
		else if (*p < 0x20 || *p >= 0x7f)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

/* Start a member ("key":) of an object, or an element of an array when key is NULL. */
static void json_key(struct json *j, const char *key)
{
	if (j->comma)
		fputc(',', j->f);
	j->comma = true;
	if (key) {
		json_string(j->f, key);
		fputc(':', j->f);
	}
}

static void json_open(struct json *j, const char *key, char bracket)
{
	json_key(j, key);
	fputc(bracket, j->f);
	j->comma = false;
}

static void json_close(struct json *j, char bracket)
{
	fputc(bracket, j->f);
	j->comma = true;
}

static void json_str(struct json *j, const char *key, const char *v)
{
	json_key(j, key);
	json_string(j->f, v);
}

static void json_u64(struct json *j, const char *key, uint64_t v)
{
	json_key(j, key);
	fprintf(j->f, "%" PRIu64, v);
}

static void json_bool(struct json *j, const char *key, bool v)
{
	json_key(j, key);
	fputs(v ? "true" : "false", j->f);
}

static void json_double(struct json *j, const char *key, double v)
{
	json_key(j, key);
	fprintf(j->f, "%.6g", v);
}

/* --- formatting helpers ------------------------------------------------------------------ */

/* CLOCK_REALTIME ns as local time in ISO 8601, "2026-11-22T09:30:00+01:00"; "-" for 0. */
static const char *time_format(uint64_t ns, char *buf, size_t len)
{
	time_t t = (time_t)(ns / 1000000000u);
	struct tm tm;
	size_t n;

	if (ns == 0 || !localtime_r(&t, &tm) || (n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S%z", &tm)) < 5 ||
	    (buf[n - 5] != '+' && buf[n - 5] != '-') || n + 2 > len) {
		snprintf(buf, len, "-");
		return buf;
	}
	/* %z gives +hhmm; ISO 8601's extended format wants +hh:mm */
	memmove(buf + n - 1, buf + n - 2, 3);
	buf[n - 2] = ':';
	return buf;
}

/* "3d 4h 5m 6s", leaving out leading zero units. */
static const char *duration_format(uint64_t s, char *buf, size_t len)
{
	uint64_t d = s / 86400, h = s / 3600 % 24, m = s / 60 % 60, sec = s % 60;

	if (d)
		snprintf(buf, len, "%" PRIu64 "d %" PRIu64 "h %" PRIu64 "m %" PRIu64 "s", d, h, m, sec);
	else if (h)
		snprintf(buf, len, "%" PRIu64 "h %" PRIu64 "m %" PRIu64 "s", h, m, sec);
	else if (m)
		snprintf(buf, len, "%" PRIu64 "m %" PRIu64 "s", m, sec);
	else
		snprintf(buf, len, "%" PRIu64 "s", sec);
	return buf;
}

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

static const struct command {
	const char *name;
	const char *help;
	void (*text)(const struct hp_status *st);
	void (*json)(struct json *j, const struct hp_status *st); /* members of the top-level object */
} commands[] = {
	{ "status", "the daemon, its pool, its boot and its classes", status_text, status_json },
	{ "classes", "the buffer classes and how many buffers are free", classes_text, classes_json },
	{ "leases", "who holds which buffer, and the connected clients", leases_text, leases_json },
	{ "stats", "the daemon's counters since it started", stats_text, stats_json },
};

/* --- main -------------------------------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: hugepoolctl [OPTION]... COMMAND\n"
		"Show the state of hugepoold, the pre-faulted hugepage buffer pool.\n"
		"\n"
		"Commands:\n");
	for (size_t i = 0; i < ARRAY_SIZE(commands); i++)
		fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
	fprintf(f,
		"\n"
		"Options:\n"
		"  -s, --socket=PATH  the daemon's socket (default $HUGEPOOL_SOCKET, else\n"
		"                     " HP_DEFAULT_SOCKET ")\n"
		"  -j, --json         print one JSON object instead of text\n"
		"  -h, --help         show this help and exit\n"
		"  -V, --version      show the version and exit\n"
		"\n"
		"Exit status: 0 success, 1 usage error, 2 cannot connect to the daemon,\n"
		"3 the daemon returned an error or a protocol error occurred.\n"
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

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' }, { "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },	    { "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const struct command *cmd = NULL;
	const char *path = NULL;
	struct hp_status *st = NULL;
	hp_conn *conn = NULL;
	bool json = false;
	int c, r;

	opterr = 0; /* say it ourselves, as "hugepoolctl: ..." whatever argv[0] is */
	while ((c = getopt_long(argc, argv, ":s:jhV", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			if (!*optarg)
				return usage_error("the socket path is empty");
			path = optarg;
			break;
		case 'j':
			json = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("hugepoolctl %s\n", HUGEPOOL_VERSION);
			return 0;
		case ':':
			return usage_error("option -s/--socket requires an argument");
		default:
			/* a bad short option sets optopt to itself; a bad long one to 0 or to its val */
			if (optopt && !strchr("jhV", optopt))
				return usage_error("invalid option '-%c'", optopt);
			return usage_error("invalid option '%s'", argv[optind - 1]);
		}
	}
	if (optind >= argc)
		return usage_error("missing command");
	if (argc - optind > 1)
		return usage_error("unexpected argument '%s'", argv[optind + 1]);
	for (size_t i = 0; i < ARRAY_SIZE(commands); i++)
		if (strcmp(argv[optind], commands[i].name) == 0)
			cmd = &commands[i];
	if (!cmd)
		return usage_error("unknown command '%s'", argv[optind]);

	if (!path)
		path = getenv("HUGEPOOL_SOCKET");
	if (!path || !*path)
		path = HP_DEFAULT_SOCKET;
	r = hp_connect(path, &conn);
	if (r < 0) {
		/* the library's words: the daemon's reason for a refusal, or the path and system error */
		fprintf(stderr, "hugepoolctl: %s\n", *hp_last_error(NULL) ? hp_last_error(NULL) : hp_strerror(r));
		/* a daemon that answered and refused (limits, protocol) is running: that is not 2 */
		return r == -EUSERS || r == -EPROTONOSUPPORT || r == -EPROTO ? EXIT_DAEMON : EXIT_CONNECT;
	}
	r = hp_status(conn, &st);
	if (r < 0) {
		report(r, hp_last_error(conn), "cannot get the status of the daemon at '%s'", path);
		hp_disconnect(conn);
		return EXIT_DAEMON;
	}
	hp_disconnect(conn);

	if (json) {
		struct json j = { .f = stdout };

		json_open(&j, NULL, '{');
		cmd->json(&j, st);
		json_close(&j, '}');
		fputc('\n', stdout);
	} else {
		cmd->text(st);
	}
	hp_status_free(st);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "hugepoolctl: cannot write the output: %s\n", strerror(errno));
		return EXIT_USAGE;
	}
	return 0;
}
