/* SPDX-License-Identifier: MIT */
/*
 * bench_pause.c - the restart pause a client sees (issue 44): one connection loops acquire and
 * release of a 2 MiB buffer and keeps its longest round trip while a real hugepoold
 * (tests/integration/harness.c, whose manager plays systemd: $NOTIFY_SOCKET, MAINPID=, the fd
 * store) is restarted RUNS times under it, with 1 and with 1,000 other clients connected, each
 * holding a buffer of a pool of $HP_BENCH_GIB GiB (default 4) of 2 MiB buffers, and one journal
 * holding $HP_BENCH_PAUSE_JOURNAL_MIB MiB of records (default 32: a production configuration has
 * journals, and every restart stops them and the next life recovers them).
 * Four ways, a fresh daemon each, same run:
 *  - exec (the baseline: how hugepoolctl restart went before the take-over, restart = exec):
 *    the daemon stops, re-executes its binary and takes every fd over again;
 *  - fd store: SIGTERM, and the manager starts the daemon again with its fd store;
 *  - take-over (restart = takeover): the next life prepares beside the running one, which
 *    stops only once it is ready and hands over what changed meanwhile;
 *  - exec with no manager (restart = exec, no $NOTIFY_SOCKET): the pid kept by two take-overs,
 *    the next life handing the service back to the daemon's process executed again.
 * A pause is the looping client's longest round trip across one restart (the median of the
 * runs, with the least and the most), beside the same client's longest round trip over as long
 * with no restart (the floor: scheduling on a shared machine). For a take-over also the longest
 * of its round trips in flight between the running life's stop and the next life's TAKEN (the
 * daemon logs both instants, CLOCK_MONOTONIC as here): the pause the hand-over itself made,
 * without the stalls a machine has whether or not the daemon restarts. Its parts are the daemon's own
 * "Restart parts (us)" log line of the median run: for a re-execution the time from the stop to
 * the new main and each boot step; for the fd store the boot steps; for a take-over the stop and
 * hand-over, applying what changed, the journals and the publishing. As root it runs at nice
 * -20, the daemons it starts too, so that other load weighs less. Prints, never asserts.
 * HP_BENCH_PAUSE_TRACE=1 prints every round trip over 300 us of each restart and each floor, with
 * when it began (ms after the restart was asked), to match against `perf sched record -k
 * CLOCK_MONOTONIC` (the restart's t0 is printed in CLOCK_MONOTONIC seconds).
 * HP_BENCH_PAUSE_WAYS (e.g. "exec,takeover") and HP_BENCH_PAUSE_CLIENTS (e.g. "1000") measure
 * only those ways and counts of other clients, to look at one part at a time.
 * Usage: bench_pause [RUNS] (default 5).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "../tests/integration/harness.h"
#include "benchutil.h"
#include "hugepool.h"

#define RUNS_MAX 20
#define PARTS "Restart parts (us):"
#define PARTS_MAX 1024

enum way { EXEC, FDSTORE, TAKEOVER, BACK, WAYS };
static const char *const way_name[WAYS] = { "exec (baseline)", "fd store", "take-over", "exec, no manager" };
static const char *const way_key[WAYS] = { "exec", "fdstore", "takeover", "back" }; /* HP_BENCH_PAUSE_WAYS */

/* the looping client: its longest round trip since the last reset, and how many it made */
static atomic_ullong max_rtt, nreq;
static atomic_bool loop_stop, loop_failed;
static const char *loop_sock;
/* every round trip of the restart being measured: when it began and ended (ns) */
#define TRIPS_MAX 65536
struct trip {
	uint64_t t0, t1;
};
static struct trip trips[TRIPS_MAX];
static atomic_uint ntrips;
/* HP_BENCH_PAUSE_TRACE: every round trip over 300 us, when it began (ns) */
#define SLOW_MAX 256
static atomic_ullong slow_t[SLOW_MAX], slow_ns[SLOW_MAX];
static atomic_uint nslow;

static void note_rtt(uint64_t ns)
{
	unsigned long long old = atomic_load(&max_rtt);

	while (ns > old && !atomic_compare_exchange_weak(&max_rtt, &old, ns))
		;
}

static void *looper(void *arg)
{
	struct hp_buffer b;
	hp_conn *c = NULL;

	(void)arg;
	if (hp_connect(loop_sock, &c) < 0) {
		loop_failed = true;
		return NULL;
	}
	while (!loop_stop) {
		uint64_t t0 = bench_now_ns(), t1, t2;

		if (hp_acquire(c, "loop", 1, 10000, &b) < 0) {
			fprintf(stderr, "bench_pause: acquire: %s\n", hp_last_error(c));
			loop_failed = true;
			break;
		}
		t1 = bench_now_ns();
		if (hp_release(c, &b, 1) < 0) {
			fprintf(stderr, "bench_pause: release: %s\n", hp_last_error(c));
			loop_failed = true;
			break;
		}
		t2 = bench_now_ns();
		note_rtt(t1 - t0);
		note_rtt(t2 - t1);
		if (ntrips + 2 <= TRIPS_MAX) {
			unsigned i = ntrips;

			trips[i] = (struct trip){ t0, t1 };
			trips[i + 1] = (struct trip){ t1, t2 };
			ntrips = i + 2;
		}
		if ((t1 - t0 > 300000 || t2 - t1 > 300000) && nslow < SLOW_MAX) {
			unsigned i = nslow++;

			slow_t[i] = t1 - t0 > 300000 ? t0 : t1;
			slow_ns[i] = t1 - t0 > 300000 ? t1 - t0 : t2 - t1;
		}
		nreq++;
	}
	hp_disconnect(c);
	return NULL;
}

/* Wait until the looping client made n more round trips (false: it failed or stalled 10 s). */
static bool looper_moves(unsigned n)
{
	unsigned long long n0 = nreq;

	for (int i = 0; i < 10000 && nreq < n0 + n && !loop_failed; i++)
		usleep(1000);
	return nreq >= n0 + n && !loop_failed;
}

/*
 * Every "Restart parts" line of d's log (after the colon), in order, `per` lines a restart
 * (joined by " | back: ") into parts[0..max)
 */
static unsigned all_parts(const struct daemon *d, char (*parts)[PARTS_MAX], unsigned max, unsigned per)
{
	char line[1024];
	FILE *f = fopen(d->log, "r");
	unsigned n = 0, k = 0;

	while (f && n < max && fgets(line, sizeof(line), f)) {
		char *p = strstr(line, PARTS);
		size_t len = strlen(parts[n]);

		if (!p)
			continue;
		p += strlen(PARTS);
		p[strcspn(p, "\n")] = '\0';
		snprintf(parts[n] + len, PARTS_MAX - len, "%s%s", k ? " | back: " : "", p + (*p == ' '));
		if (++k == per) {
			k = 0;
			n++;
		}
	}
	if (f)
		fclose(f);
	return n;
}

struct result {
	double pause_ms[RUNS_MAX], floor_ms[RUNS_MAX];
	double handover_ms[RUNS_MAX]; /* a take-over's: its longest round trip in flight at the hand-over */
	char parts[RUNS_MAX][PARTS_MAX];
	struct trip *trips[RUNS_MAX]; /* each run's round trips, until its parts are read */
	unsigned ntrips[RUNS_MAX];
	unsigned n;
};

/*
 * The longest of a run's round trips in flight at some moment between a running life's stop and
 * its next life's TAKEN, as each take-over's "Restart parts" gives them (0: none does).
 */
static double handover_ms(const char *parts, const struct trip *t, unsigned n)
{
	const char *p = parts, *q;
	unsigned long long us, stop;
	uint64_t worst = 0;

	while ((p = strstr(p, "taken over ")) && (q = strstr(p, "stopped (at "))) {
		if (sscanf(p, "taken over %llu us", &us) != 1 || sscanf(q, "stopped (at %llu ns", &stop) != 1)
			return 0;
		for (unsigned i = 0; i < n; i++)
			if (t[i].t0 <= stop + us * 1000 && t[i].t1 >= stop && t[i].t1 - t[i].t0 > worst)
				worst = t[i].t1 - t[i].t0;
		p = q;
	}
	return (double)worst / 1e6;
}

/* The journal's records: HP_BENCH_PAUSE_JOURNAL_MIB MiB of 16 KiB records, all durable. */
static int fill_journal(hp_conn *c)
{
	static char rec[16384];
	const char *e = getenv("HP_BENCH_PAUSE_JOURNAL_MIB");
	unsigned long mib = e ? strtoul(e, NULL, 10) : 32;
	uint64_t ticket = 0;
	hp_journal *j = NULL;
	int r;

	if (mib == 0)
		return 0;
	r = hp_journal_open(c, "pause", &j);
	for (unsigned long i = 0; r == 0 && i < mib * 64; i++) {
		memset(rec, (int)i, sizeof(rec));
		r = hp_journal_append(j, rec, sizeof(rec), &ticket);
	}
	if (r == 0)
		r = hp_journal_wait(j, ticket, 60000);
	if (r < 0)
		printf("  the journal could not be filled: %s\n", hp_last_error(c));
	if (j)
		hp_journal_close(j);
	return r;
}

/* One way with `others` other clients: a fresh daemon restarted `runs` times. */
static void measure(enum way way, unsigned others, unsigned gib, unsigned runs, const char *huge, struct result *res)
{
	const struct harness_opts store = { .fdstore_max = 65536 }, no_manager = { .no_manager = true };
	static struct daemon d;
	char globals[256], classes[320];
	hp_conn **cs = calloc(others + 1, sizeof(*cs)), *admin = NULL;
	struct hp_buffer held;
	pthread_t t;
	bool started = false;

	memset(res, 0, sizeof(*res));
	snprintf(globals, sizeof(globals),
		 "hugepages = %s\nrestart = %s\nmax_connections = %u\nmax_connections_per_uid = 0\n", huge,
		 way == TAKEOVER ? "takeover" : "exec", others + 64);
	snprintf(classes, sizeof(classes),
		 "[class loop]\nsize = 2M\ncount = 4\n[class pool]\nsize = 2M\ncount = %u\n"
		 "[journal pause]\ndirectory = @DIR@/pause\nsegment_size = 16M\nsegments = 8\n",
		 gib * 512);
	if (!cs || harness_start_opts(&d, globals, classes, way == FDSTORE ? &store : way == BACK ? &no_manager : NULL) < 0) {
		printf("  %s: the daemon did not start\n", way_name[way]);
		harness_dump_log(&d);
		free(cs);
		return;
	}
	loop_sock = d.socket;
	for (unsigned i = 0; i < others; i++)
		if (hp_connect(d.socket, &cs[i]) < 0 ||
		    (i < gib * 512 && hp_acquire(cs[i], "pool", 1, 10000, &held) < 0)) {
			printf("  %s: client %u could not connect and acquire\n", way_name[way], i);
			goto out;
		}
	if (hp_connect(d.socket, &admin) < 0 || fill_journal(admin) < 0)
		goto out;
	loop_stop = loop_failed = false;
	nreq = 0;
	if (pthread_create(&t, NULL, looper, NULL) != 0)
		goto out;
	started = true;
	/* the fd store gets a connection once it lived a second (fdstore.h) */
	usleep(1500000);
	for (unsigned r = 0; r < runs && r < RUNS_MAX; r++) {
		uint64_t t0, t_ret;

		/* the floor: as long as the restart will take, with none */
		max_rtt = 0;
		nslow = 0;
		t0 = bench_now_ns();
		usleep(300000);
		res->floor_ms[res->n] = (double)max_rtt / 1e6;
		if (getenv("HP_BENCH_PAUSE_TRACE")) {
			printf("    floor %s run %u: max %.3f ms; slow:", way_name[way], r, (double)max_rtt / 1e6);
			for (unsigned i = 0; i < nslow && i < SLOW_MAX; i++)
				printf(" %.3f:%.3f", ((double)slow_t[i] - (double)t0) / 1e6, (double)slow_ns[i] / 1e6);
			printf(" (%llu round trips)\n", (unsigned long long)nreq);
		}
		max_rtt = 0;
		nslow = 0;
		ntrips = 0;
		t0 = bench_now_ns();
		if (way == FDSTORE) {
			if (harness_terminate(&d) != 0 || harness_restart(&d) < 0) {
				printf("  %s: restart %u failed\n", way_name[way], r);
				break;
			}
		} else if (hp_daemon_restart(admin) < 0) {
			printf("  %s: restart %u failed: %s\n", way_name[way], r, hp_last_error(admin));
			break;
		}
		t_ret = bench_now_ns();
		/* served again, and settled: the next life's log line is there */
		if (!looper_moves(50)) {
			printf("  %s: the looping client stalled after restart %u\n", way_name[way], r);
			break;
		}
		if (bench_now_ns() - t0 < 300000000)
			usleep((useconds_t)((300000000 - (bench_now_ns() - t0)) / 1000));
		res->pause_ms[res->n] = (double)max_rtt / 1e6;
		{
			unsigned n = ntrips; /* the looping client goes on meanwhile */

			res->trips[res->n] = malloc(n * sizeof(struct trip) + 1);
			if (res->trips[res->n]) {
				memcpy(res->trips[res->n], trips, n * sizeof(struct trip));
				res->ntrips[res->n] = n;
			}
		}
		if (getenv("HP_BENCH_PAUSE_TRACE")) {
			printf("    trace %s run %u: max %.3f ms; slow round trips (start ms after the restart asked: ms):", way_name[way], r, (double)max_rtt / 1e6);
			for (unsigned i = 0; i < nslow && i < SLOW_MAX; i++)
				printf(" %.3f:%.3f", ((double)slow_t[i] - (double)t0) / 1e6, (double)slow_ns[i] / 1e6);
			printf("; restart returned at %.3f ms; t0 %.6f s\n", (double)(t_ret - t0) / 1e6, (double)t0 / 1e9);
		}
		res->n++;
	}
out:
	loop_stop = true;
	if (started)
		pthread_join(t, NULL);
	/* read once the looping client stopped: reading a long log beside it costs it milliseconds */
	all_parts(&d, res->parts, res->n, way == BACK ? 2 : 1);
	for (unsigned i = 0; i < res->n; i++) {
		if (res->trips[i])
			res->handover_ms[i] = handover_ms(res->parts[i], res->trips[i], res->ntrips[i]);
		free(res->trips[i]);
		res->trips[i] = NULL;
	}
	for (unsigned i = 0; i < others; i++)
		if (cs[i])
			hp_disconnect(cs[i]);
	if (admin)
		hp_disconnect(admin);
	free(cs);
	harness_stop(&d);
}

/* The median of res's pauses, and the run it came from (for its parts). */
static double pause_median(const struct result *res, unsigned *run, double *lo, double *hi)
{
	double v[RUNS_MAX];
	double m;

	memcpy(v, res->pause_ms, sizeof(v));
	m = bench_median(v, res->n);
	*lo = res->n ? v[0] : 0;
	*hi = res->n ? v[res->n - 1] : 0;
	*run = 0;
	for (unsigned i = 0; i < res->n; i++)
		if (res->pause_ms[i] == m || (res->pause_ms[i] >= m && res->pause_ms[*run] < m))
			*run = i;
	return m;
}

int main(int argc, char **argv)
{
	static const unsigned others[] = { 1, 1000 };
	unsigned gib = bench_env_gib(4), runs = argc > 1 ? (unsigned)atoi(argv[1]) : 5;
	static struct result res[2][WAYS];
	char why[256];
	const char *huge = "prefer";

	if (runs < 1 || runs > RUNS_MAX)
		runs = 5;
	/* the client and each daemon (which inherits it) ahead of other load on a shared machine:
	 * every way alike, so what is left of the floor is the machine's, not its neighbours' */
	if (setpriority(PRIO_PROCESS, 0, -20) < 0)
		bench_note("at the default priority (%s): other load on this machine weighs on every figure",
			   strerror(errno));
	if (!bench_hugetlb_ok((uint64_t)gib * BENCH_GIB + 8 * BENCH_MIB, 2 * BENCH_MIB, why, sizeof(why))) {
		bench_note("regular pages (hugepages = off): %s", why);
		huge = "off";
	}
	bench_title("The restart pause a client sees: its longest acquire or release round trip across a restart, "
		    "%u GiB pool of 2 MiB buffers (%s), median of %u restarts [least-most]",
		    gib, strcmp(huge, "off") ? "2 MiB hugetlb pages" : "regular pages", runs);
	for (unsigned k = 0; k < 2; k++) {
		double base = 0, floor_v[RUNS_MAX * WAYS];
		unsigned nfloor = 0;
		char count[16];

		snprintf(count, sizeof(count), "%u", others[k]);
		if (!bench_env_has("HP_BENCH_PAUSE_CLIENTS", count))
			continue;
		for (int w = 0; w < WAYS; w++)
			if (bench_env_has("HP_BENCH_PAUSE_WAYS", way_key[w]))
				measure((enum way)w, others[k], gib, runs, huge, &res[k][w]);
		printf("\n  with %u other client%s connected, each holding a buffer:\n", others[k], others[k] > 1 ? "s" : "");
		for (int w = 0; w < WAYS; w++) {
			const struct result *r = &res[k][w];
			double lo, hi, m;
			unsigned run;

			for (unsigned i = 0; i < r->n; i++)
				floor_v[nfloor++] = r->floor_ms[i];
			if (!bench_env_has("HP_BENCH_PAUSE_WAYS", way_key[w]))
				continue;
			if (!r->n) {
				printf("    %-16s no figure\n", way_name[w]);
				continue;
			}
			m = pause_median(r, &run, &lo, &hi);
			if (w == EXEC)
				base = m;
			if (w == EXEC || base <= 0)
				printf("    %-16s %8.3f ms [%.3f-%.3f]\n", way_name[w], m, lo, hi);
			else
				printf("    %-16s %8.3f ms [%.3f-%.3f] | exec %8.3f ms | exec/this %6.2fx\n", way_name[w], m, lo,
				       hi, base, m > 0 ? base / m : 0);
			printf("      its parts (us, the daemon's log): %s\n", r->parts[run][0] ? r->parts[run] : "none logged");
			if (w == TAKEOVER || w == BACK) {
				double v[RUNS_MAX];

				memcpy(v, r->handover_ms, sizeof(v));
				m = bench_median(v, r->n);
				printf("      its longest round trip in flight from a stop to its TAKEN: %.3f ms [%.3f-%.3f]%s\n", m,
				       v[0], v[r->n - 1], v[0] > 0 ? "" : " (a run had no such line)");
			}
		}
		printf("    %-16s %8.3f ms (the same client's longest round trip over 0.3 s without a restart)\n",
		       "no restart", bench_median(floor_v, nfloor));
	}
	return 0;
}
