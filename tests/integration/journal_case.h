/* SPDX-License-Identifier: MIT */
/*
 * journal_case.h - what the journal tests (tests/integration/test_journal_*.c) share on top of
 * case.h: a daemon with the pool's class and one journal "j" of small segments (JOURNAL),
 * started, killed, stopped and restarted with assertions; records whose content is a function
 * of a seed (pattern.h), so that a test remembers only (lsn, seed, len) of what was
 * acknowledged -- struct recs for a lone writer, struct acks for each of many -- and checks
 * every byte a reader returns (read_expect, acks_verify). Every wait is bounded: LIVENESS_MS
 * for an answer the daemon owes, and each case arms the harness's watchdog, which SIGKILLs a
 * daemon that overruns the case's budget, so a hung daemon makes a failed case, never a hung
 * run. Header-only: include it once per test file, after case.h.
 */
#ifndef HP_TEST_JOURNAL_CASE_H
#define HP_TEST_JOURNAL_CASE_H

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "jformat.h"
#include "jring.h"
#include "pattern.h"
#include "util.h"

#define KIB 1024u
#define MIB (1024u * 1024u)
#define JNAME "j"
#define CLASSES "[class small]\nsize = 2M\ncount = 2\n"
/* small segments keep every test quick: 4 x 1 MiB unless a test says otherwise */
#define JOURNAL "[journal j]\ndirectory = @DIR@/j\nsegment_size = 1M\nmax_batch_bytes = 256K\n"
#define SEG_DATA (MIB - JFORMAT_BLOCK) /* record bytes one segment holds */
#define LIVENESS_MS 10000 /* "an ack arrives within": generous for sanitizer builds */

/* --- the daemon under test (case.h starts, stops and tears it down) ------------------------------ */

/* Start a daemon with CLASSES and these [journal] sections, run as o says (o may be NULL). */
static inline void start_journal_opts(struct daemon *d, const char *journals, const struct harness_opts *o)
{
	char classes[2048];

	snprintf(classes, sizeof(classes), "%s%s", CLASSES, journals);
	start_opts(d, NULL, classes, o);
}

static inline void start_journal(struct daemon *d, const char *journals)
{
	start_journal_opts(d, journals, NULL);
}

/* SIGKILL the daemon; the directory stays for a restart. */
static inline void crash(struct daemon *d)
{
	assert_int_equal(harness_kill(d), 128 + SIGKILL);
}

/* A clean SIGTERM stop that keeps the directory. */
static inline void terminate(struct daemon *d)
{
	assert_int_equal(harness_terminate(d), 0);
}

/* Start it again as it was run last, or (restart_opts) with o's environment and wrapper. */
static inline void restart(struct daemon *d)
{
	int r = harness_restart(d);

	if (r < 0)
		harness_dump_log(d);
	assert_int_equal(r, 0);
}

static inline void restart_opts(struct daemon *d, const struct harness_opts *o)
{
	int r = harness_restart_opts(d, o);

	if (r < 0)
		harness_dump_log(d);
	assert_int_equal(r, 0);
}

static inline hp_journal *jopen(hp_conn *c)
{
	hp_journal *j = NULL;
	int r = hp_journal_open(c, JNAME, &j);

	if (r < 0)
		fprintf(stderr, "hp_journal_open: %s (%s)\n", hp_strerror(r), hp_last_error(c));
	assert_int_equal(r, 0);
	return j;
}

static inline const struct hp_journal_status *jst(const struct hp_status *st)
{
	for (uint32_t i = 0; i < st->njournals; i++)
		if (strcmp(st->journals[i]->name, JNAME) == 0)
			return st->journals[i];
	fail_msg("no journal %s in status", JNAME);
	abort(); /* not reached: fail_msg leaves the case, but cmocka.h does not declare it noreturn */
}

static inline void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* Wait (bounded) until the journal's state is `state`; returns the status then. */
static inline struct hp_status *wait_state(hp_conn *c, int state)
{
	double end = harness_ms() + LIVENESS_MS;

	for (;;) {
		struct hp_status *st = status(c);

		if (jst(st)->state == state)
			return st;
		if (harness_ms() > end)
			fail_msg("journal never reached state %d (is %d: %s)", state, jst(st)->state, jst(st)->note);
		hp_status_free(st);
		sleep_ms(5);
	}
}

/* --- record contents ---------------------------------------------------------------------- */

static inline bool pattern_ok(const void *data, size_t len, uint64_t seed)
{
	uint8_t *want = malloc(len ? len : 1);
	bool ok;

	assert_non_null(want);
	pattern(want, len, seed);
	ok = len == 0 || memcmp(want, data, len) == 0;
	free(want);
	return ok;
}

/* Acknowledged records, in LSN order, consecutive LSNs. */
struct rec {
	uint64_t lsn, seed;
	uint32_t len;
};

struct recs {
	struct rec *v;
	size_t n, cap;
};

static inline void recs_add(struct recs *r, uint64_t lsn, uint64_t seed, uint32_t len)
{
	if (r->n == r->cap) {
		r->cap = r->cap ? r->cap * 2 : 256;
		r->v = realloc(r->v, r->cap * sizeof(*r->v));
		assert_non_null(r->v);
	}
	if (r->n)
		assert_int_equal(lsn, r->v[r->n - 1].lsn + 1);
	r->v[r->n++] = (struct rec){ lsn, seed, len };
}

static inline uint64_t recs_last(const struct recs *r)
{
	return r->n ? r->v[r->n - 1].lsn : 0;
}

static inline const struct rec *recs_find(const struct recs *r, uint64_t lsn)
{
	if (!r->n || lsn < r->v[0].lsn || lsn > recs_last(r))
		return NULL;
	return &r->v[lsn - r->v[0].lsn];
}

/*
 * Read the journal from `from` to its end and compare with e: every record returned must be
 * the one appended at its LSN, byte for byte, LSNs consecutive, ending at e's last. first:
 * the LSN the reader must start at (0: wherever the journal still has records, >= from).
 * Returns the first LSN read.
 */
static inline uint64_t read_expect(hp_conn *c, uint64_t from, const struct recs *e, uint64_t first)
{
	hp_journal_reader *r = NULL;
	uint64_t lsn, expect = first, start = 0, n = 0;
	const void *data;
	size_t len;
	int rc;

	assert_int_equal(hp_journal_reader_open(c, JNAME, from, &r), 0);
	while ((rc = hp_journal_reader_next(r, &lsn, &data, &len)) == 1) {
		const struct rec *want = recs_find(e, lsn);

		if (n++ == 0) {
			start = lsn;
			if (!first)
				expect = lsn;
			if (lsn < from)
				fail_msg("reader from LSN %" PRIu64 " returned LSN %" PRIu64 " first", from, lsn);
		}
		if (lsn != expect)
			fail_msg("reader returned LSN %" PRIu64 ", expected %" PRIu64, lsn, expect);
		if (!want)
			fail_msg("reader returned LSN %" PRIu64 ", never appended (appended %" PRIu64 "..%" PRIu64 ")",
				 lsn, e->n ? e->v[0].lsn : 0, recs_last(e));
		if (len != want->len || !pattern_ok(data, len, want->seed))
			fail_msg("record %" PRIu64 ": %zu bytes, appended %u bytes; content %s", lsn, len, want->len,
				 len == want->len ? "differs" : "not compared");
		expect++;
	}
	if (rc != 0)
		fail_msg("reader: %s after LSN %" PRIu64, hp_strerror(rc), expect - 1);
	if (expect - 1 != recs_last(e))
		fail_msg("reader from %" PRIu64 " ended at LSN %" PRIu64 " (read %" PRIu64 "), appended up to %" PRIu64,
			 from, expect - 1, n, recs_last(e));
	hp_journal_reader_close(r);
	return start;
}

/*
 * Append one record of seed's content: wait, and return its LSN, or do not (with flags, those of
 * hp_journal_appendv_flags), and return its ticket.
 */
static inline uint64_t append_seeded(hp_journal *j, uint64_t seed, uint32_t len, bool wait, unsigned flags)
{
	uint8_t *buf = malloc(len ? len : 1);
	struct iovec v = { buf, len };
	uint64_t ret = 0;
	int r;

	assert_non_null(buf);
	pattern(buf, len, seed);
	r = wait ? hp_journal_append_wait(j, buf, len, &ret) : hp_journal_appendv_flags(j, &v, 1, flags, &ret);
	free(buf);
	if (r < 0)
		fail_msg("hp_journal_append%s(%u bytes, flags %#x): %s", wait ? "_wait" : "", len, flags, hp_strerror(r));
	return ret;
}

static inline uint64_t append_wait(hp_journal *j, uint64_t seed, uint32_t len)
{
	return append_seeded(j, seed, len, true, 0);
}

static inline uint64_t append_nowait(hp_journal *j, uint64_t seed, uint32_t len)
{
	return append_seeded(j, seed, len, false, 0);
}

/* Append one lazy record of seed's content (HP_JOURNAL_APPEND_LAZY); its ticket. */
static inline uint64_t append_lazy(hp_journal *j, uint64_t seed, uint32_t len)
{
	return append_seeded(j, seed, len, false, HP_JOURNAL_APPEND_LAZY);
}

/*
 * One writer alone appends `count` records of `len` bytes whose seeds are their LSNs (known in
 * advance: nobody else appends), pipelined, then waits for them all. Returns the last LSN.
 */
static inline uint64_t append_run(hp_journal *j, struct recs *e, uint64_t next_lsn, unsigned count, uint32_t len)
{
	uint64_t ticket = 0;

	for (unsigned i = 0; i < count; i++) {
		ticket = append_nowait(j, next_lsn + i, len);
		recs_add(e, next_lsn + i, next_lsn + i, len);
	}
	assert_int_equal(hp_journal_wait(j, ticket, LIVENESS_MS), 0);
	assert_int_equal(hp_journal_wait_lsn(j, next_lsn + count - 1, LIVENESS_MS), 0);
	return next_lsn + count - 1;
}

/* Can files in /tmp be opened O_DIRECT? (tmpfs cannot) */
static inline bool direct_io_works(char *why, size_t len)
{
	char path[] = "/tmp/hugepool-direct.XXXXXX";
	int fd = mkostemp(path, O_CLOEXEC), dfd;

	if (fd < 0) {
		snprintf(why, len, "mkostemp in /tmp: %s", strerror(errno));
		return false;
	}
	dfd = open(path, O_RDWR | O_DIRECT | O_CLOEXEC);
	if (dfd < 0)
		snprintf(why, len, "O_DIRECT in /tmp: %s", strerror(errno));
	unlink(path);
	close(fd);
	if (dfd >= 0)
		close(dfd);
	return dfd >= 0;
}

/* --- many writers: what each had acknowledged ------------------------------------------------- */

/*
 * Off the case's thread (a writer thread, a child process), where an assertion cannot fail the
 * case: connect to socket and open a writer of the journal. 0 or the error; a caller that goes
 * on after an error closes both, NULL where nothing was opened (so it starts them NULL).
 */
static inline int writer_open(const char *socket, hp_conn **ret_c, hp_journal **ret_j)
{
	int r = hp_connect(socket, ret_c);

	return r < 0 ? r : hp_journal_open(*ret_c, JNAME, ret_j);
}

/* One acknowledged append of a writer thread: its LSN, the writer's sequence number, its length. */
struct acked {
	uint64_t lsn;
	uint32_t seq, len;
};

/* A writer thread's acknowledged appends, in the order the acks came. */
struct acks {
	struct acked *v;
	size_t n, cap;
	int bad; /* acks with an LSN of 0 */
};

/* The content of writer id's record seq (a writer among many cannot know its LSNs in advance). */
static inline uint64_t writer_seed(unsigned id, uint32_t seq)
{
	return ((uint64_t)id << 32) | seq;
}

/* The length of writer id's record seq in the crash tests: none one time in eight, else below 1500 bytes. */
static inline uint32_t writer_len(unsigned id, uint32_t seq)
{
	uint64_t m = mix(writer_seed(id, seq));

	return m % 8 == 0 ? 0 : (uint32_t)(m % 1500);
}

/* From the writer's thread, where an assertion cannot fail a case: out of memory aborts. */
static inline void acks_add(struct acks *a, uint64_t lsn, uint32_t seq, uint32_t len)
{
	if (a->n == a->cap) {
		a->cap = a->cap ? a->cap * 2 : 1024;
		a->v = realloc(a->v, a->cap * sizeof(*a->v));
		if (!a->v)
			abort();
	}
	if (lsn == 0)
		a->bad++;
	a->v[a->n++] = (struct acked){ lsn, seq, len };
}

/*
 * After a recovery that truncated nothing: every record w[i] (writer i's acks, contents by
 * writer_seed(i, seq)) acknowledged is in the journal at its LSN, LSNs 1..durable, no gaps;
 * records written and never acknowledged may be there too. Returns the durable LSN.
 */
static inline void acks_verify(hp_conn *c, const struct acks *const *w, unsigned nw, uint64_t *ret_durable)
{
	struct hp_status *st = status(c);
	uint64_t durable = jst(st)->durable_lsn, total = 0, lsn, expect = 1, seen = 0;
	const struct acked **by_lsn;
	unsigned *owner;
	hp_journal_reader *r = NULL;
	const void *data;
	size_t len;
	int rc;

	/* nothing was truncated: recovery found every record there is */
	assert_int_equal(jst(st)->recovered_records, durable);
	assert_int_equal(jst(st)->next_lsn, durable + 1);
	assert_non_null(strstr(jst(st)->recovery, "records (LSN 1.."));
	hp_status_free(st);
	by_lsn = calloc(durable + 1, sizeof(*by_lsn));
	owner = calloc(durable + 1, sizeof(*owner));
	assert_true(by_lsn && owner);
	for (unsigned i = 0; i < nw; i++) {
		assert_int_equal(w[i]->bad, 0);
		for (size_t k = 0; k < w[i]->n; k++) {
			const struct acked *a = &w[i]->v[k];

			if (a->lsn > durable)
				fail_msg("writer %u's record %u was acknowledged with LSN %" PRIu64
					 ", recovery ended at %" PRIu64, i, a->seq, a->lsn, durable);
			if (by_lsn[a->lsn])
				fail_msg("LSN %" PRIu64 " acknowledged twice (writers %u and %u)", a->lsn, owner[a->lsn], i);
			by_lsn[a->lsn] = a;
			owner[a->lsn] = i;
			total++;
		}
	}
	assert_int_equal(hp_journal_reader_open(c, JNAME, 1, &r), 0);
	while ((rc = hp_journal_reader_next(r, &lsn, &data, &len)) == 1) {
		const struct acked *a;

		if (lsn != expect)
			fail_msg("reader returned LSN %" PRIu64 ", expected %" PRIu64 " (a gap)", lsn, expect);
		expect++;
		if (lsn > durable)
			fail_msg("reader returned LSN %" PRIu64 " beyond the durable %" PRIu64, lsn, durable);
		a = by_lsn[lsn];
		if (!a)
			continue; /* written, never acknowledged: allowed */
		if (len != a->len || !pattern_ok(data, len, writer_seed(owner[lsn], a->seq)))
			fail_msg("LSN %" PRIu64 " (writer %u record %u, %u bytes) read back as %zu bytes%s", lsn,
				 owner[lsn], a->seq, a->len, len, len == a->len ? " of other content" : "");
		seen++;
	}
	if (rc != 0)
		fail_msg("reader: %s after LSN %" PRIu64, hp_strerror(rc), expect - 1);
	hp_journal_reader_close(r);
	if (expect - 1 != durable)
		fail_msg("reader ended at LSN %" PRIu64 ", the journal is durable to %" PRIu64, expect - 1, durable);
	assert_int_equal(seen, total);
	free(by_lsn);
	free(owner);
	*ret_durable = durable;
}

/* Has the daemon's auto journal io_uring's queue beside libaio's (its path's words name both)?
 * Asked of the daemon itself: it sets one up only where libaio opens too and the ring has what
 * it needs, which a probe from here could judge otherwise. */
static inline bool two_queues(void)
{
	static int known = -1;
	static struct daemon d; /* static: teardown uses it after a failed assertion left this frame */
	struct hp_status *st;
	const struct hp_journal_path *p;
	hp_conn *c;

	if (known >= 0)
		return known;
	start_journal(&d, JOURNAL "backend = auto\n");
	c = conn(&d);
	st = status(c);
	p = &jst(st)->path;
	known = !strcmp(jst(st)->backend, "libaio") && strstr(p->why, "queued through io_uring") != NULL;
	hp_status_free(st);
	hp_disconnect(c);
	stop(&d);
	return known;
}

/* --- a writer's ring, as its client process sees it -------------------------------------------- */

/* Start addresses of this process's mappings whose name contains what and that are len long. */
static inline unsigned maps_find(const char *what, uint64_t len, uintptr_t *starts, unsigned max)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];
	unsigned n = 0;

	assert_non_null(f);
	while (n < max && fgets(line, sizeof(line), f)) {
		uintptr_t a, b;

		if (strstr(line, what) && sscanf(line, "%" SCNxPTR "-%" SCNxPTR, &a, &b) == 2 && b - a == len)
			starts[n++] = a;
	}
	fclose(f);
	return n;
}

/* The mapping of that kind which was not among before[0..nbefore). */
static inline void *maps_new(const char *what, uint64_t len, const uintptr_t *before, unsigned nbefore)
{
	uintptr_t now[64];
	unsigned n = maps_find(what, len, now, 64);

	for (unsigned i = 0; i < n; i++) {
		bool old = false;

		for (unsigned k = 0; k < nbefore; k++)
			old |= now[i] == before[k];
		if (!old)
			return (void *)now[i];
	}
	fail_msg("no new mapping of %s (%" PRIu64 " bytes)", what, len);
	return NULL;
}

/* Open a writer of a journal of ring_size-byte rings and find its ring in our address space (the
 * library keeps it to itself): what the daemon tells it, and what a hostile writer can rewrite. */
static inline hp_journal *jopen_ring(hp_conn *c, uint64_t ring_size, struct jring_hdr **ret_ring)
{
	uintptr_t before[64];
	unsigned n = maps_find("hugepool-journal:", JRING_HDR_SIZE + ring_size, before, 64);
	hp_journal *j = jopen(c);

	*ret_ring = maps_new("hugepool-journal:", JRING_HDR_SIZE + ring_size, before, n);
	return j;
}

#endif
