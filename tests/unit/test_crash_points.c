/* SPDX-License-Identifier: MIT */
/*
 * The crash-point harness, in process (journal.h and the flusher of libdaemon, no daemon, no
 * socket): every disk state a power loss could leave during a recorded workload, recovered by the
 * real journal_open and checked (below). The journal and its writers are journal_unit.h's.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>

#include "journal_unit.h"

/* --- the crash-point harness ------------------------------------------------------------- */

/*
 * In the spirit of ALICE and CrashMonkey: a workload runs on a real journal whose jio reports
 * every write it is asked for (with the bytes), every completion and every acknowledgement
 * (jio_set_tap). Then, for crash points in that recording, the disk state a power loss there
 * could leave is built: the writes of every completed request (a completed request is durable),
 * and of the requests still in flight none, all, or a random subset of their 4 KiB pieces, in
 * any file (a segment header without its records, records without the batch before them,
 * writes reordered across files). The real recovery runs on each state, and:
 *   - it must not refuse it (every acknowledged record is in it: nothing refusable happened);
 *   - every acknowledged record still kept is there, byte for byte, and so is every record it
 *     returns at all (no garbage, each LSN once: the walk is consecutive);
 *   - recovering again after a crash right then gives the same journal;
 *   - a later life that appends records of the same sizes where the cut tail was, then
 *     crashes, recovers exactly its own records after the first recovery's: nothing cut comes
 *     back.
 * The number of crash points is bounded for `make check`; HP_CRASH_POINTS=all (check-all
 * sets it) takes every one.
 */

#define CP_WRITERS 32
#define CP_RECORDS 220 /* per writer: about 5 MiB through 4 segments of 1 MiB, so they are reused */
#define CP_PIECE 4096u

enum cp_kind { CP_WRITE, CP_DONE, CP_ACK };

struct cp_op {
	enum cp_kind kind;
	unsigned req; /* request number */
	unsigned file; /* segment file index (CP_WRITE) */
	uint64_t off; /* CP_WRITE: file offset; CP_ACK: the LSN acknowledged */
	uint32_t len;
	int res; /* CP_DONE */
	uint8_t *data; /* CP_WRITE: a copy of what was written */
};

struct cp_log {
	struct cp_op *v;
	size_t n, cap;
	unsigned nreq;
	struct {
		const struct jio_req *req;
		unsigned id;
	} inflight[JIO_DEPTH + 1];
	int fd_of[NSEGS];
};

/* seeds and lengths by LSN: what every record must hold */
struct cp_expect {
	uint64_t *seed;
	uint32_t *len;
	uint64_t n; /* LSNs 1..n-1 */
};

static void cp_push(struct cp_log *l, struct cp_op op)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 4096;
		l->v = realloc(l->v, l->cap * sizeof(*l->v));
		if (!l->v)
			abort();
	}
	l->v[l->n++] = op;
}

static unsigned cp_file(struct cp_log *l, int fd)
{
	char link[64], target[256];
	ssize_t len;
	unsigned idx;

	for (unsigned i = 0; i < NSEGS; i++)
		if (l->fd_of[i] == fd)
			return i;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	len = readlink(link, target, sizeof(target) - 1);
	if (len < 8)
		abort();
	target[len] = '\0';
	if (sscanf(target + len - 7, "%3u.seg", &idx) != 1 || idx >= NSEGS)
		abort();
	l->fd_of[idx] = fd;
	return idx;
}

/* The tap: on the flusher thread only, so no lock. */
static void cp_tap(void *arg, enum jio_tap_event ev, const struct jio_req *req, uint64_t lsn)
{
	struct cp_log *l = arg;

	if (ev == JIO_TAP_ACKED) {
		cp_push(l, (struct cp_op){ .kind = CP_ACK, .off = lsn });
		return;
	}
	if (ev == JIO_TAP_SUBMIT) {
		unsigned id = l->nreq++;

		for (unsigned i = 0; i <= JIO_DEPTH; i++)
			if (!l->inflight[i].req) {
				l->inflight[i].req = req;
				l->inflight[i].id = id;
				break;
			}
		for (unsigned i = 0; i < req->niov; i++) {
			uint8_t *copy = malloc(req->iov[i].len ? req->iov[i].len : 1);

			if (!copy)
				abort();
			memcpy(copy, req->iov[i].buf, req->iov[i].len);
			cp_push(l, (struct cp_op){ .kind = CP_WRITE, .req = id, .file = cp_file(l, req->fd),
						   .off = req->iov[i].off, .len = (uint32_t)req->iov[i].len,
						   .data = copy });
		}
		return;
	}
	for (unsigned i = 0; i <= JIO_DEPTH; i++)
		if (l->inflight[i].req == req) {
			cp_push(l, (struct cp_op){ .kind = CP_DONE, .req = l->inflight[i].id, .res = req->res });
			l->inflight[i].req = NULL;
			return;
		}
	abort(); /* completed without being submitted: an injected write fault, not used here */
}

struct cp_writer {
	pthread_t t;
	struct twriter tw;
	unsigned id;
	struct cp_expect *e;
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

/* Run the workload on a fresh journal in dir, recording it. */
static void cp_record(const char *dir, const struct jcase *c, struct cp_log *log, struct cp_expect *e)
{
	struct cp_writer w[CP_WRITERS];
	struct journal *j;

	memset(log, 0, sizeof(*log));
	for (unsigned i = 0; i < NSEGS; i++)
		log->fd_of[i] = -1;
	e->n = CP_WRITERS * CP_RECORDS + 1;
	e->seed = calloc(e->n, sizeof(*e->seed));
	e->len = calloc(e->n, sizeof(*e->len));
	assert_true(e->seed && e->len);
	jio_set_tap(cp_tap, log);
	assert_int_equal(life_open(dir, c, "when_full = recycle\n", &j), 0);
	jio_set_tap(NULL, NULL);
	for (unsigned i = 0; i < CP_WRITERS; i++) {
		w[i] = (struct cp_writer){ .id = i, .e = e };
		twriter_open(j, &w[i].tw);
	}
	for (unsigned i = 0; i < CP_WRITERS; i++)
		assert_int_equal(pthread_create(&w[i].t, NULL, cp_writer_main, &w[i]), 0);
	for (unsigned i = 0; i < CP_WRITERS; i++) {
		pthread_join(w[i].t, NULL);
		assert_int_equal(w[i].err, 0);
		twriter_close(&w[i].tw);
	}
	/* the recording ends with the last publish; the clean stop's marker is not in it */
	journal_close(j);
}

static void cp_log_free(struct cp_log *l, struct cp_expect *e)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i].data);
	free(l->v);
	free(e->seed);
	free(e->len);
}

/* The disk a power loss just before op `at` leaves: completed requests' writes, and of the
 * requests in flight, each 4 KiB piece with probability 1/2 (variant 2 and up), all (1), or
 * none (0). */
static void cp_image(const struct cp_log *l, size_t at, unsigned variant, unsigned *rnd, uint8_t **img,
		     uint64_t *ret_acked)
{
	bool *done = calloc(l->nreq + 1, sizeof(bool));

	assert_non_null(done);
	*ret_acked = 0;
	for (size_t i = 0; i < at; i++) {
		if (l->v[i].kind == CP_DONE && l->v[i].res == 0)
			done[l->v[i].req] = true;
		if (l->v[i].kind == CP_ACK)
			*ret_acked = l->v[i].off;
	}
	for (unsigned f = 0; f < NSEGS; f++)
		memset(img[f], 0, SEG_SIZE);
	for (size_t i = 0; i < at; i++) {
		const struct cp_op *op = &l->v[i];

		if (op->kind != CP_WRITE)
			continue;
		if (done[op->req] || variant == 1) {
			memcpy(img[op->file] + op->off, op->data, op->len);
			continue;
		}
		if (variant == 0)
			continue;
		for (uint64_t p = op->off; p < op->off + op->len;) {
			uint64_t end = MIN((p / CP_PIECE + 1) * CP_PIECE, op->off + op->len);

			if (rand_r(rnd) & 1)
				memcpy(img[op->file] + p, op->data + (p - op->off), end - p);
			p = end;
		}
	}
	free(done);
}

/* Make dir hold the image's segment files and nothing else (no markers of an earlier state). */
static void cp_write_dir(const char *dir, uint8_t **img)
{
	static const char *const markers[] = { "j.clean", "j.retain", "j.clean.tmp", "j.retain.tmp" };
	char p[256];

	if (mkdir(dir, 0700) < 0)
		assert_int_equal(errno, EEXIST);
	for (size_t i = 0; i < ARRAY_SIZE(markers); i++) {
		path_of(p, sizeof(p), dir, markers[i]);
		if (unlink(p) < 0)
			assert_int_equal(errno, ENOENT);
	}
	for (unsigned f = 0; f < NSEGS; f++) {
		char name[16];
		int fd;

		snprintf(name, sizeof(name), "j-%03u.seg", f);
		path_of(p, sizeof(p), dir, name);
		fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
		assert_true(fd >= 0);
		assert_int_equal(pwrite(fd, img[f], SEG_SIZE, 0), SEG_SIZE);
		close(fd);
	}
}

/* The lowest first LSN of a valid header in the image: acknowledged records from there on
 * must all be kept (those before went with reused segments). */
static uint64_t cp_kept_from(uint8_t **img)
{
	uint64_t from = UINT64_MAX;

	for (unsigned f = 0; f < NSEGS; f++) {
		struct jformat_seg_hdr h;

		memcpy(&h, img[f], sizeof(h));
		if (jformat_seg_hdr_check(&h, "j", NULL) == 0)
			from = MIN(from, h.first_lsn);
	}
	return from;
}

/* Every record of r is the one appended at its LSN (expected content), byte for byte. */
static void cp_check_content(struct journal *j, const struct cp_expect *e, uint64_t alt_from, uint64_t alt_base,
			     const char *what)
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
				uint8_t want[1500];
				uint64_t seed = lsn >= alt_from ? alt_base + lsn : lsn < e->n ? e->seed[lsn] : 0;
				uint32_t len = lsn < e->n ? e->len[lsn] : UINT32_MAX;

				if (lsn >= e->n || (!seed && lsn < alt_from) || rec.len != len)
					fail_msg("%s: record %" PRIu64 " (%u bytes) was never appended with that length",
						 what, lsn, rec.len);
				pattern(want, len, seed);
				if (memcmp(want, map + off + JFORMAT_REC_HDR, len) != 0)
					fail_msg("%s: record %" PRIu64 " holds other bytes than appended", what, lsn);
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

/* Check one crash state (the files are in dir). Returns whether recovery cut anything. */
static void cp_check_state(const char *dir, const struct jcase *c, const struct cp_expect *e, uint64_t acked,
			   uint64_t kept_from, const char *what)
{
	struct jrecs r1, r2, r3;
	struct journal *j;
	struct twriter t;
	struct iovec iov[8];
	uint8_t buf[8][1500];
	uint64_t start, first;
	unsigned n = 0;
	int r;

	r = life_open(dir, c, "when_full = recycle\n", &j);
	if (r < 0)
		fail_msg("%s: recovery refused a state holding every acknowledged record (LSN ..%" PRIu64 "): %s",
			 what, acked, strerror(-r));
	journal_records(j, &r1);
	cp_check_content(j, e, UINT64_MAX, 0, what);
	first = r1.n ? r1.v[0].lsn : r1.next_lsn;
	if (r1.next_lsn <= acked)
		fail_msg("%s: recovered up to LSN %" PRIu64 ", %" PRIu64 " was acknowledged", what, r1.next_lsn - 1,
			 acked);
	if (kept_from != UINT64_MAX && first > MAX(kept_from, 1) && first <= acked)
		fail_msg("%s: the journal starts at LSN %" PRIu64 ", acknowledged records from %" PRIu64 " are kept",
			 what, first, kept_from);

	/* a crash right after recovery: the same journal */
	life_crash(j, dir);
	assert_int_equal(life_open(dir, c, "when_full = recycle\n", &j), 0);
	journal_records(j, &r2);
	if (!jrecs_equal(&r1, &r2))
		fail_msg("%s: a second recovery gives another journal (%zu records to %" PRIu64 ", then %zu to %" PRIu64 ")",
			 what, r1.n, r1.next_lsn - 1, r2.n, r2.next_lsn - 1);

	/* a later life writes what the cut tail held, sizes alike, other bytes, and crashes */
	for (uint64_t lsn = r1.next_lsn; lsn < e->n && n < 8; lsn++, n++) {
		pattern(buf[n], e->len[lsn], (1ull << 62) + lsn);
		iov[n] = (struct iovec){ buf[n], e->len[lsn] };
	}
	if (n) {
		twriter_open(j, &t);
		assert_int_equal(jring_append(&t.c, iov, n, &start), 0);
		assert_int_equal(jring_wait(&t.c, jring_durable_past, t.c.tail, now_ns() + 30 * 1000000000ull), 0);
		assert_int_equal(jring_entry_lsn(&t.c, start), r1.next_lsn);
		twriter_close(&t);
	}
	life_crash(j, dir);
	assert_int_equal(life_open(dir, c, "when_full = recycle\n", &j), 0);
	journal_records(j, &r3);
	if (r3.next_lsn != r1.next_lsn + n)
		fail_msg("%s: after a later life appended LSN %" PRIu64 "..%" PRIu64 " and crashed, recovery ends at %" PRIu64
			 ": records cut before came back", what, r1.next_lsn, r1.next_lsn + n - 1, r3.next_lsn - 1);
	cp_check_content(j, e, r1.next_lsn, 1ull << 62, what);
	journal_close(j);
	free(r1.v);
	free(r2.v);
	free(r3.v);
}

/* Crash points for this run: before each completion (the largest set in flight). */
static size_t cp_points(const struct cp_log *l, bool all, unsigned *rnd, size_t **ret)
{
	size_t *pts = malloc((l->n + 1) * sizeof(*pts)), n = 0, keep = 0;
	bool *pick;

	assert_non_null(pts);
	for (size_t i = 0; i < l->n; i++)
		if (l->v[i].kind == CP_DONE)
			pts[n++] = i;
	pts[n++] = l->n;
	if (all) {
		*ret = pts;
		return n;
	}
	/* from every segment header's write to a few completions after it, and a random sample */
	pick = calloc(n, sizeof(bool));
	assert_non_null(pick);
	for (size_t i = 0, k = 0; i < l->n; i++) {
		while (k < n && pts[k] <= i)
			k++;
		if (l->v[i].kind == CP_WRITE && l->v[i].off == 0 && l->v[i].len == JFORMAT_BLOCK)
			for (size_t d = k; d < MIN(n, k + 3); d++)
				pick[d] = true;
	}
	for (unsigned extra = 0; extra < 6; extra++)
		pick[(size_t)rand_r(rnd) % n] = true;
	for (size_t k = 0; k < n; k++)
		if (pick[k])
			pts[keep++] = pts[k];
	free(pick);
	*ret = pts;
	return keep;
}

static const struct jcase jc_cp[] = {
	{ "io_uring", false }, { "libaio", false }, { "sync", false },
	{ "io_uring", true },  { "libaio", true },  { "sync", true },
};

static void test_crash_points(void **state)
{
	const char *mode = getenv("HP_CRASH_POINTS");
	bool all = mode && !strcmp(mode, "all");
	unsigned variants = all ? 4 : 3;
	(void)state;

	for (size_t k = 0; k < ARRAY_SIZE(jc_cp); k++) {
		const struct jcase *c = &jc_cp[k];
		char dir[128], sdir[160];
		struct cp_log log;
		struct cp_expect e;
		uint8_t *img[NSEGS];
		unsigned rnd = 0x5eed + (unsigned)k, states = 0;
		size_t *pts, npts;

		if (c->direct && !o_direct_works()) {
			print_message("crash points %s direct: skipped, /var/tmp refuses O_DIRECT\n", c->backend);
			continue;
		}
		fresh_dir(dir, sizeof(dir), "cp-workload");
		cp_record(dir, c, &log, &e);
		/* states are written to memory-backed files where O_DIRECT is not needed: quicker */
		snprintf(sdir, sizeof(sdir), "%s/state", c->direct ? topdir : shmdir);
		for (unsigned f = 0; f < NSEGS; f++)
			assert_non_null(img[f] = malloc(SEG_SIZE));
		npts = cp_points(&log, all, &rnd, &pts);
		for (size_t p = 0; p < npts; p++)
			for (unsigned v = 0; v < variants; v++) {
				char what[160];
				uint64_t acked;

				cp_image(&log, pts[p], v, &rnd, img, &acked);
				cp_write_dir(sdir, img);
				snprintf(what, sizeof(what), "%s direct=%s, crash before op %zu of %zu, variant %u",
					 c->backend, c->direct ? "on" : "off", pts[p], log.n, v);
				cp_check_state(sdir, c, &e, acked, cp_kept_from(img), what);
				states++;
			}
		print_message("crash points %s direct=%s: %u states checked (%zu crash points of %u requests, "
			      "%u variants each)\n",
			      c->backend, c->direct ? "on" : "off", states, npts, log.nreq, variants);
		for (unsigned f = 0; f < NSEGS; f++)
			free(img[f]);
		free(pts);
		cp_log_free(&log, &e);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_crash_points),
	};

	return cmocka_run_group_tests_name("crash points", tests, group_setup, group_teardown);
}
