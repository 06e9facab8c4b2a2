/* SPDX-License-Identifier: MIT */
/*
 * hugepoolctl.c - look at a running hugepoold: its state, its classes, its leases, its counters,
 * its spill streams and its journals; replay, check and truncate a journal.
 *
 * This file holds the verbs, the tables of commands and options that name them, and main. A
 * command's row names it, the arguments it takes, the options that apply to it, its line of
 * --help and the function that runs it; or it holds a table of subcommands instead ("journal
 * list", "journal dump NAME"). cmdline.c checks a command line against the tables, before
 * anything is sent to the daemon, and prints --help from them. The views of the daemon's state
 * are one hp_status() call each, printed by views_*.c either as text for people or (--json) as
 * one JSON object for programs; the journal commands that read records go through libhugepool's
 * journal reader, so they see exactly what a client would. main only parses options, resolves
 * the command in the tables, connects and dispatches.
 * Data goes to stdout, diagnostics to stderr. Exit status: 0 success, 1 usage error, 2 cannot
 * connect, 3 the daemon answered with an error or broke the protocol, or the journal that
 * journal verify replayed is damaged (see hugepoolctl(1)).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmdline.h"
#include "expo.h"
#include "format.h"
#include "http_server.h"
#include "hugepool.h"
#include "util.h"
#include "views.h"

static void report(int err, const char *detail, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* "hugepoolctl: WHAT: <hp_strerror text> (<detail: the daemon's own words, escaped, or a hint>)" */
static void report(int err, const char *detail, const char *fmt, ...)
{
	va_list ap;

	fputs("hugepoolctl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, ": %s", hp_strerror(err));
	if (detail && *detail)
		fprintf(stderr, " (%s)", ESCAPED(detail));
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

static const struct hp_journal_status *journal_find(const struct hp_status *st, const char *name)
{
	for (uint32_t i = 0; i < st->njournals; i++)
		if (strcmp(st->journals[i]->name, name) == 0)
			return st->journals[i];
	return NULL;
}

/* The status, and in *js the journal the command names in it; exit status and nothing to free if either fails. */
static int get_journal_status(struct invocation *inv, struct hp_status **st, const struct hp_journal_status **js)
{
	int r = get_status(inv, st);

	if (r)
		return r;
	*js = journal_find(*st, inv->journal);
	if (!*js) {
		hp_status_free(*st);
		return no_journal(inv);
	}
	return 0;
}

/*
 * The segments a journal reader maps are files the daemon keeps: libhugepool checked their sizes
 * when they came, but whatever answers on the socket can cut one short afterwards, and the next
 * read of the mapping past its new end is SIGBUS. While the verbs read records (and print them
 * from the mapping), that signal ends the reading with -EFAULT instead of the program.
 */
static sigjmp_buf segment_cut;

static void on_segment_cut(int sig)
{
	(void)sig;
	siglongjmp(segment_cut, 1);
}

/* fn(arg), or -EFAULT when a segment was cut short under it. */
static int read_guarded(int (*fn)(void *arg), void *arg)
{
	struct sigaction sa = { .sa_handler = on_segment_cut }, old;
	int r;

	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, &old);
	if (sigsetjmp(segment_cut, 1) == 0)
		r = fn(arg);
	else
		r = -EFAULT; /* out of the reader or a print: neither holds a lock or half an allocation */
	sigaction(SIGBUS, &old, NULL);
	return r;
}

/* What the reader's own errors mean (the daemon gives no text for them). */
static const char *reader_hint(int err)
{
	switch (err) {
	case -EFAULT: /* read_guarded's */
		return "a segment was cut short while it was read, after the daemon had handed it over";
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
			fprintf(stderr, "hugepoolctl: %s\n", ESCAPED(detail));
		else
			no_journal(inv);
		return EXIT_DAEMON;
	}
	report(err, *detail ? detail : reader_hint(err), "%s journal \"%s\"", what, inv->journal);
	return EXIT_DAEMON;
}

/* --- the verbs --------------------------------------------------------------------------- */

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
	spill_order(st);
	return print_status(cmd, inv, st);
}

static int run_journal_stat(const struct command *cmd, struct invocation *inv)
{
	const struct hp_journal_status *js;
	struct hp_status *st;
	int r = get_journal_status(inv, &st, &js);

	(void)cmd;
	if (r)
		return r;
	journal_stat_print(js, inv->json);
	hp_status_free(st);
	return 0;
}

struct verify {
	hp_journal_reader *rd;
	struct journal_check *c;
};

/* journal verify's reading: every record in order, until the end or the first problem. */
static int verify_records(void *arg)
{
	struct verify *v = arg;
	struct journal_check *c = v->c;

	for (;;) {
		const void *data;
		uint64_t lsn;
		size_t len;
		int r = hp_journal_reader_next(v->rd, &lsn, &data, &len);

		if (r <= 0)
			return r;
		if (c->records && lsn != c->last_lsn + 1) {
			snprintf(c->problem, sizeof(c->problem),
				 "LSN %" PRIu64 " follows LSN %" PRIu64 ": records %" PRIu64 "..%" PRIu64 " are missing",
				 lsn, c->last_lsn, c->last_lsn + 1, lsn - 1);
			return 0;
		}
		if (!c->records)
			c->first_lsn = lsn;
		c->last_lsn = lsn;
		c->records++;
		c->bytes += len;
	}
}

/*
 * Replay every durable record through the reader and check that the LSNs follow each other with
 * no gap and reach what was durable when the check began (the reader checks each record's CRC).
 * A reader that stops short with 0 ("nothing more right now") below that point means damage too:
 * the reader reports a bad record at the end of the segments it holds that way.
 */
static int run_journal_verify(const struct command *cmd, struct invocation *inv)
{
	struct journal_check c = { .journal = inv->journal, .damaged = true };
	const struct hp_journal_status *js;
	hp_journal_reader *rd;
	struct hp_status *st;
	int r = get_journal_status(inv, &st, &js);

	(void)cmd;
	if (r)
		return r;
	c.durable_lsn = js->durable_lsn;
	hp_status_free(st);
	r = hp_journal_reader_open(inv->conn, inv->journal, 1, &rd);
	if (r < 0)
		return journal_failed(inv, r, "cannot read");
	r = read_guarded(verify_records, &(struct verify){ rd, &c });
	hp_journal_reader_close(rd);
	if (r < 0) {
		const char *hint = reader_hint(r);

		c.error = r;
		c.damaged = r == -EUCLEAN;
		snprintf(c.problem, sizeof(c.problem), "reading after LSN %" PRIu64 " failed: %s%s%s%s", c.last_lsn,
			 hp_strerror(r), hint ? " (" : "", hint ? hint : "", hint ? ")" : "");
	}
	if (!c.problem[0] && c.last_lsn < c.durable_lsn)
		snprintf(c.problem, sizeof(c.problem),
			 "the records end at LSN %" PRIu64 " but the journal was durable up to LSN %" PRIu64
			 " when the check began",
			 c.last_lsn, c.durable_lsn);
	journal_verify_print(&c, inv->json);
	if (c.problem[0]) {
		fprintf(stderr, "hugepoolctl: journal \"%s\" %s: %s\n", inv->journal,
			c.damaged ? "is damaged" : "could not be verified", c.problem);
		return EXIT_DAEMON;
	}
	return 0;
}

struct dump {
	const struct invocation *inv;
	hp_journal_reader *rd;
};

/* journal dump's reading: print records from --from on, at most --max of them; the reader's last result. */
static int dump_records(void *arg)
{
	const struct dump *d = arg;
	const struct invocation *inv = d->inv;
	uint64_t n = 0;
	int r = 0;

	while (!inv->max || n < inv->max) {
		const void *data;
		uint64_t lsn;
		size_t len;

		if (ferror(stdout))
			break; /* main says so */
		r = hp_journal_reader_next(d->rd, &lsn, &data, &len);
		if (r <= 0)
			break;
		if (n++ == 0 && inv->from && lsn > inv->from)
			fprintf(stderr, "hugepoolctl: records %" PRIu64 "..%" PRIu64 " are no longer kept; starting at LSN %" PRIu64 "\n",
				inv->from, lsn - 1, lsn);
		journal_record_print(lsn, data, len, inv->json, inv->hex);
	}
	return r;
}

/* Print records from --from on (default 1), at most --max of them (default all). */
static int run_journal_dump(const struct command *cmd, struct invocation *inv)
{
	hp_journal_reader *rd;
	int r;

	(void)cmd;
	r = hp_journal_reader_open(inv->conn, inv->journal, inv->from ? inv->from : 1, &rd);
	if (r < 0)
		return journal_failed(inv, r, "cannot read");
	r = read_guarded(dump_records, &(struct dump){ inv, rd });
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
	r = get_journal_status(inv, &st, &js);
	if (r)
		return r;
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

/*
 * How long restart asks again while the daemon refuses with EBUSY: a restart under way (the life
 * serving still taking over from the one before it, which it finishes once that one is idle, or
 * the next life being prepared). Restarts asked one after the other are served in turn.
 */
#define RESTART_BUSY_WAIT_NS (60ull * 1000000000ull)
#define RESTART_BUSY_PAUSE_US 20000

/*
 * Restart the daemon in place and report how the next life took over, from a status asked on
 * this same connection (which the next life serves on): how long this client waited, how warm.
 */
static int run_restart(const struct command *cmd, struct invocation *inv)
{
	struct hp_status *st;
	uint64_t t0 = now_ns(), first = t0;
	int r;

	(void)cmd;
	while ((r = hp_daemon_restart(inv->conn)) == -EBUSY && now_ns() - first < RESTART_BUSY_WAIT_NS) {
		if (t0 == first) /* said once */
			fprintf(stderr, "hugepoolctl: the daemon is busy restarting (%s); waiting\n", hp_last_error(inv->conn));
		usleep(RESTART_BUSY_PAUSE_US);
		t0 = now_ns();
	}
	if (r < 0) {
		report(r, hp_last_error(inv->conn), "cannot restart the daemon at '%s'", inv->path);
		return EXIT_DAEMON;
	}
	r = get_status(inv, &st);
	if (r)
		return r;
	if (inv->json) {
		struct json j;

		json_line_begin(&j);
		json_double(&j, "paused_s", (double)(now_ns() - t0) / 1e9);
		json_u64(&j, "pid", (uint64_t)st->daemon_pid);
		start_json(&j, st);
		json_line_end(&j);
	} else {
		printf("hugepoold restarted (pid %d); this connection waited %.3f s\n", (int)st->daemon_pid,
		       (double)(now_ns() - t0) / 1e9);
		start_text(st);
	}
	hp_status_free(st);
	return 0;
}

/* The connection main would have made: 0, or the exit status of its failure, said on stderr. */
static int connect_daemon(struct invocation *inv)
{
	int r = hp_connect(inv->path, &inv->conn);

	if (r < 0) {
		/* the library's words: the daemon's reason for a refusal, or the path and system error */
		fprintf(stderr, "hugepoolctl: %s\n", *hp_last_error(NULL) ? ESCAPED(hp_last_error(NULL)) : hp_strerror(r));
		/* a daemon that answered and refused (limits, protocol) is running: that is not 2 */
		return r == -EUSERS || r == -EPROTONOSUPPORT || r == -EPROTO ? EXIT_DAEMON : EXIT_CONNECT;
	}
	return 0;
}

/*
 * The metrics in fmt, into a buffer (*ret_buf, malloc'd, *ret_len bytes): the daemon's status
 * (the figures that name a uid with --uids), or hugepool_up 0 when it cannot be had. Connects for the status alone and disconnects before
 * returning: whoever reads the metrics after (slowly) holds nothing of the daemon's. Returns
 * the exit status of the daemon's part (0, EXIT_CONNECT, EXIT_DAEMON), or -ENOMEM.
 */
static int metrics_collect(struct invocation *inv, enum expo_format fmt, char **ret_buf, size_t *ret_len)
{
	struct hp_status *st = NULL;
	struct expo e;
	FILE *f;
	int r = connect_daemon(inv);

	if (r == 0) {
		r = get_status(inv, &st);
		hp_disconnect(inv->conn);
		inv->conn = NULL;
	}
	f = open_memstream(ret_buf, ret_len);
	if (!f) {
		hp_status_free(st);
		return -ENOMEM;
	}
	expo_init(&e, f, fmt);
	metrics_print(&e, st, inv->uids);
	hp_status_free(st);
	if (fclose(f) != 0)
		return -ENOMEM;
	return r;
}

/*
 * Replace path with len bytes of buf so that a reader sees the old file or the new one, never a
 * part: a file beside it (a dot name, which node_exporter's textfile collector does not read),
 * written, synced, renamed over path. Its mode is what the umask leaves of 0666, as for any file
 * a command makes: who may read the figures is the caller's to say (the textfile service's UMask=).
 * 0 or a negative errno.
 */
static int write_atomically(const char *path, const char *buf, size_t len)
{
	const char *slash = strrchr(path, '/');
	char tmp[4096];
	int fd, r = 0;
	mode_t mask;

	if (snprintf(tmp, sizeof(tmp), "%.*s.%s.XXXXXX", slash ? (int)(slash - path + 1) : 0, path,
		     slash ? slash + 1 : path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	mask = umask(0);
	umask(mask);
	fd = mkostemp(tmp, O_CLOEXEC); /* 0600 */
	if (fd < 0)
		return -errno;
	while (len && r == 0) {
		ssize_t k = write(fd, buf, len);

		if (k < 0 && errno != EINTR)
			r = -errno;
		else if (k > 0) {
			buf += k;
			len -= (size_t)k;
		}
	}
	if (r == 0 && (fchmod(fd, 0666 & ~mask) < 0 || fsync(fd) < 0))
		r = -errno;
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r == 0 && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0)
		unlink(tmp);
	return r;
}

/* http_server.h's body_fn: the metrics of the daemon, in the format a request asked for. */
static int metrics_body(void *arg, bool openmetrics, char **ret_buf, size_t *ret_len)
{
	int r = metrics_collect(arg, openmetrics ? EXPO_OPENMETRICS : EXPO_PROMETHEUS, ret_buf, ret_len);

	return r < 0 ? r : 0; /* the daemon not answering is hugepool_up 0, not an HTTP error */
}

static const char *metrics_type(bool openmetrics)
{
	return expo_content_type(openmetrics ? EXPO_OPENMETRICS : EXPO_PROMETHEUS);
}

/*
 * The listening sockets systemd passed (sd_listen_fds(3)'s protocol: LISTEN_PID, LISTEN_FDS, from
 * fd 3), into lfds (at most max); how many. The variables are unset, as sd_listen_fds(1) does.
 */
static unsigned listen_fds(int *lfds, unsigned max)
{
	const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");
	uint64_t p, n;
	unsigned k = 0;

	if (!pid || !fds || !cmdline_parse_positive(pid, &p) || p != (uint64_t)getpid() || !cmdline_parse_positive(fds, &n))
		return 0;
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
	for (int fd = 3; fd < 3 + (int)n && k < max; fd++) {
		int listening = 0;
		socklen_t len = sizeof(listening);

		if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) == 0 && listening &&
		    fcntl(fd, F_SETFD, FD_CLOEXEC) == 0 && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) == 0)
			lfds[k++] = fd;
	}
	return k;
}

/*
 * hugepoolctl metrics --http: serve the listening sockets systemd passed (Accept=no), every
 * scraper of them, for as long as the service runs; or, without any, answer the one request on
 * standard input on standard output (inetd, Accept=yes). The daemon is asked only for requests
 * that passed; no peer's doing ends the process (http_server.h).
 */
static int run_metrics_http(struct invocation *inv)
{
	int lfds[16], r;
	unsigned n = listen_fds(lfds, ARRAY_SIZE(lfds));

	signal(SIGPIPE, SIG_IGN); /* a peer gone: write says EPIPE */
	r = http_serve(lfds, n, STDIN_FILENO, STDOUT_FILENO, metrics_body, metrics_type, inv);
	if (r < 0) {
		fprintf(stderr, "hugepoolctl: cannot serve HTTP: %s\n", strerror(-r));
		return EXIT_USAGE;
	}
	return 0;
}

/* The daemon's state as Prometheus metrics: to stdout, or replacing --output FILE at once. */
static int run_metrics(const struct command *cmd, struct invocation *inv)
{
	enum expo_format fmt = inv->openmetrics ? EXPO_OPENMETRICS : EXPO_PROMETHEUS;
	size_t len = 0;
	char *buf = NULL;
	int status, r;

	(void)cmd;
	if (inv->http && (inv->output || inv->openmetrics))
		return cmdline_usage_error("--http answers a request on standard input: it takes neither --output nor --openmetrics");
	if (inv->http)
		return run_metrics_http(inv);
	status = metrics_collect(inv, fmt, &buf, &len);
	if (status < 0) {
		fprintf(stderr, "hugepoolctl: cannot make the metrics: %s\n", strerror(-status));
		return EXIT_DAEMON;
	}
	if (inv->output) {
		r = write_atomically(inv->output, buf, len);
		if (r < 0) {
			fprintf(stderr, "hugepoolctl: cannot write '%s': %s\n", ESCAPED(inv->output), strerror(-r));
			status = status ? status : EXIT_USAGE;
		}
	} else {
		fwrite(buf, 1, len, stdout);
	}
	free(buf);
	return status;
}

/* --- the tables -------------------------------------------------------------------------- */

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

/* A command that shows a view of the daemon's status (views.h): NAME_text, or NAME_json with --json. */
#define VIEW(view, help_, run_) \
	{ .name = #view, .help = help_, .opts = OPT_JSON, .run = run_, .text = view##_text, .json = view##_json }

/* The commands, in --help's order. */
const struct command cmdline_commands[] = {
	VIEW(status, "the daemon, its pool, its boot and its classes", run_status),
	VIEW(classes, "the buffer classes and how many buffers are free", run_status),
	VIEW(leases, "who holds which buffer, and the connected clients", run_status),
	VIEW(stats, "the daemon's counters since it started", run_status),
	VIEW(spill, "spill files, bytes and limits, per uid and client", run_spill),
	{ .name = "metrics",
	  .help = "the daemon's state as Prometheus metrics",
	  .opts = OPT_OPENMETRICS | OPT_OUTPUT | OPT_HTTP | OPT_UIDS,
	  .run = run_metrics,
	  .own_connection = true },
	{ .name = "restart",
	  .help = "restart the daemon, keeping its pool and clients (warm)",
	  .opts = OPT_JSON,
	  .run = run_restart },
	{ .name = "journal", .sub = journal_commands, .nsub = ARRAY_SIZE(journal_commands) },
};
const size_t cmdline_ncommands = ARRAY_SIZE(cmdline_commands);

/* The options, in --help's order (main's switch says what each one does). */
const struct optrow cmdline_options[] = {
	{ "socket", 's', "PATH", 0, "the daemon's socket (default $HUGEPOOL_SOCKET, else\n" HP_DEFAULT_SOCKET ")" },
	{ "json", 'j', NULL, OPT_JSON,
	  "print JSON instead of text (all but journal truncate and\n"
	  "metrics; journal dump prints one object per record and\n"
	  "line)" },
	{ "from", LONGOPT_FROM, "LSN", OPT_FROM, "journal dump: start at record LSN (default 1)" },
	{ "max", LONGOPT_MAX, "N", OPT_MAX, "journal dump: print at most N records" },
	{ "hex", LONGOPT_HEX, NULL, OPT_HEX, "journal dump: print the payloads in hexadecimal" },
	{ "openmetrics", LONGOPT_OPENMETRICS, NULL, OPT_OPENMETRICS,
	  "metrics: in OpenMetrics 1.0 rather than Prometheus' text" },
	{ "output", 'o', "FILE", OPT_OUTPUT,
	  "metrics: replace FILE with them at once (for node_exporter's\n"
	  "textfile collector) rather than print them" },
	{ "http", LONGOPT_HTTP, NULL, OPT_HTTP,
	  "metrics: answer one HTTP request on standard input\n"
	  "(GET /metrics) on standard output, as a socket-activated\n"
	  "service does" },
	{ "uids", LONGOPT_UIDS, NULL, OPT_UIDS,
	  "metrics: also the spill figures of each uid the daemon\n"
	  "shows (every uid to root, admin_group and monitor_group)\n"
	  "and the machine's spill totals: for readers who may see\n"
	  "them all" },
	{ "help", 'h', NULL, 0, "show this help and exit" },
	{ "version", 'V', NULL, 0, "show the version and exit" },
};
const size_t cmdline_noptions = ARRAY_SIZE(cmdline_options);

/* --- main -------------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
	struct option longopts[ARRAY_SIZE(cmdline_options) + 1];
	char shortopts[2 * ARRAY_SIZE(cmdline_options) + 2];
	struct invocation inv = { 0 };
	const struct command *cmd = NULL;
	int c, r;

	optrow_getopt(cmdline_options, cmdline_noptions, longopts, shortopts);
	opterr = 0; /* say it ourselves, as "hugepoolctl: ..." whatever argv[0] is */
	while ((c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
		const struct optrow *o = optrow_find(cmdline_options, cmdline_noptions, c);

		if (o) /* the commands it applies to are checked once the command is known */
			inv.given |= o->flag;
		switch (c) {
		case 's':
			if (!*optarg)
				return cmdline_usage_error("the socket path is empty");
			inv.path = optarg;
			break;
		case 'j':
			inv.json = true;
			break;
		case LONGOPT_FROM:
			if (!cmdline_parse_positive(optarg, &inv.from))
				return cmdline_usage_error("invalid LSN '%s' for --from: must be a positive integer", optarg);
			break;
		case LONGOPT_MAX:
			if (!cmdline_parse_positive(optarg, &inv.max))
				return cmdline_usage_error("invalid count '%s' for --max: must be a positive integer", optarg);
			break;
		case LONGOPT_HEX:
			inv.hex = true;
			break;
		case LONGOPT_OPENMETRICS:
			inv.openmetrics = true;
			break;
		case 'o':
			if (!*optarg)
				return cmdline_usage_error("the output file name is empty");
			inv.output = optarg;
			break;
		case LONGOPT_HTTP:
			inv.http = true;
			break;
		case LONGOPT_UIDS:
			inv.uids = true;
			break;
		case 'h':
			cmdline_usage(stdout);
			return 0;
		case 'V':
			printf("hugepoolctl %s\n", HUGEPOOL_VERSION);
			return 0;
		case ':':
			return cmdline_missing_argument(optopt);
		default:
			/* a bad short option sets optopt to itself; a bad long one to 0 or to its val */
			if (optopt >= '0' && optopt <= '9')
				return cmdline_usage_error("invalid option '-%c' (LSNs and counts are positive integers)", optopt);
			if (optopt > 0 && optopt < OPTROW_LONG_ONLY && !optrow_find(cmdline_options, cmdline_noptions, optopt))
				return cmdline_usage_error("invalid option '-%c'", optopt);
			return cmdline_usage_error("invalid option '%s'", argv[optind - 1]);
		}
	}
	r = cmdline_resolve(argv + optind, argc - optind, &cmd, &inv);
	if (r)
		return r;

	if (!inv.path)
		inv.path = getenv("HUGEPOOL_SOCKET");
	if (!inv.path || !*inv.path)
		inv.path = HP_DEFAULT_SOCKET;
	if (!cmd->own_connection) {
		r = connect_daemon(&inv);
		if (r)
			return r;
	}
	r = cmd->run(cmd, &inv);
	hp_disconnect(inv.conn);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "hugepoolctl: cannot write the output: %s\n", strerror(errno));
		return r ? r : EXIT_USAGE;
	}
	return r;
}
