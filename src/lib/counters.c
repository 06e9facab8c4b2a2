/* SPDX-License-Identifier: MIT */
/*
 * counters.c - the connection's counters page (proto.h, struct proto_counters_page): what this
 * process tells the daemon's status that the daemon never sees otherwise, its spill streams still
 * in memory (spill.c) and its hugepage heaps (hp_conn_report_heaps, for libhugepool-heap).
 *
 * The page comes once per connection, with the daemon's spill threshold (PROTO_SPILL_ATTACH), at
 * the first use of either; its fd is checked first (client_check_fd: a sealed memfd of its
 * announced size, since the words are written through a mapping of it). The words are added to
 * with relaxed atomics: the daemon reads each once per status and trusts none for a decision.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <sys/mman.h>
#include <unistd.h>

#include "client.h"
#include "util.h"

/* Add v to one word of the page. */
static void word_add(uint64_t *word, int64_t v)
{
	if (v)
		__atomic_fetch_add(word, (uint64_t)v, __ATOMIC_RELAXED);
}

int counters_attach(hp_conn *c)
{
	struct proto_spill_attach req = { 0 };
	const struct proto_spill_attached *a;
	_cleanup_free_ void *payload = NULL;
	int fd, r;
	void *p;

	if (c->counters)
		return 0;
	r = client_call_fds(c, PROTO_SPILL_ATTACH, &req, sizeof(req), PROTO_SPILL_ATTACHED, &payload, &fd, 1);
	if (r < 0)
		return r;
	a = payload;
	if (a->page_size < sizeof(struct proto_counters_page) || a->threshold > HP_SPILL_THRESHOLD_MAX) {
		client_set_error(c, "the daemon announced a counters page of %" PRIu64 " bytes and a threshold of %" PRIu64,
				 a->page_size, a->threshold);
		close(fd);
		return -EPROTO;
	}
	if ((r = client_check_fd(c, fd, CLIENT_FD_MEMORY, a->page_size, "a counters page")) < 0) {
		close(fd);
		return r;
	}
	p = mmap(NULL, sizeof(struct proto_counters_page), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	r = p == MAP_FAILED ? -errno : 0;
	close(fd);
	if (r < 0)
		return r;
	c->counters = p;
	c->spill_threshold = a->threshold;
	return 0;
}

void counters_add_spill(hp_conn *c, int64_t streams, int64_t bytes)
{
	word_add(&c->counters->streams_memory, streams);
	word_add(&c->counters->bytes_memory, bytes);
}

int hp_conn_report_heaps(hp_conn *c, int64_t heaps, int64_t buffers, int64_t bytes)
{
	int r;

	if (!c)
		return -EINVAL;
	if ((r = counters_attach(c)) < 0)
		return r;
	word_add(&c->counters->heaps, heaps);
	word_add(&c->counters->heap_buffers, buffers);
	word_add(&c->counters->heap_bytes, bytes);
	return 0;
}
