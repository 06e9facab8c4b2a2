/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: the daemon's reader of a client's append ring (jring_read_entry), with the ring
 * rewritten between its reads as a hostile client would.
 *
 * Input: a 16-byte header (ring size, room, max entry, head, tail, how many rewrites), the
 * ring's bytes, then a rewrite script. jring_fetch_hook runs after every read the reader makes
 * of the ring and applies the next rewrite (offset, byte), so every double fetch shows: a
 * length checked then read again could now send a read out of the ring, which ASan reports (the
 * ring and the batch buffer are allocations of exactly their size). Every entry the reader
 * accepts must hold records that check out (jformat_rec_check) with consecutive LSNs, within
 * the room and the entry limit it was given.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "jformat.h"
#include "jring.h"

static struct {
	uint8_t *ring;
	uint64_t size;
	const uint8_t *script, *end;
} cur;

void jring_fetch_hook(const void *src, size_t n)
{
	(void)src;
	(void)n;
	if (!cur.ring || cur.end - cur.script < 3)
		return;
	cur.ring[((uint64_t)cur.script[0] | (uint64_t)cur.script[1] << 8) & (cur.size - 1)] = cur.script[2];
	cur.script += 3;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint64_t gen = 7, first_lsn = 100;
	struct jring_view v;
	uint64_t ring_size, room, head, tail, pos, lsn = first_lsn;
	uint8_t *ring, *dst;

	if (size < 16)
		return 0;
	ring_size = (uint64_t)256 << (data[0] % 6); /* 256 B .. 8 KiB: small rings fuzz fast */
	room = ((uint64_t)data[1] | (uint64_t)data[2] << 8) % (2 * ring_size) + 1;
	v.max_entry = ((uint64_t)data[3] | (uint64_t)data[4] << 8) % (2 * ring_size) + 1;
	head = ((uint64_t)data[5] | (uint64_t)data[6] << 8 | (uint64_t)data[7] << 16) * 16;
	tail = head + ((uint64_t)data[8] | (uint64_t)data[9] << 8) % (ring_size + 1);
	data += 16;
	size -= 16;
	ring = calloc(1, ring_size);
	dst = malloc(room);
	if (!ring || !dst) {
		free(ring);
		free(dst);
		return 0;
	}
	memcpy(ring, data, size < ring_size ? size : ring_size);
	v.data = ring;
	v.size = ring_size;
	cur.ring = ring;
	cur.size = ring_size;
	cur.script = size > ring_size ? data + ring_size : data + size;
	cur.end = data + size;
	/* as gather_ring: entry after entry until the tail, a full batch or a broken ring */
	for (pos = head; pos < tail;) {
		struct jring_read rd;
		const char *why = NULL;
		uint64_t off = 0;
		int r = jring_read_entry(&v, pos, tail, dst, room, lsn, gen, &rd, &why);

		if (r == -ENOSPC)
			break;
		if (r < 0) {
			if (r != -EPROTO || !why)
				abort();
			break;
		}
		if (rd.end <= pos || rd.end > tail || rd.disk > room || rd.disk > v.max_entry)
			abort();
		for (uint32_t i = 0; i < rd.count; i++) {
			struct jformat_rec rec;

			if (jformat_rec_check(dst + off, rd.disk - off, lsn + i, gen, &rec, NULL) < 0)
				abort();
			off += jformat_rec_size(rec.len);
		}
		if (off != rd.disk)
			abort();
		lsn += rd.count;
		pos = rd.end;
	}
	cur.ring = NULL;
	free(ring);
	free(dst);
	return 0;
}
