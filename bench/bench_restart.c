/* SPDX-License-Identifier: MIT */
/*
 * bench_restart.c - "The daemon restarts under clients holding a multi-GiB pool": warm against
 * cold, through a real hugepoold (tests/integration/harness.c, whose manager plays systemd's
 * fd store).
 *
 * A pool of $HP_BENCH_GIB GiB (default 4) in 64 MiB buffers, hugetlb 2 MiB pages when enough
 * are free (else 4 KiB pages, said so); CLIENTS clients connected, which between them hold
 * every buffer. Timed from the SIGTERM that starts the restart to the moment every client holds
 * all its buffers and is served again:
 *  - baseline (cold, today without a store): the clients release their buffers (else the new
 *    daemon would not find the hugepages their mappings hold), the new daemon faults the whole
 *    pool again, the clients, whose connections died, reconnect and acquire again;
 *  - ours (warm, fd store): the new daemon takes the pool and the connections over; a client is
 *    served again when a status request it sent on its old connection is answered;
 *  - ours (re-execution, hugepoolctl restart, no service manager): the same, from the answer to
 *    the restart request to the answer of the status sent right after it (the pause a connected
 *    client sees: the daemon checks the restart, running the next binary's --check-config,
 *    while it still serves, and stops once it answered).
 * Also counts the clients that lost their connection (cold: all of them; warm: none). The
 * clients are a process of their own (clients_main), as in production, and the bench holds no
 * mapping of the pool when it starts the next daemon. Best of 3 runs; a fresh daemon for each.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../tests/integration/harness.h"
#include "benchutil.h"
#include "hugepool.h"

#define BUF_SIZE (64 * BENCH_MIB)
#define CLIENTS 8
#define RUNS 3

enum mode { COLD, WARM, REEXEC };

struct run {
	uint64_t ns; /* restart until every client is served with its buffers */
	unsigned disconnected; /* clients whose connection did not survive */
};

/* Every client acquires its share of the n buffers. */
static int acquire_all(hp_conn **c, struct hp_buffer *b, unsigned n)
{
	for (unsigned i = 0; i < CLIENTS; i++) {
		unsigned first = n * i / CLIENTS, k = n * (i + 1) / CLIENTS - first;
		int r = k ? hp_acquire(c[i], "bench", k, 30000, b + first) : 0;

		if (r < 0)
			return r;
	}
	return 0;
}

/*
 * The clients' process: CLIENTS connections that acquire the n buffers (cold: and release them),
 * then say 'R' on out; on 'g' (the daemon was restarted by the bench) or 'x' (restart it
 * through the first connection: re-execution) each client asks for status on its connection,
 * reconnects and acquires again where the connection died, and the process answers with a
 * struct client_report. A process of their own, as in production: the bench, which starts the
 * daemon, then maps none of the pool, so its fork of the next daemon copies no page tables of
 * it (hugetlb mappings are copied at fork even when shared).
 */
struct client_report {
	int r;
	unsigned disconnected;
	uint64_t start_ns, end_ns; /* CLOCK_MONOTONIC: one clock for both processes */
};

static void clients_main(enum mode m, const char *socket, unsigned n, int in, int out)
{
	struct client_report rep = { 0 };
	struct hp_buffer *b = calloc(n, sizeof(*b));
	hp_conn *c[CLIENTS] = { 0 };
	char cmd = 0;
	int r = b ? 0 : -ENOMEM;

	for (unsigned i = 0; i < CLIENTS && r == 0; i++)
		r = hp_connect(socket, &c[i]);
	if (r == 0)
		r = acquire_all(c, b, n);
	/* cold: the clients let go first, or the new daemon would not find the hugepages their
	 * mappings still hold (the double count warm restart exists to avoid) */
	for (unsigned i = 0; m == COLD && i < CLIENTS && r == 0; i++) {
		unsigned first = n * i / CLIENTS, k = n * (i + 1) / CLIENTS - first;

		r = k ? hp_release(c[i], b + first, k) : 0;
	}
	if (r == 0 && (write(out, "R", 1) != 1 || read(in, &cmd, 1) != 1))
		r = -EIO;
	rep.start_ns = bench_now_ns();
	/* the daemon checks the restart while it serves, and stops once it answered: the pause its
	 * clients see starts there */
	if (r == 0 && cmd == 'x' && (r = hp_daemon_restart(c[0])) == 0)
		rep.start_ns = bench_now_ns();
	for (unsigned i = 0; i < CLIENTS && r == 0; i++) {
		struct hp_status *st;

		if (hp_status(c[i], &st) == 0) {
			hp_status_free(st);
			continue;
		}
		/* its connection died with the daemon: connect again and take its buffers again */
		rep.disconnected++;
		hp_disconnect(c[i]);
		c[i] = NULL;
		r = hp_connect(socket, &c[i]);
	}
	if (r == 0 && rep.disconnected)
		r = acquire_all(c, b, n);
	rep.end_ns = bench_now_ns();
	rep.r = r;
	if (write(out, &rep, sizeof(rep)) != (ssize_t)sizeof(rep))
		_exit(1);
	(void)!read(in, &cmd, 1); /* hold everything until the bench has what it needs */
	for (unsigned i = 0; i < CLIENTS; i++)
		hp_disconnect(c[i]);
	_exit(0);
}

static int one_run(enum mode m, const char *globals, unsigned n, struct run *ret)
{
	const struct harness_opts store = { .fdstore_max = 65536 };
	struct client_report rep = { .r = -EIO };
	char classes[128], ready = 0;
	int to[2] = { -1, -1 }, from[2] = { -1, -1 };
	struct daemon d;
	pid_t pid = -1;
	uint64_t t0;
	int r;

	snprintf(classes, sizeof(classes), "[class bench]\nsize = 64M\ncount = %u\n", n);
	r = harness_start_opts(&d, globals, classes, m == WARM ? &store : NULL);
	if (r < 0) {
		printf("   hugepoold did not start: %s\n", strerror(-r));
		harness_dump_log(&d);
		return r;
	}
	if (pipe2(to, O_CLOEXEC) < 0 || pipe2(from, O_CLOEXEC) < 0 || (pid = fork()) < 0) {
		r = -errno;
		goto out;
	}
	if (pid == 0) {
		/* only the bench's ends stay open here, or no read would ever see end-of-file */
		close(to[1]);
		close(from[0]);
		clients_main(m, d.socket, n, to[0], from[1]);
	}
	r = read(from[0], &ready, 1) == 1 && ready == 'R' ? 0 : -EIO;
	if (r < 0)
		goto out;
	bench_settle();
	t0 = bench_now_ns();
	if (m != REEXEC)
		r = harness_terminate(&d) == 0 ? harness_restart(&d) : -EIO;
	if (r == 0 && (write(to[1], m == REEXEC ? "x" : "g", 1) != 1 ||
		       read(from[0], &rep, sizeof(rep)) != (ssize_t)sizeof(rep)))
		r = -EIO;
	if (r == 0)
		r = rep.r;
	ret->disconnected = rep.disconnected;
	/* re-execution: from the client's restart request on */
	ret->ns = rep.end_ns - (m == REEXEC ? rep.start_ns : t0);
out:
	if (r < 0)
		printf("   %s run failed: %s\n", m == COLD ? "cold" : m == WARM ? "warm" : "re-execution", hp_strerror(r));
	if (to[1] >= 0)
		close(to[1]); /* the clients let go and exit */
	if (pid > 0)
		waitpid(pid, NULL, 0);
	if (to[0] >= 0)
		close(to[0]);
	for (int i = 0; i < 2; i++)
		if (from[i] >= 0)
			close(from[i]);
	if (harness_stop(&d) != 0)
		printf("   hugepoold did not exit cleanly (its log is above)\n");
	return r;
}

int main(void)
{
	unsigned gib = bench_env_gib(4), n = gib * 16;
	uint64_t bytes = (uint64_t)n * BUF_SIZE;
	const char *globals = "hugepages = require\n";
	struct bench_series s[3] = { 0 };
	unsigned lost[3] = { 0 };
	char why[256], b1[3][96];
	const char *kind = "2 MiB hugetlb";

	bench_settle_init();
	if (!bench_hugetlb_ok(bytes, 2 * BENCH_MIB, why, sizeof(why))) {
		printf("bench_restart: %s; measuring with 4 KiB pages (hugepages = off) instead\n", why);
		globals = "hugepages = off\n";
		kind = "4 KiB";
	}
	bench_title("Restart under %d clients holding %u buffers of 64 MiB (%u GiB, %s pages), best of %d runs",
		    CLIENTS, n, gib, kind, RUNS);
	for (int run = 0; run < RUNS; run++)
		for (int m = COLD; m <= REEXEC; m++) {
			struct run res = { 0 };

			if (one_run((enum mode)m, globals, n, &res) < 0)
				return 0;
			bench_series_add(&s[m], res.ns);
			lost[m] += res.disconnected;
		}
	{
		double cold = (double)bench_series_best(&s[COLD]) / 1e6;
		double warm = (double)bench_series_best(&s[WARM]) / 1e6;
		double reexec = (double)bench_series_best(&s[REEXEC]) / 1e6;

		printf("   %-51s | %-43s | %s\n", "figure (ms, best run)", "baseline", "ratio (> 1: ours faster)");
		bench_row("warm restart (fd store), clients served again", warm, "cold restart + reconnect + acquire",
			  cold, "ms", "baseline/ours", cold / warm);
		bench_row("re-execution (hugepoolctl restart): client pause", reexec, "cold restart + reconnect + acquire",
			  cold, "ms", "baseline/ours", cold / reexec);
		bench_note("clients disconnected over %d runs: cold %u of %d, warm %u, re-execution %u", RUNS, lost[COLD],
			   RUNS * CLIENTS, lost[WARM], lost[REEXEC]);
		bench_note("all runs (ms): cold %s; warm %s; re-execution %s",
			   bench_series_str(&s[COLD], true, b1[0], sizeof(b1[0])),
			   bench_series_str(&s[WARM], true, b1[1], sizeof(b1[1])),
			   bench_series_str(&s[REEXEC], true, b1[2], sizeof(b1[2])));
	}
	return 0;
}
