/* SPDX-License-Identifier: MIT */
/*
 * Integration tests of `hugepoolctl metrics` against a real, busy hugepoold (leases held, a
 * waiting acquire, journals appended to, one of them failed, spill files open): Prometheus'
 * own checker (promtool check metrics, from Debian's prometheus package; the case is skipped,
 * saying so, where it is missing) on both formats' families, the figures against hp_status,
 * that no figure names a uid without --uids, what a uid outside monitor_group sees, the daemon
 * down, --output replacing its file at once with the umask's mode, --http on a socket pair as
 * inetd would hand it over: the answers, the content negotiation, and requests that cost the
 * daemon nothing (no connection) however bad they are; and --http serving a listening socket as
 * systemd passes it, held and cycled by connections of one local user.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "hugepool.h"
#include "proto.h"
#include "case.h"
#include "util.h"

#define CLASSES                                                                                  \
	"[class small]\nsize = 2M\ncount = 4\n[class big]\nsize = 4M\ncount = 2\n"                 \
	"[journal orders]\ndirectory = @DIR@/orders\nsegment_size = 1M\nsegments = 2\n"            \
	"[journal audit]\ndirectory = @DIR@/audit\nsegment_size = 1M\nsegments = 2\n"
#define OUT_MAX (1u << 20)
#define HTTP_BIG 9000 /* more than hugepoolctl's HTTP_REQUEST_MAX, 8192 */
#define HTTP_CONNS 64 /* hugepoolctl's connections at once (http_server.h) */

static char out[OUT_MAX];

/* --- a busy daemon --------------------------------------------------------------------------- */

struct busy {
	hp_conn *c, *waiter_conn;
	struct hp_buffer small[3], big[2], waited;
	hp_journal *j;
	hp_spill *sp[2];
	pthread_t waiter;
	int waiter_r;
};

static void *waiter_main(void *arg)
{
	struct busy *b = arg;

	b->waiter_r = hp_acquire(b->waiter_conn, "big", 1, -1, &b->waited);
	return NULL;
}

static void wait_big_waiter(hp_conn *c)
{
	for (int i = 0; i < 2000; i++) {
		struct hp_status *st = status(c);
		uint32_t w = st->classes[1]->waiters;

		hp_status_free(st);
		if (w == 1)
			return;
		usleep(5000);
	}
	fail_msg("the acquire never waited");
}

/*
 * Leases in both classes (big all taken, one more acquire waiting for it), 100 records in
 * "orders", two spill files with bytes, an acquire refused and one of no class; "audit" fails
 * at its third write (fault injection), so that its state and I/O errors show.
 */
static void busy_start(struct daemon *d, struct busy *b)
{
	struct harness_opts o = { .env = { "HUGEPOOLD_FAULT_INJECT=audit:write:3", NULL } };
	struct hp_spill_opts so = { .threshold = HP_SPILL_ALWAYS_FILE };
	static char data[3 << 20];
	hp_journal *audit;
	uint64_t lsn;
	int r = 0;

	*b = (struct busy){ 0 };
	start_opts(d, "spill_max_bytes = 64M\nspill_max_bytes_per_uid = 32M\n", CLASSES, &o);
	b->c = conn(d);
	b->waiter_conn = conn(d);
	assert_int_equal(hp_acquire(b->c, "small", 3, 0, b->small), 0);
	assert_int_equal(hp_acquire(b->c, "big", 2, 0, b->big), 0);
	assert_int_equal(hp_acquire(b->c, "small", 9, 0, b->small), -E2BIG);
	assert_int_equal(hp_acquire(b->c, "nosuch", 1, 0, b->small), -ENOENT);
	assert_int_equal(pthread_create(&b->waiter, NULL, waiter_main, b), 0);
	wait_big_waiter(b->c);
	assert_int_equal(hp_journal_open(b->c, "orders", &b->j), 0);
	for (unsigned i = 0; i < 100; i++)
		assert_int_equal(hp_journal_append_wait(b->j, data, 100 + i, &lsn), 0);
	assert_int_equal(hp_journal_open(b->c, "audit", &audit), 0);
	for (unsigned i = 0; i < 10 && r == 0; i++)
		r = hp_journal_append_wait(audit, data, 10, &lsn);
	assert_int_equal(r, -EIO);
	hp_journal_close(audit);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(hp_spill_open(b->c, &so, &b->sp[i]), 0);
		assert_int_equal(hp_spill_write(b->sp[i], data, sizeof(data)), 0);
	}
}

static void busy_stop(struct daemon *d, struct busy *b)
{
	for (int i = 0; i < 2; i++)
		hp_spill_close(b->sp[i]);
	hp_journal_close(b->j);
	/* the waiter gets its buffer once one is released */
	assert_int_equal(hp_release(b->c, b->big, 1), 0);
	assert_int_equal(pthread_join(b->waiter, NULL), 0);
	assert_int_equal(b->waiter_r, 0);
	hp_disconnect(b->waiter_conn);
	hp_disconnect(b->c);
	stop(d);
}

/* --- reading the metrics --------------------------------------------------------------------- */

/* The value of the sample named exactly `series` (name and labels) in text; fails if absent. */
static double sample(const char *text, const char *series)
{
	size_t n = strlen(series);

	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (strncmp(p, series, n) == 0 && p[n] == ' ')
			return strtod(p + n + 1, NULL);
	fail_msg("no sample %s in the metrics", series);
	return 0;
}

/* Run a shell command; its exit status, its standard output (and error) in buf. */
static int sh(const char *cmd, char *buf, size_t len)
{
	FILE *f = popen(cmd, "r");
	size_t n;
	int st;

	assert_non_null(f);
	n = fread(buf, 1, len - 1, f);
	buf[n] = '\0';
	st = pclose(f);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static bool have_promtool(void)
{
	char buf[256];

	return sh("command -v promtool", buf, sizeof(buf)) == 0;
}

/* promtool check metrics on text (written to a file of d's directory): fails with what it says. */
static void promtool_check(const struct daemon *d, const char *text)
{
	char path[128], cmd[256], said[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/metrics.txt", d->dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "promtool check metrics < %s 2>&1", path);
	if (sh(cmd, said, sizeof(said)) != 0)
		fail_msg("promtool check metrics found problems:\n%s", said);
}

/* --- the cases ------------------------------------------------------------------------------- */

/* A busy daemon's metrics pass promtool, and say what its status says. */
static void test_busy_daemon_promtool(void **state)
{
	static struct daemon d; /* static: teardown uses it after a failed assertion left this frame */
	struct busy b;
	struct hp_status *st;
	const struct hp_journal_durability *dur;
	(void)state;

	if (!have_promtool()) {
		fprintf(stderr, "test_metrics: promtool is missing (Debian package prometheus; ./dev.sh installs it): "
				"the exposition is not checked by Prometheus' own checker here\n");
		skip();
	}
	busy_start(&d, &b);
	/* no figure names a uid unless asked, whoever asks (root sees every uid) */
	assert_int_equal(ctl(&d, "metrics", out, sizeof(out)), 0);
	promtool_check(&d, out);
	assert_null(strstr(out, "hugepool_spill_uid_bytes{"));
	assert_null(strstr(out, "hugepool_spill_uid_files{"));
	assert_null(strstr(out, "\nhugepool_spill_bytes "));
	assert_null(strstr(out, "\nhugepool_spill_files "));
	assert_int_equal(sample(out, "hugepool_scrape_sees_all_uids"), 0);
	assert_int_equal(sample(out, "hugepool_spill_limit_bytes"), 64 << 20);
	assert_int_equal(ctl(&d, "metrics --uids", out, sizeof(out)), 0);
	promtool_check(&d, out);
	st = status(b.c);
	assert_int_equal(sample(out, "hugepool_up"), 1);
	assert_int_equal(sample(out, "hugepool_class_leased_buffers{class=\"small\"}"), 3);
	assert_int_equal(sample(out, "hugepool_class_free_buffers{class=\"small\"}"), st->classes[0]->free);
	assert_int_equal(sample(out, "hugepool_class_leased_buffers{class=\"big\"}"), 2);
	assert_int_equal(sample(out, "hugepool_class_waiters{class=\"big\"}"), 1);
	assert_int_equal(sample(out, "hugepool_class_acquires_refused_total{class=\"small\",reason=\"too_large\"}"), 1);
	assert_int_equal(sample(out, "hugepool_class_acquire_wait_seconds_count{class=\"small\"}"), 1);
	assert_int_equal(sample(out, "hugepool_acquires_unknown_class_total"), 1);
	/* hugepoolctl's own connection was open too */
	assert_int_equal(sample(out, "hugepool_connections_open"), st->server.connections + 1);
	assert_int_equal(sample(out, "hugepool_journal_durable_lsn{journal=\"orders\"}"), 100);
	assert_int_equal(sample(out, "hugepool_journal_appends_total{journal=\"orders\"}"), 100);
	assert_int_equal(sample(out, "hugepool_journal_append_durable_seconds_count{journal=\"orders\"}"), 100);
	assert_int_equal(sample(out, "hugepool_journal_batch_records_sum{journal=\"orders\"}"), 100);
	dur = &st->journals[0]->durability;
	assert_int_equal(sample(out, "hugepool_journal_sync_seconds_count{journal=\"orders\"}"), dur->write_sync.count);
	assert_int_equal(sample(out, "hugepool_journal_state{journal=\"orders\",state=\"ok\"}"), 1);
	assert_int_equal(sample(out, "hugepool_journal_state{journal=\"audit\",state=\"failed\"}"), 1);
	assert_int_equal(sample(out, "hugepool_journal_state{journal=\"audit\",state=\"ok\"}"), 0);
	assert_true(sample(out, "hugepool_journal_io_errors_total{journal=\"audit\"}") >= 1);
	assert_int_equal(sample(out, "hugepool_spill_files"), 2);
	assert_int_equal(sample(out, "hugepool_spill_bytes"), st->spill.bytes);
	assert_int_equal(sample(out, "hugepool_spill_limit_bytes"), 64 << 20);
	{
		char series[96];

		snprintf(series, sizeof(series), "hugepool_spill_uid_bytes{uid=\"%u\"}", (unsigned)getuid());
		assert_int_equal(sample(out, series), st->spill.bytes);
	}
	assert_int_equal(sample(out, "hugepool_scrape_sees_all_uids"), 1);
	assert_int_equal(sample(out, "hugepool_lives"), 1);
	hp_status_free(st);
	/* OpenMetrics: the same families, its own rules (promtool reads the text format only; the
	 * container test has Prometheus itself scrape it) */
	assert_int_equal(ctl(&d, "metrics --openmetrics", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "# TYPE hugepool_connections counter\n"));
	assert_non_null(strstr(out, "# UNIT hugepool_journal_sync_seconds seconds\n"));
	assert_non_null(strstr(out, "# TYPE hugepool_exporter_build info\n"));
	assert_int_equal(strcmp(out + strlen(out) - 6, "# EOF\n"), 0);
	busy_stop(&d, &b);
}

/* As a uid outside monitor_group, --uids: its own figures, no machine-wide spill figure but the limits. */
static int other_uid_main(void *arg)
{
	const struct daemon *d = arg;

	if (ctl(d, "metrics --uids", out, sizeof(out)) != 0)
		return 20;
	if (strstr(out, "hugepool_spill_bytes ") || strstr(out, "hugepool_spill_files ") ||
	    strstr(out, "hugepool_spill_uid_bytes{"))
		return 13;
	if (!strstr(out, "hugepool_scrape_sees_all_uids 0\n") || !strstr(out, "hugepool_spill_limit_bytes 67108864\n") ||
	    !strstr(out, "hugepool_class_leased_buffers{class=\"small\"} 3\n"))
		return 14;
	return 0;
}

static void test_other_uid(void **state)
{
	static struct daemon d;
	struct busy b;
	(void)state;

	if (!harness_two_uids())
		skip();
	busy_start(&d, &b);
	assert_int_equal(harness_as_uid(HARNESS_OTHER_UID, other_uid_main, &d), 0);
	busy_stop(&d, &b);
}

/* No daemon: the file still written, saying hugepool_up 0, and the exit status of a failed connection. */
static void test_daemon_down(void **state)
{
	char dir[] = "/tmp/hugepool-metrics.XXXXXX", path[64], cmd[512];
	FILE *f;
	(void)state;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/hugepool.prom", dir);
	snprintf(cmd, sizeof(cmd), "%s/hugepoolctl -s %s/none metrics -o %s 2>&1; echo rc=$?", harness_build(), dir, path);
	sh(cmd, out, sizeof(out));
	assert_non_null(strstr(out, "rc=2"));
	f = fopen(path, "r");
	assert_non_null(f);
	out[fread(out, 1, sizeof(out) - 1, f)] = '\0';
	fclose(f);
	unlink(path);
	rmdir(dir);
	assert_non_null(strstr(out, "\nhugepool_up 0\n"));
	assert_null(strstr(out, "hugepool_class"));
}

/*
 * --output FILE replaces FILE, via a temporary file that does not stay behind, with the mode
 * the umask gives a new file (0644 under 022; 0600 under 077: the figures are for whom the
 * caller says, never for everyone whatever the umask).
 */
static void test_output_atomic(void **state)
{
	static struct daemon d;
	char path[160], args[256];
	struct stat sb;
	struct dirent *e;
	unsigned files = 0;
	DIR *dir;
	FILE *f;
	(void)state;

	start(&d, NULL, CLASSES);
	snprintf(path, sizeof(path), "%s/tf/hugepool.prom", d.dir);
	snprintf(args, sizeof(args), "mkdir -p %s/tf && echo old > %s", d.dir, path);
	assert_int_equal(sh(args, out, sizeof(out)), 0);
	snprintf(args, sizeof(args), "metrics --output %s", path);
	{
		mode_t old = umask(077); /* popen's shell and hugepoolctl inherit it */

		assert_int_equal(ctl(&d, args, out, sizeof(out)), 0);
		assert_int_equal(stat(path, &sb), 0);
		assert_int_equal(sb.st_mode & 07777, 0600);
		umask(022);
		assert_int_equal(ctl(&d, args, out, sizeof(out)), 0);
		umask(old);
	}
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0644);
	f = fopen(path, "r");
	assert_non_null(f);
	out[fread(out, 1, sizeof(out) - 1, f)] = '\0';
	fclose(f);
	assert_int_equal(strncmp(out, "# HELP hugepool_up ", 19), 0);
	assert_non_null(strstr(out, "hugepool_class_buffers{class=\"big\"} 2\n"));
	snprintf(args, sizeof(args), "%s/tf", d.dir);
	dir = opendir(args);
	assert_non_null(dir);
	while ((e = readdir(dir)))
		files += e->d_name[0] != '.' || (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."));
	closedir(dir);
	assert_int_equal(files, 1);
	/* options that do not go with metrics, or with each other: usage errors */
	assert_int_equal(ctl(&d, "metrics --json", out, sizeof(out)), 1);
	assert_int_equal(ctl(&d, "metrics --http --output x", out, sizeof(out)), 1);
	assert_int_equal(ctl(&d, "status --openmetrics", out, sizeof(out)), 1);
	/* a directory that cannot be written: said, exit 1, the file left as it was */
	assert_int_equal(ctl(&d, "metrics --output /proc/hugepool.prom", out, sizeof(out)), 1);
	assert_non_null(strstr(out, "cannot write '/proc/hugepool.prom'"));
	stop(&d);
}

/* --- --http ---------------------------------------------------------------------------------- */

/* hugepoolctl metrics --http with a socket pair as its standard input and output; our end in *fd. */
static pid_t http_start(const struct daemon *d, int *fd)
{
	char bin[256];
	int sv[2];
	pid_t pid;

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	snprintf(bin, sizeof(bin), "%s/hugepoolctl", harness_build());
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(sv[1], 0);
		dup2(sv[1], 1);
		execl(bin, bin, "-s", d->socket, "metrics", "--http", (char *)NULL);
		_exit(127);
	}
	close(sv[1]);
	*fd = sv[0];
	return pid;
}

/* Send req (NULL: nothing), read the whole answer into out; the child's exit status. */
static int http_exchange(const struct daemon *d, const char *req, bool close_after_send)
{
	size_t n = 0;
	int fd, st;
	pid_t pid = http_start(d, &fd);

	if (req)
		assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
	if (close_after_send)
		shutdown(fd, SHUT_WR);
	for (;;) {
		ssize_t k = read(fd, out + n, sizeof(out) - 1 - n);

		if (k <= 0)
			break;
		n += (size_t)k;
	}
	out[n] = '\0';
	close(fd);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static uint64_t connections_total(hp_conn *c)
{
	struct hp_status *st = status(c);
	uint64_t n = st->connections_total;

	hp_status_free(st);
	return n;
}

static void test_http(void **state)
{
	static struct daemon d;
	static char big[HTTP_BIG];
	uint64_t before;
	hp_conn *c;
	(void)state;

	start(&d, NULL, CLASSES);
	c = conn(&d);
	/* a scrape as Prometheus 2.42 asks: OpenMetrics */
	assert_int_equal(http_exchange(&d,
				       "GET /metrics HTTP/1.1\r\nHost: localhost\r\nUser-Agent: Prometheus/2.42.0\r\n"
				       "Accept: application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
				       "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1\r\n\r\n",
				       false),
			 0);
	assert_int_equal(strncmp(out, "HTTP/1.1 200 OK\r\n", 17), 0);
	assert_non_null(strstr(out, "\r\nContent-Type: application/openmetrics-text; version=1.0.0; charset=utf-8\r\n"));
	assert_int_equal(strcmp(out + strlen(out) - 6, "# EOF\n"), 0);
	{
		const char *body = strstr(out, "\r\n\r\n") + 4;
		unsigned long len = strtoul(strstr(out, "Content-Length: ") + 16, NULL, 10);

		assert_int_equal(len, strlen(body));
	}
	/* no Accept, or curl's */
	assert_int_equal(http_exchange(&d, "GET /metrics HTTP/1.0\r\n\r\n", false), 0);
	assert_non_null(strstr(out, "\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"));
	assert_non_null(strstr(out, "\nhugepool_up 1\n"));
	/* to whoever connects, though it runs as root: nothing that names a uid */
	assert_non_null(strstr(out, "\nhugepool_scrape_sees_all_uids 0\n"));
	assert_null(strstr(out, "\nhugepool_spill_bytes "));
	assert_int_equal(http_exchange(&d, "GET /metrics?x=1 HTTP/1.1\r\naccept: */*\r\n\r\n", false), 0);
	assert_non_null(strstr(out, "text/plain; version=0.0.4"));
	/* HEAD: the headers alone */
	assert_int_equal(http_exchange(&d, "HEAD /metrics HTTP/1.1\r\n\r\n", false), 0);
	assert_int_equal(strncmp(out, "HTTP/1.1 200 OK\r\n", 17), 0);
	assert_int_equal(strcmp(out + strlen(out) - 4, "\r\n\r\n"), 0);
	/* what is not a scrape costs the daemon no connection */
	before = connections_total(c);
	assert_int_equal(http_exchange(&d, "GET / HTTP/1.1\r\n\r\n", false), 0);
	assert_int_equal(strncmp(out, "HTTP/1.1 404 Not Found\r\n", 24), 0);
	assert_int_equal(http_exchange(&d, "POST /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc", false), 0);
	assert_int_equal(strncmp(out, "HTTP/1.1 405 Method Not Allowed\r\n", 33), 0);
	assert_non_null(strstr(out, "\r\nAllow: GET, HEAD\r\n"));
	assert_int_equal(http_exchange(&d, "\x16\x03\x01\x02\xfc\x03\x03 no request line\r\n\r\n", false), 0);
	assert_int_equal(strncmp(out, "HTTP/1.1 400 Bad Request\r\n", 26), 0);
	assert_int_equal(http_exchange(&d, "GET /metrics HTTP/2.0\r\n\r\n", false), 0);
	assert_int_equal(strncmp(out, "HTTP/1.1 400 ", 13), 0);
	assert_int_equal(http_exchange(&d, "GET /metrics HTTP/1.1\r\n folded: header\r\n\r\n", false), 0);
	assert_int_equal(strncmp(out, "HTTP/1.1 400 ", 13), 0);
	/* a head larger than HTTP_REQUEST_MAX */
	memset(big, 'a', sizeof(big) - 1);
	memcpy(big, "GET /metrics HTTP/1.1\r\nX: ", 26);
	assert_int_equal(http_exchange(&d, big, false), 0);
	assert_int_equal(strncmp(out, "HTTP/1.1 400 ", 13), 0);
	/* half a request, then the end: 400; nothing at all: no answer */
	assert_int_equal(http_exchange(&d, "GET /metr", true), 0);
	assert_int_equal(strncmp(out, "HTTP/1.1 400 ", 13), 0);
	assert_int_equal(http_exchange(&d, NULL, true), 0);
	assert_string_equal(out, "");
	/* a request that never ends: 408 after HTTP_TIMEOUT_MS (10 s) */
	{
		int fd, st;
		pid_t pid = http_start(&d, &fd);
		double t0 = harness_ms();
		ssize_t k;

		assert_int_equal(write(fd, "GET /metrics HTTP/1.1\r\n", 23), 23);
		k = read(fd, out, sizeof(out) - 1);
		assert_true(k > 0);
		out[k] = '\0';
		assert_int_equal(strncmp(out, "HTTP/1.1 408 ", 13), 0);
		assert_true(harness_ms() - t0 >= 9000);
		close(fd);
		assert_int_equal(waitpid(pid, &st, 0), pid);
		assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	/* none of them connected (connections_total's own status is asked on c) */
	assert_int_equal(connections_total(c), before);
	hp_disconnect(c);
	stop(&d);
}

/* --- --http serving a listening socket (systemd's Accept=no) --------------------------------- */

/*
 * hugepoolctl metrics --http with a listening TCP socket on 127.0.0.1 (an ephemeral port, in
 * *port) as systemd passes it: fd 3, LISTEN_FDS=1, LISTEN_PID its own.
 */
static pid_t server_start(const struct daemon *d, int *port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	char bin[256];
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	pid_t pid;

	assert_true(lfd >= 0);
	assert_int_equal(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(lfd, 4096), 0);
	assert_int_equal(getsockname(lfd, (struct sockaddr *)&sa, &len), 0);
	*port = ntohs(sa.sin_port);
	snprintf(bin, sizeof(bin), "%s/hugepoolctl", harness_build());
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char n[16];

		dup2(lfd, 3);
		snprintf(n, sizeof(n), "%d", (int)getpid());
		setenv("LISTEN_PID", n, 1);
		setenv("LISTEN_FDS", "1", 1);
		execl(bin, bin, "-s", d->socket, "metrics", "--http", (char *)NULL);
		_exit(127);
	}
	close(lfd);
	return pid;
}

/* A TCP connection to 127.0.0.1:port from source address 127.0.0.src (any local user may bind them). */
static int tcp_connect(int port, int src)
{
	struct sockaddr_in from = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000000u | (unsigned)src) };
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&from, sizeof(from)), 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&to, sizeof(to)), 0);
	return fd;
}

/* A scrape as curl does it: GET, the whole answer into out; whether it was a 200 with the metrics. */
static bool scrape(int port)
{
	static const char req[] = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
	int fd = tcp_connect(port, 1);
	size_t n = 0;
	ssize_t k;

	assert_int_equal(write(fd, req, sizeof(req) - 1), (ssize_t)sizeof(req) - 1);
	while ((k = read(fd, out + n, sizeof(out) - 1 - n)) > 0)
		n += (size_t)k;
	out[n] = '\0';
	close(fd);
	return strncmp(out, "HTTP/1.1 200 OK\r\n", 17) == 0 && strstr(out, "\nhugepool_up 1\n");
}

/*
 * Issue 39, findings 3 and 4, against the server itself: one local user holding connections (more
 * than it keeps, silent, from four source addresses; or sending a request byte by byte; or asking
 * and never reading) or cycling them (hundreds opened and closed at once) neither keeps a scraper
 * from its answer nor stops the server. The packaged socket is attacked in tests/container-test.sh.
 */
static void test_http_server_held_and_cycled(void **state)
{
	static struct daemon d;
	static int held[3 * HTTP_CONNS];
	int port, st, slow, noread;
	pid_t pid;
	(void)state;

	start(&d, NULL, CLASSES);
	pid = server_start(&d, &port);
	assert_true(scrape(port));
	/* held: three times as many silent connections as it keeps, and one sending a byte at a time */
	slow = tcp_connect(port, 2);
	assert_int_equal(write(slow, "G", 1), 1);
	for (unsigned i = 0; i < ARRAY_SIZE(held); i++)
		held[i] = tcp_connect(port, 2 + (int)(i % 4));
	assert_int_equal(write(slow, "E", 1), 1);
	noread = tcp_connect(port, 5);
	assert_int_equal(write(noread, "GET /metrics HTTP/1.1\r\n\r\n", 25), 25);
	for (int i = 0; i < 5; i++)
		assert_true(scrape(port));
	for (unsigned i = 0; i < ARRAY_SIZE(held); i++)
		close(held[i]);
	close(slow);
	close(noread);
	/* cycled: 1000 connections opened and closed as fast as they go, some with half a request */
	for (int i = 0; i < 1000; i++) {
		int fd = tcp_connect(port, 2 + i % 4);

		if (i % 3 == 0)
			assert_int_equal(write(fd, "GET /met", 8), 8);
		close(fd);
	}
	assert_true(scrape(port));
	/* still serving, never exited */
	assert_int_equal(waitpid(pid, &st, WNOHANG), 0);
	kill(pid, SIGTERM);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	stop(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_busy_daemon_promtool, teardown),
		cmocka_unit_test_teardown(test_other_uid, teardown),
		cmocka_unit_test_teardown(test_daemon_down, teardown),
		cmocka_unit_test_teardown(test_output_atomic, teardown),
		cmocka_unit_test_teardown(test_http, teardown),
		cmocka_unit_test_teardown(test_http_server_held_and_cycled, teardown),
	};

	return run_cases("metrics", tests);
}
