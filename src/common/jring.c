/* SPDX-License-Identifier: MIT */
/*
 * jring.c - both halves of the append ring protocol (jring.h): the client lays out entries,
 * publishes its tail, rings its doorbell and waits on its uid's wake word; the daemon fetches
 * and checks the entries, raises need_wakeup before it sleeps, publishes what is durable and
 * wakes the waiters. Nothing else reads or writes a ring or a wake page.
 *
 * The daemon's half reads the ring, which a hostile client may rewrite at any moment, only
 * through jring_fetch and reads each client-written byte once: a header is copied, the copy is
 * checked and then used, the shared one never looked at again. The fuzz target defines
 * jring_fetch_hook to be called after every fetch, so it can change the ring between reads as
 * such a client would (tests/fuzz/fuzz_ring.c).
 *
 * No locks, no allocation. The daemon's flusher is its rings' one thread. A client's appends
 * are serialised by its caller, but any number of its threads may wait beside the one that
 * appends (hp_journal_wait): so the client's words both touch are atomic, `tail` stored by the
 * appender alone and `want` (its copy and the header's) only ever raised, by whichever thread
 * asks for more (raise_want).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "jformat.h"
#include "jring.h"
#include "util.h"

/* --- the client's half ------------------------------------------------------------------ */

/* Bytes an entry of these records takes in the ring, and on disk (*ret_disk). */
static uint64_t jring_entry_size(const struct iovec *recs, unsigned n, uint64_t *ret_disk)
{
	uint64_t total = sizeof(struct jring_entry), disk = 0;

	for (unsigned i = 0; i < n; i++) {
		total += jring_align(sizeof(struct jring_rec) + recs[i].iov_len);
		disk += jformat_rec_size(recs[i].iov_len);
	}
	*ret_disk = disk;
	return jring_entry_align(total);
}

/* Lay out an entry of total bytes (jring_entry_size) at data[off]: header, records, padding. */
static void jring_put_entry(uint8_t *data, uint64_t off, uint64_t total, const struct iovec *recs, unsigned n)
{
	struct jring_entry e = { .total = (uint32_t)total, .count = n };
	uint64_t o = off + sizeof(e);

	memcpy(data + off, &e, sizeof(e));
	for (unsigned i = 0; i < n; i++) {
		struct jring_rec rec = { .len = (uint32_t)recs[i].iov_len };
		uint64_t sz = jring_align(sizeof(rec) + recs[i].iov_len);

		memcpy(data + o, &rec, sizeof(rec));
		if (recs[i].iov_len)
			memcpy(data + o + sizeof(rec), recs[i].iov_base, recs[i].iov_len);
		/* the daemon copies only payloads, but keep the padding clean */
		memset(data + o + sizeof(rec) + recs[i].iov_len, 0, sz - sizeof(rec) - recs[i].iov_len);
		o += sz;
	}
	memset(data + o, 0, off + total - o);
}

static void ring_doorbell(const struct jring_client *c)
{
	uint64_t one = 1;

	if (write(c->doorbell, &one, sizeof(one)) < 0) {
		/* EAGAIN: the counter is saturated, a wake-up is pending anyway */
	}
}

uint64_t jring_tail(const struct jring_client *c)
{
	return __atomic_load_n(&c->tail, __ATOMIC_ACQUIRE);
}

/* Raise v to at least x (v is only ever raised: a thread that asks for less changes nothing). */
static bool raise_to(uint64_t *v, uint64_t x)
{
	uint64_t cur = __atomic_load_n(v, __ATOMIC_RELAXED);

	while (cur < x)
		if (__atomic_compare_exchange_n(v, &cur, x, false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
			return true;
	return false;
}

/*
 * The entries up to pos are wanted now (a daemon that reads `want`: c->lazy_ok): raise the
 * client's want and the header's. The thread that appends and one that waits may both be
 * raising them, and neither may lower what the other published. False when it was wanted
 * already.
 */
static bool raise_want(struct jring_client *c, uint64_t pos)
{
	if (!raise_to(&c->want, pos))
		return false;
	raise_to(&c->hdr->want, pos);
	return true;
}

/* Make everything before tail visible, and ring the doorbell if the daemon sleeps. */
static void jring_publish(struct jring_client *c, uint64_t tail)
{
	__atomic_store_n(&c->tail, tail, __ATOMIC_RELEASE);
	/* want (raised by the caller) before tail: a daemon that sees the tail sees which of its
	 * entries are urgent. The client's side of the Dekker pair: store tail, then look at
	 * need_wakeup */
	__atomic_store_n(&c->hdr->tail, tail, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&c->hdr->need_wakeup, __ATOMIC_SEQ_CST))
		ring_doorbell(c);
}

int jring_client_init(struct jring_client *c, void *ring, uint64_t size, struct jring_wake *wake, int doorbell,
		      bool (*gone)(void *arg), void *gone_arg, const char **ret_why)
{
	const struct jring_hdr *h = ring;
	/* the daemon's words, read once: every position the client writes at follows from tail */
	uint64_t tail = __atomic_load_n(&h->tail, __ATOMIC_ACQUIRE);

	if (h->magic != JRING_MAGIC || h->size != size) {
		*ret_why = "a header that is not its own";
		return -EPROTO;
	}
	if (tail % 16) {
		/* entries are 16-aligned: from elsewhere, the next one's header could end past the data */
		*ret_why = "a tail that is not an entry's start";
		return -EPROTO;
	}
	*c = (struct jring_client){
		.hdr = ring,
		.data = (uint8_t *)ring + JRING_HDR_SIZE,
		.size = size,
		.doorbell = doorbell,
		.wake = wake,
		.gone = gone,
		.gone_arg = gone_arg,
	};
	c->max_entry = c->hdr->max_entry;
	c->tail = tail;
	c->want = tail;
	/* an older daemon has no `want`: every entry is urgent there, as it always was */
	c->lazy_ok = __atomic_load_n(&h->version, __ATOMIC_RELAXED) >= 2;
	if (c->lazy_ok) {
		__atomic_store_n(&c->hdr->want, c->want, __ATOMIC_RELAXED);
		__atomic_store_n(&c->hdr->lazy, 1, __ATOMIC_RELEASE);
	}
	return 0;
}

void jring_want(struct jring_client *c, uint64_t pos)
{
	pos = MIN(pos, jring_tail(c));
	if (!c->lazy_ok || !raise_want(c, pos))
		return;
	/* the Dekker pair again, with want for tail (raised seq_cst): a daemon going to sleep sees
	 * it or is rung */
	if (__atomic_load_n(&c->hdr->need_wakeup, __ATOMIC_SEQ_CST))
		ring_doorbell(c);
}

/* The ring's error, 0 or a negative errno (anything else the daemon wrote there is -EPROTO). */
static int32_t ring_error(const struct jring_client *c)
{
	int32_t err = __atomic_load_n(&c->hdr->error, __ATOMIC_ACQUIRE);

	return ERRNO_VALID(err) ? err : -EPROTO;
}

uint64_t jring_durable_lsn(const struct jring_client *c)
{
	return __atomic_load_n(&c->hdr->durable_lsn, __ATOMIC_ACQUIRE);
}

bool jring_durable_past(const struct jring_client *c, uint64_t pos)
{
	return __atomic_load_n(&c->hdr->durable, __ATOMIC_ACQUIRE) >= pos;
}

bool jring_lsn_durable(const struct jring_client *c, uint64_t lsn)
{
	return __atomic_load_n(&c->hdr->durable_lsn, __ATOMIC_ACQUIRE) >= lsn;
}

int jring_wait(struct jring_client *c, bool (*done)(const struct jring_client *c, uint64_t arg), uint64_t arg,
	       uint64_t deadline_ns)
{
	/*
	 * A lone writer's sync takes a few hundred microseconds: waiting for it by polling beats a
	 * futex round trip. sched_yield, not a pause loop: on a small machine the flusher may be
	 * queued on this very CPU, and must not wait for our spin to end. Unless the client said
	 * its process has better uses for the CPU (sleep_only).
	 */
	uint32_t spin_us = __atomic_load_n(&c->sleep_only, __ATOMIC_RELAXED) ? 0 : MIN(__atomic_load_n(&c->hdr->spin_us, __ATOMIC_RELAXED), JRING_SPIN_MAX_US);

	if (spin_us) {
		uint64_t until = MIN(now_ns() + spin_us * 1000ull, deadline_ns);

		while (!done(c, arg) && now_ns() < until)
			sched_yield();
	}
	for (;;) {
		uint32_t f = __atomic_load_n(&c->wake->futex, __ATOMIC_SEQ_CST);
		int32_t err;
		uint64_t now, slice;
		struct timespec ts;
		bool timed_out;

		if (done(c, arg))
			return 0;
		err = ring_error(c);
		if (err < 0)
			return err;
		now = now_ns();
		if (now >= deadline_ns)
			return -ETIMEDOUT;
		slice = MIN(deadline_ns - now, JRING_WAIT_SLICE_NS);
		ts = (struct timespec){ (time_t)(slice / 1000000000u), (long)(slice % 1000000000u) };
		__atomic_fetch_add(&c->wake->waiters, 1, __ATOMIC_SEQ_CST);
		/* the daemon bumps the word after publishing: a changed value means look again */
		timed_out = !done(c, arg) &&
			    syscall(SYS_futex, &c->wake->futex, FUTEX_WAIT, f, &ts, NULL, 0) < 0 && errno == ETIMEDOUT;
		__atomic_fetch_sub(&c->wake->waiters, 1, __ATOMIC_SEQ_CST);
		if (done(c, arg))
			continue;
		if (c->gone(c->gone_arg))
			return -ECONNRESET;
		/* a whole slice without news while the daemon sleeps with our entries unread: ring again */
		if (timed_out && __atomic_load_n(&c->hdr->need_wakeup, __ATOMIC_SEQ_CST) &&
		    __atomic_load_n(&c->hdr->head, __ATOMIC_ACQUIRE) != jring_tail(c))
			ring_doorbell(c);
	}
}

int jring_append(struct jring_client *c, const struct iovec *recs, unsigned n, bool lazy, uint64_t *ret_start)
{
	uint64_t total, disk, off, pos, skip = 0, tail = c->tail; /* ours: only this thread stores it */
	int32_t err;
	int r;

	total = jring_entry_size(recs, n, &disk);
	if (disk > c->max_entry || total > c->size / 2)
		return -EMSGSIZE;
	err = ring_error(c);
	if (err < 0)
		return err;
	off = tail & (c->size - 1);
	if (off + total > c->size)
		skip = c->size - off; /* does not fit before the end: start over at 0 */
	/* space is free behind what is durable (we may still need to read an entry's LSN) */
	pos = tail + skip + total;
	if (pos - __atomic_load_n(&c->hdr->durable, __ATOMIC_ACQUIRE) > c->size) {
		/* waiting for room: everything in the ring is wanted now, lazy or not */
		jring_want(c, tail);
		r = jring_wait(c, jring_durable_past, pos - c->size, UINT64_MAX);
		if (r < 0)
			return r;
	}
	if (skip) {
		struct jring_entry e = { .total = (uint32_t)skip, .count = 0 };

		memcpy(c->data + off, &e, sizeof(e));
		tail += skip;
		off = 0;
	}
	*ret_start = tail;
	jring_put_entry(c->data, off, total, recs, n);
	tail += total;
	if (!lazy && c->lazy_ok)
		raise_want(c, tail);
	jring_publish(c, tail);
	return 0;
}

uint64_t jring_entry_lsn(const struct jring_client *c, uint64_t start)
{
	/* durable, so the daemon wrote the LSN into our entry, and we have not reused its space */
	return __atomic_load_n((uint64_t *)(c->data + (start & (c->size - 1)) + offsetof(struct jring_entry, lsn)),
			       __ATOMIC_ACQUIRE);
}

/* --- the daemon's half ------------------------------------------------------------------ */

void jring_fetch(void *dst, const void *src, size_t n)
{
	memcpy(dst, src, n);
	if (jring_fetch_hook)
		jring_fetch_hook(src, n);
}

uint64_t jring_load_tail(const struct jring_hdr *h)
{
	uint64_t tail = __atomic_load_n(&h->tail, __ATOMIC_SEQ_CST);

	if (jring_fetch_hook)
		jring_fetch_hook(&h->tail, sizeof(h->tail));
	return tail;
}

uint64_t jring_take_want(const struct jring_hdr *h, uint64_t upto, uint64_t *seen)
{
	uint32_t lazy = __atomic_load_n(&h->lazy, __ATOMIC_ACQUIRE);
	uint64_t want = UINT64_MAX;

	if (jring_fetch_hook)
		jring_fetch_hook(&h->lazy, sizeof(h->lazy));
	if (lazy == 1) {
		want = __atomic_load_n(&h->want, __ATOMIC_SEQ_CST);
		if (jring_fetch_hook)
			jring_fetch_hook(&h->want, sizeof(h->want));
	}
	/*
	 * Monotonic: what the arm below saw must stay seen by the next gather, or a client that
	 * moves want back and forth would have the flusher find it urgent before each sleep and
	 * lazy at each gather, and loop without sleeping or writing.
	 */
	*seen = MAX(*seen, MIN(want, upto));
	return *seen;
}

bool jring_arm(struct jring_hdr *h, bool want, uint64_t head, uint64_t lazy_end, uint64_t *seen)
{
	/* the daemon's side of the Dekker pair: store need_wakeup, then look at tail (and want) */
	__atomic_store_n(&h->need_wakeup, want, __ATOMIC_SEQ_CST);
	if (!want)
		return true;
	if (jring_load_tail(h) != head)
		return false;
	return !lazy_end || jring_take_want(h, head, seen) < lazy_end;
}

int jring_read_entry(const struct jring_view *v, uint64_t pos, uint64_t tail, uint8_t *dst, uint64_t room,
		     uint64_t lsn, uint64_t generation, struct jring_read *ret, const char **ret_why)
{
	uint64_t off = pos & (v->size - 1), end, eoff, disk = 0;
	struct jring_entry e;
	uint32_t i;

	if (off + sizeof(e) > v->size) {
		*ret_why = "entry header across the end of the ring";
		return -EPROTO;
	}
	jring_fetch(&e, v->data + off, sizeof(e));
	if (e.total < sizeof(e) || e.total % 16 || off + e.total > v->size || e.total > tail - pos ||
	    (e.count && e.total > v->size / 2)) {
		*ret_why = "entry length out of range";
		return -EPROTO;
	}
	end = off + e.total;
	if (e.count == 0) {
		/* a skip entry: it must take exactly the rest of the ring */
		if (end != v->size) {
			*ret_why = "skip entry not at the end of the ring";
			return -EPROTO;
		}
		*ret = (struct jring_read){ pos + e.total, 0, 0 };
		return 0;
	}
	eoff = off + sizeof(e);
	for (i = 0; i < e.count; i++) {
		struct jring_rec rec;
		uint64_t sz;

		if (eoff + sizeof(rec) > end) {
			*ret_why = "record header outside its entry";
			return -EPROTO;
		}
		jring_fetch(&rec, v->data + eoff, sizeof(rec));
		if (rec.len > JFORMAT_RECORD_MAX || rec.len > end - eoff - sizeof(rec)) {
			*ret_why = "record length out of range";
			return -EPROTO;
		}
		sz = jformat_rec_size(rec.len);
		if (disk + sz > v->max_entry) {
			*ret_why = "entry larger than a batch";
			return -EPROTO;
		}
		if (disk + sz > room)
			return -ENOSPC;
		/* the CRC is computed over this copy, so it covers exactly what is written */
		jring_fetch(dst + disk + JFORMAT_REC_HDR, v->data + eoff + sizeof(rec), rec.len);
		jformat_rec_seal(dst + disk, lsn + i, generation, JREC_DATA, rec.len);
		disk += sz;
		eoff += jring_align(sizeof(rec) + rec.len);
	}
	if (jring_entry_align(eoff - off) != e.total) {
		*ret_why = "records do not fill their entry";
		return -EPROTO;
	}
	*ret = (struct jring_read){ pos + e.total, e.count, disk };
	return 0;
}

void jring_init(struct jring_hdr *h, uint64_t size, uint64_t max_entry)
{
	h->magic = JRING_MAGIC;
	h->version = JRING_VERSION;
	h->size = size;
	h->max_record = JFORMAT_RECORD_MAX;
	h->max_entry = max_entry;
	/* the flusher may be asleep already: until it says otherwise, appenders must ring */
	h->need_wakeup = 1;
}

void jring_set_head(struct jring_hdr *h, uint64_t head)
{
	__atomic_store_n(&h->head, head, __ATOMIC_RELEASE);
}

void jring_set_lsn(uint8_t *data, uint64_t size, uint64_t pos, uint64_t lsn)
{
	/* relaxed: the client reads it only after `durable` (release) covers the entry */
	__atomic_store_n((uint64_t *)(data + (pos & (size - 1)) + offsetof(struct jring_entry, lsn)), lsn,
			 __ATOMIC_RELAXED);
}

void jring_set_durable(struct jring_hdr *h, uint64_t durable_lsn, uint64_t durable)
{
	/* the LSN first: a client that sees its position may ask for the LSN at once */
	__atomic_store_n(&h->durable_lsn, durable_lsn, __ATOMIC_RELEASE);
	__atomic_store_n(&h->durable, durable, __ATOMIC_RELEASE);
}

void jring_set_durable_lsn(struct jring_hdr *h, uint64_t durable_lsn)
{
	__atomic_store_n(&h->durable_lsn, durable_lsn, __ATOMIC_RELEASE);
}

void jring_set_error(struct jring_hdr *h, int32_t err)
{
	__atomic_store_n(&h->error, err, __ATOMIC_RELEASE);
}

void jring_set_spin(struct jring_hdr *h, uint32_t us)
{
	__atomic_store_n(&h->spin_us, us, __ATOMIC_RELAXED);
}

void jring_wake(struct jring_wake *w)
{
	__atomic_fetch_add(&w->futex, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&w->waiters, __ATOMIC_SEQ_CST))
		syscall(SYS_futex, &w->futex, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}
