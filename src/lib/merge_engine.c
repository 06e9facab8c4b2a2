/* SPDX-License-Identifier: MIT */
/*
 * merge_engine.c - the engine of hp_merge: a loser tree over k batched cursors that merges rows
 * in the caller's order and folds equal keys with the combine function, galloping through runs
 * that one input wins many times in a row. One engine is used by one thread at a time (see
 * merge.c for which); it knows nothing of groups, tasks or threads.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "merge_internal.h"
#include "util.h"

static inline void copy_row(void *dst, const void *src, size_t rs)
{
	switch (rs) {
	case 8:
		memcpy(dst, src, 8);
		break;
	case 16:
		memcpy(dst, src, 16);
		break;
	case 24:
		memcpy(dst, src, 24);
		break;
	case 32:
		memcpy(dst, src, 32);
		break;
	default:
		memcpy(dst, src, rs);
	}
}

/*
 * The engine. One comparison per tree level and row; ties go to the lower input index, so the
 * output is stable (input order, then position in the input). After an input won min_streak
 * times in a row, the engine finds the runner-up among the losers on the winner's path,
 * gallops (exponential, then binary search) over the winner's batch to count the rows that
 * precede it, and copies that run at once (one memcpy, or one fold pass with combine);
 * min_streak adapts, so random data pays almost nothing for the check. A row is folded into
 * the open output row (the last of the batch) while they compare equal, and a batch is handed
 * on only when the next row differs: batches never split a key.
 */

/* Does leaf a's current row come before leaf b's? Exhausted leaves come last; ties by index. */
static inline bool precedes(const struct cursor *cur, unsigned a, unsigned b, cmp_fn cmp, void *ud)
{
	const char *pa = cur[a].p, *pb = cur[b].p;
	int c;

	if (__builtin_expect(!pb, 0))
		return pa != NULL;
	if (__builtin_expect(!pa, 0))
		return false;
	c = cmp(pa, pb, ud);
	return c < 0 || (c == 0 && a < b);
}

/*
 * Leaf w's current row is now p (NULL: exhausted): play its matches up to the root. At node n
 * the player coming up from child m meets the loser stored there, which comes from the other
 * child: from the left (lower leaves, winning ties) when m is odd. The rows sit in the nodes,
 * so a level costs one comparison and no lookup.
 */
static inline void replay(struct engine *e, unsigned w, const char *p)
{
	struct node *tree = e->tree;
	const cmp_fn cmp = e->cmp;
	void *const ud = e->ud;

	for (unsigned m = w + e->kp, n = m >> 1; n; m = n, n >>= 1) {
		const char *lp = tree[n].row;
		bool lt;

		if (__builtin_expect(!lp, 0))
			lt = false;
		else if (__builtin_expect(!p, 0))
			lt = true;
		else
			lt = cmp(lp, p, ud) < (int)(m & 1);
		if (lt) {
			unsigned l = tree[n].leaf;

			tree[n].row = p;
			tree[n].leaf = w;
			p = lp;
			w = l;
		}
	}
	tree[0].row = p;
	tree[0].leaf = w;
}

int merge_engine_init(struct engine *e, const struct hp_merge *m, unsigned k, refill_fn refill,
		       const struct hp_merge_input *inputs, const struct hp_merge_opts *o)
{
	unsigned kp = 1;

	while (kp < k)
		kp <<= 1;
	e->rs = m->rs;
	e->cmp = o->cmp;
	e->combine = o->combine;
	e->ud = o->ud;
	e->k = k;
	e->kp = kp;
	e->refill = refill;
	e->inputs = inputs;
	e->last = UINT_MAX;
	e->min_streak = 1;
	e->cur = calloc(kp, sizeof(*e->cur));
	e->tree = calloc(kp, sizeof(*e->tree));
	return e->cur && e->tree ? 0 : -ENOMEM;
}

void merge_engine_free(struct engine *e)
{
	free(e->cur);
	free(e->tree);
}

/* Load every leaf's first batch and play the initial tournament. */
long merge_engine_start(struct engine *e)
{
	unsigned kp = e->kp;
	unsigned *win;
	long r;

	for (unsigned i = 0; i < e->k; i++) {
		r = e->refill(e, i);
		if (r < 0)
			return r;
	}
	win = malloc(2 * (size_t)kp * sizeof(*win));
	if (!win)
		return -ENOMEM;
	for (unsigned i = 0; i < kp; i++)
		win[kp + i] = i;
	for (unsigned n = kp - 1; n >= 1; n--) {
		unsigned a = win[2 * n], b = win[2 * n + 1];

		if (precedes(e->cur, a, b, e->cmp, e->ud)) {
			win[n] = a;
			e->tree[n] = (struct node){ e->cur[b].p, b };
		} else {
			win[n] = b;
			e->tree[n] = (struct node){ e->cur[a].p, a };
		}
	}
	e->tree[0].leaf = kp > 1 ? win[1] : 0;
	e->tree[0].row = e->cur[e->tree[0].leaf].p;
	free(win);
	e->started = true;
	return 0;
}

/* The best of the losers on w's path (the overall runner-up), or -1 if they are all exhausted. */
static int runner_up(const struct engine *e, unsigned w)
{
	int best = -1;

	for (unsigned n = (w + e->kp) >> 1; n; n >>= 1) {
		unsigned l = e->tree[n].leaf;

		if (!e->tree[n].row)
			continue;
		if (best < 0 || precedes(e->cur, l, (unsigned)best, e->cmp, e->ud))
			best = (int)l;
	}
	return best;
}

static inline bool row_before(const struct engine *e, const char *row, const char *ref, bool tie_ok)
{
	int c = e->cmp(row, ref, e->ud);

	return c < 0 || (c == 0 && tie_ok);
}

/* How many rows of w's batch, from the current one, come before the runner-up's current row. */
static size_t run_length(const struct engine *e, unsigned w, int ru)
{
	const struct cursor *c = &e->cur[w];
	size_t rs = e->rs, m = (size_t)(c->end - c->p) / rs, good = 0, bad, step = 1;
	const char *ref;
	bool tie_ok;

	if (ru < 0)
		return m;
	ref = e->cur[ru].p;
	tie_ok = w < (unsigned)ru;
	/* exponential probes at good + 0, 1, 3, 7, ... until one fails */
	for (;;) {
		size_t i = good + step - 1;

		if (i >= m)
			i = m - 1;
		if (!row_before(e, c->p + i * rs, ref, tie_ok)) {
			bad = i;
			break;
		}
		good = i + 1;
		if (good >= m)
			return m;
		step <<= 1;
	}
	while (good < bad) {
		size_t mid = good + (bad - good) / 2;

		if (row_before(e, c->p + mid * rs, ref, tie_ok))
			good = mid + 1;
		else
			bad = mid;
	}
	return good;
}

/*
 * w keeps winning: copy (or fold) at once its rows that precede the runner-up, at most `left`
 * and as many as fit in out. Returns the rows consumed; *ret_all says whether that was the whole
 * run (else w still wins with its current row and the tree stands as it is).
 */
static size_t gallop(struct engine *e, unsigned w, char *out, size_t cap, size_t *pn, char **pacc,
		     uint64_t left, bool *ret_all)
{
	struct cursor *c = &e->cur[w];
	size_t run = run_length(e, w, runner_up(e, w)), i = 0, n = *pn, rs = e->rs;

	if (run >= GALLOP_GOOD) {
		if (e->min_streak > 1)
			e->min_streak--;
	} else if (e->min_streak < STREAK_MAX) {
		e->min_streak++;
	}
	if (!e->combine) {
		i = MIN(run, cap - n);
		i = MIN(i, left);
		memcpy(out + n * rs, c->p, i * rs);
		n += i;
	} else {
		char *acc = *pacc;

		for (; i < run && i < left; i++) {
			const char *row = c->p + i * rs;

			if (e->cmp(acc, row, e->ud) == 0) {
				e->combine(acc, row, e->ud);
			} else {
				if (n == cap)
					break;
				acc = out + n * rs;
				copy_row(acc, row, rs);
				n++;
			}
		}
		*pacc = acc;
	}
	c->p += i * rs;
	*pn = n;
	*ret_all = i == run;
	return i;
}

/*
 * Merge into out (cap rows, *pn already there, the last one open when combining) until out is
 * full and the next row differs (ST_FULL), *budget input rows were consumed (ST_QUOTA), or
 * every leaf is exhausted (ST_END); or a negative errno from a refill (the engine is then dead).
 */
long merge_engine_run(struct engine *e, char *out, size_t cap, size_t *pn, uint64_t *budget)
{
	const size_t rs = e->rs;
	const cmp_fn cmp = e->cmp;
	const combine_fn combine = e->combine;
	void *const ud = e->ud;
	struct cursor *const cur = e->cur;
	size_t n = *pn;
	char *acc = combine && n ? out + (n - 1) * rs : NULL;
	uint64_t left = *budget;
	unsigned last = e->last, streak = e->streak;
	long st = ST_QUOTA;

	while (left) {
		unsigned w = e->tree[0].leaf;
		struct cursor *c = &cur[w];
		const char *r = c->p;

		if (!r) {
			st = ST_END;
			break;
		}
		if (acc && cmp(acc, r, ud) == 0) {
			combine(acc, r, ud);
		} else {
			char *d;

			if (n == cap) {
				st = ST_FULL;
				break;
			}
			d = out + n * rs;
			copy_row(d, r, rs);
			n++;
			if (combine)
				acc = d;
		}
		left--;
		c->p = r + rs;
		/* 64 streams outrun the hardware prefetcher: ask for this one's rows ahead */
		__builtin_prefetch(r + 512);
		if (w != last) {
			last = w;
			streak = 0;
		} else if (++streak >= e->min_streak && c->p != c->end && left) {
			bool all;

			streak = 0;
			left -= gallop(e, w, out, cap, &n, &acc, left, &all);
			if (!all) {
				st = n == cap ? ST_FULL : ST_QUOTA;
				break;
			}
		}
		if (c->p == c->end) {
			long rr = e->refill(e, w);

			if (rr < 0) {
				st = rr;
				break;
			}
		}
		replay(e, w, c->p);
	}
	e->last = last;
	e->streak = streak;
	*pn = n;
	*budget = left;
	return st;
}

/* The refill of an engine over the caller's inputs. */
long merge_input_refill(struct engine *e, unsigned i)
{
	const struct hp_merge_input *in = &e->inputs[i];
	const void *rows = NULL;
	long n = in->next(in->ctx, &rows);

	if (n < 0)
		return n < -4095 ? -EIO : n;
	if (n == 0) {
		e->cur[i].p = e->cur[i].end = NULL;
		return 0;
	}
	if (!rows || (unsigned long)n > SIZE_MAX / e->rs)
		return -EINVAL;
	e->cur[i].p = rows;
	e->cur[i].end = (const char *)rows + (size_t)n * e->rs;
	return 1;
}

