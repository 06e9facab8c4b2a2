/* SPDX-License-Identifier: MIT */
/*
 * The crash-point harness, in process (journal.h and the flusher of libdaemon, no daemon, no
 * socket), in the spirit of ALICE and CrashMonkey: a workload runs on a real journal in an empty
 * directory while both of the journal's taps record every operation that changes what a power
 * loss can leave (crashfs.h: the segment files made, the batches written and completed, the
 * acknowledgements, the segments made anew, the clean-stop and truncation-point markers, the
 * directory synced); then the disk states the file systems' rules allow at points of that
 * recording are built and the real recovery runs on each:
 *
 *   power loss   at a point of the recording: of what was not yet synced, nothing, everything,
 *                random 4 KiB pages or random 512-byte sectors, and of the names not yet synced a
 *                prefix (none, all, any);
 *   in recovery  a state's recovery recorded in turn, and a second power loss at every point of
 *                its own writes (the zeroing, the padding, the marker removed, segments made);
 *   after a kill the process killed at a point (the page cache keeps what it wrote, of a batch in
 *                flight all or random pages), the next life recorded from its recovery through
 *                appends acknowledged to it, and a power loss at every point of that: what the
 *                killed life left unsynced can still be lost then.
 *
 * Each state is checked: recovery does not refuse it; every acknowledged record not truncated
 * is there, byte for byte (acknowledged by whichever life), and every record at all is one some
 * life appended at that LSN; recovering again after a crash right then gives the same journal
 * (and a crash during recovery, the journal that recovery would have given); a later life that
 * appends records of the same sizes where a cut tail was, then crashes, recovers exactly its own
 * records after the first recovery's: nothing cut comes back. After a kill that left whole
 * batches, recovery logs no warning.
 *
 * Two workloads (32 writers, segments reused: when_full = recycle, and when_full = block with
 * truncations whenever the journal is full), each on every backend, direct on and off. The states
 * are sampled with a seed (HP_CRASH_SEED, printed), as many per workload as `make check` can
 * afford, eight times as many with HP_CRASH_POINTS=all (check-all), a quarter under a sanitizer;
 * each workload prints how many it checked. HP_CRASH_SHARD=I/N runs the workloads numbered I
 * modulo N only (and the two single cases in shard 0), with the same seeds as a whole run:
 * tests/run-tests.sh runs a shard per CPU at once.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>

#include "journal_unit.h"
#include "../lib/crashfs.h"

#define CP_WRITERS 32
#define CP_RECORDS 220 /* per writer: about 5 MiB through 4 segments of 1 MiB, so they are reused */
#define CP_LATER 8 /* records a later life appends */
#define SEED_KILLED (1ull << 62) /* records of the life after a kill: seed + LSN */
#define SEED_LATER (1ull << 61) /* records of a check's later life: seed + LSN */

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CP_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define CP_SANITIZED 1
#endif
#endif
#ifndef CP_SANITIZED
#define CP_SANITIZED 0
#endif

/* States sampled per workload in `make check` (times 8 with HP_CRASH_POINTS=all, / 4 under a
 * sanitizer): power losses in the recording, states whose recovery gets a second power loss,
 * kills (besides the one after the clean stop). */
#define CP_POWER 24
#define CP_RECOVERY 2
#define CP_KILLS 2

enum cp_full { CP_RECYCLE, CP_BLOCK };

struct cp_mode {
	const char *backend;
	bool direct;
	const char *path; /* backend = auto: its path forced (jpath_set_test's spec), or NULL */
};

/* backend = auto runs with its path going round inline, queued and (with io_uring's queue beside
 * libaio's) queued-alt every two batches (path:flip:2), so every path and the switches between
 * them, from one queue to the other too, are in the recording. */
static const struct cp_mode cp_modes[] = {
	{ "io_uring", false, NULL }, { "libaio", false, NULL }, { "sync", false, NULL }, { "auto", false, "flip:2" },
	{ "io_uring", true, NULL },  { "libaio", true, NULL },  { "sync", true, NULL },  { "auto", true, "flip:2" },
};

/* Does backend = auto open io_uring's queue beside libaio's on this machine (jio.h)? */
static bool auto_two_queues(void)
{
	struct jio *io;
	bool two;

	assert_int_equal(jio_open(JIO_AUTO, false, &io, NULL, 0), 0);
	two = jio_queues(io) == 2;
	jio_close(io);
	return two;
}

/* seeds and lengths by LSN: what every record of the workload holds */
struct cp_expect {
	uint64_t *seed;
	uint32_t *len;
	uint64_t n; /* LSNs 1..n-1 */
};

/* A recorded workload. */
struct cp_work {
	struct jcase c;
	enum cp_full full;
	const char *extra; /* its configuration's lines */
	/* a lone writer first: lone records of lone_len bytes (0: sizes at random); then, unless
	 * lone_only, CP_WRITERS writers of CP_RECORDS each */
	unsigned lone;
	uint32_t lone_len;
	bool lone_only;
	bool on_shm; /* recorded in memory-backed files (direct = off only): quicker */
	struct cfs_log log;
	struct cp_expect e;
	unsigned seed, rnd; /* the sample's seed; its generator's state */
	unsigned states, power, recovery, killed; /* checked */
};

/* --- the workload ------------------------------------------------------------------------- */

struct cp_writer {
	pthread_t t;
	struct twriter tw;
	unsigned id;
	struct cp_expect *e;
	atomic_bool *done;
	int err;
};

static uint64_t cp_seed(unsigned id, unsigned seq)
{
	return ((uint64_t)(id + 1) << 32) | seq; /* never 0: 0 is "not appended" */
}

static uint32_t cp_len(uint64_t seed)
{
	uint64_t m = mix(seed);

	return m % 8 == 0 ? 0 : (uint32_t)(m % 1500);
}

/* The size of a record a later life appends at lsn: the workload's there, so that it lines up
 * with what a cut tail held. */
static uint32_t cp_len_at(const struct cp_expect *e, uint64_t lsn)
{
	return lsn < e->n ? e->len[lsn] : cp_len(lsn);
}

static void *cp_writer_main(void *arg)
{
	struct cp_writer *w = arg;

	for (unsigned seq = 0; seq < CP_RECORDS && !w->err; seq++) {
		uint64_t seed = cp_seed(w->id, seq), lsn;
		uint32_t len = cp_len(seed);

		lsn = append_wait(&w->tw, seed, len, &w->err);
		if (lsn && lsn < w->e->n) {
			w->e->seed[lsn] = seed;
			w->e->len[lsn] = len;
		}
	}
	return NULL;
}

struct cp_truncator {
	pthread_t t;
	struct journal *j;
	struct cfs_log *log;
	atomic_bool stop;
};

/*
 * when_full = block: whenever the journal is full, truncate half of what it holds (from the
 * truncation point to its durable end), marked in the log before the journal may reuse anything
 * for it; while it stays full, half of the rest, and so on. Not a fixed count of records: with
 * direct = on every batch is padded to a block, so what a segment holds varies with the batches'
 * sizes, and two segments' worth at 800 bytes a record (the count this used) could leave the
 * oldest segment needed for good: the writers waited out their 30 s (TSan, a loaded machine).
 */
static void *cp_truncator_main(void *arg)
{
	struct cp_truncator *t = arg;

	while (!atomic_load(&t->stop)) {
		struct journal_stats st;

		journal_get_stats(t->j, &st);
		if (st.state == JOURNAL_FULL && st.durable_lsn > st.retain_lsn + 1) {
			uint64_t to = st.retain_lsn + (st.durable_lsn + 1 - st.retain_lsn) / 2;

			cfs_mark(t->log, CFS_TRUNC, to);
			journal_truncate(t->j, to);
		}
		usleep(200);
	}
	return NULL;
}

/*
 * Run the workload in a fresh directory, recording it from the journal's first open (its segment
 * files made) to its clean stop. A reader holds the segment of the first record to the end, so
 * the journal makes it anew before it reuses it.
 */
static void cp_record(struct cp_work *w)
{
	struct cp_writer wr[CP_WRITERS];
	struct cp_truncator tr = { 0 };
	struct journal_segment_info infos[NSEGS];
	int fds[NSEGS];
	unsigned nfds = 0;
	uint64_t durable;
	struct twriter first;
	struct journal *j;
	char dir[128];

	static unsigned n;

	if (w->on_shm) {
		snprintf(dir, sizeof(dir), "%s/cp-workload-%u", shmdir, n++);
		cfs_clear_dir(dir);
	} else {
		fresh_dir(dir, sizeof(dir), "cp-workload");
	}
	cfs_init(&w->log);
	w->e.n = CP_WRITERS * CP_RECORDS + w->lone + 1;
	w->e.seed = calloc(w->e.n, sizeof(*w->e.seed));
	w->e.len = calloc(w->e.n, sizeof(*w->e.len));
	assert_true(w->e.seed && w->e.len);
	cfs_record(&w->log);
	assert_int_equal(life_open(dir, &w->c, w->extra, &j), 0);
	twriter_open(j, &first);
	for (unsigned seq = 0; seq < w->lone; seq++) {
		uint64_t seed = cp_seed(CP_WRITERS, seq);
		uint32_t len = w->lone_len ? w->lone_len : cp_len(seed);
		uint64_t lsn = append_wait(&first, seed, len, NULL);

		w->e.seed[lsn] = seed;
		w->e.len[lsn] = len;
		if (seq == 0)
			assert_int_equal(journal_read_segments(j, 1, NSEGS, fds, infos, &nfds, &durable), 0);
	}
	twriter_close(&first);
	if (w->full == CP_BLOCK) {
		tr = (struct cp_truncator){ .j = j, .log = &w->log };
		assert_int_equal(pthread_create(&tr.t, NULL, cp_truncator_main, &tr), 0);
	}
	for (unsigned i = 0; i < CP_WRITERS && !w->lone_only; i++) {
		wr[i] = (struct cp_writer){ .id = i, .e = &w->e };
		twriter_open(j, &wr[i].tw);
	}
	for (unsigned i = 0; i < CP_WRITERS && !w->lone_only; i++)
		assert_int_equal(pthread_create(&wr[i].t, NULL, cp_writer_main, &wr[i]), 0);
	for (unsigned i = 0; i < CP_WRITERS && !w->lone_only; i++) {
		pthread_join(wr[i].t, NULL);
		assert_int_equal(wr[i].err, 0);
		twriter_close(&wr[i].tw);
	}
	if (w->full == CP_BLOCK) {
		atomic_store(&tr.stop, true);
		pthread_join(tr.t, NULL);
	}
	if (w->c.path) {
		struct journal_stats st;

		/* every path was taken, unless the machine has a CPU per writer (all inline-spin) */
		journal_get_stats(j, &st);
		if (st.cpus < CP_WRITERS &&
		    (!st.inline_batches || !st.queued_batches || !st.queued_alt_batches != !auto_two_queues()))
			fail_msg("auto path:%s wrote %" PRIu64 " batches inline, %" PRIu64 " queued and %" PRIu64
				 " queued-alt (two queues here: %d)", w->c.path, st.inline_batches,
				 st.queued_batches - st.queued_alt_batches, st.queued_alt_batches, auto_two_queues());
	}
	journal_close(j); /* its clean stop recorded too */
	cfs_stop(&w->log);
	if (w->log.misordered[0])
		fail_msg("%s direct=%s: %s", w->c.backend, w->c.direct ? "on" : "off", w->log.misordered);
	while (nfds)
		close(fds[--nfds]);
}

/* --- what a state must recover to --------------------------------------------------------- */

/* A life of the journal: it appended LSNs [from, to), with seeds base + LSN (base 0: the
 * workload's seeds), and had them acknowledged up to acked (0: none). */
struct cp_life {
	uint64_t from, to, acked, base;
};

struct cp_want {
	const struct cp_work *w;
	struct cp_life lives[3]; /* the workload first */
	unsigned nlives;
	uint64_t acked; /* every LSN from keep_from to acked must be there */
	uint64_t keep_from;
	const struct jrecs *same; /* the journal a recovery must give (a crash in recovery), or NULL */
	bool no_warning; /* recovery must log none: nothing pending was torn */
};

/* Is the record at lsn one that a life appended there, and the one if a life had it acked? */
static bool cp_record_ok(const struct cp_want *want, uint64_t lsn, const uint8_t *payload, uint32_t len)
{
	const struct cp_expect *e = &want->w->e;

	for (unsigned k = want->nlives; k-- > 0;) {
		const struct cp_life *l = &want->lives[k];
		uint64_t seed = l->base ? l->base + lsn : lsn < e->n ? e->seed[lsn] : 0;
		uint32_t wlen = l->base ? cp_len_at(e, lsn) : lsn < e->n ? e->len[lsn] : 0;
		uint8_t want_bytes[1500];

		if (lsn < l->from || lsn >= l->to || !seed)
			continue;
		pattern(want_bytes, wlen, seed);
		if (len == wlen && !memcmp(want_bytes, payload, len))
			return true;
		if (lsn <= l->acked)
			return false; /* acknowledged by this life: nobody else's will do */
	}
	return false;
}

/* Every record the journal serves is one some life appended at its LSN, byte for byte. */
static void cp_check_content(struct journal *j, const struct cp_want *want, const char *what)
{
	int fds[NSEGS];
	struct journal_segment_info infos[NSEGS];
	unsigned n = 0;
	uint64_t durable;

	assert_int_equal(journal_read_segments(j, 1, NSEGS, fds, infos, &n, &durable), 0);
	for (unsigned i = 0; i < n; i++) {
		uint8_t *map = mmap(NULL, infos[i].size, PROT_READ, MAP_SHARED, fds[i], 0);
		uint64_t off = JFORMAT_BLOCK, lsn = infos[i].first_lsn;
		struct jformat_rec rec;
		struct jformat_seg_hdr h;

		assert_true(map != MAP_FAILED);
		memcpy(&h, map, sizeof(h));
		while (off < infos[i].size && lsn <= durable &&
		       jformat_rec_check(map + off, infos[i].size - off, lsn, h.generation, &rec, NULL) == 0) {
			if (rec.type == JREC_DATA) {
				if (!cp_record_ok(want, lsn, map + off + JFORMAT_REC_HDR, rec.len))
					fail_msg("%s: record %" PRIu64 " (%u bytes) is none that was appended there%s", what,
						 lsn, rec.len, lsn <= want->acked ? ", and it was acknowledged" : "");
				lsn++;
			}
			off += jformat_rec_size(rec.len);
		}
		munmap(map, infos[i].size);
		close(fds[i]);
	}
}

static bool jrecs_equal(const struct jrecs *a, const struct jrecs *b)
{
	return a->n == b->n && a->next_lsn == b->next_lsn && (a->n == 0 || !memcmp(a->v, b->v, a->n * sizeof(*a->v)));
}

/* Append a later life's records at the journal's end (sizes as the workload's there), wait for
 * them; how many. */
static unsigned cp_append_life(struct journal *j, const struct cp_expect *e, uint64_t from, uint64_t base)
{
	struct twriter t;
	struct iovec iov[CP_LATER];
	uint8_t buf[CP_LATER][1500];
	uint64_t start;

	for (unsigned k = 0; k < CP_LATER; k++) {
		pattern(buf[k], cp_len_at(e, from + k), base + from + k);
		iov[k] = (struct iovec){ buf[k], cp_len_at(e, from + k) };
	}
	twriter_open(j, &t);
	assert_int_equal(jring_append(&t.c, iov, CP_LATER, false, &start), 0);
	assert_int_equal(jring_wait(&t.c, jring_durable_past, t.c.tail, now_ns() + 30 * 1000000000ull), 0);
	assert_int_equal(jring_entry_lsn(&t.c, start), from);
	twriter_close(&t);
	return CP_LATER;
}

/* Did the log of an open warn of anything but the path the test forced (backend = auto)? */
static bool recovery_warned(const char *log)
{
	for (const char *l = log; (l = strstr(l, "warning")); l++) {
		const char *eol = strchrnul(l, '\n');
		const char *forced = strstr(l, "path chosen by the tests");

		if (!forced || forced > eol)
			return true;
	}
	return false;
}

/*
 * Open the journal in dir as the workload's configuration says (check: with the sync backend,
 * whatever the workload's: recovery is the same on every backend, and a journal opened and closed
 * on libaio costs tens of milliseconds in io_destroy), recording the open into rec when given;
 * fails the case on a refusal, or on a warning where there must be none, with the log.
 */
static struct journal *cp_open(const char *dir, const struct cp_work *w, bool check, struct cfs_log *rec,
			       bool no_warning, const char *what)
{
	const struct jcase sync = { "sync", w->c.direct, NULL };
	char log[8192];
	struct journal *j;
	int r;

	if (rec)
		cfs_record(rec);
	r = open_logged(dir, check ? &sync : &w->c, w->extra, &j, log, sizeof(log));
	if (rec)
		cfs_stop(rec);
	if (r < 0)
		fail_msg("%s: recovery refused the state: %s; its log:\n%s", what, strerror(-r), log);
	if (no_warning && recovery_warned(log))
		fail_msg("%s: recovery warned, where no write was torn:\n%s", what, log);
	return j;
}

/*
 * Check one crash state (the files are in dir): recovered, recovered again, a later life, as the
 * comment at the top says. rec: record the first recovery into it. ret_r1: the first recovery's
 * journal (the caller frees it), or NULL.
 */
static void cp_check_state(const char *dir, const struct cp_want *want, struct cfs_log *rec, struct jrecs *ret_r1,
			   const char *what)
{
	const struct cp_work *w = want->w;
	struct cp_want later = *want;
	struct jrecs r1, r2, r3;
	struct journal *j;
	uint64_t first;
	unsigned n;

	j = cp_open(dir, w, true, rec, want->no_warning, what);
	journal_records(j, &r1);
	cp_check_content(j, want, what);
	first = r1.n ? r1.v[0].lsn : r1.next_lsn;
	if (r1.next_lsn <= want->acked)
		fail_msg("%s: recovered up to LSN %" PRIu64 ", %" PRIu64 " was acknowledged", what, r1.next_lsn - 1,
			 want->acked);
	if (first > MAX(want->keep_from, 1) && first <= want->acked)
		fail_msg("%s: the journal starts at LSN %" PRIu64 ", acknowledged records from %" PRIu64 " are kept", what,
			 first, want->keep_from);
	if (want->same && !jrecs_equal(&r1, want->same))
		fail_msg("%s: a crash during recovery changed the journal (%zu records to %" PRIu64 ", %zu to %" PRIu64
			 " without the crash)",
			 what, r1.n, r1.next_lsn - 1, want->same->n, want->same->next_lsn - 1);

	/* a crash right after recovery: the same journal */
	life_crash(j, dir);
	j = cp_open(dir, w, true, NULL, false, what);
	journal_records(j, &r2);
	if (!jrecs_equal(&r1, &r2))
		fail_msg("%s: a second recovery gives another journal (%zu records to %" PRIu64 ", then %zu to %" PRIu64 ")",
			 what, r1.n, r1.next_lsn - 1, r2.n, r2.next_lsn - 1);

	/* a later life writes what a cut tail held, sizes alike, other bytes, and crashes */
	if (w->full == CP_BLOCK)
		journal_truncate(j, r1.next_lsn);
	n = cp_append_life(j, &w->e, r1.next_lsn, SEED_LATER);
	life_crash(j, dir);
	j = cp_open(dir, w, true, NULL, false, what);
	journal_records(j, &r3);
	if (r3.next_lsn != r1.next_lsn + n)
		fail_msg("%s: after a later life appended LSN %" PRIu64 "..%" PRIu64 " and crashed, recovery ends at %" PRIu64
			 ": records cut before came back", what, r1.next_lsn, r1.next_lsn + n - 1, r3.next_lsn - 1);
	later.lives[later.nlives++] = (struct cp_life){ r1.next_lsn, r1.next_lsn + n, r1.next_lsn + n - 1, SEED_LATER };
	later.acked = r1.next_lsn + n - 1;
	cp_check_content(j, &later, what);
	journal_close(j);
	if (ret_r1)
		*ret_r1 = r1;
	else
		free(r1.v);
	free(r2.v);
	free(r3.v);
}

/* The lowest first LSN of a valid segment header in img: with when_full = recycle, acknowledged
 * records from there on must all be kept (those before went with reused segments). */
static uint64_t cp_headers_from(const struct cfs_image *img)
{
	uint64_t from = UINT64_MAX;

	for (unsigned f = 0; f < NSEGS; f++) {
		char name[16];
		uint64_t size;
		const uint8_t *p;
		struct jformat_seg_hdr h;

		snprintf(name, sizeof(name), "j-%03u.seg", f);
		p = cfs_file(img, name, &size);
		if (!p || size < sizeof(h))
			continue;
		memcpy(&h, p, sizeof(h));
		if (jformat_seg_hdr_check(&h, "j", NULL) == 0 && h.first_lsn < from)
			from = h.first_lsn;
	}
	return from;
}

/* What a state of w built at point upto of log must recover to: the workload's life (and a life
 * after a kill, from killed_at on), keeping what was acknowledged and not truncated. */
static struct cp_want cp_want_of(const struct cp_work *w, const struct cfs_log *log, size_t upto,
				 const struct cfs_image *img, const struct cp_life *killed_life, size_t killed_at)
{
	struct cp_want want = { .w = w };

	want.lives[want.nlives++] = (struct cp_life){ 1, w->e.n, cfs_max(log, CFS_ACK, 0, MIN(upto, killed_at)), 0 };
	if (killed_life) {
		want.lives[want.nlives] = *killed_life;
		want.lives[want.nlives++].acked = cfs_max(log, CFS_ACK, killed_at, upto);
	}
	want.acked = cfs_max(log, CFS_ACK, 0, upto);
	want.keep_from = w->full == CP_BLOCK ? cfs_max(log, CFS_TRUNC, 0, upto) : cp_headers_from(img);
	return want;
}

/* --- the states ----------------------------------------------------------------------------- */

static const struct cfs_choice cp_choices[] = {
	{ CFS_NONE, 0 },     /* nothing pending reached the disk */
	{ CFS_ALL, -1 },     /* all of it did */
	{ CFS_SECTORS, -2 }, /* torn: any sectors, any prefix of the names */
	{ CFS_PAGES, -2 },   /* torn: any pages */
};

static const char *const cp_choice_names[] = { "nothing pending", "all pending", "sectors", "pages" };

/* Does choice v leave every write whole (so recovery has nothing to warn of)? */
static bool cp_untorn(unsigned v)
{
	return cp_choices[v].pending == CFS_NONE || cp_choices[v].pending == CFS_ALL;
}

/* The state directory of w's states: memory-backed unless the journal needs O_DIRECT. */
static void cp_state_dir(const struct cp_work *w, char *buf, size_t len)
{
	snprintf(buf, len, "%s/state", w->c.direct ? topdir : shmdir);
}

static void cp_what(const struct cp_work *w, char *buf, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void cp_what(const struct cp_work *w, char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(buf, len, "%s%s%s direct=%s when_full=%s seed %u: ", w->c.backend, w->c.path ? " path:" : "",
			 w->c.path ? w->c.path : "", w->c.direct ? "on" : "off", w->full == CP_BLOCK ? "block" : "recycle",
			 w->seed);

	va_start(ap, fmt);
	vsnprintf(buf + n, len - (size_t)n, fmt, ap);
	va_end(ap);
}

/*
 * A second power loss during the recovery of a state: the recovery recorded in rec (its first
 * ops the state itself, durable), every point of it, every choice. The journal must be the one
 * that recovery gave (r1), and check out as the state's.
 */
static void cp_recovery_crashes(struct cp_work *w, const struct cfs_log *rec, size_t base, const struct cp_want *want,
				const struct jrecs *r1, const char *what, unsigned *rnd)
{
	size_t *pts = malloc((rec->n + 1) * sizeof(*pts)), npts;
	struct cfs_image img = { 0 };
	char sdir[160], what2[768];

	assert_non_null(pts);
	cp_state_dir(w, sdir, sizeof(sdir));
	npts = cfs_points(rec, base, pts);
	for (size_t p = 0; p < npts; p++)
		for (unsigned v = 0; v < ARRAY_SIZE(cp_choices); v++) {
			struct cp_want want2 = *want;

			cfs_build(rec, pts[p], cp_choices[v], rnd, &img);
			cfs_write_dir(&img, sdir, NULL, false);
			want2.same = r1;
			want2.no_warning = want->no_warning && cp_untorn(v);
			snprintf(what2, sizeof(what2), "%s; a power loss in its recovery before op %zu of %zu, %s", what,
				 pts[p] - base, rec->n - base, cp_choice_names[v]);
			cp_check_state(sdir, &want2, NULL, NULL, what2);
			w->states++;
			w->recovery++;
		}
	cfs_image_free(&img);
	free(pts);
}

/* Power losses at points of the workload's recording. */
static void cp_power_states(struct cp_work *w, unsigned scale, unsigned scale_down)
{
	size_t *pts = malloc((w->log.n + 1) * sizeof(*pts)), npts, *pick, npick, nrec;
	struct cfs_image img = { 0 };
	char sdir[160], what[512];

	assert_non_null(pts);
	cp_state_dir(w, sdir, sizeof(sdir));
	npts = cfs_points(&w->log, 0, pts);
	pick = malloc(npts * sizeof(*pick));
	assert_non_null(pick);
	npick = cfs_pick(&w->log, pts, npts, MAX(CP_POWER * scale / scale_down, 4), &w->rnd, pick);
	nrec = MAX(CP_RECOVERY * scale / scale_down, 1);
	for (size_t k = 0; k < npick; k++) {
		size_t at = pts[pick[k]];
		unsigned v = (unsigned)rand_r(&w->rnd) % ARRAY_SIZE(cp_choices);
		struct cp_want want;
		struct cfs_log rec;
		struct jrecs r1;
		size_t base;
		bool in_recovery = k < nrec;

		cfs_build(&w->log, at, cp_choices[v], &w->rnd, &img);
		cp_what(w, what, sizeof(what), "a power loss before op %zu of %zu, %s", at, w->log.n, cp_choice_names[v]);
		want = cp_want_of(w, &w->log, at, &img, NULL, SIZE_MAX);
		want.no_warning = cp_untorn(v);
		cfs_init(&rec);
		cfs_write_dir(&img, sdir, in_recovery ? &rec : NULL, true);
		base = rec.n;
		cp_check_state(sdir, &want, in_recovery ? &rec : NULL, in_recovery ? &r1 : NULL, what);
		w->states++;
		w->power++;
		if (in_recovery) {
			cp_recovery_crashes(w, &rec, base, &want, &r1, what, &w->rnd);
			free(r1.v);
		}
		cfs_free(&rec);
	}
	cfs_image_free(&img);
	free(pick);
	free(pts);
}

/*
 * The process killed right before op `at` of the workload's recording: its page cache (of the
 * batches in flight, all or random pages) is the next life's disk. That life is recorded from its
 * recovery through CP_LATER appends acknowledged, then a power loss at every point of it, every
 * choice.
 */
static void cp_kill_at(struct cp_work *w, size_t at, enum cfs_pending pending)
{
	struct cp_life life = { .base = SEED_KILLED };
	struct cfs_image img = { 0 };
	char sdir[160], what[512], what2[768];
	size_t killed_at, *pts, npts;
	struct cfs_log l;
	struct cp_want want;
	struct journal *j;
	struct jrecs r;

	cp_state_dir(w, sdir, sizeof(sdir));
	/* the killed life's log up to the kill, as the page cache got it */
	cfs_init(&l);
	for (size_t i = 0; i < at; i++) {
		struct cfs_op op = w->log.v[i];

		if (op.data)
			op.data = cfs_copy(op.data, op.len);
		cfs_push(&l, op);
	}
	l.nfiles = w->log.nfiles;
	l.nreq = w->log.nreq;
	cfs_kill(&l, at, pending, &w->rnd);
	killed_at = l.n;
	cfs_build(&l, l.n, cp_choices[1], &w->rnd, &img);
	cfs_write_dir(&img, sdir, &l, false);
	cp_what(w, what, sizeof(what), "killed before op %zu of %zu (%s of the batches in flight)", at, w->log.n,
		 pending == CFS_ALL ? "all" : "pages");

	/* the next life: recovery (after a kill alone, every ack kept), appends, acks */
	want = cp_want_of(w, &l, l.n, &img, NULL, SIZE_MAX);
	j = cp_open(sdir, w, false, &l, pending == CFS_ALL, what);
	journal_records(j, &r);
	cp_check_content(j, &want, what);
	if (r.next_lsn <= want.acked)
		fail_msg("%s: recovered up to LSN %" PRIu64 ", %" PRIu64 " was acknowledged", what, r.next_lsn - 1,
			 want.acked);
	life.from = r.next_lsn;
	cfs_record(&l);
	if (w->full == CP_BLOCK) {
		/* room for the appends, the marker written while recording */
		cfs_mark(&l, CFS_TRUNC, r.next_lsn);
		journal_truncate(j, r.next_lsn);
	}
	life.to = life.from + cp_append_life(j, &w->e, life.from, SEED_KILLED);
	cfs_stop(&l);
	if (l.misordered[0])
		fail_msg("%s: %s", what, l.misordered);
	life_crash(j, sdir);
	free(r.v);
	w->states++;
	w->killed++;

	/* a power loss anywhere in that life */
	pts = malloc((l.n + 1) * sizeof(*pts));
	assert_non_null(pts);
	npts = cfs_points(&l, killed_at, pts);
	for (size_t p = 0; p < npts; p++)
		for (unsigned v = 0; v < 3; v++) {
			cfs_build(&l, pts[p], cp_choices[v], &w->rnd, &img);
			cfs_write_dir(&img, sdir, NULL, false);
			want = cp_want_of(w, &l, pts[p], &img, &life, killed_at);
			want.no_warning = cp_untorn(v) && pending == CFS_ALL;
			snprintf(what2, sizeof(what2), "%s; then a power loss before op %zu of the next life's %zu, %s", what,
				 pts[p] - killed_at, l.n - killed_at, cp_choice_names[v]);
			cp_check_state(sdir, &want, NULL, NULL, what2);
			w->states++;
			w->killed++;
		}
	free(pts);
	cfs_free(&l);
	cfs_image_free(&img);
}

/* Kills at points of the workload's recording: after its clean stop (the next life takes the
 * marker), and sampled. */
static void cp_kill_states(struct cp_work *w, unsigned scale, unsigned scale_down)
{
	size_t *pts = malloc((w->log.n + 1) * sizeof(*pts)), npts, *pick, npick;

	assert_non_null(pts);
	cp_kill_at(w, w->log.n, CFS_ALL);
	npts = cfs_points(&w->log, 0, pts);
	pick = malloc(npts * sizeof(*pick));
	assert_non_null(pick);
	npick = cfs_pick(&w->log, pts, npts, MAX(CP_KILLS * scale / scale_down, 1), &w->rnd, pick);
	for (size_t k = 0; k < npick; k++)
		cp_kill_at(w, pts[pick[k]], k % 2 ? CFS_ALL : CFS_PAGES);
	free(pick);
	free(pts);
}

static void cp_work_free(struct cp_work *w)
{
	cfs_free(&w->log);
	free(w->e.seed);
	free(w->e.len);
}

/* The op of log completing the request of the first write that ends at `end` of
 * a segment (past its header), or SIZE_MAX. */
static size_t cp_done_of_write_ending(const struct cfs_log *l, uint64_t end)
{
	for (size_t i = 0; i < l->n; i++) {
		const struct cfs_op *op = &l->v[i];

		if (op->kind != CFS_WRITE || !op->req || op->off + op->len != end || op->off < JFORMAT_BLOCK)
			continue;
		for (size_t k = i + 1; k < l->n; k++)
			if (l->v[k].kind == CFS_DONE && l->v[k].req == op->req)
				return k;
	}
	return SIZE_MAX;
}

/* The op of log syncing the directory after the nth rename to name (from 1), or SIZE_MAX. */
static size_t cp_dirsync_after_rename(const struct cfs_log *l, const char *name, unsigned nth)
{
	for (size_t i = 0; i < l->n; i++)
		if (l->v[i].kind == CFS_RENAME && !strcmp(l->v[i].name2, name) && --nth == 0)
			for (size_t k = i + 1; k < l->n; k++)
				if (l->v[k].kind == CFS_DIRSYNC)
					return k;
	return SIZE_MAX;
}

/*
 * Found by the harness: killed while the batch that fills a segment to its very end was written
 * and not yet synced, the next life's recovery took its records (the walk ended at the segment's
 * end: nothing to zero, so nothing synced), opened the next segment and had records acknowledged
 * there. A power loss then took that batch: a hole before the new segment, which the next start
 * refused. (1000-byte records: 1020 of them fill a segment of 1 MiB exactly.)
 */
static void test_kill_unsynced_segment_end(void **state)
{
	struct cp_work w = { .c = { "sync", false, NULL }, .full = CP_RECYCLE, .extra = "when_full = recycle\n",
			     .lone = 1100, .lone_len = 1000, .lone_only = true, .on_shm = true, .seed = 1, .rnd = 1 };
	size_t at;
	(void)state;

	cp_record(&w);
	at = cp_done_of_write_ending(&w.log, SEG_SIZE);
	assert_true(at != SIZE_MAX);
	cp_kill_at(&w, at, CFS_ALL);
	cp_work_free(&w);
}

/*
 * Found by the harness: killed after a segment made anew (a reader held it) was renamed into
 * place and before the directory was synced, the next life wrote that segment's new generation
 * into the new file and had it acknowledged. A power loss then undid the rename: the name led to
 * the old file again, and the acknowledged records were gone.
 */
static void test_kill_unsynced_rename(void **state)
{
	struct cp_work w = { .c = { "sync", false, NULL }, .full = CP_RECYCLE, .extra = "when_full = recycle\n",
			     .lone = 4 * 1020 + 20, .lone_len = 1000, .lone_only = true, .on_shm = true, .seed = 1, .rnd = 1 };
	size_t at;
	(void)state;

	cp_record(&w);
	/* the first rename made segment 0, the second made it anew for its reuse */
	at = cp_dirsync_after_rename(&w.log, "j-000.seg", 2);
	assert_true(at != SIZE_MAX);
	cp_kill_at(&w, at, CFS_ALL);
	cp_work_free(&w);
}

/* HP_CRASH_SHARD=I/N: this process runs workload k when k % N == I (whole: 0/1). */
static unsigned shard_index, shard_count = 1;

static void shard_init(void)
{
	const char *s = getenv("HP_CRASH_SHARD");
	unsigned i, n;

	if (s && sscanf(s, "%u/%u", &i, &n) == 2 && n > 0 && i < n) {
		shard_index = i;
		shard_count = n;
	}
}

static bool shard_mine(unsigned k)
{
	return k % shard_count == shard_index;
}

static void test_crash_points(void **state)
{
	const char *mode = getenv("HP_CRASH_POINTS"), *seed_env = getenv("HP_CRASH_SEED");
	unsigned scale = mode && !strcmp(mode, "all") ? 8 : 1, scale_down = CP_SANITIZED ? 4 : 1, total = 0;
	unsigned seed = seed_env ? (unsigned)strtoul(seed_env, NULL, 0) : 0x5eed;
	(void)state;

	print_message("crash states: seed %u (HP_CRASH_SEED), %s%s, shard %u of %u (HP_CRASH_SHARD)\n", seed,
		      scale > 1 ? "HP_CRASH_POINTS=all" : "sampled", scale_down > 1 ? ", a quarter under a sanitizer" : "",
		      shard_index + 1, shard_count);
	for (size_t k = 0; k < ARRAY_SIZE(cp_modes); k++)
		for (unsigned full = CP_RECYCLE; full <= CP_BLOCK; full++) {
			if (!shard_mine((unsigned)(2 * k + full)))
				continue;
			struct cp_work w = { .c = { cp_modes[k].backend, cp_modes[k].direct, cp_modes[k].path },
					     .full = full,
					     .lone = 64,
					     .extra = full == CP_BLOCK ? "when_full = block\n" : "when_full = recycle\n",
					     .seed = seed + (unsigned)(2 * k + full) };

			if (w.c.direct && !o_direct_works()) {
				print_message("crash states %s direct=on: skipped, /var/tmp refuses O_DIRECT\n", w.c.backend);
				continue;
			}
			uint64_t t0 = now_ns(), t1;

			w.rnd = w.seed;
			cp_record(&w);
			t1 = now_ns();
			cp_power_states(&w, scale, scale_down);
			cp_kill_states(&w, scale, scale_down);
			print_message("crash states %s%s%s direct=%s when_full=%s: %u checked (%u power losses, %u in their "
				      "recovery, %u after kills) of %zu operations recorded; %.1f s recording, %.1f s checking\n",
				      w.c.backend, w.c.path ? " path:" : "", w.c.path ? w.c.path : "", w.c.direct ? "on" : "off", full == CP_BLOCK ? "block" : "recycle", w.states,
				      w.power, w.recovery, w.killed, w.log.n, (double)(t1 - t0) / 1e9, (double)(now_ns() - t1) / 1e9);
			total += w.states;
			cp_work_free(&w);
		}
	print_message("crash states: %u checked\n", total);
}

int main(void)
{
	const struct CMUnitTest single[] = {
		cmocka_unit_test(test_kill_unsynced_segment_end),
		cmocka_unit_test(test_kill_unsynced_rename),
	};
	const struct CMUnitTest sampled[] = {
		cmocka_unit_test(test_crash_points),
	};
	int failed = 0;

	shard_init();
	if (shard_mine(0))
		failed = cmocka_run_group_tests_name("crash points, single", single, group_setup, group_teardown);
	return failed + cmocka_run_group_tests_name("crash points", sampled, group_setup, group_teardown);
}
