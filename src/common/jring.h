/* SPDX-License-Identifier: MIT */
/*
 * jring.h - the append ring a journal writer shares with hugepoold: layout and protocol.
 *
 * One ring per writer (an hp_journal handle): a memfd the daemon creates and both map. Page 0
 * is the header, then `size` data bytes (a power of two) used as a circular buffer. Positions
 * are byte counts that only grow; position p lives at data[p & (size - 1)].
 *
 *   client writes: the entries, then `tail` (store-release) once an entry is complete;
 *   daemon writes: `head` (entries copied into a batch), then for each entry its first LSN
 *                  into the entry's lsn field, then `durable` (store-release) once the sync
 *                  covering them completed, `durable_lsn`, then bumps the journal's wake word;
 *                  `need_wakeup` while its flusher sleeps; `error` once the journal failed;
 *   client waiters: sleep on the journal's wake word (struct jring_wake, a page shared by all
 *                  writers of the journal) and count themselves in its `waiters`, so that one
 *                  FUTEX_WAKE per batch wakes every waiting writer and none when nobody waits.
 *                  A writer can scribble on that page, but all it can cause is spurious
 *                  wake-ups: each waiter checks its own ring's `durable` before it returns.
 *
 * An entry is a group of records that get consecutive LSNs:
 *   struct jring_entry { total, count, lsn } then count x (struct jring_rec + payload, 8-aligned),
 *   zero padding up to a multiple of 16
 * An entry takes at most size / 2 bytes of the ring and its records at most max_entry bytes on
 * disk (one batch). An entry never wraps: when it would not fit before the end of the data area, the client
 * writes a skip entry (count 0) covering the rest and starts again at offset 0. The client may
 * reuse space only behind `durable`, so it can still read an entry's LSN after waiting for it.
 *
 * Wake-ups (no socket round trip): the client stores `tail` then loads `need_wakeup`, and if
 * set writes the journal's doorbell eventfd. The daemon stores `need_wakeup = 1` then loads
 * every `tail` before it sleeps. All four accesses are sequentially consistent, so one of the
 * two always sees the other.
 *
 * The daemon trusts nothing here: it reads `tail` once, reads each entry and record header
 * exactly once into a copy, checks every length against the ring before it reads past it, and
 * copies payloads into its own buffer before computing their CRC. A client that corrupts its
 * ring only loses its own records (the daemon closes that writer); a client that dies half-way
 * through an entry never published it.
 */
#ifndef HP_JRING_H
#define HP_JRING_H

#include <stdint.h>

#define JRING_MAGIC 0x474e524au /* "JRNG" */
#define JRING_HDR_SIZE 4096u
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
	uint8_t pad1[56];
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

/* The journal's wake page, shared by its writers: one futex word for all of them. */
struct jring_wake {
	uint32_t futex; /* bumped by the daemon at every publish */
	uint32_t waiters; /* writer threads in FUTEX_WAIT on it */
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

#endif
