/* SPDX-License-Identifier: MIT */
/*
 * bench_journal.c - durable appends: hugepoold's journal against the classic alternatives.
 *
 * For writers x record sizes as in the seed (Artemis' TimedBuffer post: 1..128 writers, 100 B..
 * 10 KB records), every writer appends and waits for durability in a loop. Measured side by side
 * in one run, on the same file system:
 *   ours       a real hugepoold journal ($HP_BENCH_BACKEND, auto by default), one connection and
 *              writer per thread;
 *   per-append one pwrite + fdatasync per append, all threads on one preallocated file;
 *   timer      a fixed-timer batch: appends gather in a shared buffer that a flusher thread
 *              writes and syncs every T, T = the device's measured sync latency (what a tuning
 *              step would pick; the classic TimedBuffer);
 *   limit      the best any group commit can do for W writers of S bytes each waiting for its
 *              own record: one thread writes W records of S bytes in the journal's own format
 *              (24-byte headers, 8-byte alignment, padded to a block under O_DIRECT) at the
 *              next offset of a preallocated segment and calls fdatasync, in a loop; its
 *              appends/s are W x loops/s;
 *   threads    the limit with W threads that each wait for their own record, in one process:
 *              appends gather in a shared buffer, a flusher thread writes and syncs all that
 *              gathered as soon as its previous sync ended and wakes the waiters (condvar);
 *              what ours pays over it is the daemon, what it pays over the limit is waking
 *              W threads on this machine;
 *   device     the disk's own limits: fdatasync rate of single small overwrites, and sequential
 *              write bandwidth with one sync per MiB.
 * Prints appends/s, MB/s, p50 and p99 latency for each, and the ratios; for ours also the
 * records per batch and syncs per second of that cell, and the paths its batches took to the
 * disk (from the daemon's counters). Then the event loop
 * under that load: hp_status round trips while 32 writers append, for the libaio and sync
 * backends beside io_uring's (measured in the same run), p99 ratio and max difference; set
 * $HP_BENCH_NO_STATUS to leave it out. Never asserts.
 * $HP_BENCH_WRITERS and $HP_BENCH_SIZES (comma lists) pick cells; $HP_BENCH_CELL_SECONDS their
 * length (default 0.6); $HP_BENCH_BACKEND (auto, io_uring, libaio, sync; default auto) and
 * $HP_BENCH_DIRECT=1 (O_DIRECT, for ours and the limit) the journal's configuration. A comma list
 * of backends ("auto,io_uring,libaio,sync") gives the daemon a journal per backend and runs ours
 * on each in turn within every cell, the first in the main table, each on a line of its own
 * below it with its ratio to the best of the others: backends compared side by side, in the same
 * seconds of a machine whose other work comes and goes; with $HP_BENCH_REPEAT above 1 also
 * "paired": the median over the rounds of its appends/s over each other's in the same round (a
 * steadier figure than the ratio of best runs, which may come from different seconds), a line
 * with the first target against the best of the others (print_against_best) and one with every
 * round's appends/s of each. A backend named twice ("libaio,libaio") gets two journals
 * alike, "libaio" and "libaio#2": their ratio is what this machine's noise makes of one code;
 * $HP_BENCH_BASELINE=/path/to/hugepoold (an older build) starts that daemon too, with a journal
 * per backend configured alike, and runs ours on each of its journals in the same turns, each on
 * a line "base:BACKEND" with the ratio of this build's same backend to it: a change measured
 * against what it replaces in the same seconds;
 * $HP_BENCH_WARMUP_SECONDS: ours appends that long, unmeasured, before each of its runs (0);
 * $HP_BENCH_WHY=1 adds, to auto's line, the controller's own words at the end of the cell
 * (status' why: the rates it last measured, its comparisons and changes);
 * $HP_BENCH_ONLY=ours (or limit, threads, per-append, timer; a comma list) runs only those, for
 * profiles; $HP_BENCH_REPEAT=N runs each method N times per cell, in turns, and keeps the best.
 * The targets' turns within a round follow a Williams design (run_order): over n rounds (2n when
 * n is odd) each target runs right after each other one equally often. A run leaves something
 * behind that costs the next one (seen here: with every round the same cycle shifted by one, the
 * first target, always after the last, was the lowest of four in 10 cells of 12, a median 0.95x
 * of each other one, whichever backend it was); so pick a repeat that is a multiple of that
 * period.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "benchutil.h"
#include "../tests/integration/harness.h"
#include "hist.h"
#include "hugepool.h"
#include "jformat.h"
#include "proto.h"
#include "size.h"

#define FILE_SIZE (256ull << 20)

static const unsigned writer_counts[] = { 1, 2, 8, 16, 32, 64, 128 };
static const unsigned record_sizes[] = { 100, 1000, 4000, 10000 };
static double cell_seconds = 0.6;
static char workdir[128];
static bool direct; /* $HP_BENCH_DIRECT: the journal and the limit use O_DIRECT */

struct result {
	uint64_t appends, bytes, ns;
	struct hist lat; /* ns per append-and-wait */
};

struct worker {
	pthread_t t;
	unsigned size;
	uint64_t stop_ns;
	struct result r;
	int err;
	/* ours */
	const char *socket, *journal;
	/* per-append and timer */
	int fd;
};

static atomic_uint_fast64_t next_off;
static pthread_barrier_t start_line;

static uint64_t end_time(void)
{
	return bench_now_ns() + (uint64_t)(cell_seconds * 1e9);
}

/* $HP_BENCH_WARMUP_SECONDS: ours appends this long before a cell's measured seconds begin (0) */
static uint64_t warmup_ns;

/* A file of zeros already written, so that overwrites need no metadata at fdatasync. */
static int prealloc_file(const char *name)
{
	char path[256];
	static char zeros[1 << 20];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", workdir, name);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	for (uint64_t off = 0; off < FILE_SIZE; off += sizeof(zeros))
		if (pwrite(fd, zeros, sizeof(zeros), (off_t)off) != (ssize_t)sizeof(zeros))
			return -EIO;
	fdatasync(fd);
	return fd;
}

/* --- per-append: one pwrite + fdatasync per record ------------------------------------------ */

static void *per_append_main(void *arg)
{
	struct worker *w = arg;
	char buf[16384];

	memset(buf, 'a', sizeof(buf));
	pthread_barrier_wait(&start_line);
	w->stop_ns = end_time();
	while (bench_now_ns() < w->stop_ns) {
		uint64_t t0 = bench_now_ns(), off = atomic_fetch_add(&next_off, w->size) % (FILE_SIZE - 16384);

		if (pwrite(w->fd, buf, w->size, (off_t)off) != (ssize_t)w->size || fdatasync(w->fd) < 0) {
			w->err = -errno;
			break;
		}
		hist_add(&w->r.lat, bench_now_ns() - t0);
		w->r.appends++;
		w->r.bytes += w->size;
	}
	return NULL;
}

/* --- timer: the classic fixed-time batch --------------------------------------------------- */

static struct {
	pthread_mutex_t lock;
	pthread_cond_t done;
	char *buf;
	size_t len, cap;
	uint64_t seq; /* the batch being filled, from 1 */
	uint64_t durable_seq; /* the last batch synced */
	bool stop;
	uint64_t period_ns; /* 0: sync as soon as the previous sync ended (the threads baseline) */
	pthread_cond_t filled; /* len became non-zero (waited for with period 0) */
	int fd;
} tb;

static void *timer_flusher(void *arg)
{
	char *out = malloc(tb.cap);
	uint64_t off = 0;
	(void)arg;

	for (;;) {
		struct timespec ts = { 0, (long)__atomic_load_n(&tb.period_ns, __ATOMIC_RELAXED) };
		size_t len;
		uint64_t seq;

		if (ts.tv_nsec)
			nanosleep(&ts, NULL);
		pthread_mutex_lock(&tb.lock);
		while (!__atomic_load_n(&tb.period_ns, __ATOMIC_RELAXED) && !tb.len && !tb.stop)
			pthread_cond_wait(&tb.filled, &tb.lock);
		if (tb.stop) {
			pthread_mutex_unlock(&tb.lock);
			break;
		}
		len = tb.len;
		seq = tb.seq;
		memcpy(out, tb.buf, len);
		tb.len = 0;
		tb.seq++;
		pthread_mutex_unlock(&tb.lock);
		if (len) {
			if (pwrite(tb.fd, out, len, (off_t)(off % (FILE_SIZE - tb.cap))) != (ssize_t)len)
				break;
			fdatasync(tb.fd);
			off += len;
		}
		pthread_mutex_lock(&tb.lock);
		tb.durable_seq = seq;
		pthread_cond_broadcast(&tb.done);
		pthread_mutex_unlock(&tb.lock);
	}
	free(out);
	return NULL;
}

static void *timer_main(void *arg)
{
	struct worker *w = arg;
	char buf[16384];

	memset(buf, 't', sizeof(buf));
	pthread_barrier_wait(&start_line);
	w->stop_ns = end_time();
	while (bench_now_ns() < w->stop_ns) {
		uint64_t t0 = bench_now_ns(), mine;

		pthread_mutex_lock(&tb.lock);
		while (tb.len + w->size > tb.cap) /* full: wait for the next flush */
			pthread_cond_wait(&tb.done, &tb.lock);
		memcpy(tb.buf + tb.len, buf, w->size);
		if (!tb.len)
			pthread_cond_signal(&tb.filled);
		tb.len += w->size;
		mine = tb.seq;
		while (tb.durable_seq < mine)
			pthread_cond_wait(&tb.done, &tb.lock);
		pthread_mutex_unlock(&tb.lock);
		hist_add(&w->r.lat, bench_now_ns() - t0);
		w->r.appends++;
		w->r.bytes += w->size;
	}
	return NULL;
}

/* --- limit: one thread, W records per write, one fdatasync per loop ------------------------- */

#define LIMIT_FILE (64ull << 20) /* the journal's segment_size below */

/*
 * The device's limit for n writers of size bytes: n records in the journal's format written at
 * the next offset of a preallocated segment, then fdatasync, for the cell's length. Under
 * O_DIRECT the batch is padded to a block with a PAD record, as the journal pads it.
 */
static int run_limit(int fd, unsigned n, unsigned size, struct result *ret)
{
	uint64_t rec = jformat_rec_size(size), len = rec * n, off = JFORMAT_BLOCK, stop;
	void *buf = NULL;
	int r = 0;

	memset(ret, 0, sizeof(*ret));
	if (fd < 0)
		return fd;
	if (direct && len % JFORMAT_BLOCK) {
		uint64_t pad = JFORMAT_BLOCK - len % JFORMAT_BLOCK;

		len += pad < JFORMAT_REC_HDR ? pad + JFORMAT_BLOCK : pad;
	}
	if (posix_memalign(&buf, JFORMAT_BLOCK, len) != 0)
		return -ENOMEM;
	memset(buf, 'l', len);
	for (unsigned i = 0; i < n; i++)
		jformat_rec_write((char *)buf + i * rec, i + 1, 1, JREC_DATA, (char *)buf + i * rec + JFORMAT_REC_HDR, size);
	if (len > rec * n)
		jformat_rec_write((char *)buf + rec * n, 0, 1, JREC_PAD, NULL,
				  (uint32_t)(len - rec * n - JFORMAT_REC_HDR));
	stop = end_time();
	ret->ns = bench_now_ns();
	while (bench_now_ns() < stop) {
		uint64_t t0 = bench_now_ns();

		if (off + len > LIMIT_FILE)
			off = JFORMAT_BLOCK; /* the next use of the segment */
		if (pwrite(fd, buf, len, (off_t)off) != (ssize_t)len || fdatasync(fd) < 0) {
			r = -errno;
			break;
		}
		off += len;
		for (unsigned i = 0; i < n; i++) /* each writer waited for this loop */
			hist_add(&ret->lat, bench_now_ns() - t0);
		ret->appends += n;
		ret->bytes += (uint64_t)size * n;
	}
	ret->ns = bench_now_ns() - ret->ns;
	free(buf);
	return r;
}

/* The limit's segment: preallocated, opened as the journal opens its own. */
static int open_limit_file(void)
{
	char path[256];
	int fd = prealloc_file("limit");

	if (fd < 0)
		return fd;
	close(fd);
	snprintf(path, sizeof(path), "%s/limit", workdir);
	fd = open(path, O_RDWR | O_CLOEXEC | (direct ? O_DIRECT : 0));
	return fd < 0 ? -errno : fd;
}

/* --- ours ------------------------------------------------------------------------------------- */

static void *ours_main(void *arg)
{
	struct worker *w = arg;
	char buf[16384];
	hp_conn *c = NULL;
	hp_journal *j = NULL;

	memset(buf, 'o', sizeof(buf));
	w->err = hp_connect(w->socket, &c);
	if (w->err == 0)
		w->err = hp_journal_open(c, w->journal ? w->journal : "bench", &j);
	pthread_barrier_wait(&start_line);
	w->stop_ns = end_time() + warmup_ns;
	uint64_t from = w->stop_ns - (uint64_t)(cell_seconds * 1e9);
	while (w->err == 0 && bench_now_ns() < w->stop_ns) {
		uint64_t t0 = bench_now_ns();

		w->err = hp_journal_append_wait(j, buf, w->size, NULL);
		if (w->err)
			break;
		if (t0 < from)
			continue; /* the warm-up */
		hist_add(&w->r.lat, bench_now_ns() - t0);
		w->r.appends++;
		w->r.bytes += w->size;
	}
	hp_journal_close(j);
	hp_disconnect(c);
	return NULL;
}

/* --- the event loop under load: hp_status while 32 writers append ----------------------------- */

struct status_lat {
	struct hist h;
	uint64_t max;
};

/* hp_status round trips on a connection of its own while n writers append, on backend. */
static int status_under_load(const char *backend, unsigned n, struct status_lat *ret)
{
	struct daemon d;
	char journal[512];
	struct worker *w = calloc(n, sizeof(*w));
	hp_conn *c = NULL;
	uint64_t stop;
	int r;

	memset(ret, 0, sizeof(*ret));
	snprintf(journal, sizeof(journal),
		 "[journal bench]\ndirectory = %s/status-%s\nsegment_size = 64M\nsegments = 4\n"
		 "when_full = recycle\nring_size = 256K\nbackend = %s\n",
		 workdir, backend, backend);
	r = harness_start(&d, "max_connections_per_uid = 0\nmax_journal_writers_per_uid = 0\nhugepages = off\n", journal);
	if (r < 0) {
		free(w);
		return r;
	}
	r = hp_connect(d.socket, &c);
	pthread_barrier_init(&start_line, NULL, n + 1);
	for (unsigned i = 0; i < n; i++) {
		w[i] = (struct worker){ .size = 100, .socket = d.socket };
		pthread_create(&w[i].t, NULL, ours_main, &w[i]);
	}
	pthread_barrier_wait(&start_line);
	stop = bench_now_ns() + (uint64_t)(cell_seconds * 1e9);
	while (r == 0 && bench_now_ns() < stop) {
		struct hp_status *st;
		uint64_t t0 = bench_now_ns(), dt;

		r = hp_status(c, &st);
		dt = bench_now_ns() - t0;
		if (r == 0)
			hp_status_free(st);
		hist_add(&ret->h, dt);
		ret->max = dt > ret->max ? dt : ret->max;
		usleep(1000);
	}
	for (unsigned i = 0; i < n; i++)
		pthread_join(w[i].t, NULL);
	pthread_barrier_destroy(&start_line);
	hp_disconnect(c);
	harness_stop(&d);
	free(w);
	return r;
}

/* Each backend's hp_status latency beside io_uring's (the backend that never syncs on the
 * flusher's thread), measured in this run: the event loop must not wait for a disk. */
static void status_latency(void)
{
	static const char *const backends[] = { "io_uring", "libaio", "sync" };
	struct status_lat lat[3];
	int err[3];

	printf("\nhp_status round trip while 32 writers append 100 B (%.1f s each), beside io_uring's in this run:\n",
	       cell_seconds);
	for (unsigned b = 0; b < 3; b++)
		err[b] = status_under_load(backends[b], 32, &lat[b]);
	for (unsigned b = 0; b < 3; b++) {
		if (err[b]) {
			printf("  %-8s: %s\n", backends[b], strerror(-err[b]));
			continue;
		}
		printf("  %-8s p50 %6.2f ms p99 %6.2f ms max %6.2f ms | io_uring p99 %6.2f ms max %6.2f ms | "
		       "p99 ratio %5.2fx, max %+.2f ms\n",
		       backends[b], hist_quantile(&lat[b].h, 0.5) / 1e6, hist_quantile(&lat[b].h, 0.99) / 1e6,
		       lat[b].max / 1e6, hist_quantile(&lat[0].h, 0.99) / 1e6, lat[0].max / 1e6,
		       hist_quantile(&lat[0].h, 0.99) ? (double)hist_quantile(&lat[b].h, 0.99) / (double)hist_quantile(&lat[0].h, 0.99) : 0,
		       ((double)lat[b].max - (double)lat[0].max) / 1e6);
	}
	fflush(stdout);
}

/* $name, a comma-separated list of numbers, contains v (or is unset). */
static bool selected(const char *name, unsigned v)
{
	const char *list = getenv(name);
	uint64_t n;

	if (!list || !*list)
		return true;
	while (decimal_prefix(list, &list, &n) == 0) {
		if (n == v)
			return true;
		if (*list++ != ',')
			break;
	}
	return false;
}

/* The methods a cell runs, in turn: index into methods[] */
enum { M_OURS, M_LIMIT, M_THREADS, M_APPEND, M_TIMER, NMETHOD };
static const char *const methods[NMETHOD] = { "ours", "limit", "threads", "per-append", "timer" };
static unsigned repeat = 1; /* $HP_BENCH_REPEAT: runs per cell and method, the best kept */

/* Is method (ours, limit, threads, per-append, timer) to run: in $HP_BENCH_ONLY, or that is unset? */
static bool method_on(const char *method)
{
	return bench_env_has("HP_BENCH_ONLY", method);
}

/* The journal ours appends to in the run being made ("bench", or one per backend). */
static const char *ours_journal = "bench";

/* Run n workers of main for one cell and add up their results. */
static int run_cell(void *(*fn)(void *), unsigned n, unsigned size, const char *socket, int fd, struct result *ret)
{
	struct worker *w = calloc(n, sizeof(*w));
	uint64_t t0, t1;
	int err = 0;

	memset(ret, 0, sizeof(*ret));
	pthread_barrier_init(&start_line, NULL, n + 1);
	for (unsigned i = 0; i < n; i++) {
		w[i] = (struct worker){ .size = size, .socket = socket, .journal = ours_journal, .fd = fd };
		pthread_create(&w[i].t, NULL, fn, &w[i]);
	}
	pthread_barrier_wait(&start_line);
	t0 = bench_now_ns();
	for (unsigned i = 0; i < n; i++) {
		pthread_join(w[i].t, NULL);
		ret->appends += w[i].r.appends;
		ret->bytes += w[i].r.bytes;
		hist_merge(&ret->lat, &w[i].r.lat);
		if (w[i].err && !err)
			err = w[i].err;
	}
	t1 = bench_now_ns();
	ret->ns = t1 - t0 - (fn == ours_main ? warmup_ns : 0);
	pthread_barrier_destroy(&start_line);
	free(w);
	return err;
}

static double per_sec(const struct result *r)
{
	return r->ns ? (double)r->appends * 1e9 / (double)r->ns : 0;
}

static double ratio(const struct result *a, const struct result *b)
{
	return per_sec(b) ? per_sec(a) / per_sec(b) : 0;
}

/* One run of method m for n writers of size bytes (timer_period: the timer baseline's T). */
static int run_method(unsigned m, unsigned n, unsigned size, const char *socket, int fd_append, int fd_limit,
		      uint64_t timer_period, struct result *ret)
{
	switch (m) {
	case M_OURS:
		return run_cell(ours_main, n, size, socket, -1, ret);
	case M_LIMIT:
		return run_limit(fd_limit, n, size, ret);
	case M_APPEND:
		return run_cell(per_append_main, n, size, NULL, fd_append, ret);
	default:
		/* the timer and threads baselines share the flusher: only its period differs */
		__atomic_store_n(&tb.period_ns, m == M_TIMER ? timer_period : 0, __ATOMIC_RELAXED);
		return run_cell(timer_main, n, size, NULL, -1, ret);
	}
}

static double mb_per_sec(const struct result *r)
{
	return r->ns ? (double)r->bytes * 1e3 / (double)r->ns : 0;
}

static double us(uint64_t ns)
{
	return (double)ns / 1e3;
}

/* The disk's own figures: how fast single small syncs go, and how many MB/s it takes. */
static void device_limits(uint64_t *ret_sync_p50)
{
	int fd = prealloc_file("device");
	struct hist h = { 0 };
	uint64_t t0, n = 0, bytes = 0, stop;
	static char buf[1 << 20];

	if (fd < 0) {
		printf("  device: cannot create a file in %s: %s\n", workdir, strerror(-fd));
		*ret_sync_p50 = 200000;
		return;
	}
	memset(buf, 'd', sizeof(buf));
	t0 = bench_now_ns();
	stop = t0 + 1000000000ull;
	while (bench_now_ns() < stop) {
		uint64_t s = bench_now_ns();

		if (pwrite(fd, buf, 100, (off_t)(n * 100)) != 100 || fdatasync(fd) < 0)
			break;
		hist_add(&h, bench_now_ns() - s);
		n++;
	}
	printf("  device: fdatasync of single 100 B overwrites: %.0f/s, p50 %.0f us, p99 %.0f us\n",
	       (double)n * 1e9 / (double)(bench_now_ns() - t0), us(hist_quantile(&h, 0.5)), us(hist_quantile(&h, 0.99)));
	*ret_sync_p50 = hist_quantile(&h, 0.5);
	n = 0;
	t0 = bench_now_ns();
	stop = t0 + 1000000000ull;
	while (bench_now_ns() < stop) {
		if (pwrite(fd, buf, sizeof(buf), (off_t)((n % 200) * sizeof(buf))) != (ssize_t)sizeof(buf) ||
		    fdatasync(fd) < 0)
			break;
		n++;
		bytes += sizeof(buf);
	}
	printf("  device: sequential 1 MiB writes, one fdatasync each: %.0f MB/s\n",
	       (double)bytes * 1e3 / (double)(bench_now_ns() - t0));
	close(fd);
}

/* The journal's counters now (all zero when status fails). */
struct jcounters {
	uint64_t appends, batches, syncs;
	uint64_t by_size[HP_BATCH_BUCKETS]; /* batches by records, as hp_journal_batches */
	uint64_t by_path[3]; /* batches inline-spin, inline, queued (hp_journal_path) */
	char chosen[16]; /* backend = auto: the path it measured best for more writers than CPUs */
	uint64_t changes; /* backend = auto: times its measurements changed the path */
	char why[256]; /* backend = auto: the controller's own words */
};

static struct jcounters journal_counters(hp_conn *c, const char *name)
{
	struct jcounters k = { 0 };
	struct hp_status *st;

	if (c && hp_status(c, &st) == 0) {
		for (uint32_t i = 0; i < st->njournals; i++) {
			if (strcmp(st->journals[i]->name, name))
				continue;
			k.appends = st->journals[i]->appends;
			k.batches = st->journals[i]->batches;
			k.syncs = st->journals[i]->syncs;
			memcpy(k.by_size, st->journals[i]->batch_sizes.by_size, sizeof(k.by_size));
			k.by_path[0] = st->journals[i]->path.inline_spin_batches;
			k.by_path[1] = st->journals[i]->path.inline_batches;
			k.by_path[2] = st->journals[i]->path.queued_batches;
			snprintf(k.chosen, sizeof(k.chosen), "%s", st->journals[i]->path.chosen);
			k.changes = st->journals[i]->path.path_changes;
			snprintf(k.why, sizeof(k.why), "%s", st->journals[i]->path.why);
		}
		hp_status_free(st);
	}
	return k;
}

/* "batches by records: 1: 40%, 2: 20%, 3-4: ..." between two counter snapshots. */
static void print_batch_sizes(const struct jcounters *k0, const struct jcounters *k1)
{
	uint64_t total = k1->batches - k0->batches;

	if (!total)
		return;
	printf("        batches by records:");
	for (unsigned k = 0; k < HP_BATCH_BUCKETS; k++) {
		uint64_t n = k1->by_size[k] - k0->by_size[k];
		char name[32];

		if (n)
			printf(" %s: %.0f%%", proto_batch_bucket_name(k, name, sizeof(name)), 100.0 * (double)n / (double)total);
	}
	printf("\n");
}

/* " inline-spin 0% inline 96% queued 4% (auto chose inline)" between two snapshots. */
static void print_paths(const struct jcounters *k0, const struct jcounters *k1)
{
	static const char *const names[] = { "inline-spin", "inline", "queued" };
	uint64_t total = k1->batches - k0->batches;

	for (unsigned p = 0; p < 3 && total; p++)
		printf(" %s %.0f%%", names[p], 100.0 * (double)(k1->by_path[p] - k0->by_path[p]) / (double)total);
	if (k1->chosen[0])
		printf(" (auto chose %s, %" PRIu64 " changes%s%s)", k1->chosen, k1->changes - k0->changes,
		       getenv("HP_BENCH_WHY") ? ": " : "", getenv("HP_BENCH_WHY") ? k1->why : "");
}

static void print_batch_paths(const struct jcounters *k0, const struct jcounters *k1)
{
	if (k1->batches == k0->batches)
		return;
	printf("        batches by path:");
	print_paths(k0, k1);
	printf("\n");
}

/* $HP_BENCH_BACKEND: a backend, or several; each gets a journal of its own when there are several. */
#define MAX_BACKENDS 5
static char backend_list[64];
static const char *backends[MAX_BACKENDS];
static char journal_names[MAX_BACKENDS][32];
static char labels[MAX_BACKENDS][32]; /* the backend, "libaio#2" for its second journal */
static unsigned nbackends;

/*
 * Where ours runs: target t is journal t % nbackends of daemon t / nbackends, daemon 0 this
 * build's, daemon 1 the baseline's ($HP_BENCH_BASELINE) when there is one.
 */
#define MAX_TARGETS (2 * MAX_BACKENDS)
static struct daemon daemons[2];
static hp_conn *counters_of[2]; /* a connection to each daemon for its journals' counters */
static unsigned ndaemons = 1, ntargets;

static void parse_backends(const char *list)
{
	char *save = NULL;

	snprintf(backend_list, sizeof(backend_list), "%s", list && *list ? list : "auto");
	for (char *b = strtok_r(backend_list, ",", &save); b && nbackends < MAX_BACKENDS; b = strtok_r(NULL, ",", &save))
		backends[nbackends++] = b;
	for (unsigned i = 0; i < nbackends; i++) {
		unsigned same = 1; /* a backend named twice gets two journals alike: the noise of a cell */

		for (unsigned k = 0; k < i; k++)
			same += !strcmp(backends[k], backends[i]);
		snprintf(labels[i], sizeof(labels[i]), same > 1 ? "%.15s#%u" : "%.15s", backends[i], same);
		if (nbackends == 1)
			snprintf(journal_names[i], sizeof(journal_names[i]), "bench");
		else /* "bench-libaio", "bench-libaio-2" */
			snprintf(journal_names[i], sizeof(journal_names[i]), same > 1 ? "bench-%.15s-%u" : "bench-%.15s",
				 backends[i], same);
	}
}

/* appends/s of every run of the cell being measured: rounds[rep * ntargets + t] (0: failed) */
static double *rounds;

/*
 * Target a against target b, paired: the median over the cell's rounds [from, to) of a's
 * appends/s over b's in the same round (the two ran seconds apart, in turns), 0 when no round
 * has both. What the machine's other work does over a cell's seconds weighs on both of a pair
 * alike, where each one's best run may come from another second.
 */
static double paired_in(unsigned a, unsigned b, unsigned from, unsigned to)
{
	double *r = calloc(repeat, sizeof(*r)), m;
	unsigned n = 0;

	if (!r)
		return 0;
	for (unsigned k = from; k < to; k++)
		if (rounds[k * ntargets + a] > 0 && rounds[k * ntargets + b] > 0)
			r[n++] = rounds[k * ntargets + a] / rounds[k * ntargets + b];
	m = bench_median(r, n);
	free(r);
	return m;
}

static double paired(unsigned a, unsigned b)
{
	return paired_in(a, b, 0, repeat);
}

/* The median over rounds [from, to) of target t's appends/s (its failed runs left out). */
static double median_in(unsigned t, unsigned from, unsigned to)
{
	double *r = calloc(repeat, sizeof(*r)), m;
	unsigned n = 0;

	if (!r)
		return 0;
	for (unsigned k = from; k < to; k++)
		if (rounds[k * ntargets + t] > 0)
			r[n++] = rounds[k * ntargets + t];
	m = bench_median(r, n);
	free(r);
	return m;
}

/* Of this build's targets other than a, the one whose median appends/s over rounds [from, to) is highest. */
static unsigned best_in(unsigned a, unsigned from, unsigned to)
{
	unsigned best = a;
	double top = -1;

	for (unsigned t = 0; t < nbackends; t++) {
		double m = t == a ? -1 : median_in(t, from, to);

		if (m > top) {
			top = m;
			best = t;
		}
	}
	return best;
}

/*
 * The first target against the best of the others, two ways. Picked by its median over the same
 * rounds it is measured on, the best comes out ahead even of its equals: the highest of three
 * noisy figures is above their mean. Picked on one half of the rounds and measured on the other,
 * both ways, and the two figures averaged, much less: the noise that made one highest on its
 * half does not carry over to the other, and a backend that leads clearly is picked on both
 * halves. Four sync journals, 8 rounds, each against the best of the other three: 0.976x in
 * geometric mean the first way, 0.986x the second; the spread stays (below 0.95x in 38% and 27%
 * of the figures). With a repeat of two Williams periods (8 rounds of 4 targets) each half is
 * balanced on its own.
 */
/* Over the cells so far, the split-half figure of print_against_best: for the run's summary. */
static struct {
	double log_sum, lowest;
	unsigned cells, below_95, below_90;
	char lowest_cell[32];
} against;

static void print_against_best(unsigned n, unsigned size)
{
	unsigned half = repeat / 2, all, b1, b2;
	double split;

	if (nbackends < 3 || repeat < 4)
		return;
	all = best_in(0, 0, repeat);
	b1 = best_in(0, 0, half);
	b2 = best_in(0, half, repeat);
	split = (paired_in(0, b1, half, repeat) + paired_in(0, b2, 0, half)) / 2;
	printf("        %s against the best other: %.2fx %s (picked on the same rounds); %.2fx picked on one half "
	       "of the rounds, measured on the other (the halves picked %s and %s)\n",
	       labels[0], paired(0, all), labels[all], split, labels[b1], labels[b2]);
	if (split <= 0)
		return;
	against.log_sum += log(split);
	against.below_95 += split < 0.95;
	against.below_90 += split < 0.90;
	if (!against.cells++ || split < against.lowest) {
		against.lowest = split;
		snprintf(against.lowest_cell, sizeof(against.lowest_cell), "%u x %u B", n, size);
	}
}

/* The run's summary of print_against_best's split-half figures. */
static void print_against_summary(void)
{
	if (!against.cells)
		return;
	printf("\n%s against the best other backend, picked on one half of the rounds and measured on the other, "
	       "over %u cells: %.3fx in geometric mean, the lowest %.2fx (%s); %u cells below 0.95x, %u below 0.90x\n",
	       labels[0], against.cells, exp(against.log_sum / against.cells), against.lowest, against.lowest_cell,
	       against.below_95, against.below_90);
}

/*
 * A target's own line under a cell of several: its best run and, for this build's, its ratio to
 * the best of this build's others; for the baseline's, this build's same backend's ratio to it.
 */
static void print_backend(unsigned t, const struct result *best, const struct jcounters *k0, const struct jcounters *k1)
{
	unsigned b = t % nbackends;
	bool base = t >= nbackends;
	double others = 0, ratio;
	char label[32];

	for (unsigned i = 0; i < nbackends; i++)
		if (i != b && per_sec(&best[i]) > others)
			others = per_sec(&best[i]);
	if (base)
		ratio = per_sec(&best[t]) ? per_sec(&best[b]) / per_sec(&best[t]) : 0;
	else
		ratio = others ? per_sec(&best[b]) / others : 0;
	snprintf(label, sizeof(label), "%s%s", base ? "base:" : "", labels[b]);
	printf("        %-13s %8.0f appends/s p50 %5.0f p99 %6.0f us, ", label, per_sec(&best[t]),
	       us(hist_quantile(&best[t].lat, 0.5)), us(hist_quantile(&best[t].lat, 0.99)));
	if (k1[t].batches > k0[t].batches)
		printf("%5.1f per batch, ", (double)(k1[t].appends - k0[t].appends) / (double)(k1[t].batches - k0[t].batches));
	else /* a baseline whose status this build cannot read */
		printf("    - per batch, ");
	printf("%5.2fx %s;", ratio, base ? "new/base" : "the best other");
	if (repeat > 1 && base) {
		printf(" paired %.2fx;", paired(b, t));
	} else if (repeat > 1) {
		printf(" paired");
		for (unsigned i = 0; i < nbackends; i++)
			if (i != b)
				printf(" %.2fx %s", paired(b, i), labels[i]);
		printf(";");
	}
	print_paths(&k0[t], &k1[t]);
	printf("\n");
}

/* Every run of the cell, for a reader's own statistics: "rounds (appends/s): auto 51234 50987 ... | sync ...". */
static void print_rounds(void)
{
	printf("        rounds (appends/s):");
	for (unsigned t = 0; t < ntargets; t++) {
		printf(" %s%s", t >= nbackends ? "base:" : "", labels[t % nbackends]);
		for (unsigned k = 0; k < repeat; k++)
			printf(" %.0f", rounds[k * ntargets + t]);
		printf(t + 1 < ntargets ? " |" : "\n");
	}
}

/*
 * The target that runs i-th in round rep of n targets: rows of a Williams Latin square (first row
 * 0, 1, n-1, 2, n-2, ..., each next row shifted by one; for odd n, a second square with the rows
 * reversed). Every target runs in every place once per n rounds, and right after every other
 * target once per n rounds (n even) or twice per 2n (n odd): what a run leaves to the next one
 * weighs on every target alike.
 */
static unsigned run_order(unsigned rep, unsigned i, unsigned n)
{
	unsigned row = rep % (n % 2 ? 2 * n : n), k = row >= n ? n - 1 - i : i;
	unsigned first = k == 0 ? 0 : k % 2 ? (k + 1) / 2 : n - k / 2;

	return (first + row) % n;
}

/* Start daemon i (0: this build's, 1: the baseline binary's) with a journal per backend. */
static int start_daemon(unsigned i, const char *binary)
{
	char globals[128], journal[2048];
	size_t jlen = 0;
	int r;

	for (unsigned b = 0; b < nbackends; b++)
		jlen += (size_t)snprintf(journal + jlen, sizeof(journal) - jlen,
					 "[journal %s]\ndirectory = %s/%sjournal-%u\nsegment_size = 64M\nsegments = 8\n"
					 "when_full = recycle\nring_size = 256K\nbackend = %s\ndirect = %s\n",
					 journal_names[b], workdir, i ? "base-" : "", b, backends[b], direct ? "on" : "off");
	snprintf(globals, sizeof(globals), "max_connections_per_uid = 0\nmax_journal_writers_per_uid = 0\nhugepages = off\n");
	r = harness_start_opts(&daemons[i], globals, journal, &(struct harness_opts){ .binary = binary });
	if (r < 0) {
		printf("bench_journal: cannot start %s (%s)\n", binary ? binary : "hugepoold", strerror(-r));
		harness_dump_log(&daemons[i]);
		return r;
	}
	if (hp_connect(daemons[i].socket, &counters_of[i]) < 0)
		counters_of[i] = NULL;
	return 0;
}

int main(void)
{
	struct daemon *d = &daemons[0];
	const char *secs = getenv("HP_BENCH_CELL_SECONDS"), *baseline = getenv("HP_BENCH_BASELINE");
	uint64_t sync_p50;
	pthread_t flusher;
	int fd_append, fd_timer, fd_limit;

	if (secs && atof(secs) > 0)
		cell_seconds = atof(secs);
	if (getenv("HP_BENCH_WARMUP_SECONDS") && atof(getenv("HP_BENCH_WARMUP_SECONDS")) > 0)
		warmup_ns = (uint64_t)(atof(getenv("HP_BENCH_WARMUP_SECONDS")) * 1e9);
	repeat = bench_env_uint("HP_BENCH_REPEAT", repeat, 1, 1000);
	rounds = calloc(repeat * MAX_TARGETS, sizeof(*rounds));
	if (!rounds)
		return 1;
	parse_backends(getenv("HP_BENCH_BACKEND"));
	if (baseline && *baseline)
		ndaemons = 2;
	ntargets = nbackends * ndaemons;
	direct = getenv("HP_BENCH_DIRECT") && strcmp(getenv("HP_BENCH_DIRECT"), "1") == 0;
	snprintf(workdir, sizeof(workdir), "/var/tmp/hugepool-bench.XXXXXX");
	if (!mkdtemp(workdir)) {
		perror("mkdtemp");
		return 1;
	}
	printf("bench_journal: durable appends (append, then wait until synced), %.1f s per cell%s, files in %s\n",
	       cell_seconds, warmup_ns ? " after a warm-up (HP_BENCH_WARMUP_SECONDS)" : "", workdir);
	printf("  ours       = hugepoold journal (backend: see below), adaptive group commit\n");
	printf("  per-append = one pwrite + fdatasync per append (all writers, one preallocated file)\n");
	printf("  timer      = fixed-timer batch: a flusher writes and syncs what gathered every T\n");
	printf("  limit      = one thread: W records of S bytes in the journal's format + fdatasync per loop\n");
	printf("  threads    = in-process group commit: W threads wait on a condvar, a flusher thread syncs all\n"
	       "               that gathered as soon as its previous sync ended (the limit with W waiting threads)\n");
	printf("  best of %u run%s per cell and method, the methods taking turns\n", repeat, repeat == 1 ? "" : "s");
	printf("  journal    = backend %s, direct %s; batch = records per batch of ours in the cell, and how\n"
	       "               they went to the disk (auto: inline or a queue, as it measured)%s\n",
	       getenv("HP_BENCH_BACKEND") && *getenv("HP_BENCH_BACKEND") ? getenv("HP_BENCH_BACKEND") : "auto",
	       direct ? "on" : "off",
	       nbackends > 1 ? ";\n               a journal per backend, each in turn within a cell; the table shows the first" : "");
	if (ndaemons > 1)
		printf("  baseline   = %s, a journal per backend configured alike, in the same turns (base:BACKEND)\n",
		       baseline);
	device_limits(&sync_p50);
	printf("  timer T    = the device's fdatasync p50 above, %.0f us\n\n", us(sync_p50));

	for (unsigned i = 0; i < ndaemons; i++)
		if (start_daemon(i, i ? baseline : NULL) < 0)
			return 1;
	fd_append = prealloc_file("per-append");
	fd_timer = prealloc_file("timer");
	fd_limit = open_limit_file();
	tb.fd = fd_timer;
	tb.cap = 16u << 20;
	tb.buf = malloc(tb.cap);
	tb.period_ns = sync_p50;
	tb.seq = 1;
	pthread_mutex_init(&tb.lock, NULL);
	pthread_cond_init(&tb.done, NULL);
	pthread_cond_init(&tb.filled, NULL);
	pthread_create(&flusher, NULL, timer_flusher, NULL);

	printf("%7s %6s | %-31s | %-6s %-7s | %-20s | %-20s | %-20s | %-20s | %-8s %-8s %-8s %-8s\n", "writers", "size",
	       "ours: appends/s MB/s p50 p99 us", "batch", "syncs/s", "limit: /s p50 p99", "threads: /s p50 p99",
	       "per-append: /s p50 p99", "timer: /s p50 p99", "ours/lim", "ours/thr", "ours/app", "ours/tim");
	for (size_t s = 0; s < sizeof(record_sizes) / sizeof(record_sizes[0]); s++) {
		for (size_t w = 0; w < sizeof(writer_counts) / sizeof(writer_counts[0]); w++) {
			unsigned n = writer_counts[w], size = record_sizes[s];
			struct result best[NMETHOD], lim, best_ours[MAX_TARGETS];
			struct jcounters k0, k1, best_k0[MAX_TARGETS] = { 0 }, best_k1[MAX_TARGETS] = { 0 };
			int err[NMETHOD] = { 0 };

			if (!selected("HP_BENCH_WRITERS", n) || !selected("HP_BENCH_SIZES", size))
				continue;
			memset(best, 0, sizeof(best));
			memset(best_ours, 0, sizeof(best_ours));
			memset(rounds, 0, repeat * MAX_TARGETS * sizeof(*rounds));
			/* the methods take turns, repeat times; each keeps its best run; ours runs on each
			 * target (backend, daemon) in turn, in the order run_order gives each round */
			for (unsigned rep = 0; rep < repeat; rep++) {
				for (unsigned m = 0; m < NMETHOD; m++) {
					if (!method_on(methods[m]))
						continue;
					for (unsigned i = 0; i < (m == M_OURS ? ntargets : 1); i++) {
						unsigned b = run_order(rep, i, ntargets);
						hp_conn *counters = counters_of[b / nbackends];
						struct result run;
						int e;

						ours_journal = journal_names[b % nbackends];
						k0 = journal_counters(counters, ours_journal);
						e = run_method(m, n, size, daemons[b / nbackends].socket, fd_append, fd_limit,
							       sync_p50, &run);
						k1 = journal_counters(counters, ours_journal);
						if (e && !err[m])
							err[m] = e;
						if (m == M_OURS)
							rounds[rep * ntargets + b] = e ? 0 : per_sec(&run);
						if (m == M_OURS && (per_sec(&run) > per_sec(&best_ours[b]) || !best_ours[b].ns)) {
							best_ours[b] = run;
							best_k0[b] = k0;
							best_k1[b] = k1;
						} else if (m != M_OURS && (per_sec(&run) > per_sec(&best[m]) || !best[m].ns)) {
							best[m] = run;
						}
					}
				}
			}
			best[M_OURS] = best_ours[0];
			lim = best[M_LIMIT];
			printf("%7u %6u | %8.0f %6.1f %6.0f %7.0f | %6.1f %7.0f | %7.0f %5.0f %6.0f | %7.0f %5.0f %6.0f | "
			       "%7.0f %5.0f %6.0f | %7.0f %5.0f %6.0f | %7.2fx %7.2fx %7.2fx %7.2fx%s\n",
			       n, size, per_sec(&best[M_OURS]), mb_per_sec(&best[M_OURS]),
			       us(hist_quantile(&best[M_OURS].lat, 0.5)), us(hist_quantile(&best[M_OURS].lat, 0.99)),
			       best_k1[0].batches > best_k0[0].batches
				       ? (double)(best_k1[0].appends - best_k0[0].appends) /
						 (double)(best_k1[0].batches - best_k0[0].batches)
				       : 0,
			       best[M_OURS].ns ? (double)(best_k1[0].syncs - best_k0[0].syncs) * 1e9 / (double)best[M_OURS].ns
					       : 0,
			       per_sec(&lim), us(hist_quantile(&lim.lat, 0.5)), us(hist_quantile(&lim.lat, 0.99)),
			       per_sec(&best[M_THREADS]), us(hist_quantile(&best[M_THREADS].lat, 0.5)),
			       us(hist_quantile(&best[M_THREADS].lat, 0.99)), per_sec(&best[M_APPEND]),
			       us(hist_quantile(&best[M_APPEND].lat, 0.5)), us(hist_quantile(&best[M_APPEND].lat, 0.99)),
			       per_sec(&best[M_TIMER]), us(hist_quantile(&best[M_TIMER].lat, 0.5)),
			       us(hist_quantile(&best[M_TIMER].lat, 0.99)), ratio(&best[M_OURS], &lim),
			       ratio(&best[M_OURS], &best[M_THREADS]), ratio(&best[M_OURS], &best[M_APPEND]),
			       ratio(&best[M_OURS], &best[M_TIMER]),
			       err[M_OURS] || err[M_LIMIT] || err[M_THREADS] || err[M_APPEND] || err[M_TIMER]
				       ? "  (errors: see below)"
				       : "");
			print_batch_sizes(&best_k0[0], &best_k1[0]);
			if (ntargets == 1)
				print_batch_paths(&best_k0[0], &best_k1[0]);
			for (unsigned b = 0; b < ntargets && ntargets > 1 && method_on("ours"); b++)
				print_backend(b, best_ours, best_k0, best_k1);
			if (ntargets > 1 && repeat > 1 && method_on("ours")) {
				print_against_best(n, size);
				print_rounds();
			}
			for (unsigned m = 0; m < NMETHOD; m++)
				if (err[m])
					printf("        %s: %s\n", methods[m], m == M_OURS ? hp_strerror(err[m]) : strerror(-err[m]));
			if (n == 1 && best[M_OURS].ns && lim.ns)
				printf("        lone writer: ours p50 %.0f us against a bare write+fdatasync (the limit) p50 %.0f "
				       "us: %+.0f%%\n",
				       us(hist_quantile(&best[M_OURS].lat, 0.5)), us(hist_quantile(&lim.lat, 0.5)),
				       100.0 * ((double)hist_quantile(&best[M_OURS].lat, 0.5) / (double)hist_quantile(&lim.lat, 0.5) - 1));
			fflush(stdout);
		}
	}
	print_against_summary();
	pthread_mutex_lock(&tb.lock);
	tb.stop = true;
	pthread_cond_signal(&tb.filled);
	pthread_mutex_unlock(&tb.lock);
	pthread_join(flusher, NULL);
	{
		hp_conn *c;
		struct hp_status *st;

		if (hp_connect(d->socket, &c) == 0 && hp_status(c, &st) == 0) {
			for (uint32_t i = 0; i < st->njournals; i++)
				printf("\nours, whole run: journal %s, backend %s, %lu appends in %lu batches (%.1f per batch), "
				       "sync p50 %.0f us p99 %.0f us p999 %.0f us\n",
				       st->journals[i]->name, st->journals[i]->backend, (unsigned long)st->journals[i]->appends,
				       (unsigned long)st->journals[i]->batches, st->journals[i]->mean_batch,
				       us(st->journals[i]->sync_p50_ns), us(st->journals[i]->sync_p99_ns),
				       us(st->journals[i]->sync_p999_ns));
			hp_status_free(st);
			hp_disconnect(c);
		}
	}
	for (unsigned i = 0; i < ndaemons; i++) {
		hp_disconnect(counters_of[i]);
		harness_stop(&daemons[i]);
	}
	if (!getenv("HP_BENCH_NO_STATUS"))
		status_latency();
	close(fd_append);
	close(fd_timer);
	if (fd_limit >= 0)
		close(fd_limit);
	{
		char cmd[200];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", workdir);
		if (system(cmd) != 0)
			printf("could not remove %s\n", workdir);
	}
	return 0;
}
