/* SPDX-License-Identifier: MIT */
/*
 * hist.c - see hist.h. Values below HIST_SUB get a bucket each; above, every power of two is
 * split into HIST_SUB equal buckets, and a quantile reports the upper edge of its bucket.
 */
#include "hist.h"

static unsigned bucket_of(uint64_t v)
{
	unsigned msb;

	if (v < HIST_SUB)
		return (unsigned)v;
	msb = 63u - (unsigned)__builtin_clzll(v);
	/* the HIST_SUB_BITS bits below the top one pick the sub-bucket */
	return (msb - HIST_SUB_BITS + 1) * HIST_SUB + (unsigned)((v >> (msb - HIST_SUB_BITS)) & (HIST_SUB - 1));
}

static uint64_t bucket_top(unsigned b)
{
	unsigned group = b / HIST_SUB, sub = b % HIST_SUB;

	if (group == 0)
		return b;
	/* group g >= 1 covers [2^(g+SUB_BITS-1), 2^(g+SUB_BITS)) in HIST_SUB steps */
	unsigned shift = group - 1;
	uint64_t base = (uint64_t)HIST_SUB << shift;

	return base + (((uint64_t)sub + 1) << shift) - 1;
}

void hist_add(struct hist *h, uint64_t v)
{
	unsigned b = bucket_of(v);

	h->buckets[b < HIST_BUCKETS ? b : HIST_BUCKETS - 1]++;
	h->count++;
	h->sum += v;
	if (v > h->max)
		h->max = v;
}

uint64_t hist_quantile(const struct hist *h, double q)
{
	uint64_t want, seen = 0;

	if (!h->count)
		return 0;
	want = (uint64_t)(q * (double)h->count + 0.5);
	if (want == 0)
		want = 1;
	for (unsigned b = 0; b < HIST_BUCKETS; b++) {
		seen += h->buckets[b];
		if (seen >= want) {
			uint64_t top = bucket_top(b);

			return top < h->max ? top : h->max;
		}
	}
	return h->max;
}

void hist_merge(struct hist *dst, const struct hist *src)
{
	for (unsigned b = 0; b < HIST_BUCKETS; b++)
		dst->buckets[b] += src->buckets[b];
	dst->count += src->count;
	dst->sum += src->sum;
	if (src->max > dst->max)
		dst->max = src->max;
}
