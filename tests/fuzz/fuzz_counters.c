/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: the daemon's reader of the counters pages clients share with it (counters.c's
 * counters_read, through spill_get_status and spill_owner_status as a status reply uses them),
 * with the pages rewritten between the daemon's reads as a hostile client would.
 *
 * Input: one byte of owners (1..8, and which of them have a page), 16 bytes of initial counters
 * per owner with a page (its streams' words; the heaps' start at zero), then a rewrite script of
 * 10-byte steps (owner, word, 8 value bytes). The page's words are its first NWORDS uint64s, in
 * the order the daemon reads them: streams_memory, bytes_memory, then the heaps' fields.
 * counters_read_hook runs after every read the daemon makes of a page and applies the next step
 * to a page (any page: clients share nothing, but a rewrite anywhere must change nothing
 * already read). What must hold: the machine's figures are exactly the sum of the owners'
 * (each page is read once per status, and the owners report that read), and each owner
 * reports what its page held at that read, its heaps too. The pages are real (spill_attach's
 * sealed memfd, mapped read-write here as a client maps it).
 */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "config.h"
#include "fuzz.h"
#include "spill.h"

#define MAX_OWNERS 8
#define NWORDS 5 /* streams_memory, bytes_memory, heaps, heap_buffers, heap_bytes */
_Static_assert(offsetof(struct proto_counters_page, heap_bytes) == (NWORDS - 1) * sizeof(uint64_t),
	       "the words the daemon reads are the page's first NWORDS");

static uint64_t *words(struct proto_counters_page *page)
{
	return (uint64_t *)page;
}

static struct {
	struct proto_counters_page *page[MAX_OWNERS]; /* the client's writable mappings */
	const struct proto_counters_page *daemon[MAX_OWNERS]; /* the daemon's mappings, to know whose */
	uint64_t at_read[MAX_OWNERS][NWORDS]; /* what each page held when the daemon read each word */
	unsigned nreads[MAX_OWNERS], n;
	const uint8_t *script, *end;
} cur;

void counters_read_hook(const struct proto_counters_page *page)
{
	unsigned i, w;

	for (i = 0; i < cur.n; i++)
		if (cur.daemon[i] == page && cur.nreads[i] < NWORDS) {
			w = cur.nreads[i]++;
			cur.at_read[i][w] = words(cur.page[i])[w];
		}
	if (cur.end - cur.script < 10)
		return;
	i = cur.script[0] % MAX_OWNERS;
	if (i < cur.n && cur.page[i]) {
		uint64_t v;

		memcpy(&v, cur.script + 2, sizeof(v));
		words(cur.page[i])[cur.script[1] % NWORDS] = v;
	}
	cur.script += 10;
}

static struct spill *spill_once(void)
{
	static struct spill *sp;
	static char dir[64];
	struct config cfg;

	if (sp)
		return sp;
	snprintf(dir, sizeof(dir), "/tmp/hugepool-fuzz.XXXXXX");
	if (!mkdtemp(dir))
		abort();
	config_init(&cfg);
	snprintf(cfg.spill_directory, sizeof(cfg.spill_directory), "%s/spill", dir);
	if (spill_open(&cfg, false, &sp) < 0)
		abort(); /* its log line says why */
	return sp;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct spill *sp = spill_once();
	struct spill_owner owners[MAX_OWNERS];
	struct proto_status_spill st;
	uint64_t streams = 0, bytes = 0;
	unsigned n;

	if (size < 1)
		return 0;
	memset(&cur, 0, sizeof(cur));
	n = data[0] % MAX_OWNERS + 1;
	for (unsigned i = 0; i < n; i++) {
		uint64_t threshold;
		int fd;

		spill_owner_init(sp, &owners[i], 1000 + i % 3, 100 + i);
		if (!(data[0] >> 3 & 1u << (i % 5)))
			continue; /* an owner without a page (a connection with files only) */
		if (spill_attach(sp, &owners[i], &fd, &threshold) < 0)
			abort();
		cur.page[i] = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		close(fd);
		if (cur.page[i] == MAP_FAILED)
			abort();
		cur.daemon[i] = owners[i].counters.page;
	}
	cur.n = n;
	data++;
	size--;
	for (unsigned i = 0; i < n; i++) {
		if (!cur.page[i] || size < 16)
			continue;
		memcpy(&cur.page[i]->streams_memory, data, 8);
		memcpy(&cur.page[i]->bytes_memory, data + 8, 8);
		data += 16;
		size -= 16;
	}
	cur.script = data;
	cur.end = data + size;

	spill_get_status(sp, NULL, &st);
	for (unsigned i = 0; i < n; i++) {
		uint64_t b, mem_streams, mem_bytes;
		struct proto_status_heaps heaps;
		uint32_t files;

		spill_owner_status(&owners[i], &files, &b, &mem_streams, &mem_bytes);
		spill_owner_heaps(&owners[i], &heaps);
		if (files != 0 || b != 0)
			abort();
		if (cur.page[i] && (cur.nreads[i] != NWORDS || mem_streams != cur.at_read[i][0] ||
				    mem_bytes != cur.at_read[i][1] || heaps.heaps != cur.at_read[i][2] ||
				    heaps.heap_buffers != cur.at_read[i][3] || heaps.heap_bytes != cur.at_read[i][4]))
			abort(); /* not what the page held when the daemon read it */
		if (!cur.page[i] && (mem_streams || mem_bytes || heaps.heaps || heaps.heap_buffers || heaps.heap_bytes))
			abort();
		/* the daemon's sums saturate: the clients' own words must not wrap them */
		streams = streams + mem_streams < streams ? UINT64_MAX : streams + mem_streams;
		bytes = bytes + mem_bytes < bytes ? UINT64_MAX : bytes + mem_bytes;
	}
	if (st.streams_memory != streams || st.bytes_memory != bytes)
		abort(); /* the machine's figures are not the (saturated) sum of what the owners report */

	for (unsigned i = 0; i < n; i++) {
		if (cur.page[i])
			munmap(cur.page[i], 4096);
		spill_owner_release(sp, &owners[i]);
	}
	memset(&cur, 0, sizeof(cur));
	return 0;
}
