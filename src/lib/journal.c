/* SPDX-License-Identifier: MIT */
/*
 * journal.c - libhugepool's journal writers and readers.
 *
 * A writer appends into its append ring (src/common/jring.h) with plain stores and one
 * store of `tail`; it rings its doorbell eventfd only when the daemon has said it sleeps, and it
 * waits for durability on its wake word, so an append costs no system call while the daemon is
 * busy and a wait costs one FUTEX_WAIT. The doorbell is this writer's own, the wake page its
 * uid's (the daemon wakes all of a uid's waiting writers with one FUTEX_WAKE). While
 * waiting it looks at the connection every 100 ms so that a dead daemon is an error, not a
 * hang, and rings again if the daemon sleeps with its entries unread (a lost wake-up is a delay).
 * That protocol is src/common/jring.c's (jring_append, jring_wait), beside the daemon's half:
 * this file maps the ring the daemon sends, checks the caller's arguments, and supplies the
 * connection check.
 *
 * A reader gets the segment files from the daemon (read-only fds), maps them and checks every
 * record (jformat.h) itself; the daemon's durable LSN bounds what it returns. Every fd from the
 * daemon is checked before it is mapped (client_check_fd): a ring and a wake page must be
 * sealed memfds of their sizes, a doorbell a non-blocking eventfd, a segment a regular file at
 * least as long as announced, so no mapping starts out reaching past its file's end.
 *
 * Neither is thread-safe, and both belong to the connection that opened them, with one
 * exception: threads may wait for a writer's records (hp_journal_wait, _wait_lsn, _durable_lsn,
 * _set_wait_mode) beside the one thread that appends to it (libhugepool(3), THREAD SAFETY), so
 * a broker's appender can wait for a group's sync while its other threads append the next.
 * jring.c keeps the ring's client words safe for that; here, the one message a wait leaves on
 * the connection is written once (writer_result).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "client.h"
#include "jformat.h"
#include "jring.h"
#include "util.h"

#define READER_SEGMENTS PROTO_MAX_FDS

struct hp_journal {
	hp_conn *c;
	uint64_t writer_id;
	struct jring_client ring; /* its append ring, doorbell and uid's wake page */
	int gone_said; /* GONE_*: the "went away" message, which threads beside each other may all meet */
};

enum { GONE_UNSAID, GONE_SAYING, GONE_SAID };

static int check_name(const char *name)
{
	if (!name || !*name || strlen(name) >= PROTO_NAME_MAX || !proto_name_valid(name, strlen(name) + 1))
		return -EINVAL;
	return 0;
}

/* The daemon closed our connection (it died or threw us out)? For the ring's waits. */
static bool connection_gone(void *arg)
{
	hp_conn *c = arg;
	struct pollfd p = { .fd = c->fd, .events = POLLIN | POLLRDHUP };

	/* a request/reply protocol: nothing may arrive unasked, so readable means gone */
	return poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLRDHUP | POLLHUP | POLLERR));
}

/*
 * A wait or append ended because the daemon went away (it stopped, crashed or restarted: a
 * restarted daemon recovers the journal from disk and closes its writers' connections). Say
 * what the writer can know: up to which LSN it is durable, and what to do about the rest.
 */
static int writer_result(hp_journal *j, int r)
{
	int unsaid = GONE_UNSAID;

	if (r != -ECONNRESET)
		return r;
	/*
	 * A waiting and an appending thread may meet the daemon's end together: one writes the
	 * message, the other waits until it is whole (the end is for good, so it is said once).
	 */
	if (__atomic_compare_exchange_n(&j->gone_said, &unsaid, GONE_SAYING, false, __ATOMIC_ACQ_REL,
					__ATOMIC_ACQUIRE)) {
		client_set_error(j->c,
				 "hugepoold went away (stopped or restarted): this journal is durable up to LSN %llu; "
				 "records appended after it may or may not be on disk: open the journal again on a new "
				 "connection, read from LSN %llu on, and append what is missing",
				 (unsigned long long)hp_journal_durable_lsn(j),
				 (unsigned long long)hp_journal_durable_lsn(j) + 1);
		__atomic_store_n(&j->gone_said, GONE_SAID, __ATOMIC_RELEASE);
	}
	while (__atomic_load_n(&j->gone_said, __ATOMIC_ACQUIRE) != GONE_SAID)
		sched_yield();
	return r;
}

int hp_journal_open(hp_conn *c, const char *name, hp_journal **ret)
{
	struct proto_journal_open req = { 0 };
	_cleanup_free_ void *payload = NULL;
	const struct proto_journal_opened *o;
	const char *why;
	int fds[3], r;
	hp_journal *j;
	void *map, *wake;

	if (!c || !ret || check_name(name) < 0)
		return -EINVAL;
	proto_set_name(req.name, sizeof(req.name), name);
	r = client_call_fds(c, PROTO_JOURNAL_OPEN, &req, sizeof(req), PROTO_JOURNAL_OPENED, &payload, fds, 3);
	if (r < 0)
		return r;
	o = payload;
	if (o->ring_size < JRING_MIN_SIZE || o->ring_size > JRING_MAX_SIZE || (o->ring_size & (o->ring_size - 1))) {
		client_set_error(c, "the daemon announced a journal ring of %" PRIu64 " bytes", o->ring_size);
		r = -EPROTO;
		goto out_close;
	}
	if ((r = client_check_fd(c, fds[0], CLIENT_FD_MEMORY, JRING_HDR_SIZE + o->ring_size, "a journal ring")) < 0 ||
	    (r = client_check_fd(c, fds[1], CLIENT_FD_EVENTFD, 0, "a journal doorbell")) < 0 ||
	    (r = client_check_fd(c, fds[2], CLIENT_FD_MEMORY, JRING_WAKE_SIZE, "a journal wake page")) < 0)
		goto out_close;
	map = mmap(NULL, JRING_HDR_SIZE + o->ring_size, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
	if (map == MAP_FAILED) {
		r = -errno;
		goto out_close;
	}
	wake = mmap(NULL, JRING_WAKE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fds[2], 0);
	if (wake == MAP_FAILED) {
		r = -errno;
		goto out_unmap_ring;
	}
	j = calloc(1, sizeof(*j));
	if (!j) {
		r = -ENOMEM;
		goto out_unmap_wake;
	}
	r = jring_client_init(&j->ring, map, o->ring_size, wake, fds[1], connection_gone, c, &why);
	if (r < 0) {
		client_set_error(c, "the daemon sent a journal ring with %s", why);
		free(j);
		goto out_unmap_wake;
	}
	j->c = c;
	j->writer_id = o->writer_id;
	close(fds[0]);
	close(fds[2]);
	*ret = j;
	return 0;
out_unmap_wake:
	munmap(wake, JRING_WAKE_SIZE);
out_unmap_ring:
	munmap(map, JRING_HDR_SIZE + o->ring_size);
out_close:
	for (int i = 0; i < 3; i++)
		close(fds[i]);
	return r;
}

void hp_journal_close(hp_journal *j)
{
	struct proto_journal_close req;

	if (!j)
		return;
	req.writer_id = j->writer_id;
	/* what was appended is still written: the daemon drains the ring before it lets go, lazy
	 * entries too, and without holding them for a wait that will not come */
	jring_want(&j->ring, jring_tail(&j->ring));
	(void)client_simple_request(j->c, PROTO_JOURNAL_CLOSE, &req, sizeof(req));
	munmap(j->ring.hdr, JRING_HDR_SIZE + j->ring.size);
	munmap(j->ring.wake, JRING_WAKE_SIZE);
	close(j->ring.doorbell);
	free(j);
}

uint64_t hp_journal_durable_lsn(const hp_journal *j)
{
	return jring_durable_lsn(&j->ring);
}

static uint64_t deadline_of(int64_t timeout_ms)
{
	return timeout_ms < 0 ? UINT64_MAX : now_ns() + (uint64_t)timeout_ms * 1000000ull;
}

/* Append an entry (lazy: HP_JOURNAL_APPEND_LAZY); *ret_start is where its header lies (for the
 * LSN), *ret_end its ticket. */
static int append_entry(hp_journal *j, const struct iovec *recs, unsigned n, bool lazy, uint64_t *ret_start,
			uint64_t *ret_end)
{
	int r;

	if (!j || !recs || n == 0 || n > UINT32_MAX)
		return -EINVAL;
	for (unsigned i = 0; i < n; i++) {
		if (!recs[i].iov_base && recs[i].iov_len)
			return -EINVAL;
		if (recs[i].iov_len > JFORMAT_RECORD_MAX)
			return -EMSGSIZE;
	}
	r = jring_append(&j->ring, recs, n, lazy, ret_start);
	if (r < 0)
		return writer_result(j, r);
	*ret_end = jring_tail(&j->ring);
	return 0;
}

int hp_journal_appendv_flags(hp_journal *j, const struct iovec *recs, unsigned n, unsigned flags, uint64_t *ret_ticket)
{
	uint64_t start, end;
	int r;

	if (flags & ~(unsigned)HP_JOURNAL_APPEND_LAZY)
		return -EINVAL;
	r = append_entry(j, recs, n, flags & HP_JOURNAL_APPEND_LAZY, &start, &end);
	if (r == 0 && ret_ticket)
		*ret_ticket = end;
	return r;
}

int hp_journal_appendv(hp_journal *j, const struct iovec *recs, unsigned n, uint64_t *ret_ticket)
{
	return hp_journal_appendv_flags(j, recs, n, 0, ret_ticket);
}

int hp_journal_append(hp_journal *j, const void *data, size_t len, uint64_t *ret_ticket)
{
	struct iovec v = { (void *)(uintptr_t)data, len };

	if (!data && len)
		return -EINVAL;
	return hp_journal_appendv(j, &v, 1, ret_ticket);
}

int hp_journal_wait(hp_journal *j, uint64_t ticket, int64_t timeout_ms)
{
	if (!j || ticket > jring_tail(&j->ring))
		return -EINVAL;
	jring_want(&j->ring, ticket);
	return writer_result(j, jring_wait(&j->ring, jring_durable_past, ticket, deadline_of(timeout_ms)));
}

int hp_journal_appendv_wait(hp_journal *j, const struct iovec *recs, unsigned n, uint64_t *ret_first_lsn)
{
	uint64_t start, end;
	int r;

	r = append_entry(j, recs, n, false, &start, &end);
	if (r < 0)
		return r;
	r = jring_wait(&j->ring, jring_durable_past, end, UINT64_MAX);
	if (r < 0)
		return writer_result(j, r);
	if (ret_first_lsn)
		*ret_first_lsn = jring_entry_lsn(&j->ring, start);
	return 0;
}

int hp_journal_append_wait(hp_journal *j, const void *data, size_t len, uint64_t *ret_lsn)
{
	struct iovec v = { (void *)(uintptr_t)data, len };

	if (!data && len)
		return -EINVAL;
	return hp_journal_appendv_wait(j, &v, 1, ret_lsn);
}

int hp_journal_wait_lsn(hp_journal *j, uint64_t lsn, int64_t timeout_ms)
{
	if (!j)
		return -EINVAL;
	/* which of our entries holds lsn is not known here: all of them are wanted */
	jring_want(&j->ring, jring_tail(&j->ring));
	return writer_result(j, jring_wait(&j->ring, jring_lsn_durable, lsn, deadline_of(timeout_ms)));
}

int hp_journal_set_wait_mode(hp_journal *j, int mode)
{
	if (!j || (mode != HP_JOURNAL_WAIT_SPIN && mode != HP_JOURNAL_WAIT_SLEEP))
		return -EINVAL;
	__atomic_store_n(&j->ring.sleep_only, mode == HP_JOURNAL_WAIT_SLEEP, __ATOMIC_RELAXED);
	return 0;
}

int hp_journal_truncate(hp_conn *c, const char *name, uint64_t lsn)
{
	struct proto_journal_truncate req = { .lsn = lsn };

	if (!c || check_name(name) < 0)
		return -EINVAL;
	proto_set_name(req.name, sizeof(req.name), name);
	return client_simple_request(c, PROTO_JOURNAL_TRUNCATE, &req, sizeof(req));
}

/* --- readers ---------------------------------------------------------------------------- */

struct reader_segment {
	const uint8_t *map;
	uint64_t size, generation, first_lsn;
};

struct hp_journal_reader {
	hp_conn *c;
	char name[PROTO_NAME_MAX];
	uint64_t next_lsn, durable_lsn;
	struct reader_segment segs[READER_SEGMENTS];
	unsigned nsegs, cur;
	uint64_t off; /* in segs[cur] */
	uint64_t scan_lsn; /* the LSN the record at off must carry */
	bool started; /* returned a record already */
	bool more; /* the daemon has further segments after these */
};

/* Let go of segment i (passed: the record returned from it was valid until this call). */
static void reader_drop(hp_journal_reader *r, unsigned i)
{
	if (r->segs[i].map)
		munmap((void *)(uintptr_t)r->segs[i].map, r->segs[i].size);
	r->segs[i].map = NULL;
}

static void reader_unmap(hp_journal_reader *r)
{
	for (unsigned i = 0; i < r->nsegs; i++)
		reader_drop(r, i);
	r->nsegs = r->cur = 0;
	r->off = 0;
}

/* Ask the daemon for the segments holding next_lsn on, and map them. */
static int reader_load(hp_journal_reader *r)
{
	struct proto_journal_read req = { .from_lsn = r->next_lsn };
	struct proto_hdr h;
	_cleanup_free_ void *payload = NULL;
	const struct proto_journal_segments *s;
	const struct proto_journal_segment *e;
	int fds[PROTO_MAX_FDS];
	int ret;

	reader_unmap(r);
	memcpy(req.name, r->name, sizeof(req.name));
	ret = client_send(r->c, PROTO_JOURNAL_READ, &req, sizeof(req));
	if (ret < 0)
		return ret;
	ret = client_recv(r->c, &h, &payload, fds, PROTO_MAX_FDS);
	if (ret <= 0)
		return ret < 0 ? ret : -EPROTO;
	s = payload;
	e = (const void *)(s + 1);
	if (h.type != PROTO_JOURNAL_SEGMENTS || s->n != h.nfds || h.len != sizeof(*s) + s->n * sizeof(*e)) {
		for (unsigned i = 0; i < h.nfds; i++)
			close(fds[i]);
		client_set_error(r->c, "malformed journal segments from the daemon");
		return -EPROTO;
	}
	ret = 0;
	for (unsigned i = 0; i < s->n; i++) {
		void *map = MAP_FAILED;

		if (ret == 0 && (e[i].size < 2 * JFORMAT_BLOCK || e[i].size > (1ull << 40))) {
			client_set_error(r->c, "the daemon announced a journal segment of %" PRIu64 " bytes", e[i].size);
			ret = -EPROTO;
		}
		/* a file may be longer than announced (never read past it), never shorter (SIGBUS) */
		if (ret == 0)
			ret = client_check_fd(r->c, fds[i], CLIENT_FD_FILE, e[i].size, "a journal segment");
		if (ret == 0 && (map = mmap(NULL, e[i].size, PROT_READ, MAP_SHARED, fds[i], 0)) == MAP_FAILED) {
			ret = -errno;
			client_set_error(r->c, "mapping a journal segment failed: %s", strerror(-ret));
		}
		close(fds[i]);
		if (map != MAP_FAILED)
			r->segs[r->nsegs++] = (struct reader_segment){ map, e[i].size, e[i].generation, e[i].first_lsn };
	}
	if (ret < 0) {
		reader_unmap(r);
		return ret;
	}
	r->durable_lsn = s->durable_lsn;
	r->more = s->more;
	r->cur = 0;
	r->off = JFORMAT_BLOCK;
	return 0;
}

int hp_journal_reader_open(hp_conn *c, const char *name, uint64_t from_lsn, hp_journal_reader **ret)
{
	hp_journal_reader *r;
	int e;

	if (!c || !ret || check_name(name) < 0)
		return -EINVAL;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->c = c;
	proto_set_name(r->name, sizeof(r->name), name);
	r->next_lsn = from_lsn ? from_lsn : 1;
	e = reader_load(r);
	if (e < 0) {
		free(r);
		return e;
	}
	*ret = r;
	return 0;
}

/* The segment still holds the generation we were given (not recycled under us)? */
static bool segment_current(const struct reader_segment *s, struct jformat_seg_hdr *ret)
{
	memcpy(ret, s->map, sizeof(*ret));
	return jformat_seg_hdr_check(ret, NULL, NULL) == 0 && ret->generation == s->generation;
}

/*
 * Walk the mapped segments from where we are: scan_lsn is the LSN the record at (cur, off) must
 * carry, next_lsn the one the caller wants next. Records below next_lsn are skipped; at the end
 * of what we hold (or of what is durable) we ask the daemon once for newer segments.
 */
int hp_journal_reader_next(hp_journal_reader *r, uint64_t *ret_lsn, const void **ret_data, size_t *ret_len)
{
	bool reloaded = false;

	if (!r || !ret_lsn || !ret_data || !ret_len)
		return -EINVAL;
	for (;;) {
		struct reader_segment *s;
		struct jformat_seg_hdr h;
		struct jformat_rec rec;
		int e;

		if (r->cur >= r->nsegs || r->next_lsn > r->durable_lsn) {
			if (reloaded)
				return 0;
			e = reader_load(r);
			if (e < 0)
				return e;
			reloaded = true;
			continue;
		}
		s = &r->segs[r->cur];
		if (!segment_current(s, &h)) {
			/* recycled since the daemon named it: before we returned anything, ask again */
			if (r->started || reloaded)
				return -ESTALE;
			r->cur = r->nsegs;
			continue;
		}
		if (r->off == JFORMAT_BLOCK)
			r->scan_lsn = h.first_lsn;
		if (r->scan_lsn > r->next_lsn) {
			/* the records asked for are gone (truncated and reused) */
			if (r->started)
				return -ESTALE;
			r->next_lsn = r->scan_lsn; /* start at the oldest record still kept */
		}
		if (jformat_rec_check(s->map + r->off, s->size - r->off, r->scan_lsn, h.generation, &rec, NULL) < 0) {
			if (!segment_current(s, &h))
				return -ESTALE;
			if (r->cur + 1 < r->nsegs && r->segs[r->cur + 1].first_lsn == r->scan_lsn) {
				/* a segment read to its end is not held: the daemon may reuse it in place */
				reader_drop(r, r->cur++);
				r->off = JFORMAT_BLOCK;
				continue;
			}
			/*
			 * Durable records should follow but do not: a hole between segments, or a damaged
			 * record. At the end of what we hold, ask the daemon once before saying so.
			 */
			if (r->scan_lsn <= r->durable_lsn && (r->cur + 1 < r->nsegs || reloaded))
				return -EUCLEAN;
			r->cur = r->nsegs; /* what we hold is exhausted */
			continue;
		}
		if (rec.type != JREC_DATA) {
			r->off += jformat_rec_size(rec.len);
			continue;
		}
		if (rec.lsn > r->durable_lsn) {
			/* written, not yet synced: not to be returned before it is durable */
			r->cur = r->nsegs;
			continue;
		}
		r->off += jformat_rec_size(rec.len);
		r->scan_lsn++;
		if (rec.lsn < r->next_lsn)
			continue;
		r->started = true;
		r->next_lsn = rec.lsn + 1;
		*ret_lsn = rec.lsn;
		*ret_data = s->map + r->off - jformat_rec_size(rec.len) + JFORMAT_REC_HDR;
		*ret_len = rec.len;
		return 1;
	}
}

void hp_journal_reader_close(hp_journal_reader *r)
{
	if (!r)
		return;
	reader_unmap(r);
	free(r);
}
