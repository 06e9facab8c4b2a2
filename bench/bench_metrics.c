/* SPDX-License-Identifier: MIT */
/*
 * bench_metrics.c - "A scrape of a daemon with 10,000 leases and 16 journals answers in under
 * 50 ms, the daemon's event loop not stalled": a real hugepoold (tests/integration/harness.c)
 * with LEASES buffers of 4 KiB (hugepages = off: the figure is about the status, not the
 * pages) all leased by CLIENTS connections, and JOURNALS journals that have taken records.
 *
 *  - a scrape: `hugepoolctl metrics --http` started as inetd would start it (its standard input
 *    and output one end of a socket pair), sent Prometheus' request (it asks for OpenMetrics),
 *    timed until the whole answer is read: process start, connection, status, decoding,
 *    rendering, answer; against the baseline `hugepoolctl status --json` of the same daemon,
 *    timed until its output ends. The median and the worst of SCRAPES each, and the answer's
 *    size.
 *  - a scrape of the endpoint as packaged: one `hugepoolctl metrics --http` serving a listening
 *    TCP socket on 127.0.0.1 (LISTEN_FDS, as systemd's Accept=no passes it), a connection and
 *    the request per scrape, timed until the answer is read. With $HP_BENCH_CTL_BEFORE naming
 *    another build's hugepoolctl (the one before a change), its scrapes are timed in turns with
 *    these: the packaged scrape before (that build's --http started per connection, as
 *    Accept=yes did) beside the served one, and each build's --http started per connection.
 *  - the event loop: a client does acquire-and-release round trips on a class of its own
 *    while nothing else happens (baseline), then while scrapes run back to back; the worst and
 *    the 99th percentile round trip of each say how long a status of this daemon holds the
 *    loop, which serves every other client meanwhile.
 * Prints, never asserts.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../tests/integration/harness.h"
#include "benchutil.h"
#include "hugepool.h"

#define LEASES 10000
#define CLIENTS 10
#define JOURNALS 16
#define SCRAPES 31
#define PROBES_MAX 200000

extern char **environ;

static bool uids_too; /* run_ctl's --http of this build with --uids */

static const char request[] = "GET /metrics HTTP/1.1\r\nHost: localhost:10864\r\nUser-Agent: Prometheus/2.42.0\r\n"
			      "Accept: application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
			      "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1\r\n\r\n";

/*
 * Run hugepoolctl with args, its standard input and output a socket pair (http: the request
 * sent first); ns until its output ended; *ret_bytes what it wrote. 0 or -1.
 */
static int run_ctl(const struct daemon *d, const char *ctl, bool http, uint64_t *ret_ns, size_t *ret_bytes)
{
	char bin[256], sock[sizeof(d->socket)];
	/* --uids: the same families as a build before it, which had no such option and wrote them all */
	char *argv_http[] = { bin, "-s", sock, "metrics", "--http", ctl || !uids_too ? NULL : "--uids", NULL };
	char *argv_status[] = { bin, "-s", sock, "status", "--json", NULL };
	posix_spawn_file_actions_t fa;
	static char buf[1 << 16];
	uint64_t t0 = bench_now_ns();
	size_t bytes = 0;
	int sv[2], st;
	pid_t pid;

	if (ctl)
		snprintf(bin, sizeof(bin), "%s", ctl);
	else
		snprintf(bin, sizeof(bin), "%s/hugepoolctl", harness_build());
	snprintf(sock, sizeof(sock), "%s", d->socket);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -1;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, sv[1], 0);
	posix_spawn_file_actions_adddup2(&fa, sv[1], 1);
	if (posix_spawn(&pid, bin, &fa, NULL, http ? argv_http : argv_status, environ) != 0) {
		posix_spawn_file_actions_destroy(&fa);
		close(sv[0]);
		close(sv[1]);
		return -1;
	}
	posix_spawn_file_actions_destroy(&fa);
	close(sv[1]);
	if (http && write(sv[0], request, sizeof(request) - 1) != (ssize_t)sizeof(request) - 1)
		bytes = 0;
	for (;;) {
		ssize_t k = read(sv[0], buf, sizeof(buf));

		if (k <= 0)
			break;
		bytes += (size_t)k;
	}
	*ret_ns = bench_now_ns() - t0;
	close(sv[0]);
	waitpid(pid, &st, 0);
	*ret_bytes = bytes;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* The served endpoint: hugepoolctl metrics --http on a listening socket (fd 3, LISTEN_FDS); its port. */
static pid_t server_start(const struct daemon *d, int *port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	char bin[256];
	pid_t pid;

	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 128) < 0 ||
	    getsockname(lfd, (struct sockaddr *)&sa, &len) < 0)
		return -1;
	*port = ntohs(sa.sin_port);
	snprintf(bin, sizeof(bin), "%s/hugepoolctl", harness_build());
	pid = fork();
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

/* One scrape of the served endpoint: connect, ask, read it all. 0 or -1. */
static int scrape_served(int port, uint64_t *ret_ns, size_t *ret_bytes)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	static char buf[1 << 16];
	uint64_t t0 = bench_now_ns();
	size_t bytes = 0;
	bool ok = false;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    write(fd, request, sizeof(request) - 1) != (ssize_t)sizeof(request) - 1) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	for (;;) {
		ssize_t k = read(fd, buf, sizeof(buf));

		if (k <= 0)
			break;
		if (bytes == 0)
			ok = k >= 12 && memcmp(buf, "HTTP/1.1 200", 12) == 0;
		bytes += (size_t)k;
	}
	*ret_ns = bench_now_ns() - t0;
	close(fd);
	*ret_bytes = bytes;
	return ok ? 0 : -1;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The q quantile of n sorted values. */
static uint64_t quantile(const uint64_t *v, size_t n, double q)
{
	size_t i = (size_t)(q * (double)(n - 1) + 0.5);

	return n ? v[i < n ? i : n - 1] : 0;
}

/* The prober: round trips on its own connection until told to stop. */
static struct {
	hp_conn *c;
	atomic_bool stop;
	uint64_t ns[PROBES_MAX];
	size_t n;
	int err;
} probe;

static void *probe_main(void *arg)
{
	(void)arg;
	probe.n = 0;
	while (!atomic_load(&probe.stop) && probe.n < PROBES_MAX) {
		struct hp_buffer b;
		uint64_t t0 = bench_now_ns();
		int r = hp_acquire(probe.c, "probe", 1, 0, &b);

		if (r == 0)
			r = hp_release(probe.c, &b, 1);
		if (r < 0) {
			probe.err = r;
			break;
		}
		probe.ns[probe.n++] = bench_now_ns() - t0;
		usleep(200); /* a client that asks now and then, not one that owns the loop */
	}
	return NULL;
}

/* Probe for ms milliseconds while busy() runs (NULL: nothing else): p99 and worst in *ret. */
static int probe_during(void (*busy)(const struct daemon *d), const struct daemon *d, unsigned ms,
			uint64_t *ret_p99, uint64_t *ret_max, size_t *ret_n)
{
	pthread_t t;

	atomic_store(&probe.stop, false);
	if (pthread_create(&t, NULL, probe_main, NULL) != 0)
		return -1;
	if (busy)
		busy(d);
	else
		usleep(ms * 1000u);
	atomic_store(&probe.stop, true);
	pthread_join(t, NULL);
	if (probe.err || probe.n == 0)
		return -1;
	qsort(probe.ns, probe.n, sizeof(probe.ns[0]), cmp_u64);
	*ret_p99 = quantile(probe.ns, probe.n, 0.99);
	*ret_max = probe.ns[probe.n - 1];
	*ret_n = probe.n;
	return 0;
}

static void scrapes_back_to_back(const struct daemon *d)
{
	for (unsigned i = 0; i < SCRAPES; i++) {
		uint64_t ns;
		size_t bytes;

		run_ctl(d, NULL, true, &ns, &bytes);
	}
}

static double ms(uint64_t ns)
{
	return (double)ns / 1e6;
}

/*
 * The endpoint as packaged now (one server, a connection per scrape) and, with
 * $HP_BENCH_CTL_BEFORE, as packaged before (a --http process per connection) of that build, and
 * the two builds' --http per connection, all in turns.
 */
static void served_vs_before(const struct daemon *d)
{
	const char *before = getenv("HP_BENCH_CTL_BEFORE");
	uint64_t served[SCRAPES], ours[SCRAPES], theirs[SCRAPES];
	size_t bytes = 0, theirs_bytes = 0;
	int port = 0, st;
	pid_t pid = server_start(d, &port);

	if (pid < 0 || scrape_served(port, &served[0], &bytes) < 0) { /* untimed: the server's own start */
		bench_note("skipped: the served endpoint did not start");
		goto out;
	}
	uids_too = before != NULL;
	for (unsigned i = 0; i < SCRAPES; i++)
		if (scrape_served(port, &served[i], &bytes) < 0 || run_ctl(d, NULL, true, &ours[i], &bytes) < 0 ||
		    (before && run_ctl(d, before, true, &theirs[i], &theirs_bytes) < 0)) {
			bench_note("skipped: a scrape of the served endpoint or of %s failed", before ? before : "ours");
			goto out;
		}
	qsort(served, SCRAPES, sizeof(served[0]), cmp_u64);
	qsort(ours, SCRAPES, sizeof(ours[0]), cmp_u64);
	if (!before) {
		bench_note("the served endpoint (one hugepoolctl, Accept=no); HP_BENCH_CTL_BEFORE=<a hugepoolctl> compares "
			   "another build's");
		bench_row("served scrape, median of 31 (ms)", ms(quantile(served, SCRAPES, 0.5)),
			  "a process per scrape, median", ms(quantile(ours, SCRAPES, 0.5)), "ms", "process/served",
			  (double)quantile(ours, SCRAPES, 0.5) / (double)quantile(served, SCRAPES, 0.5));
		goto out;
	}
	qsort(theirs, SCRAPES, sizeof(theirs[0]), cmp_u64);
	bench_note("in turns with %s (%zu bytes an answer; ours per connection, with --uids, %zu)", before,
		   theirs_bytes, bytes);
	bench_row("packaged scrape now: served, median of 31 (ms)", ms(quantile(served, SCRAPES, 0.5)),
		  "before: a process per scrape, median", ms(quantile(theirs, SCRAPES, 0.5)), "ms", "before/now",
		  (double)quantile(theirs, SCRAPES, 0.5) / (double)quantile(served, SCRAPES, 0.5));
	bench_row("packaged scrape now: served, worst of 31 (ms)", ms(served[SCRAPES - 1]), "before, worst",
		  ms(theirs[SCRAPES - 1]), "ms", "before/now", (double)theirs[SCRAPES - 1] / (double)served[SCRAPES - 1]);
	bench_row("--http per connection now, median (ms)", ms(quantile(ours, SCRAPES, 0.5)), "before, median",
		  ms(quantile(theirs, SCRAPES, 0.5)), "ms", "before/now",
		  (double)quantile(theirs, SCRAPES, 0.5) / (double)quantile(ours, SCRAPES, 0.5));
out:
	if (pid > 0) {
		kill(pid, SIGTERM);
		waitpid(pid, &st, 0);
	}
}

int main(void)
{
	static char classes[8192];
	hp_conn *c[CLIENTS] = { NULL };
	static struct hp_buffer bufs[LEASES];
	static hp_journal *j[JOURNALS];
	uint64_t scrape[SCRAPES], status[SCRAPES], p99_idle, max_idle, p99_busy, max_busy;
	size_t scrape_bytes = 0, status_bytes = 0, n_idle, n_busy;
	struct rlimit rl;
	struct daemon d;
	size_t at;
	int r;

	bench_title("Metrics: a scrape of a daemon with %u leases and %u journals", LEASES, JOURNALS);
	/* the leases' mappings are ours: as many fds as a grant of 32 needs, maps by the thousand */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	at = (size_t)snprintf(classes, sizeof(classes),
			      "[class bench]\nsize = 4K\ncount = %u\n[class probe]\nsize = 4K\ncount = 1\n", LEASES);
	for (unsigned i = 0; i < JOURNALS; i++)
		at += (size_t)snprintf(classes + at, sizeof(classes) - at,
				       "[journal j%02u]\ndirectory = @DIR@/j%02u\nsegment_size = 1M\nsegments = 2\n", i, i);
	r = harness_start(&d, "hugepages = off\nmax_connections_per_uid = 64\n", classes);
	if (r < 0) {
		bench_note("skipped: the daemon did not start (%s)", strerror(-r));
		return 0;
	}
	for (unsigned i = 0; i < CLIENTS; i++) {
		unsigned first = LEASES * i / CLIENTS, k = LEASES * (i + 1) / CLIENTS - first;

		r = hp_connect(d.socket, &c[i]);
		for (unsigned got = 0; r == 0 && got < k; got += 1000)
			r = hp_acquire(c[i], "bench", k - got < 1000 ? k - got : 1000, 10000, bufs + first + got);
		if (r < 0)
			break;
	}
	for (unsigned i = 0; r == 0 && i < JOURNALS; i++) {
		char name[8];
		uint64_t lsn;

		snprintf(name, sizeof(name), "j%02u", i);
		r = hp_journal_open(c[i % CLIENTS], name, &j[i]);
		for (unsigned k = 0; r == 0 && k < 20; k++)
			r = hp_journal_append_wait(j[i], "record", 6, &lsn);
	}
	if (r == 0)
		r = hp_connect(d.socket, &probe.c);
	if (r < 0) {
		bench_note("skipped: setting the daemon up failed: %s", hp_strerror(r));
		goto out;
	}
	bench_note("%u leases of 4 KiB held by %u clients, %u journals of 20 records, hugepages = off", LEASES, CLIENTS,
		   JOURNALS);
	for (unsigned i = 0; i < SCRAPES; i++)
		if (run_ctl(&d, NULL, true, &scrape[i], &scrape_bytes) < 0 ||
		    run_ctl(&d, NULL, false, &status[i], &status_bytes) < 0) {
			bench_note("skipped: hugepoolctl failed");
			goto out;
		}
	qsort(scrape, SCRAPES, sizeof(scrape[0]), cmp_u64);
	qsort(status, SCRAPES, sizeof(status[0]), cmp_u64);
	bench_note("a scrape answers %zu bytes (OpenMetrics); status --json prints %zu bytes", scrape_bytes, status_bytes);
	bench_row("scrape, median of 31 (ms)", ms(quantile(scrape, SCRAPES, 0.5)), "status --json, median",
		  ms(quantile(status, SCRAPES, 0.5)), "ms", "status/scrape", (double)quantile(status, SCRAPES, 0.5) /
									     (double)quantile(scrape, SCRAPES, 0.5));
	bench_row("scrape, worst of 31 (ms)", ms(scrape[SCRAPES - 1]), "status --json, worst", ms(status[SCRAPES - 1]), "ms",
		  "status/scrape", (double)status[SCRAPES - 1] / (double)scrape[SCRAPES - 1]);
	bench_note("target: a scrape under 50 ms: %s (worst %.2f ms)", ms(scrape[SCRAPES - 1]) < 50 ? "met" : "NOT met",
		   ms(scrape[SCRAPES - 1]));
	served_vs_before(&d);
	if (probe_during(NULL, &d, 2000, &p99_idle, &max_idle, &n_idle) < 0 ||
	    probe_during(scrapes_back_to_back, &d, 0, &p99_busy, &max_busy, &n_busy) < 0) {
		bench_note("skipped: the probe failed: %s", hp_strerror(probe.err));
		goto out;
	}
	bench_note("the event loop: a client's acquire+release round trips, %zu while idle, %zu during %u scrapes",
		   n_idle, n_busy, SCRAPES);
	bench_row("round trip during scrapes, p99 (ms)", ms(p99_busy), "idle, p99", ms(p99_idle), "ms", "idle/scrapes",
		  (double)p99_idle / (double)p99_busy);
	bench_row("round trip during scrapes, worst (ms)", ms(max_busy), "idle, worst", ms(max_idle), "ms",
		  "idle/scrapes", (double)max_idle / (double)max_busy);
out:
	hp_disconnect(probe.c);
	for (unsigned i = 0; i < JOURNALS; i++)
		if (j[i])
			hp_journal_close(j[i]);
	for (unsigned i = 0; i < CLIENTS; i++)
		hp_disconnect(c[i]);
	harness_stop(&d);
	return 0;
}
