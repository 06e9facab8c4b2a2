/* SPDX-License-Identifier: MIT */
/*
 * counters.h - a connection's counters page: a sealed memfd of one page the daemon makes when the
 * client first asks (PROTO_SPILL_ATTACH, with the spill threshold) and maps read-only, in which
 * the client's library counts what the daemon never sees otherwise: its spill streams still in
 * its memory and its hugepage heaps (struct proto_counters_page).
 *
 * The client writes the page whenever it likes, so its words are informative (status only), never
 * trusted for a decision: counters_read copies each word once, with a relaxed load, into the
 * owner's copy (seen), which is all anything reports. The page lives with the connection's
 * spill owner (spill.h), which keeps it across a warm restart (spill_warm.c). Event loop only.
 */
#ifndef HP_COUNTERS_H
#define HP_COUNTERS_H

#include <stdint.h>

#include "proto.h"

#define COUNTERS_PAGE_BYTES 4096u

struct counters {
	const struct proto_counters_page *page; /* read-only mapping; NULL: none yet */
	int fd; /* the daemon's own fd of the page (kept for a next life); -1: none */
	struct {
		uint64_t streams, bytes; /* spill streams in memory, and their bytes */
		struct proto_status_heaps heaps;
	} seen; /* what counters_read copied last (zeros without a page) */
};

/* No page yet. */
void counters_init(struct counters *c);
/* Make the page: *ret_fd, the client's copy of its fd (the caller sends and closes it). */
int counters_create(struct counters *c, int *ret_fd);
/* Take a page a previous life kept (fd: checked to be a sealed one-page memfd); false if not one. */
bool counters_adopt(struct counters *c, int fd);
/* Copy the page's words, each read once. */
void counters_read(struct counters *c);
/* Unmap the page and close the daemon's fd of it (close_fd false: leave the fd to the caller). */
void counters_free(struct counters *c, bool close_fd);

/* Tests only: called after every read of a page's word, to change the page between reads. */
void counters_read_hook(const struct proto_counters_page *page) __attribute__((weak));

#endif
