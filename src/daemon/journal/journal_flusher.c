/* SPDX-License-Identifier: MIT */
/*
 * journal_flusher.c - a journal's flusher thread (one per journal, started by journal_open):
 * it takes what the writers appended to their rings, writes and syncs it in batches, and tells
 * the writers what is durable. Its loop:
 *
 *   gather   copy complete entries from every ring into the filling batch, giving LSNs, in
 *            passes over the writers with an equal share of the batch each per pass (fair);
 *   flush    submit the batch (header block too if it opens a segment) when the rule says so;
 *   sleep    in ppoll() on the daemon's own doorbell, the epoll set of the writers' doorbells
 *            (edge-triggered, never read) and the backend's completion eventfd, with need_wakeup
 *            raised in every ring so that appenders ring their doorbells, lowered again
 *            once awake (appends made while it works are gathered without a doorbell);
 *   publish  completed batches in submission order only: durable_lsn and each ring's durable
 *            position move to the end of the longest prefix of completed batches.
 *
 * Flush rule (the adaptive part; the idea is Artemis' adapting TimedBuffer, seed 004):
 *   - a lone writer (at most one ring active within the last two sync latencies) is flushed
 *     at once: it must not pay a time budget;
 *   - a batch that holds an entry from every active writer is flushed at once: nobody else is
 *     coming;
 *   - a batch that reached the size estimate (arrival rate x sync latency, measured) is flushed;
 *   - otherwise when the time budget (max_batch_delay, at most one sync latency) since its first
 *     record runs out.
 * At most JOURNAL_INFLIGHT batches are written at once: one syncs while the next fills. When the
 * active writers are no more than the CPUs, nobody needs to sleep: their batch is written and
 * synced inline, they spin for it (the hint in their rings) and the flusher for their next
 * appends (the inline-spin path; it looks less often while its looks find nothing). More
 * writers' batches go through the backend's queue, or, with backend = auto, inline on this
 * thread or through io_uring's queue beside libaio's when the path controller (journal_path.h)
 * measured that faster; their writers spin (yielding) too
 * while the batch needs no thread but this one (inline, libaio, sync), and sleep while io-wq's
 * workers write and sync it (spin_pays).
 *
 * It holds the journal's lock except while it sleeps, submits or reaps I/O (a backend may write
 * and sync inside either), writes a batch or a segment's header inline, saves
 * the truncation point, or yields while it looks for a few writers' next append (what the
 * lock guards: journal_internal.h): the event loop takes that lock for status, opens and
 * closes, and must never wait for a disk. A failed write or sync makes the journal read-only
 * (journal_fail).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/queue.h>
#include <unistd.h>

#include "jformat.h"
#include "jio.h"
#include "journal_internal.h"
#include "jring.h"
#include "log.h"
#include "util.h"

#define EWMA_ALPHA 0.2
#define FLUSHER_SPIN_NS 50000 /* how long the flusher looks for a few writers' next append */
#define FLUSHER_SPIN_SKIP_MAX 16 /* rounds without that look after misses in a row, at most */

/* --- batches ---------------------------------------------------------------------------- */

/* Space the filling batch may still use in the current segment. */
static size_t batch_room(const struct journal *j, const struct batch *b)
{
	uint64_t seg_left = j->cfg.segment_size - j->cur_off - b->len;
	/* under O_DIRECT keep room for the padding record that ends the batch on a block */
	uint64_t reserve = j->cfg.direct ? JFORMAT_REC_HDR : 0;
	uint64_t left = MIN((uint64_t)(b->cap - b->len), seg_left > reserve ? seg_left - reserve : 0);

	return (size_t)left;
}

void batch_reset(struct journal *j, struct batch *b)
{
	b->len = 0;
	b->nrefs = 0;
	b->nwaves = 0;
	b->first_lsn = b->end_lsn = j->next_lsn;
	b->t_first = 0;
	b->urgent = false;
	b->inflight = b->done = false;
	b->res = 0;
}

static int batch_add_ref(struct batch *b, struct journal_writer *w, uint64_t end)
{
	if (b->nrefs && b->refs[b->nrefs - 1].w == w) {
		b->refs[b->nrefs - 1].end = end;
		return 0;
	}
	if (ARRAY_RESERVE_ONE(b->refs, b->nrefs, b->refs_cap, 16) < 0)
		return -ENOMEM;
	b->refs[b->nrefs++] = (struct batch_ref){ w, end };
	w->refs++;
	return 0;
}

/* records more of b, taken at now (see struct batch_wave) */
static void batch_wave(struct batch *b, uint64_t now, uint64_t records)
{
	if (b->nwaves && (b->waves[b->nwaves - 1].t == now || b->nwaves == BATCH_WAVES))
		b->waves[b->nwaves - 1].records += records;
	else
		b->waves[b->nwaves++] = (struct batch_wave){ now, records };
}

static void writer_break(struct journal *j, struct journal_writer *w, const char *why)
{
	static struct log_ratelimit rl = LOG_RATELIMIT(10, 5);

	log_msg_ratelimited(&rl, LOG_WARNING,
			    "Journal '%s': writer of pid %d (uid %u) broke the ring protocol (%s); ignoring its "
			    "further records",
			    j->cfg.name, (int)w->pid, (unsigned)w->uid, why);
	w->broken = true;
	jring_set_error(w->hdr, -EPROTO);
	jring_wake(w->group->wake);
}

/* GATHER_SHARE: took its share of the batch for this pass and has more */
enum gather_result { GATHER_EMPTY, GATHER_MORE, GATHER_SHARE, GATHER_FULL };

/*
 * Copy complete entries of one ring into batch b while they fit and this pass's share of the
 * batch (share bytes; the first entry always may) is not used up. The client shares this memory
 * and may change it at any time: tail is read once here, each header once in jring_read_entry,
 * and only those copies are used.
 */
static enum gather_result gather_ring(struct journal *j, struct journal_writer *w, struct batch *b, uint64_t now,
				      uint64_t share)
{
	struct jring_view v = { w->data, w->size, w->max_entry };
	uint64_t tail = jring_load_tail(w->hdr), want, pos = w->head, start_len = b->len;
	enum gather_result res = GATHER_EMPTY;

	/* closed: what it had committed then is taken, nothing it appends afterwards (its client
	 * may go on writing to the ring, which would keep the writer from ever being freed) */
	if (w->closed) {
		tail = MIN(tail, w->end_tail);
		want = UINT64_MAX; /* nobody is left to ask for its lazy entries: they go now */
	}
	if (tail - pos > w->size || tail < pos) {
		writer_break(j, w, "tail out of range");
		return GATHER_EMPTY;
	}
	if (!w->closed)
		want = jring_take_want(w->hdr, tail, &w->want_seen);
	while (pos < tail && b->len - start_len < share) {
		uint64_t lsn = j->next_lsn;
		struct jring_read rd;
		const char *why;
		int r;

		r = jring_read_entry(&v, pos, tail, b->buf + b->len, batch_room(j, b), lsn,
				     j->segs[j->cur].generation, &rd, &why);
		if (r == -ENOSPC)
			return GATHER_FULL;
		if (r < 0) {
			writer_break(j, w, why);
			return res;
		}
		if (rd.count == 0) {
			pos = rd.end;
			continue;
		}
		if (batch_add_ref(b, w, rd.end) < 0)
			return GATHER_FULL; /* cannot track it: keep it out of the batch and retry later */
		/* the client reads its entry's first LSN here once the entry is durable */
		jring_set_lsn(w->data, w->size, pos, lsn);
		pos = rd.end;
		b->len += rd.disk;
		j->next_lsn += rd.count;
		if (!b->t_first)
			b->t_first = now;
		b->end_lsn = j->next_lsn;
		batch_wave(b, now, rd.count);
		j->st.appends += rd.count;
		j->st.bytes += rd.disk;
		w->head = pos;
		w->active_ns = now;
		w->in_batch = true;
		/* urgent unless it ends past what the client wants now (jring.h, lazy entries) */
		if (pos > want)
			w->lazy_end = pos;
		else
			b->urgent = true;
		res = GATHER_MORE;
	}
	/* the client now wants lazy entries of its already in the batch: they are urgent too */
	if (w->lazy_end && want >= w->lazy_end)
		b->urgent = true;
	/* a skip entry read last moves head too */
	w->head = pos;
	jring_set_head(w->hdr, w->head);
	return pos < tail ? GATHER_SHARE : res;
}

/*
 * Fill batch b fairly: in passes over the writers, each may add up to an equal share of the
 * batch per pass (at least one entry), while one had more than its share and entries fit. A
 * writer with large entries thus cannot keep the others out of a batch, whoever comes first.
 * Returns true when the batch is full.
 */
static bool gather_fair(struct journal *j, struct batch *b, uint64_t now)
{
	struct journal_writer *w;
	unsigned n = 0;
	uint64_t share;
	bool full = false, more = true;

	TAILQ_FOREACH(w, &j->writers, link)
		n += !w->broken;
	if (n == 0)
		return false;
	share = MAX(b->cap / n, (size_t)1);
	while (more && !full) {
		more = false;
		TAILQ_FOREACH(w, &j->writers, link) {
			enum gather_result g;

			if (w->broken)
				continue;
			g = gather_ring(j, w, b, now, share);
			full |= g == GATHER_FULL;
			more |= g == GATHER_SHARE;
		}
	}
	/* the next batch starts with the next writer: no one is always first */
	w = TAILQ_FIRST(&j->writers);
	TAILQ_REMOVE(&j->writers, w, link);
	TAILQ_INSERT_TAIL(&j->writers, w, link);
	return full;
}

/* End a batch under O_DIRECT on a block boundary with a padding record. */
static void batch_pad(struct journal *j, struct batch *b)
{
	uint64_t end = j->cur_off + b->len, target;

	if (!j->cfg.direct || end % JFORMAT_BLOCK == 0)
		return;
	target = (end + JFORMAT_REC_HDR + JFORMAT_BLOCK - 1) / JFORMAT_BLOCK * JFORMAT_BLOCK;
	jformat_rec_write(b->buf + b->len, j->next_lsn, j->segs[j->cur].generation, JREC_PAD, NULL,
			  (uint32_t)(target - end - JFORMAT_REC_HDR));
	b->len += target - end;
}

static void batch_completed(struct journal *j, struct batch *b, int res, uint64_t now)
{
	b->done = true;
	b->res = res;
	hist_add(&j->st.sync_ns, now - b->t_submit);
	proto_latency_add(&j->st.durability.write_sync, now - b->t_submit, 1);
	j->st.syncs++;
	j->ewma_sync_ns = j->ewma_sync_ns ? (1 - EWMA_ALPHA) * j->ewma_sync_ns + EWMA_ALPHA * (double)(now - b->t_submit)
					  : (double)(now - b->t_submit);
}

/* The jio queue of a queued path (jio_use_queue): queued-alt is auto's second, io_uring's. */
static unsigned queue_of(enum jpath path)
{
	return path == JPATH_QUEUED_ALT ? 1 : 0;
}

/* Count a batch under its path (journal_path.h) in the status figures. */
static void path_count(struct journal *j, enum jpath path)
{
	j->st.path = path;
	if (path == JPATH_INLINE_SPIN)
		j->st.inline_spin_batches++;
	else if (path == JPATH_INLINE)
		j->st.inline_batches++;
	else
		j->st.queued_batches++;
	if (path == JPATH_QUEUED_ALT)
		j->st.queued_alt_batches++;
}

/*
 * Send the filling batch to the disk by path (journal_path.h); writers: how many are open (the
 * load the path controller compares under). Inline (inline-spin or inline): write and sync it
 * here and now (jio_run), with nothing else in flight: no queue, no thread hop; the caller
 * publishes it at once. Queued: through the backend.
 */
static int batch_submit(struct journal *j, uint64_t now, enum jpath path, unsigned writers)
{
	struct batch *b = &j->batches[j->fill];
	int r;

	b->rec_len = b->len;
	batch_pad(j, b);
	b->seg = j->cur;
	b->off = j->cur_off;
	b->req = (struct jio_req){ .fd = j->segs[j->cur].fd, .niov = 1, .iov = { { b->buf, b->len, b->off } }, .data = b };
	b->t_submit = now;
	b->path = path;
	b->writers = writers;
	if (!jpath_queued(path)) {
		/*
		 * Without the lock: the event loop (status, opens, closes) must not wait for a disk.
		 * Nothing it may change meanwhile is used here: the batch, the segments and the LSN
		 * counter are the flusher's, and writers are only marked closed, never freed, by others.
		 */
		pthread_mutex_unlock(&j->lock);
		r = jio_run(j->io, &b->req);
		pthread_mutex_lock(&j->lock);
		batch_completed(j, b, r, now_ns());
	} else {
		/* without the lock too: the sync backend writes and syncs inside submit, and libaio's
		 * buffered writes happen inside io_submit */
		pthread_mutex_unlock(&j->lock);
		r = jio_use_queue(j->io, queue_of(path));
		if (r == 0)
			r = jio_submit(j->io, &b->req);
		pthread_mutex_lock(&j->lock);
		if (r < 0)
			return r;
	}
	b->inflight = true;
	path_count(j, path);
	j->cur_off += b->len;
	j->order[j->norder++] = j->fill;
	j->st.batches++;
	j->st.batch_sizes[proto_batch_bucket(b->end_lsn - b->first_lsn)]++;
	j->st.durability.batch_records += b->end_lsn - b->first_lsn;
	/* arrival rate: what this batch gathered since the previous submission */
	if (j->last_submit_ns && now > j->last_submit_ns) {
		double rate = (double)b->len / (double)(now - j->last_submit_ns);

		j->ewma_rate = j->ewma_rate ? (1 - EWMA_ALPHA) * j->ewma_rate + EWMA_ALPHA * rate : rate;
	}
	j->last_submit_ns = now;
	/* the next filling batch: a free one exists, at most JOURNAL_INFLIGHT are in flight */
	for (unsigned i = 0; i < NBATCH; i++)
		if (!j->batches[i].inflight) {
			j->fill = i;
			break;
		}
	batch_reset(j, &j->batches[j->fill]);
	return 0;
}

/* --- publish ---------------------------------------------------------------------------- */

static void wake_all(struct journal *j)
{
	struct wake_group *g;

	LIST_FOREACH(g, &j->groups, link)
		jring_wake(g->wake);
}

/* A write or sync failed (err): count it, and, the first time, make the journal read-only. */
static void journal_fail(struct journal *j, int err, const char *what)
{
	struct journal_writer *w;

	j->st.durability.io_errors++; /* every one, also those in flight with the first */
	if (j->st.state == JOURNAL_FAILED)
		return;
	j->st.state = JOURNAL_FAILED;
	j->st.error = err;
	snprintf(j->st.note, sizeof(j->st.note), "%s: %s", what, strerror(-err));
	log_error_errno(err, "Journal '%s' is read-only from now on: %s: %m (durable up to LSN %" PRIu64
			"; nothing after it was acknowledged)",
			j->cfg.name, what, j->durable_lsn);
	TAILQ_FOREACH(w, &j->writers, link)
		jring_set_error(w->hdr, err);
	wake_all(j);
}

/*
 * backend = auto: tell the path controller of a batch made durable, and log what it decides:
 * its first decision once (info), later changes at debug level and rate-limited, since under a
 * load where two paths are about as fast it may change every few seconds.
 */
static void path_published(struct journal *j, const struct batch *b, uint64_t now)
{
	static struct log_ratelimit rl = LOG_RATELIMIT(60, 5);
	enum jpath_event ev;
	char why[256];

	if (!j->adaptive)
		return;
	ev = jpath_published(&j->path, b->path, b->end_lsn - b->first_lsn, b->rec_len, b->writers, b->t_submit, now);
	if (ev == JPATH_SAME)
		return;
	journal_path_words(j, why, sizeof(why));
	if (ev == JPATH_FIRST)
		log_info("Journal '%s': batches of more writers than CPUs (%u) go %s", j->cfg.name, j->st.cpus, why);
	else
		log_msg_ratelimited(&rl, LOG_DEBUG, "Journal '%s': batches of more writers than CPUs now go %s",
				    j->cfg.name, why);
}

/*
 * Collect completions and publish the completed prefix, in submission order. The backend is
 * asked only when a request is in flight or its eventfd was seen readable (signalled):
 * an inline batch completes in batch_submit, and a look with nothing to find cost a failing
 * read of the eventfd (and, with libaio, io_getevents twice) twice per sync: 8.5k reads a
 * second at 8 producers of a broker (perf stat, docs/MEASURED.md "The flusher's looks for
 * completions").
 */
static void reap_and_publish(struct journal *j, uint64_t now, bool signalled)
{
	struct jio_req *req, *done[JIO_DEPTH];
	struct journal_writer *w;
	bool published = false;
	unsigned n = 0;

	if (j->io->inflight || signalled) {
		/* without the lock: libaio syncs inside reap */
		pthread_mutex_unlock(&j->lock);
		while (n < JIO_DEPTH && (req = jio_reap(j->io)))
			done[n++] = req;
		pthread_mutex_lock(&j->lock);
	}
	for (unsigned i = 0; i < n; i++)
		batch_completed(j, done[i]->data, done[i]->res, now);
	while (j->norder && j->batches[j->order[0]].done) {
		struct batch *b = &j->batches[j->order[0]];

		if (b->res < 0) {
			char what[96];

			snprintf(what, sizeof(what),
				 "writing or syncing %zu bytes at offset %" PRIu64 " of segment %u (%s) failed", b->len,
				 b->off, b->seg, jpath_name(b->path));
			journal_fail(j, b->res, what);
		} else if (j->st.state != JOURNAL_FAILED) {
			/* durable: its records and, through the ring positions, its writers' entries */
			j->durable_lsn = b->end_lsn - 1; /* the last durable LSN; 0 = none yet */
			for (unsigned i = 0; i < b->nrefs; i++)
				jring_set_durable(b->refs[i].w->hdr, j->durable_lsn, b->refs[i].end);
			for (unsigned i = 0; i < b->nwaves; i++)
				proto_latency_add(&j->st.durability.to_durable,
						  now > b->waves[i].t ? now - b->waves[i].t : 0, b->waves[i].records);
			published = true;
			path_published(j, b, now);
		}
		for (unsigned i = 0; i < b->nrefs; i++)
			b->refs[i].w->refs--;
		b->inflight = false;
		b->nrefs = 0;
		memmove(j->order, j->order + 1, --j->norder * sizeof(j->order[0]));
	}
	if (published) {
		j->st.durable_lsn = j->durable_lsn;
		/* positions first (a spinning client sees them now), wake-ups after the next submit */
		TAILQ_FOREACH(w, &j->writers, link)
			jring_set_durable_lsn(w->hdr, j->durable_lsn);
		j->wake_pending = true;
		jio_acked(j->io, j->durable_lsn);
	}
}

/* Wake the clients waiting for what was published: after submitting, off the critical path. */
static void wake_writers(struct journal *j)
{
	if (!j->wake_pending)
		return;
	j->wake_pending = false;
	wake_all(j);
}

/* --- the flush rule --------------------------------------------------------------------- */

/* Writers seen with data within the recent past: "is anyone else appending?" */
static unsigned active_writers(struct journal *j, uint64_t now, unsigned *ret_in_batch)
{
	uint64_t window = (uint64_t)MAX(2 * j->ewma_sync_ns, 1e6);
	struct journal_writer *w;
	unsigned n = 0, in = 0;

	TAILQ_FOREACH(w, &j->writers, link) {
		if (w->closed || w->broken || !w->active_ns || now - w->active_ns > window)
			continue;
		n++;
		in += w->in_batch;
	}
	*ret_in_batch = in;
	return n;
}

static uint64_t flush_budget_ns(const struct journal *j)
{
	uint64_t budget = j->cfg.max_batch_delay_ns;

	if (j->ewma_sync_ns > 0 && (uint64_t)j->ewma_sync_ns < budget)
		budget = (uint64_t)j->ewma_sync_ns;
	return budget;
}

/* Should the filling batch go now? Sets *ret_deadline when it should go later. */
static bool flush_due(struct journal *j, uint64_t now, uint64_t *ret_deadline)
{
	struct batch *b = &j->batches[j->fill];
	unsigned in_batch, active;
	double estimate;

	if (b->len == 0)
		return false;
	if (!b->urgent) {
		/* lazy entries only: they wait for one someone waits for, max_batch_delay at most */
		if (now >= b->t_first + j->cfg.max_batch_delay_ns)
			return true;
		*ret_deadline = b->t_first + j->cfg.max_batch_delay_ns;
		return false;
	}
	active = active_writers(j, now, &in_batch);
	if (active <= 1 || in_batch >= active)
		return true;
	estimate = j->ewma_rate * j->ewma_sync_ns;
	if (estimate >= JFORMAT_BLOCK && (double)b->len >= MIN(estimate, (double)j->cfg.max_batch_bytes))
		return true;
	if (now >= b->t_first + flush_budget_ns(j))
		return true;
	*ret_deadline = b->t_first + flush_budget_ns(j);
	return false;
}

static void writers_clear_batch_marks(struct journal *j)
{
	struct journal_writer *w;

	TAILQ_FOREACH(w, &j->writers, link) {
		w->in_batch = false;
		w->lazy_end = 0;
	}
}

/*
 * Whether the writers of a batch just submitted on path may wait for it by spinning: when they
 * are few (no more than the CPUs), or when the batch needs no CPU but this thread's while it is
 * in flight (written inline, or through a queue that writes and syncs on this thread: libaio's,
 * sync's). Then a writer that spins, yielding, keeps nobody off a CPU who needs one: its batch
 * is the flusher's, blocked in the kernel, and a woken writer or any other thread of the machine
 * runs the moment the spinner yields. Sleeping instead costs each writer a futex wait, a wake-up
 * and two switches per batch, on top of its sync. Through io_uring's queue the batch's writes
 * and sync run on io-wq workers, which do need CPUs: its writers sleep.
 * 8 writers x 100 B, page cache, auto (2 vCPUs): 34-38k -> 48-49k appends/s; 128 x 100 B:
 * 207k -> 315k; explicit io_uring at 128 writers lost a third with spinning writers.
 */
static bool spin_pays(const struct journal *j, enum jpath path, bool few)
{
	return few || !jpath_queued(path) || jio_on_caller(j->io);
}

/* Tell the writers whether waiting by spinning pays (spin_pays), and for how long at most (at
 * least a microsecond: 0 says sleep, also where syncs take less, as on a RAM disk). */
static void set_spin_hint(struct journal *j, bool spin)
{
	uint32_t us = spin ? (uint32_t)MAX(1.0, MIN(2 * j->ewma_sync_ns / 1000, (double)JRING_SPIN_MAX_US)) : 0;
	struct journal_writer *w;

	TAILQ_FOREACH(w, &j->writers, link)
		jring_set_spin(w->hdr, us);
}

/*
 * After serving a few writers: their next append usually follows within microseconds, and
 * looking for it spares them a doorbell and us a wake-up. Not always: a writer that appends
 * once per round trip to its own client (a broker's producer) comes back after a millisecond,
 * and a spin that finds nothing is FLUSHER_SPIN_NS of a CPU taken from that writer's process.
 * So spinning backs off as adaptive mutexes do: after a spin that found nothing, the next
 * spin_skip rounds sleep at once, spin_skip doubling with each miss in a row up to
 * FLUSHER_SPIN_SKIP_MAX rounds (the spin after them probes whether spinning pays again); a
 * spin that finds an append has every round spin again.
 */
static bool spin_for_append(struct journal *j)
{
	uint64_t until;

	if (j->spin_skip_left) {
		j->spin_skip_left--;
		j->st.spins_skipped++;
		return false;
	}
	j->st.spins++;
	until = now_ns() + FLUSHER_SPIN_NS;
	do {
		struct journal_writer *w;

		TAILQ_FOREACH(w, &j->writers, link)
			if (!w->broken && jring_load_tail(w->hdr) != w->head) {
				j->spin_skip = 0;
				j->st.spins_found++;
				return true;
			}
		/* yield, not pause: the writer may be queued on our CPU; and let the event loop in */
		pthread_mutex_unlock(&j->lock);
		sched_yield();
		pthread_mutex_lock(&j->lock);
	} while (now_ns() < until);
	j->spin_skip = j->spin_skip ? MIN(2 * j->spin_skip, FLUSHER_SPIN_SKIP_MAX) : 1;
	j->spin_skip_left = j->spin_skip;
	return false;
}

/* --- the loop --------------------------------------------------------------------------- */

/*
 * Gather and submit as the rule says. Returns the deadline to wake up at (0 = none). Stopping,
 * it gathers nothing more and submits what the filling batch took: a clean stop writes every
 * record it gave an LSN (the clean marker records the next LSN, and a record taken from a
 * ring has one).
 */
static uint64_t gather_and_flush(struct journal *j, uint64_t now)
{
	uint64_t deadline = 0;

	for (;;) {
		struct batch *b = &j->batches[j->fill];
		bool full;

		if (j->st.state == JOURNAL_FAILED)
			return 0;
		if (j->stop && b->len == 0)
			return 0;
		full = j->stop ? false : gather_fair(j, b, now);
		if (full && b->len == 0) {
			int r;

			/*
			 * Nothing fits what is left of this segment: open the next one, but only once
			 * every batch written into this one has completed. A sync covers nothing of
			 * another file, and a power loss must never leave the next segment on the disk
			 * without all that comes before it (recovery would see a hole there).
			 */
			if (j->norder)
				return 0; /* a completion wakes us */
			r = segment_start(j);
			if (r < 0 && r != -ENOSPC) {
				journal_fail(j, r, "writing the header of the next segment failed");
				return 0;
			}
			if (r == -ENOSPC) {
				if (j->st.state != JOURNAL_FULL)
					log_warning("Journal '%s' is full: every segment holds records after the "
						    "truncation point (LSN %" PRIu64 "); appends wait for a truncate",
						    j->cfg.name, j->retain_lsn);
				j->st.state = JOURNAL_FULL;
				return 0;
			}
			j->st.state = JOURNAL_OK;
			b->first_lsn = b->end_lsn = j->next_lsn;
			continue;
		}
		if (j->norder >= JOURNAL_INFLIGHT)
			return 0; /* a completion wakes us */
		if (!(full || j->stop || flush_due(j, now, &deadline)))
			return deadline;
		{
			unsigned in_batch, active = active_writers(j, now, &in_batch);
			/*
			 * Few writers, no more than the CPUs, and nothing in flight: write inline and
			 * let them spin, so that no one sleeps. A futex wake-up and the switch back
			 * cost a woken writer about as much as its sync on a small VM; spinning
			 * (yielding) writers keep no other writer off a CPU while they fit the CPUs.
			 * 2 writers x 100 B: 10.3k -> 17.3k appends/s (limit ~20k), 3 runs each.
			 * More writers spin too where their batch needs no other thread (spin_pays).
			 */
			bool few = j->norder == 0 && active <= j->st.cpus && !(j->adaptive && jpath_forced(&j->path));
			enum jpath path = few ? JPATH_INLINE_SPIN : JPATH_QUEUED;

			if (!few && j->adaptive) {
				path = jpath_next(&j->path);
				/*
				 * More writers (who sleep), backend = auto: inline, queued or queued-alt,
				 * as the controller measured. Inline only with nothing in flight, as for a
				 * few writers, and a change of queue too: a queue's sync covers only its
				 * own writes (jio_use_queue). What is acknowledged stays in LSN order
				 * whichever way each batch goes, since batches are published strictly in
				 * submission order (an inline batch done first would wait in `order`
				 * behind the queued ones); starting inline on an empty pipeline keeps what
				 * inline is for: the batch is published the moment its sync returns, with
				 * no completion to wait for, and its fdatasync comes after every earlier
				 * write to the file is done, so a change of path is a full barrier, as a
				 * segment switch is. Until then the batch goes on filling.
				 */
				if (j->norder && (path == JPATH_INLINE || queue_of(path) != jio_queue_current(j->io)))
					return 0; /* a completion wakes us */
			}
			if (batch_submit(j, now, path, j->nwriters) < 0) {
				journal_fail(j, -EIO, "submitting a batch failed");
				return 0;
			}
			set_spin_hint(j, spin_pays(j, path, few));
			j->few_recent = few;
			if (!jpath_queued(path))
				reap_and_publish(j, now_ns(), false);
		}
		writers_clear_batch_marks(j);
		if (!full)
			return 0;
	}
}

/* Free writers whose client left, once what they had committed at their close is taken and no
 * batch in flight refers to them. */
static void reap_writers(struct journal *j)
{
	struct journal_writer *w, *next;

	for (w = TAILQ_FIRST(&j->writers); w; w = next) {
		next = TAILQ_NEXT(w, link);
		/* a failed journal takes nothing more: its closed writers have nothing left to give */
		if (!w->closed || w->refs || (!w->broken && w->head < w->end_tail && j->st.state != JOURNAL_FAILED))
			continue;
		TAILQ_REMOVE(&j->writers, w, link);
		j->nwriters--;
		j->st.writers = j->nwriters;
		writer_free(w);
	}
}

/* Before sleeping: ask appenders to ring; false if one appended meanwhile (do not sleep). */
static bool arm_wakeups(struct journal *j, bool want)
{
	struct journal_writer *w;
	bool quiet = true;

	/* the daemon's half of the handshake in jring.h (a broken ring is never looked at again) */
	TAILQ_FOREACH(w, &j->writers, link)
		if (!jring_arm(w->hdr, want && !w->broken, w->head, w->lazy_end, &w->want_seen))
			quiet = false;
	return quiet;
}

void *flusher_main(void *arg)
{
	struct journal *j = arg;
	/* before anything is written: the clean-stop marker's removal durable (journal_marker_sync;
	 * here, not in recovery, so that a take-over's clients do not wait for it) */
	int r = journal_marker_sync(j);
	bool durable, signalled = true; /* the backend's eventfd, as the last ppoll saw it */

	pthread_mutex_lock(&j->lock);
	if (r < 0)
		journal_fail(j, r, "syncing the directory after the clean-stop marker's removal");
	for (;;) {
		uint64_t now = now_ns(), deadline;
		struct pollfd pfd[3] = { { .fd = j->doorbell, .events = POLLIN },
					 { .fd = j->io->efd, .events = POLLIN },
					 { .fd = j->epfd, .events = POLLIN } };
		struct timespec ts, *timeout = NULL;
		bool can_submit, sleep_ok = true;

		reap_and_publish(j, now, signalled);
		signalled = false;
		reap_writers(j);
		if (j->retain_dirty) {
			uint64_t lsn = j->retain_lsn;

			j->retain_dirty = false;
			pthread_mutex_unlock(&j->lock);
			retain_persist(j, lsn);
			pthread_mutex_lock(&j->lock);
		}
		if (j->stop && j->norder == 0 &&
		    (j->batches[j->fill].len == 0 || j->st.state == JOURNAL_FAILED))
			break;
		deadline = gather_and_flush(j, now);
		wake_writers(j);
		/* a batch written inline has dropped its writers' references by now */
		reap_writers(j);
		/* stopping with nothing in flight: the batch it filled is written, go and end */
		if (j->stop && j->norder == 0)
			continue;
		/* a full or failed journal cannot take what waits in a ring: looking for it would spin */
		if (!deadline && j->few_recent && j->norder == 0 && !j->stop && j->st.state == JOURNAL_OK &&
		    spin_for_append(j))
			continue;
		/* a full or failed journal can do nothing with new appends: sleep until a truncate
		 * (which rings the doorbell) or a completion */
		can_submit = j->norder < JOURNAL_INFLIGHT && j->st.state == JOURNAL_OK && !j->stop;
		/* appenders need to ring only when we could act on it */
		sleep_ok = arm_wakeups(j, can_submit);
		if (!sleep_ok)
			continue;
		if (deadline) {
			/* budgets are often below a millisecond: sleep with nanosecond precision */
			uint64_t left;

			now = now_ns();
			left = deadline > now ? deadline - now : 0;
			ts = (struct timespec){ (time_t)(left / 1000000000u), (long)(left % 1000000000u) };
			timeout = &ts;
		}
		pthread_mutex_unlock(&j->lock);
		if (!timeout || timeout->tv_sec || timeout->tv_nsec)
			ppoll(pfd, 3, timeout, NULL);
		signalled = pfd[1].revents & POLLIN;
		if (pfd[0].revents & POLLIN) {
			uint64_t v;

			if (read(j->doorbell, &v, sizeof(v)) < 0) {
				/* EAGAIN: another wake-up took it */
			}
		}
		if (pfd[2].revents & POLLIN) {
			/* writers rang: take the events (which writer does not matter, gather looks at all) */
			struct epoll_event ev[64];

			while (epoll_wait(j->epfd, ev, ARRAY_SIZE(ev), 0) == (int)ARRAY_SIZE(ev))
				;
		}
		pthread_mutex_lock(&j->lock);
		/*
		 * Awake: appenders need not ring until we arm again before the next sleep (as an
		 * io_uring SQPOLL thread clears its NEED_WAKEUP flag). Left raised, every append of
		 * a busy journal wrote its doorbell: 0.97 eventfd writes per append at 64 writers.
		 */
		arm_wakeups(j, false);
	}
	wake_writers(j);
	arm_wakeups(j, false);
	durable = j->mark_durable;
	pthread_mutex_unlock(&j->lock);
	/* here, not after the join: a stop asked early (journal_stop_begin) has it written while the
	 * event loop finishes its own stop */
	clean_mark(j, durable);
	return NULL;
}
