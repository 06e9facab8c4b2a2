/* SPDX-License-Identifier: MIT */
/*
 * jformat.h - the on-disk format of journals, shared by the daemon (writes and recovers), the
 * library (replays) and hugepoolctl (verify, dump). Pure functions over bytes; no I/O.
 *
 * A journal is a fixed set of preallocated segment files, reused in turn. Each segment starts
 * with a JFORMAT_BLOCK-sized header naming its generation (one more at every reuse) and the LSN
 * of its first record. Records follow, each 8-byte aligned:
 *
 *   crc32c u32 | len u32 | lsn u64 | gen u32 | type u16 | flags u16 | payload[len] | zero pad
 *
 * The CRC covers everything after itself: the rest of the header and the payload. gen is the
 * low 32 bits of the segment's generation, so a record left over from an earlier use of the
 * file never validates; lsn must be exactly the next expected one, so nothing after a gap or a
 * torn record is believed. DATA records carry the client's bytes and consume one LSN each; PAD
 * records fill space (to a block boundary under O_DIRECT, or the rest of a segment) and consume
 * none.
 */
#ifndef HP_JFORMAT_H
#define HP_JFORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define JFORMAT_BLOCK 4096u
#define JFORMAT_SEG_MAGIC 0x534a5048u /* "HPJS" */
#define JFORMAT_VERSION 1u
#define JFORMAT_REC_HDR 24u
#define JFORMAT_RECORD_MAX (1u << 20) /* payload bytes of one record */
#define JFORMAT_NAME_MAX 32
/*
 * flags of a segment header: the segment was opened only once every record before first_lsn
 * was durable (its header was synced before any of its records was written). Without it (a
 * header of an older hugepoold), the segment's first batch may have been written while the
 * last batch of the segment before was still in flight.
 */
#define JFORMAT_SEG_ORDERED 1u

enum jformat_type {
	JREC_DATA = 1,
	JREC_PAD = 2,
};

struct jformat_seg_hdr {
	uint32_t magic;
	uint32_t version;
	uint64_t generation; /* >= 1; 0 means never used */
	uint64_t first_lsn; /* LSN of the first DATA record in this use of the segment */
	uint64_t segment_size; /* bytes of the file, header included */
	uint64_t created_ns; /* CLOCK_REALTIME */
	char journal[JFORMAT_NAME_MAX];
	uint32_t flags; /* JFORMAT_SEG_*; 0 in headers of older versions */
	uint32_t crc; /* over everything above */
};

struct jformat_rec {
	uint32_t crc;
	uint32_t len;
	uint64_t lsn;
	uint32_t gen;
	uint16_t type;
	uint16_t flags;
};
_Static_assert(sizeof(struct jformat_rec) == JFORMAT_REC_HDR, "record header size");

/* Bytes a record of payload len occupies on disk, header and padding included. */
static inline uint64_t jformat_rec_size(uint64_t len)
{
	return (JFORMAT_REC_HDR + len + 7) & ~(uint64_t)7;
}

void jformat_seg_hdr_init(struct jformat_seg_hdr *h, const char *journal, uint64_t generation,
			  uint64_t first_lsn, uint64_t segment_size, uint64_t created_ns, uint32_t flags);
/* 0 when the header is intact and of this journal; -EINVAL (with a reason) otherwise. */
int jformat_seg_hdr_check(const struct jformat_seg_hdr *h, const char *journal, const char **ret_reason);

/*
 * Write a record at dst (jformat_rec_size(len) bytes, padding zeroed). payload may be NULL
 * for PAD records (the payload area is zeroed).
 */
void jformat_rec_write(void *dst, uint64_t lsn, uint64_t generation, enum jformat_type type,
		       const void *payload, uint32_t len);
/*
 * The same for a payload already in place at dst + JFORMAT_REC_HDR: pad, CRC (of those bytes,
 * so of exactly what will be written) and header.
 */
void jformat_rec_seal(void *dst, uint64_t lsn, uint64_t generation, enum jformat_type type, uint32_t len);

/*
 * Check the record at src with avail bytes left in the segment. It must carry the segment's
 * generation and, for DATA, exactly expected_lsn. Returns 0 and the header in *ret, or with a
 * reason: -ENODATA never written (zeros) or no room left, -ESTALE bytes left by an earlier use of
 * the segment, a record or part of one (both: the normal end of a segment's records), -EINVAL a
 * record of this use, torn or corrupt: it carries the expected LSN, or it is intact under the
 * segment's generation but out of sequence or of no known type. Whose bytes they are is judged
 * first, on the LSN and the checksum, never on a type or length read from stale bytes.
 */
int jformat_rec_check(const void *src, uint64_t avail, uint64_t expected_lsn, uint64_t generation,
		      struct jformat_rec *ret, const char **ret_reason);

/* Where a scan of one segment's records stopped. */
struct jformat_scan {
	uint64_t end; /* offset after the last valid record (>= JFORMAT_BLOCK) */
	uint64_t next_lsn; /* LSN the next record must carry */
	uint64_t records; /* DATA records seen */
	uint64_t bytes; /* DATA payload bytes seen */
	const char *stop_reason; /* why it stopped before the end, or NULL */
	int stop_err; /* 0 at the end of the segment, else jformat_rec_check's error */
};

/*
 * Walk the records of one segment (seg points at the whole file, size bytes) whose header has
 * been checked, calling fn for each DATA record (fn may be NULL; non-zero from fn stops the walk
 * and is returned). Returns 0 at the end of the valid records.
 */
int jformat_scan_segment(const uint8_t *seg, uint64_t size, const struct jformat_seg_hdr *h,
			 int (*fn)(const struct jformat_rec *rec, const void *payload, void *ud), void *ud,
			 struct jformat_scan *ret);

#endif
