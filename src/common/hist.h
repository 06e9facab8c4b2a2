/* SPDX-License-Identifier: MIT */
/*
 * hist.h - a log-linear latency histogram: constant memory, O(1) record, percentiles within
 * 1/HIST_SUB (about 6%) of the true value. Used for the journal's sync latency and by the
 * benchmarks. Not thread-safe: the owner serialises access.
 */
#ifndef HP_HIST_H
#define HP_HIST_H

#include <stdint.h>

#define HIST_SUB_BITS 4
#define HIST_SUB (1u << HIST_SUB_BITS)
#define HIST_BUCKETS (64 * HIST_SUB)

struct hist {
	uint64_t count;
	uint64_t sum;
	uint64_t max;
	uint64_t buckets[HIST_BUCKETS];
};

void hist_add(struct hist *h, uint64_t v);
/* The value below which a fraction q (0..1) of the samples lie; 0 when empty. */
uint64_t hist_quantile(const struct hist *h, double q);
void hist_merge(struct hist *dst, const struct hist *src);

#endif
