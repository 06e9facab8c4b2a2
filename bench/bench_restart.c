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
 *  - ours (re-execution, hugepoolctl restart, no service manager): the same, from the restart
 *    request to the answer of the status sent right after it (the pause a connected client sees).
 * Also counts the clients that lost their connection (cold: all of them; warm: none).
 * Best of 3 runs; a fresh daemon for each.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static int one_run(enum mode m, const char *globals, unsigned n, struct run *ret)
{
	const struct harness_opts store = { .fdstore_max = 65536 };
	char classes[128];
	struct hp_buffer *b = calloc(n, sizeof(*b));
	hp_conn *c[CLIENTS] = { 0 };
	struct daemon d;
	uint64_t t0;
	int r;

	if (!b)
		return -ENOMEM;
	snprintf(classes, sizeof(classes), "[class bench]\nsize = 64M\ncount = %u\n", n);
	r = harness_start_opts(&d, globals, classes, m == WARM ? &store : NULL);
	if (r < 0) {
		printf("   hugepoold did not start: %s\n", strerror(-r));
		harness_dump_log(&d);
		free(b);
		return r;
	}
	for (unsigned i = 0; i < CLIENTS && r == 0; i++)
		r = hp_connect(d.socket, &c[i]);
	if (r == 0)
		r = acquire_all(c, b, n);
	if (r < 0)
		goto out;
	/* cold: the clients let go first, or the new daemon would not find the hugepages their
	 * mappings still hold (the double count warm restart exists to avoid) */
	for (unsigned i = 0; m == COLD && i < CLIENTS && r == 0; i++) {
		unsigned first = n * i / CLIENTS, k = n * (i + 1) / CLIENTS - first;

		r = k ? hp_release(c[i], b + first, k) : 0;
	}
	if (r < 0)
		goto out;
	bench_settle();
	ret->disconnected = 0;
	t0 = bench_now_ns();
	if (m == REEXEC) {
		r = hp_daemon_restart(c[0]);
	} else {
		r = harness_terminate(&d) == 0 ? harness_restart(&d) : -EIO;
	}
	if (r < 0)
		goto out;
	for (unsigned i = 0; i < CLIENTS; i++) {
		struct hp_status *st;

		if (hp_status(c[i], &st) == 0) {
			hp_status_free(st);
			continue;
		}
		/* its connection died with the daemon: connect again and take its buffers again */
		ret->disconnected++;
		hp_disconnect(c[i]);
		c[i] = NULL;
		r = hp_connect(d.socket, &c[i]);
		if (r < 0)
			goto out;
	}
	if (ret->disconnected)
		r = acquire_all(c, b, n);
	ret->ns = bench_now_ns() - t0;
out:
	if (r < 0)
		printf("   %s run failed: %s\n", m == COLD ? "cold" : m == WARM ? "warm" : "re-execution", hp_strerror(r));
	for (unsigned i = 0; i < CLIENTS; i++)
		hp_disconnect(c[i]);
	if (harness_stop(&d) != 0)
		printf("   hugepoold did not exit cleanly (its log is above)\n");
	free(b);
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
