/* SPDX-License-Identifier: MIT */
/*
 * merge.c - hp_merge: k sorted inputs merged (and combined) by a loser tree over batched cursors,
 * on the caller's thread (serial), or in two layers: groups of inputs merged by tasks on the
 * process-wide pool (workpool.c) into rings of batches, and their final merge on the caller's.
 * Threads: the one thread driving a merge runs hp_merge_next and the final merge; workers run
 * slices of groups; hp_merge_cancel may come from any thread. m->lock guards the rings, group
 * states and m->stop/err/live/slots/waiting; m->cancelled is atomic; a group's engine belongs to
 * whoever set it RUNNING. Deadlock-free: no task ever waits for another (a producer with a full
 * ring parks), and the caller runs any group it needs that no worker is running (help-while-
 * waiting), so a merge completes even if no worker ever serves it (see "Groups" below).
 * Memory: the merge owns its engines, groups and buffers; hp_merge_close stops the tasks first.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hugepool.h"
#include "util.h"
#include "workpool.h"

#define MERGE_K_MAX 65536u
#define DEFAULT_BATCH_ROWS 4096
#define DEFAULT_SLICE_NS 1000000u
#define GROUP_BUFS 8 /* batch buffers per group: one filling, one read, the rest queued */
#define RESUME_FREE (GROUP_BUFS / 2) /* a parked group is requeued once this many are free */
#define IBATCH_BYTES (32u << 10) /* target size of a batch between tasks */
#define IBATCH_MIN_ROWS 8
#define QUOTA_START 8192 /* rows of a task's first slice */
#define QUOTA_MIN 256
#define QUOTA_MAX (1u << 22)
#define CONSUMER_CHUNK 65536 /* rows hp_merge_next merges between two looks at cancel */
#define STREAK_MAX 32 /* wins in a row before a gallop, at most */
#define GALLOP_GOOD 8 /* a gallop that copied fewer rows makes the next one less eager */
#define PARALLEL_MIN_K 4 /* fewer inputs: always serial */
#define GROUPS_MAX 256

typedef int (*cmp_fn)(const void *a, const void *b, void *ud);
typedef void (*combine_fn)(void *acc, const void *row, void *ud);

/* engine_run results (>= 0); errors are negative errnos */
enum { ST_END = 0, ST_FULL = 1, ST_QUOTA = 2 };
/* group_work results (>= 0) */
enum { GW_YIELD = 0, GW_END = 1, GW_NOBUF = 2 };

struct cursor {
	const char *p, *end; /* the current row and the end of its batch; p NULL: exhausted */
};

/* a player in the loser tree: its leaf and its current row (NULL: exhausted), kept in the node */
struct node {
	const char *row;
	unsigned leaf;
};

struct engine;
/* Load leaf i's next batch: 1 with rows, 0 at its end (p = NULL), or a negative errno. */
typedef long (*refill_fn)(struct engine *e, unsigned i);

/*
 * A loser tree over k cursors, padded to kp (a power of two) leaves with exhausted ones, so the
 * left subtree of every node holds the lower leaves: a tie goes to the player from the left.
 * Used by one thread at a time: the consumer (top), or whoever set its group RUNNING.
 */
struct engine {
	size_t rs;
	cmp_fn cmp;
	combine_fn combine; /* NULL: no folding */
	void *ud;
	unsigned k, kp;
	struct cursor *cur; /* kp; the padding leaves stay exhausted */
	struct node *tree; /* kp: [0] the winner, [1..kp-1] the loser of each match */
	refill_fn refill;
	const struct hp_merge_input *inputs; /* input_refill: this engine's k inputs */
	struct hp_merge *m; /* group_fetch */
	unsigned last, streak, min_streak; /* the gallop trigger */
	bool started;
};

enum gstate {
	G_IDLE, /* parked (ring full) or not started: nobody runs it, not queued */
	G_QUEUED, /* submitted to the pool: on the run queue, or popped by a worker about to run */
	G_RUNNING, /* a worker or the consumer runs group_work */
	G_DONE, /* will never run again */
};

struct group {
	struct wp_task task; /* first: the pool hands back &task */
	struct hp_merge *m;
	struct engine eng; /* owned by the thread that set RUNNING */
	char *buf[GROUP_BUFS];
	/* m->lock: */
	size_t nrows[GROUP_BUFS]; /* rows in each filled buffer */
	unsigned filled[GROUP_BUFS], fhead, flen; /* FIFO of filled buffers */
	unsigned freel[GROUP_BUFS], nfree; /* free buffers */
	enum gstate state;
	bool eof; /* every row was pushed: when flen is 0, the stream is over */
	/* owned by the thread that set RUNNING: */
	int fill; /* the buffer being filled, -1 none */
	size_t fill_n;
	uint64_t quota; /* rows per slice on a worker */
	/* consumer's: */
	int reading; /* the buffer the final merge reads, -1 none */
};

struct hp_merge {
	const struct hp_merge_input *inputs;
	unsigned k;
	size_t rs, batch_rows, ibatch_rows;
	uint64_t slice_ns;
	atomic_bool cancelled; /* hp_merge_cancel, any thread */
	/* consumer's (the thread driving the merge): */
	bool finished;
	long final; /* what hp_merge_next returns once finished */
	struct engine top; /* over the inputs (serial) or the groups' rings */
	char *out; /* batch_rows rows, handed to the caller */
	unsigned ngroups;
	struct group *groups;
	pthread_mutex_t lock;
	pthread_cond_t cond; /* a group pushed a batch or changed state, or cancel */
	/* m->lock: */
	bool stop; /* cancel, error or close: groups stop at their next slice boundary */
	long err; /* the first input error seen by a group */
	unsigned live; /* groups not G_DONE */
	unsigned slots; /* pool slots still reserved */
	unsigned waiting; /* consumer threads in cond_wait (0 or 1) */
};

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

static int engine_init(struct engine *e, const struct hp_merge *m, unsigned k, refill_fn refill,
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

static void engine_free(struct engine *e)
{
	free(e->cur);
	free(e->tree);
}

/* Load every leaf's first batch and play the initial tournament. */
static long engine_start(struct engine *e)
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
static long engine_run(struct engine *e, char *out, size_t cap, size_t *pn, uint64_t *budget)
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
static long input_refill(struct engine *e, unsigned i)
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

/*
 * Groups: the first layer. hp_merge_open splits the inputs into G contiguous groups (G from a
 * cost model, choose_groups) and submits one task per group; a slice merges g->quota input rows
 * (adapted to opts->slice_ns) into the group's ring of GROUP_BUFS batches, then the task yields
 * (requeued at the back of the pool's FIFO) or, when no buffer is free, parks (G_IDLE, holding
 * no thread) until the consumer has freed RESUME_FREE of them and requeues it.
 * Deadlock freedom: a task never waits for anything but m->lock and its own inputs. The consumer
 * (group_fetch, on the caller's thread), needing group g's next batch, takes g off the run
 * queue and runs it itself when g is queued or parked; when a worker is running g, it runs
 * another queued group of this merge meanwhile, or waits on m->cond, which that worker signals
 * at the end of its slice. So the consumer waits only for a thread that is making progress, and
 * a merge completes with every worker busy elsewhere (or blocked in another merge's input), with
 * any number of concurrent merges, and in a child after fork (no workers). Lock order: m->lock,
 * then the pool lock.
 */

static void release_slots(struct hp_merge *m)
{
	if (m->slots) {
		workpool_release(m->slots);
		m->slots = 0;
	}
}

static void wake_consumer(struct hp_merge *m)
{
	if (m->waiting)
		pthread_cond_broadcast(&m->cond);
}

/*
 * Run group g (state RUNNING, owned by the caller of this, no lock held): on a worker for one
 * slice of g->quota input rows; for the consumer (until_batch) until it pushed a batch or was
 * cancelled (with combine, one output batch may take any number of input rows). Returns
 * GW_YIELD, GW_END (every row pushed), GW_NOBUF (ring full) or a negative errno.
 */
static long group_work(struct group *g, bool until_batch)
{
	struct hp_merge *m = g->m;
	uint64_t t0 = until_batch ? 0 : now_ns();
	uint64_t budget = g->quota, start = budget;
	long st, res = GW_YIELD;

	if (!g->eng.started) {
		st = engine_start(&g->eng);
		if (st < 0)
			return st;
	}
	for (;;) {
		bool stop;

		if (g->fill < 0) {
			pthread_mutex_lock(&m->lock);
			if (g->nfree)
				g->fill = (int)g->freel[--g->nfree];
			pthread_mutex_unlock(&m->lock);
			if (g->fill < 0) {
				res = GW_NOBUF;
				break;
			}
			g->fill_n = 0;
		}
		st = engine_run(&g->eng, g->buf[g->fill], m->ibatch_rows, &g->fill_n, &budget);
		if (st < 0)
			return st;
		if (st == ST_QUOTA) {
			if (!until_batch || atomic_load_explicit(&m->cancelled, memory_order_relaxed))
				break;
			budget = start;
			continue;
		}
		/* ST_FULL, or ST_END: push what was filled */
		pthread_mutex_lock(&m->lock);
		if (g->fill_n) {
			g->nrows[g->fill] = g->fill_n;
			g->filled[(g->fhead + g->flen) % GROUP_BUFS] = (unsigned)g->fill;
			g->flen++;
			g->fill = -1;
		}
		if (st == ST_END)
			g->eof = true;
		stop = m->stop;
		wake_consumer(m);
		pthread_mutex_unlock(&m->lock);
		if (st == ST_END)
			return GW_END;
		if (until_batch || stop)
			break;
	}
	if (!until_batch && start - budget >= QUOTA_MIN) {
		/* the rows that fit in slice_ns at this slice's pace, smoothed */
		uint64_t ns = now_ns() - t0, used = start - budget;
		uint64_t want = ns ? (uint64_t)((double)used * (double)m->slice_ns / (double)ns) : QUOTA_MAX;

		g->quota = (g->quota + want) / 2;
		g->quota = MAX(g->quota, QUOTA_MIN);
		g->quota = MIN(g->quota, QUOTA_MAX);
	}
	return res;
}

/* After group_work returned res; m->lock held. Decide g's next state. */
static void group_after(struct group *g, long res)
{
	struct hp_merge *m = g->m;

	if (res < 0) {
		if (!m->err)
			m->err = res;
		m->stop = true;
	}
	if (res < 0 || res == GW_END || m->stop) {
		g->state = G_DONE;
		if (--m->live == 0)
			release_slots(m);
	} else if (res == GW_NOBUF && g->nfree < RESUME_FREE) {
		g->state = G_IDLE; /* the consumer requeues it when it frees a buffer */
	} else {
		g->state = G_QUEUED;
		workpool_submit(&g->task);
	}
	wake_consumer(m);
}

/* The pool's entry: run one slice of a group. */
static void group_task_run(struct wp_task *t)
{
	struct group *g = (struct group *)t;
	struct hp_merge *m = g->m;
	long res;

	pthread_mutex_lock(&m->lock);
	if (g->state != G_QUEUED) { /* not ours to run (cannot happen: unqueue failed for them) */
		pthread_mutex_unlock(&m->lock);
		return;
	}
	if (m->stop) {
		group_after(g, GW_YIELD);
		pthread_mutex_unlock(&m->lock);
		return;
	}
	g->state = G_RUNNING;
	pthread_mutex_unlock(&m->lock);
	res = group_work(g, false);
	pthread_mutex_lock(&m->lock);
	group_after(g, res);
	/* after this unlock, m may be freed by hp_merge_close: touch nothing */
	pthread_mutex_unlock(&m->lock);
}

/* m->lock held: take g to run it on this thread if nobody runs it (queued or parked). */
static bool group_claim(struct group *g)
{
	if (g->state == G_IDLE || (g->state == G_QUEUED && workpool_unqueue(&g->task))) {
		g->state = G_RUNNING;
		return true;
	}
	return false;
}

/* m->lock held, claimed g: run it until it pushed a batch, then let it go on. */
static void group_run_here(struct hp_merge *m, struct group *g)
{
	long res;

	pthread_mutex_unlock(&m->lock);
	res = group_work(g, true);
	pthread_mutex_lock(&m->lock);
	group_after(g, res);
}

/* The refill of the final merge: group gi's next batch, helping or waiting for it. */
static long group_fetch(struct engine *e, unsigned gi)
{
	struct hp_merge *m = e->m;
	struct group *g = &m->groups[gi];
	struct cursor *c = &e->cur[gi];
	long r;

	pthread_mutex_lock(&m->lock);
	if (g->reading >= 0) {
		g->freel[g->nfree++] = (unsigned)g->reading;
		g->reading = -1;
		if (g->state == G_IDLE && g->nfree >= RESUME_FREE && !m->stop) {
			g->state = G_QUEUED;
			workpool_submit(&g->task);
		}
	}
	for (;;) {
		bool helped = false;

		if (atomic_load_explicit(&m->cancelled, memory_order_relaxed)) {
			r = -ECANCELED;
			break;
		}
		if (m->err) {
			r = m->err;
			break;
		}
		if (g->flen) {
			unsigned b = g->filled[g->fhead];

			g->fhead = (g->fhead + 1) % GROUP_BUFS;
			g->flen--;
			g->reading = (int)b;
			c->p = g->buf[b];
			c->end = c->p + g->nrows[b] * m->rs;
			r = 1;
			break;
		}
		if (g->eof) {
			c->p = c->end = NULL;
			r = 0;
			break;
		}
		if (g->state == G_DONE) { /* stopped without an error: only cancel does that */
			r = -ECANCELED;
			break;
		}
		if (group_claim(g)) {
			group_run_here(m, g);
			continue;
		}
		/* a worker runs g: meanwhile run another group nobody runs, if there is one */
		for (unsigned i = 1; i < m->ngroups && !helped; i++) {
			struct group *h = &m->groups[(gi + i) % m->ngroups];

			if (h->state == G_QUEUED && group_claim(h)) {
				group_run_here(m, h);
				helped = true;
			}
		}
		if (!helped) {
			m->waiting++;
			pthread_cond_wait(&m->cond, &m->lock);
			m->waiting--;
		}
	}
	pthread_mutex_unlock(&m->lock);
	return r;
}

/* --- the public API ------------------------------------------------------------------------ */

/*
 * How many groups: the one minimising the estimated time per row, in comparisons (a merge of n
 * streams costs ceil(log2 n) plus about one for moving the row): the final merge runs on the
 * consumer, the first layer on min(P, G) workers, and everything shares `cores`.
 */
static unsigned choose_groups(unsigned k, unsigned P, unsigned cores)
{
	unsigned best = 2, maxg = MIN(k / 2, GROUPS_MAX);
	double best_cost = 0;

	for (unsigned G = 2; G <= maxg; G++) {
		unsigned per = (k + G - 1) / G;
		double x = (double)(32 - __builtin_clz(G - 1)) + 1.0; /* ceil(log2 G) + 1 */
		double y = (per > 1 ? (double)(32 - __builtin_clz(per - 1)) : 0.0) + 1.0;
		double par = MIN(P, G), share = MIN(cores, P + 1);
		double cost = MAX(MAX(x, y / par), (x + y) / share);

		if (G == 2 || cost < best_cost - 1e-9) {
			best = G;
			best_cost = cost;
		}
	}
	return best;
}

static void merge_free(struct hp_merge *m)
{
	engine_free(&m->top);
	for (unsigned i = 0; i < m->ngroups; i++) {
		engine_free(&m->groups[i].eng);
		for (unsigned b = 0; b < GROUP_BUFS; b++)
			free(m->groups[i].buf[b]);
	}
	free(m->groups);
	free(m->out);
	pthread_mutex_destroy(&m->lock);
	pthread_cond_destroy(&m->cond);
	free(m);
}

static int setup_groups(struct hp_merge *m, const struct hp_merge_opts *o, unsigned G)
{
	m->groups = calloc(G, sizeof(*m->groups));
	if (!m->groups)
		return -ENOMEM;
	m->ngroups = G;
	m->ibatch_rows = MAX(IBATCH_BYTES / m->rs, IBATCH_MIN_ROWS);
	for (unsigned i = 0; i < G; i++) {
		struct group *g = &m->groups[i];
		unsigned lo = (unsigned)((uint64_t)m->k * i / G), hi = (unsigned)((uint64_t)m->k * (i + 1) / G);

		g->task.run = group_task_run;
		g->m = m;
		g->fill = -1;
		g->reading = -1;
		g->quota = QUOTA_START;
		g->state = G_IDLE;
		if (engine_init(&g->eng, m, hi - lo, input_refill, m->inputs + lo, o) < 0)
			return -ENOMEM;
		for (unsigned b = 0; b < GROUP_BUFS; b++) {
			g->buf[b] = malloc(m->ibatch_rows * m->rs);
			if (!g->buf[b])
				return -ENOMEM;
			g->freel[g->nfree++] = b;
		}
	}
	if (engine_init(&m->top, m, G, group_fetch, NULL, o) < 0)
		return -ENOMEM;
	m->top.m = m;
	return 0;
}

int hp_merge_open(const struct hp_merge_input *inputs, unsigned k, const struct hp_merge_opts *opts,
		  hp_merge **ret)
{
	struct hp_merge *m;
	unsigned P = 0;
	int r;

	if (ret)
		*ret = NULL;
	if (!inputs || !opts || !ret || k < 1 || k > MERGE_K_MAX || !opts->row_size || !opts->cmp)
		return -EINVAL;
	for (unsigned i = 0; i < k; i++)
		if (!inputs[i].next)
			return -EINVAL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	if (pthread_mutex_init(&m->lock, NULL)) {
		free(m);
		return -ENOMEM;
	}
	if (pthread_cond_init(&m->cond, NULL)) {
		pthread_mutex_destroy(&m->lock);
		free(m);
		return -ENOMEM;
	}
	m->inputs = inputs;
	m->k = k;
	m->rs = opts->row_size;
	m->batch_rows = opts->batch_rows ? opts->batch_rows : DEFAULT_BATCH_ROWS;
	m->slice_ns = opts->slice_ns ? opts->slice_ns : DEFAULT_SLICE_NS;
	atomic_init(&m->cancelled, false);
	if (m->batch_rows > LONG_MAX || m->batch_rows > SIZE_MAX / m->rs) {
		r = -EINVAL;
		goto fail;
	}
	m->out = malloc(m->batch_rows * m->rs);
	if (!m->out) {
		r = -ENOMEM;
		goto fail;
	}

	if (opts->max_threads != 1 && k >= PARALLEL_MIN_K) {
		unsigned cores = workpool_size();
		unsigned want = opts->max_threads ? opts->max_threads - 1 : cores;

		if (cores)
			P = workpool_reserve(MIN(want, k / 2));
		if (P) {
			unsigned G = choose_groups(k, P, cores);

			if (P > G) {
				workpool_release(P - G);
				P = G;
			}
			m->slots = P;
			r = setup_groups(m, opts, G);
			if (r < 0)
				goto fail;
		}
	}
	if (!m->ngroups) {
		r = engine_init(&m->top, m, k, input_refill, inputs, opts);
		if (r < 0)
			goto fail;
	} else {
		/* start the first layer now: it runs while the caller gets ready to consume */
		pthread_mutex_lock(&m->lock);
		m->live = m->ngroups;
		for (unsigned i = 0; i < m->ngroups; i++) {
			m->groups[i].state = G_QUEUED;
			workpool_submit(&m->groups[i].task);
		}
		pthread_mutex_unlock(&m->lock);
	}
	*ret = m;
	return 0;
fail:
	release_slots(m);
	merge_free(m);
	return r;
}

static long merge_finish(struct hp_merge *m, long r)
{
	m->finished = true;
	m->final = r;
	if (m->ngroups) {
		pthread_mutex_lock(&m->lock);
		if (r < 0)
			m->stop = true;
		release_slots(m);
		pthread_mutex_unlock(&m->lock);
	}
	return r;
}

long hp_merge_next(hp_merge *m, const void **ret_rows)
{
	size_t n = 0;
	long st;

	if (!m || !ret_rows)
		return -EINVAL;
	if (m->finished)
		return m->final;
	if (!m->top.started) {
		st = engine_start(&m->top);
		if (st < 0)
			return merge_finish(m, st);
	}
	do {
		uint64_t budget = CONSUMER_CHUNK;

		if (atomic_load_explicit(&m->cancelled, memory_order_relaxed))
			return merge_finish(m, -ECANCELED);
		st = engine_run(&m->top, m->out, m->batch_rows, &n, &budget);
		if (st < 0)
			return merge_finish(m, st);
	} while (st == ST_QUOTA);
	if (!n)
		return merge_finish(m, 0);
	*ret_rows = m->out;
	return (long)n;
}

void hp_merge_cancel(hp_merge *m)
{
	if (!m)
		return;
	atomic_store(&m->cancelled, true);
	pthread_mutex_lock(&m->lock);
	m->stop = true;
	pthread_cond_broadcast(&m->cond);
	pthread_mutex_unlock(&m->lock);
}

void hp_merge_close(hp_merge *m)
{
	if (!m)
		return;
	if (m->ngroups) {
		pthread_mutex_lock(&m->lock);
		m->stop = true;
		for (unsigned i = 0; i < m->ngroups; i++) {
			struct group *g = &m->groups[i];

			if (g->state == G_IDLE || (g->state == G_QUEUED && workpool_unqueue(&g->task))) {
				g->state = G_DONE;
				m->live--;
			}
		}
		for (;;) {
			bool busy = false;

			for (unsigned i = 0; i < m->ngroups && !busy; i++)
				busy = m->groups[i].state == G_QUEUED || m->groups[i].state == G_RUNNING;
			if (!busy)
				break;
			m->waiting++;
			pthread_cond_wait(&m->cond, &m->lock);
			m->waiting--;
		}
		release_slots(m);
		pthread_mutex_unlock(&m->lock);
	}
	merge_free(m);
}
