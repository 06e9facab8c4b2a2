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
 *
 * The engine (the loser tree) is merge_engine.c; what the two share is merge_internal.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "merge_internal.h"
#include "util.h"

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
		st = merge_engine_start(&g->eng);
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
		st = merge_engine_run(&g->eng, g->buf[g->fill], m->ibatch_rows, &g->fill_n, &budget);
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
	merge_engine_free(&m->top);
	for (unsigned i = 0; i < m->ngroups; i++) {
		merge_engine_free(&m->groups[i].eng);
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
		if (merge_engine_init(&g->eng, m, hi - lo, merge_input_refill, m->inputs + lo, o) < 0)
			return -ENOMEM;
		for (unsigned b = 0; b < GROUP_BUFS; b++) {
			g->buf[b] = malloc(m->ibatch_rows * m->rs);
			if (!g->buf[b])
				return -ENOMEM;
			g->freel[g->nfree++] = b;
		}
	}
	if (merge_engine_init(&m->top, m, G, group_fetch, NULL, o) < 0)
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
		r = merge_engine_init(&m->top, m, k, merge_input_refill, inputs, opts);
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
		st = merge_engine_start(&m->top);
		if (st < 0)
			return merge_finish(m, st);
	}
	do {
		uint64_t budget = CONSUMER_CHUNK;

		if (atomic_load_explicit(&m->cancelled, memory_order_relaxed))
			return merge_finish(m, -ECANCELED);
		st = merge_engine_run(&m->top, m->out, m->batch_rows, &n, &budget);
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
