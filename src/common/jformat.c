/* SPDX-License-Identifier: MIT */
/*
 * jformat.c - see jformat.h. Every check here runs on bytes that may be torn, stale or hostile
 * (a replaying client maps the segment files), so lengths are checked before they are used.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "crc32c.h"
#include "jformat.h"

static uint32_t seg_hdr_crc(const struct jformat_seg_hdr *h)
{
	return crc32c(0, h, offsetof(struct jformat_seg_hdr, crc));
}

void jformat_seg_hdr_init(struct jformat_seg_hdr *h, const char *journal, uint64_t generation,
			  uint64_t first_lsn, uint64_t segment_size, uint64_t created_ns, uint32_t flags)
{
	memset(h, 0, sizeof(*h));
	h->magic = JFORMAT_SEG_MAGIC;
	h->version = JFORMAT_VERSION;
	h->generation = generation;
	h->first_lsn = first_lsn;
	h->segment_size = segment_size;
	h->created_ns = created_ns;
	h->flags = flags;
	strncpy(h->journal, journal, sizeof(h->journal) - 1);
	h->crc = seg_hdr_crc(h);
}

int jformat_seg_hdr_check(const struct jformat_seg_hdr *h, const char *journal, const char **ret_reason)
{
	const char *why = NULL;

	if (h->magic != JFORMAT_SEG_MAGIC)
		why = h->magic == 0 ? "never used" : "not a hugepool journal segment";
	else if (h->crc != seg_hdr_crc(h))
		why = "segment header checksum mismatch";
	else if (h->version != JFORMAT_VERSION)
		why = "unsupported segment format version";
	else if (h->generation == 0 || h->segment_size < 2 * JFORMAT_BLOCK)
		why = "segment header out of range";
	else if (journal && strncmp(h->journal, journal, sizeof(h->journal)) != 0)
		why = "segment of another journal";
	if (why) {
		if (ret_reason)
			*ret_reason = why;
		return -EINVAL;
	}
	return 0;
}

static uint32_t rec_crc(const struct jformat_rec *r, const void *payload)
{
	uint32_t c = crc32c(0, (const uint8_t *)r + sizeof(r->crc), JFORMAT_REC_HDR - sizeof(r->crc));

	return crc32c(c, payload, r->len);
}

void jformat_rec_seal(void *dst, uint64_t lsn, uint64_t generation, enum jformat_type type, uint32_t len)
{
	struct jformat_rec r = { .len = len, .lsn = lsn, .gen = (uint32_t)generation, .type = (uint16_t)type };
	uint8_t *p = dst;
	uint64_t size = jformat_rec_size(len);

	memset(p + JFORMAT_REC_HDR + len, 0, size - JFORMAT_REC_HDR - len);
	r.crc = rec_crc(&r, p + JFORMAT_REC_HDR);
	memcpy(p, &r, sizeof(r));
}

void jformat_rec_write(void *dst, uint64_t lsn, uint64_t generation, enum jformat_type type,
		       const void *payload, uint32_t len)
{
	uint8_t *p = dst;

	if (payload)
		memcpy(p + JFORMAT_REC_HDR, payload, len);
	else
		memset(p + JFORMAT_REC_HDR, 0, len);
	jformat_rec_seal(dst, lsn, generation, type, len);
}

int jformat_rec_check(const void *src, uint64_t avail, uint64_t expected_lsn, uint64_t generation,
		      struct jformat_rec *ret, const char **ret_reason)
{
	struct jformat_rec r;
	const char *why = NULL;
	bool intact;
	int err = -EINVAL;

	if (avail < JFORMAT_REC_HDR) {
		why = "no room for a record";
		err = -ENODATA;
		goto bad;
	}
	memcpy(&r, src, sizeof(r));
	if (r.crc == 0 && r.len == 0 && r.lsn == 0 && r.type == 0) {
		why = "end of written data";
		err = -ENODATA;
		goto bad;
	}
	/*
	 * Whose bytes are these? Judged before anything else, on what cannot be there by chance: a
	 * record of this use of the segment carries the LSN expected here (a padding record too), or
	 * is intact under its generation. Anything else was left by an earlier use of the file: a
	 * record of its own (intact, of an older generation and LSN), or bytes from the middle of
	 * one, where this use's records end after a crash. That is the normal end of the segment,
	 * whatever its type field happens to hold.
	 */
	intact = r.len <= JFORMAT_RECORD_MAX && jformat_rec_size(r.len) <= avail &&
		 r.crc == rec_crc(&r, (const uint8_t *)src + JFORMAT_REC_HDR);
	if (r.lsn != expected_lsn && !(intact && r.gen == (uint32_t)generation)) {
		why = "left by an earlier use of this segment";
		err = -ESTALE;
	} else if (r.len > JFORMAT_RECORD_MAX || jformat_rec_size(r.len) > avail) {
		why = "record length out of range";
	} else if (!intact) {
		why = "record checksum mismatch";
	} else if (r.gen != (uint32_t)generation) {
		why = "record of another generation at this LSN";
	} else if (r.type != JREC_DATA && r.type != JREC_PAD) {
		why = "unknown record type";
	} else if (r.type == JREC_DATA && r.lsn != expected_lsn) {
		why = "record out of sequence";
	}
	if (!why) {
		*ret = r;
		return 0;
	}
bad:
	if (ret_reason)
		*ret_reason = why;
	return err;
}

int jformat_scan_segment(const uint8_t *seg, uint64_t size, const struct jformat_seg_hdr *h,
			 int (*fn)(const struct jformat_rec *rec, const void *payload, void *ud), void *ud,
			 struct jformat_scan *ret)
{
	uint64_t off = JFORMAT_BLOCK, lsn = h->first_lsn;
	struct jformat_scan s = { 0 };
	int r = 0;

	if (size > h->segment_size)
		size = h->segment_size;
	while (off < size) {
		struct jformat_rec rec;

		s.stop_err = jformat_rec_check(seg + off, size - off, lsn, h->generation, &rec, &s.stop_reason);
		if (s.stop_err < 0)
			break;
		if (rec.type == JREC_DATA) {
			if (fn && (r = fn(&rec, seg + off + JFORMAT_REC_HDR, ud)) != 0)
				break;
			lsn++;
			s.records++;
			s.bytes += rec.len;
		}
		off += jformat_rec_size(rec.len);
	}
	if (off >= size) {
		s.stop_reason = NULL;
		s.stop_err = 0;
	}
	s.end = off;
	s.next_lsn = lsn;
	*ret = s;
	return r;
}
