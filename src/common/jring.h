/* SPDX-License-Identifier: MIT */
/*
 * jring.h - the append ring a journal writer shares with hugepoold: layout and protocol, both
 * halves. jring.c holds the code of each: every read and write of a ring or a wake page, on
 * either side, is there (the library and the daemon only create, map and unmap them), so the
 * handshake can be checked in one file.
 *
 * One ring per writer (an hp_journal handle): a memfd the daemon creates and both map. Page 0
 * is the header, then `size` data bytes (a power of two) used as a circular buffer. Positions
 * are byte counts that only grow; position p lives at data[p & (size - 1)]. Each writer also
 * gets a doorbell eventfd of its own and the wake page of its uid's writers of the journal:
 * nothing is shared across uids, so a writer that scribbles on its ring, wake page or doorbell
 * delays only itself and its own uid.
 *
 *   client writes: the entries (jring_append), then `tail` (jring_publish, seq_cst) once an
 *                  entry is complete; with a daemon of version 2 on, `lazy` once at start and
 *                  `want` before each `tail` it publishes and before it waits (lazy entries);
 *   daemon writes: for each entry it copies into a batch its first LSN into the entry's lsn
 *                  field (jring_set_lsn), then `head` (jring_set_head); once the sync covering
 *                  them completed `durable_lsn`, then `durable` (jring_set_durable,
 *                  store-release), then bumps the uid's wake word (jring_wake); `need_wakeup`
 *                  while its flusher sleeps (jring_arm); `error` once the journal failed or
 *                  this ring broke the protocol (jring_set_error);
 *   client waiters: sleep on the uid's wake word (struct jring_wake, a page the uid's writers
 *                  of the journal share) and count themselves in its `waiters`, so that the
 *                  daemon makes one FUTEX_WAKE per uid someone waits in (jring_wait). A client
 *                  that corrupts the page only makes its own uid miss wake-ups (waiters look
 *                  again every JRING_WAIT_SLICE_NS, 100 ms, regardless).
 *
 * An entry is a group of records that get consecutive LSNs:
 *   struct jring_entry { total, count, lsn } then count x (struct jring_rec + payload, 8-aligned),
 *   zero padding up to a multiple of 16
 * An entry takes at most size / 2 bytes of the ring and its records at most max_entry bytes on
 * disk (one batch). An entry never wraps: when it would not fit before the end of the data area,
 * the client writes a skip entry (count 0) covering the rest and starts again at offset 0. The
 * client may reuse space only behind `durable`, so it can still read an entry's LSN after
 * waiting for it.
 *
 * Lazy entries (version 2 on, a client that set `lazy`). An entry that ends past the client's
 * `want` is lazy: nobody waits for it yet, so the daemon need not sync it at once; it holds its
 * batch up to the journal's max_batch_delay for an entry someone waits for, which the client
 * says by moving `want` to that entry's end before publishing it, or to any position it is
 * about to wait for (jring_want). Once `want` covers a lazy entry the daemon has taken, the
 * batch goes as if that entry had come urgent. A lazy entry is in the daemon's hands once
 * published: a client that dies loses none. `want` only delays or hastens the client's own
 * records' batch; every other writer's entries are urgent for their own sake.
 *
 * Wake-up handshake (no socket round trip), a Dekker pair:
 *   client (jring_publish):  store tail (seq_cst); load need_wakeup (seq_cst); if set, write 1
 *                            to its doorbell eventfd (EAGAIN is fine: a wake-up is pending);
 *   daemon (jring_arm):      store need_wakeup = 1 (seq_cst); load tail (seq_cst); if tail moved,
 *                            do not sleep: gather again.
 * One of the two always sees the other's store, so no append is left asleep. The daemon waits
 * for the writers' eventfds edge-triggered in an epoll set and never reads or writes them: a
 * client may drain its eventfd or clear O_NONBLOCK on it (it shares that open file description)
 * and only loses its own wake-ups, never blocks the daemon. A waiting client rings again every
 * time its 100 ms wait slice ends without progress, so a lost wake-up costs a delay, not a hang.
 *
 * The daemon trusts nothing here. It reads shared memory only through jring_fetch, and each
 * client-written field exactly once: `tail` once per gather (jring_load_tail), `lazy` and
 * `want` once per gather and per arm, folded into the most `want` it has seen (jring_take_want),
 * each entry and record header once into its own copy, which it validates and then uses; payloads are copied
 * into its batch before their CRC is computed there. A client that corrupts its ring only loses
 * its own records (the daemon cuts that writer off); a client that dies half-way through an
 * entry never published it.
 */
#ifndef HP_JRING_H
#define HP_JRING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define JRING_MAGIC 0x474e524au /* "JRNG" */
#define JRING_HDR_SIZE 4096u
#define JRING_VERSION 2 /* 2: the daemon reads `lazy` and `want` */
#define JRING_MIN_SIZE (64u << 10)
#define JRING_MAX_SIZE (64u << 20)

struct jring_hdr {
	/* set by the daemon at creation, read-only afterwards */
	uint32_t magic;
	uint32_t version;
	uint64_t size; /* data bytes, a power of two */
	uint64_t max_record; /* payload bytes of one record */
	uint64_t max_entry; /* on-disk bytes of one entry's records, sum of jformat_rec_size(len) */
	uint8_t pad0[32];
	/* the client's line */
	uint64_t tail;
	uint64_t want; /* lazy: entries ending past it may wait (version 2 on) */
	uint32_t lazy; /* 1: the client keeps `want`; 0 (an older library): every entry is urgent */
	uint8_t pad1[44];
	/* the daemon's line */
	uint64_t head;
	uint64_t durable;
	uint64_t durable_lsn; /* the journal's, at the last publish */
	uint32_t need_wakeup;
	int32_t error; /* 0, or the negative errno that made the journal read-only */
	uint32_t spin_us; /* a hint: how long a waiter may spin before FUTEX_WAIT (0: do not) */
};
_Static_assert(sizeof(struct jring_hdr) <= JRING_HDR_SIZE, "ring header fits its page");
_Static_assert(__builtin_offsetof(struct jring_hdr, tail) % 64 == 0, "tail on its own cache line");
_Static_assert(__builtin_offsetof(struct jring_hdr, head) % 64 == 0, "daemon fields on their own line");
_Static_assert(__builtin_offsetof(struct jring_hdr, lazy) < __builtin_offsetof(struct jring_hdr, head), "client fields on its line");

#define JRING_SPIN_MAX_US 1000u /* the longest spin_us the daemon sets and a waiter obeys */

/* The wake page of one uid's writers of a journal (no other uid maps it), JRING_WAKE_SIZE bytes. */
#define JRING_WAKE_SIZE 4096u
struct jring_wake {
	uint32_t futex; /* bumped by the daemon at every publish */
	uint32_t waiters; /* the uid's threads in FUTEX_WAIT on it */
};

struct jring_entry {
	uint32_t total; /* bytes of the entry, header included, a multiple of 16 (so that the rest
			 * of the ring before a wrap always has room for a skip entry's header) */
	uint32_t count; /* records; 0 = skip to the start of the data area */
	uint64_t lsn; /* written by the daemon: LSN of the first record */
};

struct jring_rec {
	uint32_t len; /* payload bytes */
	uint32_t reserved;
};

/* Records are 8-aligned inside an entry; entries are 16-aligned in the ring. */
static inline uint64_t jring_align(uint64_t n)
{
	return (n + 7) & ~(uint64_t)7;
}

static inline uint64_t jring_entry_align(uint64_t n)
{
	return (n + 15) & ~(uint64_t)15;
}

/* --- the client's half ----------------------------------------------------------------- */

#define JRING_WAIT_SLICE_NS 100000000ull /* a waiter looks at the daemon and rings again this often */

/*
 * The client's side of one ring (the library's writer handle holds it). One thread at a time
 * appends (jring_append); any number may wait beside it (jring_want, jring_wait, the
 * conditions, jring_tail, sleep_only). tail, want and sleep_only are accessed atomically.
 */
struct jring_client {
	struct jring_hdr *hdr; /* the mapping: the header page, then size data bytes */
	uint8_t *data;
	uint64_t size; /* from the daemon's reply, checked: not read back from the header */
	uint64_t max_entry; /* disk bytes of one entry, read once */
	uint64_t tail; /* its own copy: what it published (stored by the appending thread) */
	bool lazy_ok; /* the daemon reads want (its header's version, read once) */
	uint64_t want; /* its own copy of what it published in hdr->want: only ever raised */
	int doorbell; /* its eventfd */
	struct jring_wake *wake; /* the wake page of its uid's writers of the journal */
	/* asked after a wait slice without news: is the daemon gone? (the library: its socket) */
	bool (*gone)(void *arg);
	void *gone_arg;
	bool sleep_only; /* wait on the futex at once, whatever spin_us hints (hp_journal_set_wait_mode) */
};

/*
 * Take a freshly mapped ring (JRING_HDR_SIZE + size bytes) and wake page, and the doorbell. 0, or
 * -EPROTO with *ret_why when the header is not one jring_init wrote for size data bytes or its
 * tail is not on an entry's boundary (a lying daemon: appends would write past the ring).
 */
int jring_client_init(struct jring_client *c, void *ring, uint64_t size, struct jring_wake *wake, int doorbell,
		      bool (*gone)(void *arg), void *gone_arg, const char **ret_why);
/*
 * Append one entry of n records (each of at most JFORMAT_RECORD_MAX bytes; the caller checks
 * them) and publish it; waits while the ring is full. lazy: nobody waits for it yet (the daemon
 * may hold it for one who does; an urgent entry where the daemon predates lazy entries).
 * *ret_start: the entry's position (for jring_entry_lsn); jring_tail after it is the position
 * jring_durable_past waits for. -EMSGSIZE when the entry exceeds the ring's limits, the ring's
 * error, or what jring_wait returns.
 */
int jring_append(struct jring_client *c, const struct iovec *recs, unsigned n, bool lazy, uint64_t *ret_start);
/* Before waiting for ring position pos (at most the tail): the entries up to it are wanted now;
 * rings the doorbell if the daemon sleeps and had lazy entries to cover. */
void jring_want(struct jring_client *c, uint64_t pos);
/* The position after the last entry published (for a thread beside the appending one too). */
uint64_t jring_tail(const struct jring_client *c);
/* The journal's durable LSN at the last publish. */
uint64_t jring_durable_lsn(const struct jring_client *c);
/* Conditions for jring_wait: ring position pos is durable; LSN lsn is durable. */
bool jring_durable_past(const struct jring_client *c, uint64_t pos);
bool jring_lsn_durable(const struct jring_client *c, uint64_t lsn);
/*
 * Wait until done(c, arg): spin first if the daemon's hint says so, then sleep on the wake
 * word. deadline_ns: CLOCK_MONOTONIC, UINT64_MAX for none. 0, the ring's error, -ETIMEDOUT,
 * or -ECONNRESET once c->gone says the daemon is gone.
 */
int jring_wait(struct jring_client *c, bool (*done)(const struct jring_client *c, uint64_t arg), uint64_t arg,
	       uint64_t deadline_ns);
/* The first LSN of the entry appended at start, once it is durable. */
uint64_t jring_entry_lsn(const struct jring_client *c, uint64_t start);

/* --- the daemon's half ------------------------------------------------------------------ */

/* The one way the daemon reads memory a client can write: a copy, used from then on. */
void jring_fetch(void *dst, const void *src, size_t n);
/*
 * Called after every fetch when something defines it: only the fuzz target does (it rewrites
 * the ring between the daemon's reads, as a hostile client would); NULL in every other build.
 */
void jring_fetch_hook(const void *src, size_t n) __attribute__((weak));
/* The client's tail, read once (acquire: the entries before it are visible). */
uint64_t jring_load_tail(const struct jring_hdr *h);
/*
 * After jring_load_tail: the position up to which the client's entries are urgent. `lazy` and
 * `want` are read once each; a client that does not keep them (lazy != 1) has every entry
 * urgent. The daemon keeps the most it took in *seen (a client's `want` only grows, and one
 * that moves it back gets nothing from it): returns MAX(*seen, MIN(want, upto)), upto being
 * what the daemon has read of the ring, and stores it in *seen.
 */
uint64_t jring_take_want(const struct jring_hdr *h, uint64_t upto, uint64_t *seen);
/*
 * need_wakeup = want: raised before the flusher sleeps, lowered once it is awake (or while it
 * cannot act on appends). With want, true when the ring has nothing past head and, where the
 * filling batch holds lazy entries of this ring up to lazy_end (0: none), `want` (taken into
 * *seen as jring_take_want does) does not cover them yet: sleeping is safe.
 */
bool jring_arm(struct jring_hdr *h, bool want, uint64_t head, uint64_t lazy_end, uint64_t *seen);

/* The daemon's own description of a ring: never read back from the shared header. */
struct jring_view {
	const uint8_t *data;
	uint64_t size; /* a power of two */
	uint64_t max_entry; /* disk bytes of one entry */
};

struct jring_read {
	uint64_t end; /* ring position after the entry */
	uint32_t count; /* records copied (0: a skip entry) */
	uint64_t disk; /* bytes written to dst */
};

/*
 * Read the entry at ring position pos (below tail, which the caller read once) and write its
 * records at dst as on-disk records (jformat.h) with LSNs from lsn on, using at most room
 * bytes. Each header is fetched once, checked, and only the copy is used. Returns 0 (*ret
 * says what was read), -ENOSPC when the entry needs more than room (nothing consumed; it fits
 * an empty batch), or -EPROTO with *ret_why when the ring breaks the protocol. dst may hold
 * garbage past what *ret says on any error.
 */
int jring_read_entry(const struct jring_view *v, uint64_t pos, uint64_t tail, uint8_t *dst, uint64_t room,
		     uint64_t lsn, uint64_t generation, struct jring_read *ret, const char **ret_why);

/*
 * The daemon's writes (the protocol above says when each is made). Nothing else in the daemon
 * writes a ring or a wake page: it only creates, maps and unmaps them.
 */
/* A new ring's header, before the client maps it: geometry, limits, and need_wakeup raised
 * (the flusher may be asleep already: until it says otherwise, appenders must ring). */
void jring_init(struct jring_hdr *h, uint64_t size, uint64_t max_entry);
/* Entries up to head are consumed (informative: a waiting client rings again while head is
 * behind its tail). */
void jring_set_head(struct jring_hdr *h, uint64_t head);
/* The first LSN of the entry at ring position pos of a ring of size data bytes at data. */
void jring_set_lsn(uint8_t *data, uint64_t size, uint64_t pos, uint64_t lsn);
/* Publish a batch this ring had entries in: the journal's durable LSN, then the ring position
 * durable with it. */
void jring_set_durable(struct jring_hdr *h, uint64_t durable_lsn, uint64_t durable);
/* Publish the journal's durable LSN only (to every ring, after a batch completed). */
void jring_set_durable_lsn(struct jring_hdr *h, uint64_t durable_lsn);
/* The journal failed or this ring broke the protocol: err (negative) from now on. */
void jring_set_error(struct jring_hdr *h, int32_t err);
/* The spin hint for the ring's waiters, in microseconds (0: sleep at once). */
void jring_set_spin(struct jring_hdr *h, uint32_t us);
/* After a publish: bump the uid's wake word, and FUTEX_WAKE it when the page says someone
 * waits (a client that lies about that only misses its own uid's wake-ups). */
void jring_wake(struct jring_wake *w);

#endif
