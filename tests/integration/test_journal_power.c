/* SPDX-License-Identifier: MIT */
/*
 * test_journal_power.c - power losses a real hugepoold's journal could suffer, acknowledgements
 * counted where a client counts them: writer threads append through libhugepool
 * (hp_journal_append_wait, each writer opened over the socket) to a daemon whose journal
 * operations are traced (hugepoold-traced: traced.c, crashfs.h), and the daemon is SIGKILLed
 * under that load, its segments reused. From the trace come the disk states a power loss at that
 * moment could leave (crashfs.h's rules: of what was not synced, nothing, everything, random
 * pages or sectors; of the names not synced, any prefix), and some at earlier points. Each is
 * given to a fresh daemon, which must start, and every record a client had acknowledged (at an
 * earlier point: that the daemon had published) and no reuse of its segment took must read back
 * at its LSN, byte for byte. On io_uring with direct = off, and on sync with direct = on where
 * /tmp takes O_DIRECT.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>

#include "harness.h"
#include "hugepool.h"
#include "proto.h"
#include "case.h"
#include "journal_case.h"
#include "../lib/crashfs.h"

#define PW_WRITERS 16
#define PW_ACKS 7000 /* about 5 MiB through 4 segments of 1 MiB: every one used, some reused */
#define PW_EARLIER 12 /* states at earlier points of the trace */

struct pw_writer {
	pthread_t t;
	const char *socket;
	unsigned id;
	struct acks acks;
	atomic_ulong *total;
	int err;
};

/* Append until the daemon is gone, counting each acknowledgement as it returns. */
static void *pw_writer_main(void *arg)
{
	struct pw_writer *w = arg;
	hp_conn *c = NULL;
	hp_journal *j = NULL;
	uint8_t buf[1500];
	int r = writer_open(w->socket, &c, &j);

	for (uint32_t seq = 0; r == 0; seq++) {
		uint32_t len = writer_len(w->id, seq);
		uint64_t lsn = 0;

		pattern(buf, len, writer_seed(w->id, seq));
		r = hp_journal_append_wait(j, buf, len, &lsn);
		if (r == 0) {
			acks_add(&w->acks, lsn, seq, len);
			atomic_fetch_add(w->total, 1);
		}
	}
	w->err = r;
	hp_journal_close(j);
	hp_disconnect(c);
	return NULL;
}

static struct pw_writer pw_w[PW_WRITERS]; /* static: joined by teardown after a failed assertion */

static void pw_join(void)
{
	for (unsigned i = 0; i < PW_WRITERS; i++) {
		if (pw_w[i].t)
			pthread_join(pw_w[i].t, NULL);
		free(pw_w[i].acks.v);
	}
	memset(pw_w, 0, sizeof(pw_w));
}

/* The lowest first LSN of a valid segment header in img: acknowledged records from there on
 * must be kept (those before went with reused segments). */
static uint64_t pw_headers_from(const struct cfs_image *img)
{
	uint64_t from = UINT64_MAX;

	for (unsigned i = 0; i < img->nnames; i++) {
		const uint8_t *p;
		uint64_t size = 0;
		struct jformat_seg_hdr h;

		if (!strstr(img->names[i].name, ".seg") || strstr(img->names[i].name, ".tmp"))
			continue;
		p = cfs_file(img, img->names[i].name, &size);
		if (size < sizeof(h))
			continue;
		memcpy(&h, p, sizeof(h));
		if (jformat_seg_hdr_check(&h, JNAME, NULL) == 0 && h.first_lsn < from)
			from = h.first_lsn;
	}
	return from;
}

/*
 * The daemon on d's journal directory as the state left it: it must start, and serve every record
 * a client had acknowledged up to `acked`, from keep_from on, at its LSN, byte for byte, with
 * nothing but consecutive LSNs.
 */
static void pw_check(struct daemon *d, uint64_t acked, uint64_t keep_from, const char *what)
{
	const struct acked **by_lsn = calloc(acked + 1, sizeof(*by_lsn));
	unsigned *owner = calloc(acked + 1, sizeof(*owner));
	uint64_t lsn, first = 0, expect = 0;
	hp_journal_reader *r = NULL;
	struct hp_status *st;
	const void *data;
	size_t len;
	hp_conn *c;
	int rc;

	assert_true(by_lsn && owner);
	rc = harness_restart_opts(d, NULL);
	if (rc < 0) {
		harness_dump_log(d);
		fail_msg("%s: the daemon did not start on the state: %s", what, strerror(-rc));
	}
	c = conn(d);
	st = status(c);
	if (jst(st)->durable_lsn < acked)
		fail_msg("%s: recovered up to LSN %" PRIu64 " (%s), %" PRIu64 " was acknowledged", what, jst(st)->durable_lsn,
			 jst(st)->recovery, acked);
	if (getenv("HP_TEST_VERBOSE"))
		print_message("%s: recovered %s\n", what, jst(st)->recovery);
	hp_status_free(st);
	for (unsigned i = 0; i < PW_WRITERS; i++)
		for (size_t k = 0; k < pw_w[i].acks.n; k++)
			if (pw_w[i].acks.v[k].lsn <= acked) {
				by_lsn[pw_w[i].acks.v[k].lsn] = &pw_w[i].acks.v[k];
				owner[pw_w[i].acks.v[k].lsn] = i;
			}
	assert_int_equal(hp_journal_reader_open(c, JNAME, 1, &r), 0);
	while ((rc = hp_journal_reader_next(r, &lsn, &data, &len)) == 1) {
		const struct acked *a = lsn <= acked ? by_lsn[lsn] : NULL;

		if (!first)
			first = expect = lsn;
		if (lsn != expect)
			fail_msg("%s: the reader returned LSN %" PRIu64 " after %" PRIu64, what, lsn, expect - 1);
		expect++;
		if (a && (len != a->len || !pattern_ok(data, len, writer_seed(owner[lsn], a->seq))))
			fail_msg("%s: LSN %" PRIu64 " (writer %u's record %u, %u bytes) reads back as %zu bytes%s", what, lsn,
				 owner[lsn], a->seq, a->len, len, len == a->len ? " of other content" : "");
	}
	if (rc != 0)
		fail_msg("%s: reader: %s after LSN %" PRIu64, what, hp_strerror(rc), expect - 1);
	hp_journal_reader_close(r);
	for (uint64_t l = MAX(keep_from, 1); l <= acked; l++)
		if (by_lsn[l] && (l < first || l >= expect))
			fail_msg("%s: LSN %" PRIu64 ", acknowledged to writer %u, is gone (the journal holds %" PRIu64
				 "..%" PRIu64 ")",
				 what, l, owner[l], first, expect - 1);
	hp_disconnect(c);
	free(by_lsn);
	free(owner);
	assert_int_equal(harness_kill(d), 128 + SIGKILL);
}

static const struct cfs_choice pw_choices[] = { { CFS_NONE, 0 }, { CFS_ALL, -1 }, { CFS_SECTORS, -2 }, { CFS_PAGES, -2 } };
static const char *const pw_choice_names[] = { "nothing pending", "all pending", "sectors", "pages" };
#define PW_CHOICES 4u

/* The state a power loss before op `at` of the trace leaves, as choice v says, checked: what the
 * clients had acknowledged by then (at the kill: all of it; before: what the daemon had
 * published). */
static void pw_state(struct daemon *d, const struct cfs_log *l, size_t at, unsigned v, unsigned *rnd,
		     struct cfs_image *img, const char *jdir, uint64_t acked, unsigned *states)
{
	uint64_t published = at == l->n ? acked : cfs_max(l, CFS_ACK, 0, at);
	char what[160];

	cfs_build(l, at, pw_choices[v], rnd, img);
	cfs_write_dir(img, jdir, NULL, false);
	snprintf(what, sizeof(what), "a power loss %s op %zu of %zu traced, %s", at == l->n ? "at the kill, after" : "before",
		 at, l->n, pw_choice_names[v]);
	pw_check(d, published < acked ? published : acked, pw_headers_from(img), what);
	(*states)++;
}

static void power(const char *mode, const char *extra)
{
	static struct daemon d; /* static: teardown uses it after a failed assertion left this frame */
	char tdir[] = "/tmp/hp-power.XXXXXX", trace[64], env[96], binary[256], jdir[160], conf[256];
	atomic_ulong total = 0;
	uint64_t acked = 0;
	struct cfs_image img = { 0 };
	struct cfs_log l;
	unsigned rnd = 0x90e7, states = 0;

	harness_watchdog_arm("power losses", 240);
	assert_non_null(mkdtemp(tdir));
	snprintf(trace, sizeof(trace), "%s/trace", tdir);
	snprintf(env, sizeof(env), "HP_JOURNAL_TRACE=%s", trace);
	snprintf(binary, sizeof(binary), "%s/tests/hugepoold-traced", harness_build());
	snprintf(conf, sizeof(conf), JOURNAL "segments = 4\nwhen_full = recycle\n%s", extra);
	start_journal_opts(&d, conf, &(struct harness_opts){ .env = { env }, .binary = binary });
	snprintf(jdir, sizeof(jdir), "%s/j", d.dir);

	/* the load, acknowledgements counted by each writer, then the kill */
	threads_cleanup = pw_join;
	for (unsigned i = 0; i < PW_WRITERS; i++) {
		pw_w[i] = (struct pw_writer){ .socket = d.socket, .id = i, .total = &total };
		assert_int_equal(pthread_create(&pw_w[i].t, NULL, pw_writer_main, &pw_w[i]), 0);
	}
	{
		double end = harness_ms() + 6 * LIVENESS_MS;

		while (atomic_load(&total) < PW_ACKS && harness_ms() < end)
			sleep_ms(2);
		if (atomic_load(&total) < PW_ACKS)
			fail_msg("only %lu acks in %d ms", atomic_load(&total), 6 * LIVENESS_MS);
	}
	crash(&d);
	for (unsigned i = 0; i < PW_WRITERS; i++) {
		pthread_join(pw_w[i].t, NULL);
		pw_w[i].t = 0;
		assert_true(pw_w[i].err < 0);
		for (size_t k = 0; k < pw_w[i].acks.n; k++)
			acked = MAX(acked, pw_w[i].acks.v[k].lsn);
	}

	cfs_init(&l);
	assert_int_equal(cfs_trace_read(trace, &l), 0);
	print_message("power losses, %s: killed after %lu acks at the clients (LSN ..%" PRIu64 "), %zu operations traced\n",
		      mode, atomic_load(&total), acked, l.n);
	/* a power loss right at the kill: every record a client had acknowledged */
	for (unsigned v = 0; v < PW_CHOICES; v++)
		pw_state(&d, &l, l.n, v, &rnd, &img, jdir, acked, &states);
	/*
	 * Earlier, as the daemon went, what it had published by then: right after each segment's
	 * header was written and synced with nothing else pending (a hole before it, if the segment
	 * was opened before the one before was durable), then at points picked as test_crash_points
	 * picks them, from the first batch on (the segments' creation before it is that test's).
	 */
	{
		size_t *pts = malloc((l.n + 1) * sizeof(*pts)), npts, pick[PW_EARLIER], npick = 0, from = 0;

		assert_non_null(pts);
		while (from < l.n && !(l.v[from].kind == CFS_WRITE && l.v[from].req))
			from++;
		npts = cfs_points(&l, from, pts);
		for (size_t i = 0, k = 0; i < l.n && npick < PW_EARLIER / 2; i++)
			if (l.v[i].kind == CFS_WRITE && l.v[i].req && l.v[i].off == 0) {
				while (k < npts && pts[k] <= i + 1)
					k++;
				if (k < npts)
					pick[npick++] = k;
			}
		for (size_t k = 0; k < npick; k++)
			pw_state(&d, &l, pts[pick[k]], 0, &rnd, &img, jdir, acked, &states);
		npick = cfs_pick(&l, pts, npts, PW_EARLIER - npick, &rnd, pick);
		for (size_t k = 0; k < npick; k++)
			pw_state(&d, &l, pts[pick[k]], (unsigned)rand_r(&rnd) % PW_CHOICES, &rnd, &img, jdir, acked, &states);
		free(pts);
	}
	print_message("power losses, %s: %u states checked\n", mode, states);
	threads_cleanup = NULL;
	pw_join();
	cfs_image_free(&img);
	cfs_free(&l);
	unlink(trace);
	rmdir(tdir);
	restart(&d);
	stop(&d);
}

static void test_power_uring(void **state)
{
	(void)state;
	power("io_uring, direct off", "backend = io_uring\n");
}

static void test_power_sync_direct(void **state)
{
	char why[128];
	(void)state;

	if (!direct_io_works(why, sizeof(why))) {
		print_message("skipped: direct = on needs O_DIRECT: %s\n", why);
		skip();
	}
	power("sync, direct on", "backend = sync\ndirect = on\n");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_power_uring, teardown),
		cmocka_unit_test_teardown(test_power_sync_direct, teardown),
	};

	return run_cases("journal_power", tests);
}
