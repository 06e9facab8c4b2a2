/* SPDX-License-Identifier: MIT */
/*
 * jring.c - both halves of the append ring protocol (jring.h): the client lays out entries and
 * publishes its tail; the daemon fetches and checks them.
 *
 * The daemon's half reads the ring, which a hostile client may rewrite at any moment, only
 * through jring_fetch and reads each client-written byte once: a header is copied, the copy is
 * checked and then used, the shared one never looked at again. The fuzz target defines
 * jring_fetch_hook to be called after every fetch, so it can change the ring between reads as
 * such a client would (tests/fuzz/fuzz_ring.c).
 *
 * No locks, no allocation; callers serialise access to their ring (the library's handle, the
 * daemon's flusher).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "jformat.h"
#include "jring.h"

/* --- the client's half ------------------------------------------------------------------ */

uint64_t jring_entry_size(const struct iovec *recs, unsigned n, uint64_t *ret_disk)
{
	uint64_t total = sizeof(struct jring_entry), disk = 0;

	for (unsigned i = 0; i < n; i++) {
		total += jring_align(sizeof(struct jring_rec) + recs[i].iov_len);
		disk += jformat_rec_size(recs[i].iov_len);
	}
	*ret_disk = disk;
	return jring_entry_align(total);
}

void jring_put_entry(uint8_t *data, uint64_t off, uint64_t total, const struct iovec *recs, unsigned n)
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

bool jring_publish(struct jring_hdr *h, uint64_t tail)
{
	/* the client's side of the Dekker pair: store tail, then look at need_wakeup */
	__atomic_store_n(&h->tail, tail, __ATOMIC_SEQ_CST);
	return __atomic_load_n(&h->need_wakeup, __ATOMIC_SEQ_CST) != 0;
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

bool jring_arm(struct jring_hdr *h, bool want, uint64_t head)
{
	/* the daemon's side of the Dekker pair: store need_wakeup, then look at tail */
	__atomic_store_n(&h->need_wakeup, want, __ATOMIC_SEQ_CST);
	return !want || jring_load_tail(h) == head;
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
	h->version = 1;
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
