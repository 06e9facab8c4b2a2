/* SPDX-License-Identifier: MIT */
/*
 * journal.c - see journal.h. The flusher thread's loop:
 *
 *   gather   copy complete entries from every ring into the filling batch, giving LSNs, in
 *            passes over the writers with an equal share of the batch each per pass (fair);
 *   flush    submit the batch (header block too if it opens a segment) when the rule says so;
 *   sleep    in ppoll() on the daemon's own doorbell, the epoll set of the writers' doorbells
 *            (edge-triggered, never read) and the backend's completion eventfd, with need_wakeup
 *            raised in every ring so that appenders ring their doorbells;
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
 * At most JOURNAL_INFLIGHT batches are written at once: one syncs while the next fills.
 *
 * Locking: `lock` guards the writer list, state, counters and retain_lsn; the flusher holds it
 * while it gathers and publishes, and drops it while it sleeps. Segment bookkeeping, batches
 * and the LSN counter belong to the flusher alone (journal_read_segments reads them under the
 * lock, which the flusher holds whenever it changes them).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/queue.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "jformat.h"
#include "jio.h"
#include "journal.h"
#include "jring.h"
#include "log.h"
#include "size.h"
#include "util.h"

#define JOURNAL_INFLIGHT 2
#define NBATCH (JOURNAL_INFLIGHT + 1)
#define WRITERS_MAX 1024 /* per journal */
#define EWMA_ALPHA 0.2
#define SPIN_MAX_US 1000 /* the most a lone writer is told to spin for its sync */
#define FLUSHER_SPIN_NS 50000 /* how long the flusher looks for a lone writer's next append */

struct segment {
	int fd;
	int ro_fd; /* the same file read-only: readers get copies, nothing is reopened by name */
	uint64_t generation; /* 0: never used */
	uint64_t first_lsn;
	uint64_t end_lsn; /* after its last record; for the current segment see j->next_lsn */
};

struct journal_writer {
	struct journal *j;
	struct jring_hdr *hdr; /* the shared mapping: header page then data */
	uint8_t *data;
	uint64_t size, map_len;
	uint64_t head; /* consumed, the daemon's own copy (the shared one is only informative) */
	uint64_t max_entry; /* disk bytes of one entry: our copy, the client can write the header */
	int doorbell; /* its eventfd, in the flusher's epoll set; shared with its client */
	struct wake_group *group; /* the wake page of its uid's writers of this journal */
	uid_t uid;
	pid_t pid;
	bool closed; /* under lock: its client is gone; freed once no batch refers to it */
	bool broken; /* its ring broke the protocol: consumed no further */
	unsigned refs; /* batches in flight that will publish into it (flusher only) */
	uint64_t active_ns; /* when it last had something to gather */
	bool in_batch; /* contributed to the filling batch */
	TAILQ_ENTRY(journal_writer) link;
};

/*
 * The wake page of one uid's writers of a journal. Writers of one uid share it, so one
 * FUTEX_WAKE wakes all of them (a publish covers many writers: one wake-up per uid, not per
 * writer); writers of different uids never share one, so what a client scribbles on its page
 * delays only its own uid, which can do worse to itself anyway.
 */
struct wake_group {
	uid_t uid;
	unsigned refs; /* writers using it */
	int fd; /* the memfd, duplicated for each writer's client */
	struct jring_wake *wake;
	LIST_ENTRY(wake_group) link;
};

struct batch_ref {
	struct journal_writer *w;
	uint64_t end; /* ring position durable once this batch is */
};

struct batch {
	uint8_t *buf; /* aligned, cap bytes */
	size_t cap, len;
	uint8_t *hdr_block; /* JFORMAT_BLOCK aligned bytes: the segment header when opening one */
	bool with_header;
	unsigned seg;
	uint64_t off; /* file offset of buf[0] */
	uint64_t first_lsn, end_lsn;
	uint64_t t_first, t_submit;
	struct batch_ref *refs;
	unsigned nrefs, refs_cap;
	bool inflight, done;
	int res;
	struct jio_req req;
};

struct journal {
	struct config_journal cfg;
	int dirfd;
	struct segment *segs;
	unsigned cur; /* segment being written */
	uint64_t cur_off; /* next write offset in it */
	bool cur_fresh; /* the next batch opens segment cur: write its header */
	uint64_t next_lsn, durable_lsn, max_gen;
	struct jio *io;
	int doorbell; /* the daemon's own: closes, truncates, stop; never handed out */
	int epfd; /* the writers' doorbells, edge-triggered: never read or written by the daemon */
	pthread_t thread;
	bool thread_started;
	pthread_mutex_t lock;
	TAILQ_HEAD(, journal_writer) writers;
	unsigned nwriters;
	LIST_HEAD(, wake_group) groups; /* under lock; created by the event loop only */
	struct batch batches[NBATCH];
	unsigned fill; /* index of the filling batch */
	unsigned order[NBATCH], norder; /* in-flight batches, oldest first */
	/* the adaptive estimate (flusher only) */
	double ewma_sync_ns, ewma_rate; /* bytes per ns */
	uint64_t last_submit_ns;
	bool wake_pending; /* published since the last wake_writers (flusher only) */
	bool lone_recent; /* the last batch served a lone writer (flusher only) */
	/* under lock */
	bool stop;
	uint64_t retain_lsn;
	bool retain_dirty; /* retain_lsn changed since it was last written to NAME.retain */
	struct journal_stats st;
};

const char *journal_state_name(enum journal_state s)
{
	static const char *const names[] = { "ok", "full", "failed" };

	return s < ARRAY_SIZE(names) ? names[s] : "?";
}

const char *journal_name(const struct journal *j)
{
	return j->cfg.name;
}

static void segment_path(const struct journal *j, unsigned i, char *buf, size_t len)
{
	snprintf(buf, len, "%s-%03u.seg", j->cfg.name, i);
}

/* --- rings ------------------------------------------------------------------------------ */

static void futex_wake(uint32_t *addr)
{
	syscall(SYS_futex, addr, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/*
 * Bump a uid's wake word; one FUTEX_WAKE wakes its sleeping threads, none is made when its
 * clients say nobody sleeps (if they lie, they only miss their own wake-ups).
 */
static void wake_group(struct wake_group *g)
{
	__atomic_fetch_add(&g->wake->futex, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&g->wake->waiters, __ATOMIC_SEQ_CST))
		futex_wake(&g->wake->futex);
}

static void wake_all(struct journal *j)
{
	struct wake_group *g;

	LIST_FOREACH(g, &j->groups, link)
		wake_group(g);
}

/* A sealed memfd of len bytes mapped shared: the ring or the wake page. */
static int shared_memfd(const char *name, uint64_t len, void **ret_map)
{
	_cleanup_close_ int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	void *map;

	if (fd < 0)
		return -errno;
	/* the client may write it, never grow or shrink it under our mapping */
	if (ftruncate(fd, (off_t)len) < 0 || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
		return -errno;
	map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		return -errno;
	*ret_map = map;
	return TAKE_FD(fd);
}

/* A writer's reference to its uid's wake group, found or made (event loop thread). */
static int group_get(struct journal *j, uid_t uid, struct wake_group **ret)
{
	struct wake_group *g;
	char name[64];
	void *map;
	int fd;

	pthread_mutex_lock(&j->lock);
	LIST_FOREACH(g, &j->groups, link)
		if (g->uid == uid) {
			g->refs++;
			break;
		}
	pthread_mutex_unlock(&j->lock);
	if (g) {
		*ret = g;
		return 0;
	}
	/* only the event loop makes groups: nobody adds this uid's while the lock is let go */
	g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	snprintf(name, sizeof(name), "hugepool-journal-wake:%s", j->cfg.name);
	fd = shared_memfd(name, JRING_WAKE_SIZE, &map);
	if (fd < 0) {
		free(g);
		return fd;
	}
	*g = (struct wake_group){ .uid = uid, .refs = 1, .fd = fd, .wake = map };
	pthread_mutex_lock(&j->lock);
	LIST_INSERT_HEAD(&j->groups, g, link);
	pthread_mutex_unlock(&j->lock);
	*ret = g;
	return 0;
}

/* Under lock, or with the flusher stopped: the flusher walks the groups to wake them. */
static void group_put(struct wake_group *g)
{
	if (--g->refs)
		return;
	LIST_REMOVE(g, link);
	munmap(g->wake, JRING_WAKE_SIZE);
	close(g->fd);
	free(g);
}

static void writer_free(struct journal_writer *w)
{
	if (w->doorbell >= 0) {
		/* the client still holds the eventfd: its registration would outlive our fd */
		epoll_ctl(w->j->epfd, EPOLL_CTL_DEL, w->doorbell, NULL);
		close(w->doorbell);
	}
	if (w->group)
		group_put(w->group);
	if (w->hdr)
		munmap(w->hdr, w->map_len);
	free(w);
}

int journal_writer_new(struct journal *j, uid_t uid, pid_t pid, uint64_t ring_size,
		       struct journal_writer **ret, int *ret_ring_fd, int *ret_doorbell_fd, int *ret_wake_fd)
{
	_cleanup_close_ int ring_fd = -1, wake_fd = -1, doorbell_fd = -1;
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET };
	struct journal_writer *w;
	char name[64];
	void *map;
	int r = 0;

	if (ring_size == 0)
		ring_size = j->cfg.ring_size;
	if (ring_size < JRING_MIN_SIZE || ring_size > JRING_MAX_SIZE || (ring_size & (ring_size - 1)))
		return -EINVAL;
	pthread_mutex_lock(&j->lock);
	if (j->nwriters >= WRITERS_MAX)
		r = -EUSERS;
	else if (j->st.state == JOURNAL_FAILED)
		r = j->st.error;
	pthread_mutex_unlock(&j->lock);
	if (r < 0)
		return r;

	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->j = j;
	w->doorbell = -1;
	r = group_get(j, uid, &w->group);
	if (r < 0)
		goto out_free;
	snprintf(name, sizeof(name), "hugepool-journal:%s", j->cfg.name);
	ring_fd = shared_memfd(name, JRING_HDR_SIZE + ring_size, &map);
	if (ring_fd < 0) {
		r = ring_fd;
		goto out_free;
	}
	w->hdr = map;
	w->map_len = JRING_HDR_SIZE + ring_size;
	wake_fd = fcntl(w->group->fd, F_DUPFD_CLOEXEC, 0);
	if (wake_fd < 0) {
		r = -errno;
		goto out_free;
	}
	/*
	 * The doorbell: only this writer's client can ring it, drain it or change its flags, and
	 * the daemon never reads or writes it (edge-triggered epoll sees every write), so whatever
	 * the client does to it delays nobody else and cannot block the flusher.
	 */
	w->doorbell = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (w->doorbell < 0 || epoll_ctl(j->epfd, EPOLL_CTL_ADD, w->doorbell, &ev) < 0) {
		r = -errno;
		if (w->doorbell >= 0)
			close(w->doorbell);
		w->doorbell = -1;
		goto out_free;
	}
	doorbell_fd = fcntl(w->doorbell, F_DUPFD_CLOEXEC, 0);
	if (doorbell_fd < 0) {
		r = -errno;
		goto out_free;
	}
	w->data = (uint8_t *)w->hdr + JRING_HDR_SIZE;
	w->size = ring_size;
	w->uid = uid;
	w->pid = pid;
	w->hdr->magic = JRING_MAGIC;
	w->hdr->version = 1;
	w->hdr->size = ring_size;
	w->hdr->max_record = JFORMAT_RECORD_MAX;
	/* an entry's records must fit one batch on disk (the padding record included) */
	w->max_entry = j->cfg.max_batch_bytes - (j->cfg.direct ? JFORMAT_REC_HDR : 0);
	w->hdr->max_entry = w->max_entry;

	/* the flusher may be asleep already: until it says otherwise, appenders must ring */
	w->hdr->need_wakeup = 1;
	pthread_mutex_lock(&j->lock);
	w->hdr->durable_lsn = j->durable_lsn;
	/* the journal may have failed since the check above: journal_fail marked only the rings it
	 * knew, so this one learns it here, under the same lock */
	if (j->st.state == JOURNAL_FAILED)
		w->hdr->error = j->st.error;
	TAILQ_INSERT_TAIL(&j->writers, w, link);
	j->nwriters++;
	j->st.writers = j->nwriters;
	pthread_mutex_unlock(&j->lock);
	*ret = w;
	*ret_ring_fd = TAKE_FD(ring_fd);
	*ret_doorbell_fd = TAKE_FD(doorbell_fd);
	*ret_wake_fd = TAKE_FD(wake_fd);
	return 0;
out_free:
	if (w->group) {
		/* the flusher walks the groups: let go of ours under its lock */
		pthread_mutex_lock(&j->lock);
		group_put(w->group);
		pthread_mutex_unlock(&j->lock);
		w->group = NULL;
	}
	writer_free(w);
	return r;
}

void journal_writer_close(struct journal_writer *w)
{
	struct journal *j = w->j;
	uint64_t one = 1;

	pthread_mutex_lock(&j->lock);
	w->closed = true;
	pthread_mutex_unlock(&j->lock);
	/* let the flusher take what was committed and free the ring */
	if (write(j->doorbell, &one, sizeof(one)) < 0) {
		/* the counter is far from overflowing */
	}
}

uint64_t journal_writer_ring_size(const struct journal_writer *w)
{
	return w->size;
}

/* --- segments ----------------------------------------------------------------------------- */

static bool segment_reusable(const struct journal *j, unsigned i)
{
	const struct segment *s = &j->segs[i];

	return s->generation == 0 || s->end_lsn <= j->retain_lsn || j->cfg.recycle;
}

/* Move to the next segment for the next batch; false when it still holds needed records. */
static bool segment_advance(struct journal *j)
{
	unsigned next = (j->cur + 1) % j->cfg.segments;

	if (!segment_reusable(j, next))
		return false;
	j->segs[j->cur].end_lsn = j->next_lsn;
	j->cur = next;
	j->segs[next].generation = ++j->max_gen;
	j->segs[next].first_lsn = j->next_lsn;
	j->segs[next].end_lsn = j->next_lsn;
	j->cur_off = JFORMAT_BLOCK;
	j->cur_fresh = true;
	return true;
}

/* Space the filling batch may still use in the current segment. */
static size_t batch_room(const struct journal *j, const struct batch *b)
{
	uint64_t seg_left = j->cfg.segment_size - j->cur_off - b->len;
	/* under O_DIRECT keep room for the padding record that ends the batch on a block */
	uint64_t reserve = j->cfg.direct ? JFORMAT_REC_HDR : 0;
	uint64_t left = MIN((uint64_t)(b->cap - b->len), seg_left > reserve ? seg_left - reserve : 0);

	return (size_t)left;
}

/* --- batches ------------------------------------------------------------------------------ */

static void batch_reset(struct journal *j, struct batch *b)
{
	b->len = 0;
	b->nrefs = 0;
	b->with_header = false;
	b->first_lsn = b->end_lsn = j->next_lsn;
	b->t_first = 0;
	b->inflight = b->done = false;
	b->res = 0;
}

static int batch_add_ref(struct batch *b, struct journal_writer *w, uint64_t end)
{
	if (b->nrefs && b->refs[b->nrefs - 1].w == w) {
		b->refs[b->nrefs - 1].end = end;
		return 0;
	}
	if (b->nrefs == b->refs_cap) {
		unsigned cap = b->refs_cap ? b->refs_cap * 2 : 16;
		struct batch_ref *n = realloc(b->refs, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		b->refs = n;
		b->refs_cap = cap;
	}
	b->refs[b->nrefs++] = (struct batch_ref){ w, end };
	w->refs++;
	return 0;
}

static void writer_break(struct journal *j, struct journal_writer *w, const char *why)
{
	log_warning("Journal '%s': writer of pid %d (uid %u) broke the ring protocol (%s); ignoring its "
		    "further records",
		    j->cfg.name, (int)w->pid, (unsigned)w->uid, why);
	w->broken = true;
	__atomic_store_n(&w->hdr->error, -EPROTO, __ATOMIC_RELEASE);
	wake_group(w->group);
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
	uint64_t tail = jring_load_tail(w->hdr), pos = w->head, start_len = b->len;
	enum gather_result res = GATHER_EMPTY;

	if (tail - pos > w->size || tail < pos) {
		writer_break(j, w, "tail out of range");
		return GATHER_EMPTY;
	}
	while (pos < tail && b->len - start_len < share) {
		uint64_t off = pos & (w->size - 1), lsn = j->next_lsn;
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
		__atomic_store_n((uint64_t *)(w->data + off + offsetof(struct jring_entry, lsn)), lsn,
				 __ATOMIC_RELAXED);
		pos = rd.end;
		b->len += rd.disk;
		j->next_lsn += rd.count;
		if (!b->t_first)
			b->t_first = now;
		b->end_lsn = j->next_lsn;
		j->st.appends += rd.count;
		j->st.bytes += rd.disk;
		w->head = pos;
		w->active_ns = now;
		w->in_batch = true;
		res = GATHER_MORE;
	}
	/* a skip entry read last moves head too */
	w->head = pos;
	__atomic_store_n(&w->hdr->head, w->head, __ATOMIC_RELEASE);
	return pos < tail ? GATHER_SHARE : res;
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
	j->st.syncs++;
	j->ewma_sync_ns = j->ewma_sync_ns ? (1 - EWMA_ALPHA) * j->ewma_sync_ns + EWMA_ALPHA * (double)(now - b->t_submit)
					  : (double)(now - b->t_submit);
}

/*
 * Send the filling batch to the disk. inline_io: write and sync it here and now (jio_run), for a
 * lone writer with nothing else in flight: no queue, no thread hop; it is published at once.
 */
static int batch_submit(struct journal *j, uint64_t now, bool inline_io)
{
	struct batch *b = &j->batches[j->fill];
	struct segment *s = &j->segs[j->cur];
	unsigned n = 0;
	int r;

	batch_pad(j, b);
	b->seg = j->cur;
	b->off = j->cur_off;
	b->req = (struct jio_req){ .fd = s->fd, .data = b };
	if (j->cur_fresh) {
		struct jformat_seg_hdr h;

		jformat_seg_hdr_init(&h, j->cfg.name, s->generation, s->first_lsn, j->cfg.segment_size,
				     realtime_ns());
		memset(b->hdr_block, 0, JFORMAT_BLOCK);
		memcpy(b->hdr_block, &h, sizeof(h));
		b->req.iov[n++] = (struct jio_iov){ b->hdr_block, JFORMAT_BLOCK, 0 };
		b->with_header = true;
		j->cur_fresh = false;
	}
	b->req.iov[n++] = (struct jio_iov){ b->buf, b->len, b->off };
	b->req.niov = n;
	b->t_submit = now;
	if (inline_io) {
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
		r = jio_submit(j->io, &b->req);
		if (r < 0)
			return r;
	}
	b->inflight = true;
	j->cur_off += b->len;
	j->order[j->norder++] = j->fill;
	j->st.batches++;
	hist_add(&j->st.batch_records, b->end_lsn - b->first_lsn);
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

static void journal_fail(struct journal *j, int err, const char *what)
{
	struct journal_writer *w;

	if (j->st.state == JOURNAL_FAILED)
		return;
	j->st.state = JOURNAL_FAILED;
	j->st.error = err;
	snprintf(j->st.note, sizeof(j->st.note), "%s: %s", what, strerror(-err));
	log_error("Journal '%s' is read-only from now on: %s: %s (durable up to LSN %" PRIu64
		  "; nothing after it was acknowledged)",
		  j->cfg.name, what, strerror(-err), j->durable_lsn);
	TAILQ_FOREACH(w, &j->writers, link)
		__atomic_store_n(&w->hdr->error, err, __ATOMIC_RELEASE);
	wake_all(j);
}

/* Collect completions and publish the completed prefix, in submission order. */
static void reap_and_publish(struct journal *j, uint64_t now)
{
	struct jio_req *req;
	struct journal_writer *w;
	bool published = false;

	while ((req = jio_reap(j->io)))
		batch_completed(j, req->data, req->res, now);
	while (j->norder && j->batches[j->order[0]].done) {
		struct batch *b = &j->batches[j->order[0]];

		if (b->res < 0) {
			char what[96];

			snprintf(what, sizeof(what), "writing or syncing %zu bytes at offset %" PRIu64 " of segment %u failed",
				 b->len, b->off, b->seg);
			journal_fail(j, b->res, what);
		} else if (j->st.state != JOURNAL_FAILED) {
			/* durable: its records and, through the ring positions, its writers' entries */
			j->durable_lsn = b->end_lsn - 1; /* the last durable LSN; 0 = none yet */
			for (unsigned i = 0; i < b->nrefs; i++) {
				/* the LSN first: a client that sees its position may ask for the LSN at once */
				__atomic_store_n(&b->refs[i].w->hdr->durable_lsn, j->durable_lsn, __ATOMIC_RELEASE);
				__atomic_store_n(&b->refs[i].w->hdr->durable, b->refs[i].end, __ATOMIC_RELEASE);
			}
			published = true;
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
			__atomic_store_n(&w->hdr->durable_lsn, j->durable_lsn, __ATOMIC_RELEASE);
		j->wake_pending = true;
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

	TAILQ_FOREACH(w, &j->writers, link)
		w->in_batch = false;
}

/* Tell the writers whether waiting by spinning pays: only when one of them is alone. */
static void set_spin_hint(struct journal *j, bool lone)
{
	uint32_t us = lone ? (uint32_t)MIN(2 * j->ewma_sync_ns / 1000, (double)SPIN_MAX_US) : 0;
	struct journal_writer *w;

	TAILQ_FOREACH(w, &j->writers, link)
		__atomic_store_n(&w->hdr->spin_us, us, __ATOMIC_RELAXED);
}

/* After serving a lone writer: its next append usually follows within microseconds. */
static bool spin_for_append(struct journal *j)
{
	uint64_t until = now_ns() + FLUSHER_SPIN_NS;

	do {
		struct journal_writer *w;

		TAILQ_FOREACH(w, &j->writers, link)
			if (!w->broken && jring_load_tail(w->hdr) != w->head)
				return true;
		/* yield, not pause: the writer may be queued on our CPU; and let the event loop in */
		pthread_mutex_unlock(&j->lock);
		sched_yield();
		pthread_mutex_lock(&j->lock);
	} while (now_ns() < until);
	return false;
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

/* Gather and submit as the rule says. Returns the deadline to wake up at (0 = none). */
static uint64_t gather_and_flush(struct journal *j, uint64_t now)
{
	uint64_t deadline = 0;

	for (;;) {
		struct batch *b = &j->batches[j->fill];
		bool full;

		if (j->st.state == JOURNAL_FAILED)
			return 0;
		full = gather_fair(j, b, now);
		if (full && b->len == 0) {
			/* nothing fits what is left of this segment: open the next one */
			if (!segment_advance(j)) {
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
		if (!(full || flush_due(j, now, &deadline)))
			return deadline;
		{
			unsigned in_batch;
			bool lone = j->norder == 0 && active_writers(j, now, &in_batch) <= 1;

			if (batch_submit(j, now, lone) < 0) {
				journal_fail(j, -EIO, "submitting a batch failed");
				return 0;
			}
			set_spin_hint(j, lone);
			j->lone_recent = lone;
			if (lone)
				reap_and_publish(j, now_ns());
		}
		writers_clear_batch_marks(j);
		if (!full)
			return 0;
	}
}

/* Free writers whose client left, once no batch in flight refers to them. */
static void reap_writers(struct journal *j)
{
	struct journal_writer *w, *next;

	for (w = TAILQ_FIRST(&j->writers); w; w = next) {
		next = TAILQ_NEXT(w, link);
		if (!w->closed || w->refs || (!w->broken && w->head != jring_load_tail(w->hdr)))
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
		if (!jring_arm(w->hdr, want && !w->broken, w->head))
			quiet = false;
	return quiet;
}

/* A regular file of the daemon's uid? */
static bool file_ours(int fd)
{
	struct stat st;

	return fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid();
}

/* Replace the small file name in the journal's directory with text, durably (tmp, rename). */
static int small_file_write(struct journal *j, const char *name, const char *text)
{
	char tmp[96];
	_cleanup_close_ int fd = -1;
	ssize_t n = (ssize_t)strlen(text);

	snprintf(tmp, sizeof(tmp), "%s.tmp", name);
	/* a fresh file, never one a name happened to point to (a leftover of a crash goes first) */
	if (unlinkat(j->dirfd, tmp, 0) < 0 && errno != ENOENT)
		return -errno;
	fd = openat(j->dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, text, (size_t)n) != n || fsync(fd) < 0 ||
	    renameat(j->dirfd, tmp, j->dirfd, name) < 0 || fsync(j->dirfd) < 0)
		return errno ? -errno : -EIO;
	return 0;
}

static int small_file_read(struct journal *j, const char *name, char *buf, size_t len)
{
	_cleanup_close_ int fd = openat(j->dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	if (!file_ours(fd))
		return -EPERM;
	n = read(fd, buf, len - 1);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return 0;
}

/*
 * Keep the truncation point across restarts, in NAME.retain. Called by the flusher without the
 * lock. Losing the latest value in a crash only keeps segments longer.
 */
static void retain_persist(struct journal *j, uint64_t lsn)
{
	char name[64], text[32];

	snprintf(name, sizeof(name), "%s.retain", j->cfg.name);
	snprintf(text, sizeof(text), "%" PRIu64 "\n", lsn);
	if (small_file_write(j, name, text) < 0)
		log_warning("Journal '%s': cannot save the truncation point (LSN %" PRIu64 ") in '%s': %m; "
			    "after a restart it will have to be set again",
			    j->cfg.name, lsn, name);
}

static uint64_t retain_load(struct journal *j)
{
	char name[64], text[32];

	snprintf(name, sizeof(name), "%s.retain", j->cfg.name);
	return small_file_read(j, name, text, sizeof(text)) == 0 ? strtoull(text, NULL, 10) : 0;
}

static void *flusher_main(void *arg)
{
	struct journal *j = arg;

	pthread_mutex_lock(&j->lock);
	for (;;) {
		uint64_t now = now_ns(), deadline;
		struct pollfd pfd[3] = { { .fd = j->doorbell, .events = POLLIN },
					 { .fd = j->io->efd, .events = POLLIN },
					 { .fd = j->epfd, .events = POLLIN } };
		struct timespec ts, *timeout = NULL;
		bool can_submit, sleep_ok = true;

		reap_and_publish(j, now);
		reap_writers(j);
		if (j->retain_dirty) {
			uint64_t lsn = j->retain_lsn;

			j->retain_dirty = false;
			pthread_mutex_unlock(&j->lock);
			retain_persist(j, lsn);
			pthread_mutex_lock(&j->lock);
		}
		if (j->stop && j->norder == 0)
			break;
		deadline = j->stop ? 0 : gather_and_flush(j, now);
		wake_writers(j);
		/* a full or failed journal cannot take what waits in a ring: looking for it would spin */
		if (!deadline && j->lone_recent && j->norder == 0 && !j->stop && j->st.state == JOURNAL_OK &&
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
	}
	wake_writers(j);
	arm_wakeups(j, false);
	pthread_mutex_unlock(&j->lock);
	return NULL;
}

/* --- open, recover, close ------------------------------------------------------------------- */

/*
 * After a clean stop, say where the journal ends (NAME.clean: segment, offset, next LSN). In a
 * reused segment, what follows the last record is whatever the earlier use left, and may look
 * torn; recovery trusts this marker instead, and removes it before anything is appended.
 */
static void clean_mark(struct journal *j)
{
	char name[64], text[80];

	if (j->st.state == JOURNAL_FAILED || j->cur_off > j->cfg.segment_size)
		return;
	snprintf(name, sizeof(name), "%s.clean", j->cfg.name);
	snprintf(text, sizeof(text), "%u %" PRIu64 " %" PRIu64 "\n", j->cur, j->cur_off, j->next_lsn);
	if (small_file_write(j, name, text) < 0)
		log_warning("Journal '%s': cannot record the clean stop in '%s': %m", j->cfg.name, name);
}

/* The clean-stop marker, removed as it is read: a later crash must not find it. */
static bool clean_take(struct journal *j, unsigned *ret_seg, uint64_t *ret_off, uint64_t *ret_lsn)
{
	char name[64], text[80];
	bool ok;

	snprintf(name, sizeof(name), "%s.clean", j->cfg.name);
	if (small_file_read(j, name, text, sizeof(text)) < 0)
		return false;
	ok = sscanf(text, "%u %" SCNu64 " %" SCNu64, ret_seg, ret_off, ret_lsn) == 3;
	if (unlinkat(j->dirfd, name, 0) < 0 || fsync(j->dirfd) < 0)
		return false; /* cannot make sure it is gone: do not rely on it */
	return ok;
}

/* Create a segment file of zeros: reused later by overwriting, so fdatasync never needs metadata. */
static int segment_create(struct journal *j, const char *name, int *ret_fd)
{
	_cleanup_close_ int fd = -1;
	_cleanup_free_ uint8_t *zeros = calloc(1, 1u << 20);
	char tmp[300];

	if (!zeros)
		return -ENOMEM;
	snprintf(tmp, sizeof(tmp), "%s.tmp", name);
	if (unlinkat(j->dirfd, tmp, 0) < 0 && errno != ENOENT)
		return -errno;
	fd = openat(j->dirfd, tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	for (uint64_t off = 0; off < j->cfg.segment_size; off += 1u << 20) {
		size_t n = (size_t)MIN((uint64_t)1 << 20, j->cfg.segment_size - off);

		if (pwrite(fd, zeros, n, (off_t)off) != (ssize_t)n)
			return errno ? -errno : -EIO;
	}
	if (fdatasync(fd) < 0)
		return -errno;
	/* appears under its name only complete; the rename and the new entry reach the disk */
	if (renameat(j->dirfd, tmp, j->dirfd, name) < 0 || fsync(j->dirfd) < 0)
		return -errno;
	*ret_fd = TAKE_FD(fd);
	return 0;
}

/*
 * Open segment i by name, in the journal's directory only: never through a symlink, and only a
 * regular file of the daemon's uid (readers get these files: the name must not lead elsewhere).
 */
static int segment_open(struct journal *j, const char *name, int flags, const struct stat *same, struct stat *ret_st)
{
	int fd = openat(j->dirfd, name, flags | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	if (fstat(fd, ret_st) < 0 || !S_ISREG(ret_st->st_mode) || ret_st->st_uid != geteuid() ||
	    (same && (same->st_dev != ret_st->st_dev || same->st_ino != ret_st->st_ino))) {
		close(fd);
		return -EPERM;
	}
	return fd;
}

static int segment_open_all(struct journal *j)
{
	for (unsigned i = 0; i < j->cfg.segments; i++) {
		int direct = j->cfg.direct ? O_DIRECT : 0;
		char name[64];
		struct stat st, ro;
		int fd, r;

		segment_path(j, i, name, sizeof(name));
		fd = segment_open(j, name, O_RDWR | direct, NULL, &st);
		if (fd >= 0 && (uint64_t)st.st_size != j->cfg.segment_size) {
			log_error("Journal '%s': segment '%s' is %jd bytes, the configuration says %" PRIu64
				  "; refusing to touch it (move the directory away to start afresh)",
				  j->cfg.name, name, (intmax_t)st.st_size, j->cfg.segment_size);
			close(fd);
			return -EINVAL;
		}
		if (fd == -ENOENT) {
			r = segment_create(j, name, &fd);
			if (r < 0) {
				log_error("Journal '%s': cannot create segment '%s': %s", j->cfg.name, name, strerror(-r));
				return r;
			}
			if (fstat(fd, &st) < 0)
				st = (struct stat){ 0 };
			if (direct) {
				close(fd);
				fd = segment_open(j, name, O_RDWR | direct, &st, &st);
			}
		}
		if (fd == -EPERM || fd == -ELOOP) {
			log_error("Journal '%s': segment '%s' is not a regular file of the daemon's uid %u (a "
				  "symlink, another owner, another type); refusing to use it",
				  j->cfg.name, name, (unsigned)geteuid());
			return -EPERM;
		}
		if (fd < 0) {
			log_error("Journal '%s': cannot open segment '%s': %s%s", j->cfg.name, name, strerror(-fd),
				  fd == -EINVAL && direct ? " (direct = on: does the file system support O_DIRECT?)" : "");
			return fd;
		}
		j->segs[i].fd = fd;
		j->segs[i].ro_fd = segment_open(j, name, O_RDONLY, &st, &ro);
		if (j->segs[i].ro_fd < 0) {
			log_error("Journal '%s': cannot open segment '%s' again read-only: %s", j->cfg.name, name,
				  strerror(-j->segs[i].ro_fd));
			return j->segs[i].ro_fd;
		}
	}
	return 0;
}

/* Zero a segment from off to its end, and sync: what lay there was never acknowledged. */
static int segment_zero_tail(struct journal *j, unsigned i, uint64_t off)
{
	_cleanup_free_ uint8_t *zeros = NULL;
	const size_t chunk = 1u << 20;
	int fd = j->segs[i].fd;

	if (posix_memalign((void **)&zeros, JFORMAT_BLOCK, chunk))
		return -ENOMEM;
	memset(zeros, 0, chunk);
	/* under O_DIRECT writes start on a block: the partial block is rewritten whole below */
	if (off % JFORMAT_BLOCK) {
		_cleanup_free_ uint8_t *blk = NULL;
		uint64_t base = off / JFORMAT_BLOCK * JFORMAT_BLOCK;

		if (posix_memalign((void **)&blk, JFORMAT_BLOCK, JFORMAT_BLOCK))
			return -ENOMEM;
		if (pread(fd, blk, JFORMAT_BLOCK, (off_t)base) != JFORMAT_BLOCK)
			return -EIO;
		memset(blk + (off - base), 0, JFORMAT_BLOCK - (off - base));
		if (pwrite(fd, blk, JFORMAT_BLOCK, (off_t)base) != JFORMAT_BLOCK)
			return -EIO;
		off = base + JFORMAT_BLOCK;
	}
	for (; off < j->cfg.segment_size; off += chunk) {
		size_t n = (size_t)MIN((uint64_t)chunk, j->cfg.segment_size - off);

		if (pwrite(fd, zeros, n, (off_t)off) != (ssize_t)n)
			return -EIO;
	}
	return fdatasync(fd) < 0 ? -errno : 0;
}

/*
 * Under O_DIRECT every batch starts on a block. When recovery ends inside a block, end that
 * block with a padding record (read, fill, write back, sync), so that readers walk on to where
 * the next batch will start instead of stopping at a gap.
 */
static int segment_pad_block(struct journal *j, unsigned i, uint64_t off, uint64_t lsn)
{
	_cleanup_free_ uint8_t *blk = NULL;
	uint64_t base = off / JFORMAT_BLOCK * JFORMAT_BLOCK;
	uint64_t target = (off + JFORMAT_REC_HDR + JFORMAT_BLOCK - 1) / JFORMAT_BLOCK * JFORMAT_BLOCK;
	uint64_t len = target - base;
	int fd = j->segs[i].fd;

	if (target > j->cfg.segment_size) {
		/* no room for a padding record: the segment is done, the next batch opens another */
		j->cur_off = j->cfg.segment_size;
		return 0;
	}
	if (posix_memalign((void **)&blk, JFORMAT_BLOCK, len))
		return -ENOMEM;
	if (pread(fd, blk, len, (off_t)base) != (ssize_t)len)
		return -EIO;
	jformat_rec_write(blk + (off - base), lsn, j->segs[i].generation, JREC_PAD, NULL,
			  (uint32_t)(target - off - JFORMAT_REC_HDR));
	if (pwrite(fd, blk, len, (off_t)base) != (ssize_t)len || fdatasync(fd) < 0)
		return -EIO;
	j->cur_off = target;
	return 0;
}

static int by_generation(const void *a, const void *b, void *arg)
{
	const struct segment *s = arg;
	uint64_t ga = s[*(const unsigned *)a].generation, gb = s[*(const unsigned *)b].generation;

	return ga < gb ? -1 : ga > gb;
}

/*
 * Find where the journal ends: order the used segments by generation, walk their records and
 * require each segment to start where the previous one ended. The first record that does not
 * check out ends the journal; the rest of that segment is zeroed so that no record written
 * after it (never acknowledged) can ever be mistaken for a valid one.
 */
static int journal_recover(struct journal *j)
{
	unsigned order[1024], n = 0;
	uint64_t expected = 0, records = 0;
	const char *cut_reason = NULL;
	uint64_t cut_off = 0, clean_off = 0, clean_lsn = 0;
	unsigned clean_seg = 0;
	bool clean;
	int r;

	for (unsigned i = 0; i < j->cfg.segments; i++) {
		struct jformat_seg_hdr h;
		const char *why;

		if (pread(j->segs[i].fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h)) {
			/* O_DIRECT wants an aligned read of a whole block */
			_cleanup_free_ uint8_t *blk = NULL;

			if (posix_memalign((void **)&blk, JFORMAT_BLOCK, JFORMAT_BLOCK) ||
			    pread(j->segs[i].fd, blk, JFORMAT_BLOCK, 0) != JFORMAT_BLOCK)
				return -EIO;
			memcpy(&h, blk, sizeof(h));
		}
		if (jformat_seg_hdr_check(&h, j->cfg.name, &why) < 0) {
			if (h.magic != 0)
				log_warning("Journal '%s': segment %u header is not valid (%s); treating it as unused",
					    j->cfg.name, i, why);
			continue;
		}
		j->segs[i].generation = h.generation;
		j->segs[i].first_lsn = h.first_lsn;
		j->max_gen = MAX(j->max_gen, h.generation);
		order[n++] = i;
	}
	qsort_r(order, n, sizeof(order[0]), by_generation, j->segs);
	clean = clean_take(j, &clean_seg, &clean_off, &clean_lsn);
	if (n == 0) {
		j->next_lsn = 1;
		j->cur = j->cfg.segments - 1; /* the first batch opens segment 0 */
		j->cur_off = j->cfg.segment_size;
		snprintf(j->st.recovery, sizeof(j->st.recovery), "new journal");
		goto done;
	}
	for (unsigned k = 0; k < n; k++) {
		struct segment *s = &j->segs[order[k]];
		struct jformat_seg_hdr h;
		struct jformat_scan scan;
		void *map;

		map = mmap(NULL, j->cfg.segment_size, PROT_READ, MAP_SHARED, s->fd, 0);
		if (map == MAP_FAILED)
			return -errno;
		memcpy(&h, map, sizeof(h));
		if (k > 0 && h.first_lsn != expected) {
			munmap(map, j->cfg.segment_size);
			snprintf(j->st.recovery, sizeof(j->st.recovery),
				 "records %" PRIu64 "..%" PRIu64 " are missing before segment %u", expected,
				 h.first_lsn - 1, order[k]);
			log_error("Journal '%s': %s; refusing to append to a journal with a hole", j->cfg.name,
				  j->st.recovery);
			return -EUCLEAN;
		}
		jformat_scan_segment(map, j->cfg.segment_size, &h, NULL, NULL, &scan);
		munmap(map, j->cfg.segment_size);
		s->end_lsn = scan.next_lsn;
		expected = scan.next_lsn;
		records += scan.records;
		if (k == n - 1) {
			j->cur = order[k];
			j->cur_off = scan.end;
			/* zeros, a record of an earlier use of the file, or the end a clean stop recorded
			 * end a segment normally */
			bool clean_end = clean && clean_seg == order[k] && clean_off == scan.end &&
					 clean_lsn == scan.next_lsn;

			if (scan.stop_err == -EINVAL && !clean_end) {
				cut_reason = scan.stop_reason;
				cut_off = scan.end;
			}
		}
	}
	j->next_lsn = expected;
	if (cut_reason) {
		r = segment_zero_tail(j, j->cur, cut_off);
		if (r < 0)
			return r;
	}
	if (j->cfg.direct && j->cur_off % JFORMAT_BLOCK) {
		r = segment_pad_block(j, j->cur, j->cur_off, j->next_lsn);
		if (r < 0)
			return r;
	}
	snprintf(j->st.recovery, sizeof(j->st.recovery),
		 "%" PRIu64 " records (LSN %" PRIu64 "..%" PRIu64 ") in %u segments%s%s%s", records,
		 j->segs[order[0]].first_lsn, j->next_lsn - 1, n, cut_reason ? "; cut a torn tail: " : "; clean end",
		 cut_reason ? cut_reason : "", "");
	if (cut_reason)
		log_warning("Journal '%s': recovered %s at segment %u offset %" PRIu64, j->cfg.name, j->st.recovery,
			    j->cur, cut_off);
done:
	j->st.recovered_records = records;
	j->durable_lsn = j->next_lsn - 1;
	/* the truncation point the clients last declared still holds */
	j->retain_lsn = MIN(retain_load(j), j->next_lsn);
	j->st.retain_lsn = j->retain_lsn;
	return 0;
}

int journal_open(const struct config_journal *cfg, struct journal **ret)
{
	struct journal *j = calloc(1, sizeof(*j));
	const char *fault = getenv("HUGEPOOLD_FAULT_INJECT");
	char note[160] = "";
	static const enum jio_kind kinds[] = { JIO_AUTO, JIO_URING, JIO_AIO, JIO_SYNC };
	struct stat st;
	int r;

	if (!j)
		return -ENOMEM;
	j->cfg = *cfg;
	j->dirfd = j->doorbell = j->epfd = -1;
	TAILQ_INIT(&j->writers);
	LIST_INIT(&j->groups);
	pthread_mutex_init(&j->lock, NULL);
	j->segs = calloc(cfg->segments, sizeof(*j->segs));
	if (!j->segs) {
		r = -ENOMEM;
		goto fail;
	}
	for (unsigned i = 0; i < cfg->segments; i++)
		j->segs[i].fd = j->segs[i].ro_fd = -1;
	if (mkdir(cfg->directory, 0700) < 0 && errno != EEXIST) {
		r = -errno;
		log_error("Journal '%s': cannot create directory '%s': %m", cfg->name, cfg->directory);
		goto fail;
	}
	j->dirfd = open(cfg->directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (j->dirfd < 0 || fstat(j->dirfd, &st) < 0) {
		r = -errno;
		log_error("Journal '%s': cannot open directory '%s': %m", cfg->name, cfg->directory);
		goto fail;
	}
	/* whoever may write the directory may plant names in it: only the daemon's uid */
	if (st.st_uid != geteuid()) {
		r = -EPERM;
		log_error("Journal '%s': directory '%s' belongs to uid %u, not to the daemon (uid %u); refusing it",
			  cfg->name, cfg->directory, (unsigned)st.st_uid, (unsigned)geteuid());
		goto fail;
	}
	if (st.st_mode & (S_IWGRP | S_IWOTH)) {
		r = -EPERM;
		log_error("Journal '%s': directory '%s' has mode %04o, writable by group or others; refusing it "
			  "(chmod 0700)",
			  cfg->name, cfg->directory, (unsigned)(st.st_mode & 07777));
		goto fail;
	}
	r = segment_open_all(j);
	if (r < 0)
		goto fail;
	r = journal_recover(j);
	if (r < 0) {
		if (r != -EUCLEAN)
			log_error("Journal '%s': recovery failed: %s", cfg->name, strerror(-r));
		goto fail;
	}
	r = jio_open(kinds[cfg->backend], cfg->direct, &j->io, note, sizeof(note));
	if (r < 0) {
		log_error("Journal '%s': no I/O backend could be set up (%s): %s", cfg->name, note, strerror(-r));
		goto fail;
	}
	if (note[0])
		log_notice("Journal '%s': %s; using %s", cfg->name, note, j->io->ops->name);
	snprintf(j->st.backend, sizeof(j->st.backend), "%s", j->io->ops->name);
	snprintf(j->st.note, sizeof(j->st.note), "%s", note);
	if (fault && strncmp(fault, cfg->name, strlen(cfg->name)) == 0 && fault[strlen(cfg->name)] == ':') {
		/* HUGEPOOLD_FAULT_INJECT=NAME:write:N or NAME:sync:N, for the tests */
		r = jio_set_fault(j->io, fault + strlen(cfg->name) + 1);
		if (r < 0) {
			log_error("Journal '%s': bad HUGEPOOLD_FAULT_INJECT '%s'", cfg->name, fault);
			goto fail;
		}
		log_warning("Journal '%s': fault injection armed: %s", cfg->name, fault);
	}
	for (unsigned i = 0; i < NBATCH; i++) {
		struct batch *b = &j->batches[i];

		b->cap = cfg->max_batch_bytes + JFORMAT_BLOCK;
		if (posix_memalign((void **)&b->buf, JFORMAT_BLOCK, b->cap) ||
		    posix_memalign((void **)&b->hdr_block, JFORMAT_BLOCK, JFORMAT_BLOCK)) {
			r = -ENOMEM;
			goto fail;
		}
		/* the padding record must still fit after max_batch_bytes of records */
		b->cap = cfg->max_batch_bytes;
	}
	batch_reset(j, &j->batches[0]);
	j->doorbell = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	j->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (j->doorbell < 0 || j->epfd < 0) {
		r = -errno;
		goto fail;
	}
	j->st.segments = cfg->segments;
	j->st.segment_size = cfg->segment_size;
	j->st.next_lsn = j->next_lsn;
	j->st.durable_lsn = j->durable_lsn;
	r = -pthread_create(&j->thread, NULL, flusher_main, j);
	if (r < 0)
		goto fail;
	j->thread_started = true;
	log_info("Journal '%s' in '%s': %u segments of %s, backend %s%s; recovered %s", cfg->name,
		 cfg->directory, cfg->segments, size_format(cfg->segment_size, note, sizeof(note)),
		 j->io->ops->name, cfg->direct ? " (O_DIRECT)" : "", j->st.recovery);
	*ret = j;
	return 0;
fail:
	journal_close(j);
	return r;
}

void journal_close(struct journal *j)
{
	struct journal_writer *w;

	if (!j)
		return;
	if (j->thread_started) {
		uint64_t one = 1;

		pthread_mutex_lock(&j->lock);
		j->stop = true;
		pthread_mutex_unlock(&j->lock);
		if (write(j->doorbell, &one, sizeof(one)) < 0) {
			/* cannot fail on a fresh eventfd */
		}
		pthread_join(j->thread, NULL);
		clean_mark(j);
	}
	while ((w = TAILQ_FIRST(&j->writers))) {
		TAILQ_REMOVE(&j->writers, w, link);
		writer_free(w);
	}
	for (unsigned i = 0; i < NBATCH; i++) {
		free(j->batches[i].buf);
		free(j->batches[i].hdr_block);
		free(j->batches[i].refs);
	}
	for (unsigned i = 0; j->segs && i < j->cfg.segments; i++) {
		if (j->segs[i].fd >= 0)
			close(j->segs[i].fd);
		if (j->segs[i].ro_fd >= 0)
			close(j->segs[i].ro_fd);
	}
	jio_close(j->io);
	if (j->doorbell >= 0)
		close(j->doorbell);
	if (j->epfd >= 0)
		close(j->epfd);
	if (j->dirfd >= 0)
		close(j->dirfd);
	pthread_mutex_destroy(&j->lock);
	free(j->segs);
	free(j);
}

void journal_truncate(struct journal *j, uint64_t lsn)
{
	uint64_t one = 1;

	pthread_mutex_lock(&j->lock);
	if (lsn > j->durable_lsn + 1)
		lsn = j->durable_lsn + 1;
	if (lsn > j->retain_lsn) {
		j->retain_lsn = lsn;
		j->retain_dirty = true;
	}
	j->st.retain_lsn = j->retain_lsn;
	pthread_mutex_unlock(&j->lock);
	/* a full journal may go on now */
	if (write(j->doorbell, &one, sizeof(one)) < 0) {
		/* cannot overflow */
	}
}

int journal_read_segments(struct journal *j, uint64_t from_lsn, unsigned max, int *fds,
			  struct journal_segment_info *infos, unsigned *ret_n, uint64_t *ret_durable_lsn)
{
	unsigned order[1024], n = 0, k = 0;
	int r = 0;

	pthread_mutex_lock(&j->lock);
	for (unsigned i = 0; i < j->cfg.segments; i++)
		if (j->segs[i].generation)
			order[n++] = i;
	qsort_r(order, n, sizeof(order[0]), by_generation, j->segs);
	for (unsigned x = 0; x < n && k < max; x++) {
		const struct segment *s = &j->segs[order[x]];
		uint64_t end = order[x] == j->cur ? j->next_lsn : s->end_lsn;
		int fd;

		if (end <= from_lsn)
			continue; /* everything in it is below from_lsn */
		/* the file opened at start, not whatever its name leads to now */
		fd = fcntl(s->ro_fd, F_DUPFD_CLOEXEC, 0);
		if (fd < 0) {
			r = -errno;
			break;
		}
		fds[k] = fd;
		infos[k++] = (struct journal_segment_info){ s->generation, s->first_lsn, j->cfg.segment_size };
	}
	*ret_durable_lsn = j->durable_lsn;
	pthread_mutex_unlock(&j->lock);
	if (r < 0) {
		while (k)
			close(fds[--k]);
		return r;
	}
	*ret_n = k;
	return 0;
}

void journal_get_stats(struct journal *j, struct journal_stats *ret)
{
	unsigned used = 0;

	pthread_mutex_lock(&j->lock);
	for (unsigned i = 0; i < j->cfg.segments; i++)
		used += j->segs[i].generation != 0 &&
			(i == j->cur || j->segs[i].end_lsn > j->retain_lsn);
	j->st.segments_used = used;
	j->st.next_lsn = j->next_lsn;
	*ret = j->st;
	pthread_mutex_unlock(&j->lock);
}
