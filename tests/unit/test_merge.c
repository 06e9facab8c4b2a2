/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for hp_merge (src/lib/merge.c). Each merge is compared byte for byte with a
 * reference (all rows sorted by key, input, position; equal keys folded) over random data: k 1
 * to 256, skewed and empty inputs, duplicates, equal keys, long runs (the gallop), 16- and
 * 64-byte rows, combine on and off, serial and parallel. Inputs are callback cursors with random
 * batch sizes; some hand out a scratch copy poisoned on the next call, and all check that they
 * are never called concurrently or after their end. Then: an input failing, cancellation from
 * another thread, close with tasks in flight, 8 merges at once, and a merge started while every
 * pool worker is blocked in another merge's input. Helper threads never call cmocka.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hugepool.h"

struct row16 {
	uint64_t key, value;
};

/* a wide row: key, value, and 48 bytes that must travel with them */
struct row64 {
	uint64_t key, value;
	uint8_t pad[48];
};

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static int key_cmp(const void *a, const void *b, void *ud)
{
	uint64_t x, y;

	(void)ud;
	memcpy(&x, a, 8);
	memcpy(&y, b, 8);
	return x < y ? -1 : x > y;
}

static void sum_combine(void *acc, const void *row, void *ud)
{
	uint64_t a, r;

	(void)ud;
	memcpy(&a, (char *)acc + 8, 8);
	memcpy(&r, (const char *)row + 8, 8);
	a += r;
	memcpy((char *)acc + 8, &a, 8);
}

/* --- data sets ----------------------------------------------------------------------------- */

enum sizes { SZ_UNIFORM, SZ_SKEWED, SZ_SOME_EMPTY, SZ_ALL_EMPTY };
enum keys { K_RANDOM, K_DISJOINT, K_BLOCKS, K_EQUAL };

struct dataset {
	unsigned k;
	size_t rs;
	uint8_t **rows; /* k arrays of n[i] rows, sorted by key */
	size_t *n;
	size_t total;
};

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void ds_free(struct dataset *d)
{
	for (unsigned i = 0; i < d->k; i++)
		free(d->rows[i]);
	free(d->rows);
	free(d->n);
}

/* avg rows per input; keyrange for K_RANDOM (small: many duplicates) */
static void ds_make(struct dataset *d, unsigned k, size_t rs, enum sizes sz, enum keys kk, size_t avg,
		    uint64_t keyrange, uint64_t seed)
{
	uint64_t s = seed;

	d->k = k;
	d->rs = rs;
	d->rows = calloc(k, sizeof(*d->rows));
	d->n = calloc(k, sizeof(*d->n));
	d->total = 0;
	assert_non_null(d->rows);
	assert_non_null(d->n);
	for (unsigned i = 0; i < k; i++) {
		size_t n;
		uint64_t *keys;

		switch (sz) {
		case SZ_UNIFORM:
			n = (size_t)(rng_next(&s) % (2 * avg + 1));
			break;
		case SZ_SKEWED:
			n = i == k / 2 ? avg * k : (size_t)(rng_next(&s) % 4);
			break;
		case SZ_SOME_EMPTY:
			n = i % 3 == 1 ? 0 : (size_t)(rng_next(&s) % (2 * avg + 1));
			break;
		default:
			n = 0;
		}
		d->n[i] = n;
		d->total += n;
		d->rows[i] = calloc(n ? n : 1, rs);
		keys = calloc(n ? n : 1, sizeof(*keys));
		assert_non_null(d->rows[i]);
		assert_non_null(keys);
		for (size_t j = 0; j < n; j++) {
			switch (kk) {
			case K_RANDOM:
				keys[j] = rng_next(&s) % keyrange;
				break;
			case K_DISJOINT: /* input i owns [i << 32, ...): whole inputs are runs */
				keys[j] = ((uint64_t)i << 32) + rng_next(&s) % keyrange;
				break;
			case K_BLOCKS: /* runs of about 50 keys, interleaved between inputs */
				keys[j] = (((j / 50) * k + i) << 16) + rng_next(&s) % 8;
				break;
			case K_EQUAL:
				keys[j] = 42;
				break;
			}
		}
		qsort(keys, n, sizeof(*keys), u64_cmp);
		for (size_t j = 0; j < n; j++) {
			uint8_t *r = d->rows[i] + j * rs;
			uint64_t v = rng_next(&s) % 1000;

			memcpy(r, &keys[j], 8);
			memcpy(r + 8, &v, 8);
			for (size_t b = 16; b < rs; b++)
				r[b] = (uint8_t)(i * 31 + j * 7 + b);
		}
		free(keys);
	}
}

/* --- the reference merge ------------------------------------------------------------------ */

struct tagged {
	const uint8_t *row;
	unsigned in;
	size_t pos;
};

static int tagged_cmp(const void *a, const void *b)
{
	const struct tagged *x = a, *y = b;
	int c = key_cmp(x->row, y->row, NULL);

	if (c)
		return c;
	if (x->in != y->in)
		return x->in < y->in ? -1 : 1;
	return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* All rows, sorted stably, equal keys folded when combine; returns the row count. */
static size_t reference(const struct dataset *d, bool combine, uint8_t **ret)
{
	struct tagged *t = calloc(d->total ? d->total : 1, sizeof(*t));
	uint8_t *out = calloc(d->total ? d->total : 1, d->rs);
	size_t nt = 0, n = 0;

	assert_non_null(t);
	assert_non_null(out);
	for (unsigned i = 0; i < d->k; i++)
		for (size_t j = 0; j < d->n[i]; j++)
			t[nt++] = (struct tagged){ d->rows[i] + j * d->rs, i, j };
	qsort(t, nt, sizeof(*t), tagged_cmp);
	for (size_t i = 0; i < nt; i++) {
		if (combine && n && key_cmp(out + (n - 1) * d->rs, t[i].row, NULL) == 0) {
			sum_combine(out + (n - 1) * d->rs, t[i].row, NULL);
			continue;
		}
		memcpy(out + n * d->rs, t[i].row, d->rs);
		n++;
	}
	free(t);
	*ret = out;
	return n;
}

/* --- inputs: callback cursors over the arrays --------------------------------------------- */

/* a door inputs wait at: lock guards open and blocked, cond signals both */
struct gate {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool open;
	unsigned blocked; /* threads waiting in it */
};

/*
 * One input. The merge promises to call it from one thread at a time (handed over under its
 * own lock), which busy checks; violations is shared by all inputs of a merge (atomic).
 */
struct src {
	const uint8_t *rows;
	size_t n, pos, rs;
	uint64_t rng;
	size_t maxbatch;
	bool copy; /* hand out a scratch copy, poisoned on the next call */
	uint8_t *scratch;
	long fail_after; /* calls before it returns fail_err; < 0 never */
	long fail_err;
	long calls;
	bool done;
	unsigned delay_us; /* sleep in every call */
	struct gate *gate; /* wait for it to open in every call */
	atomic_int busy;
	atomic_int *violations; /* contract breaches seen by any input */
};

static long src_next(void *ctx, const void **ret_rows)
{
	struct src *s = ctx;
	long r;

	if (atomic_exchange(&s->busy, 1))
		atomic_fetch_add(s->violations, 1); /* called concurrently */
	if (s->done)
		atomic_fetch_add(s->violations, 1); /* called after its end or error */
	if (s->gate) {
		pthread_mutex_lock(&s->gate->lock);
		s->gate->blocked++;
		pthread_cond_broadcast(&s->gate->cond);
		while (!s->gate->open)
			pthread_cond_wait(&s->gate->cond, &s->gate->lock);
		s->gate->blocked--;
		pthread_mutex_unlock(&s->gate->lock);
	}
	if (s->delay_us) {
		struct timespec ts = { 0, (long)s->delay_us * 1000 };

		nanosleep(&ts, NULL);
	}
	if (s->fail_after >= 0 && s->calls == s->fail_after) {
		s->done = true;
		r = s->fail_err;
	} else if (s->pos == s->n) {
		s->done = true;
		r = 0;
	} else {
		size_t b = 1 + (size_t)(rng_next(&s->rng) % s->maxbatch);

		if (b > s->n - s->pos)
			b = s->n - s->pos;
		if (s->copy) {
			memset(s->scratch, 0xa5, s->maxbatch * s->rs);
			memcpy(s->scratch, s->rows + s->pos * s->rs, b * s->rs);
			*ret_rows = s->scratch;
		} else {
			*ret_rows = s->rows + s->pos * s->rs;
		}
		s->pos += b;
		r = (long)b;
	}
	s->calls++;
	atomic_store(&s->busy, 0);
	return r;
}

struct srcset {
	struct src *s;
	struct hp_merge_input *in;
	atomic_int violations;
};

/* maxbatch: 0 = random per input (1 .. n), else that */
static void srcs_make(struct srcset *ss, const struct dataset *d, size_t maxbatch, uint64_t seed)
{
	uint64_t r = seed ^ 0x5eed;

	ss->s = calloc(d->k, sizeof(*ss->s));
	ss->in = calloc(d->k, sizeof(*ss->in));
	assert_non_null(ss->s);
	assert_non_null(ss->in);
	atomic_init(&ss->violations, 0);
	for (unsigned i = 0; i < d->k; i++) {
		struct src *s = &ss->s[i];

		s->rows = d->rows[i];
		s->n = d->n[i];
		s->rs = d->rs;
		s->rng = rng_next(&r);
		s->maxbatch = maxbatch ? maxbatch : 1 + (size_t)(rng_next(&r) % (s->n ? s->n : 1));
		if (rng_next(&r) % 4 == 0)
			s->maxbatch = 1; /* batches of one row */
		s->copy = rng_next(&r) % 2;
		s->scratch = malloc(s->maxbatch * s->rs);
		assert_non_null(s->scratch);
		s->fail_after = -1;
		atomic_init(&s->busy, 0);
		s->violations = &ss->violations;
		ss->in[i] = (struct hp_merge_input){ src_next, s };
	}
}

static void srcs_free(struct srcset *ss, unsigned k)
{
	for (unsigned i = 0; i < k; i++)
		free(ss->s[i].scratch);
	free(ss->s);
	free(ss->in);
}

/* --- running a merge ----------------------------------------------------------------------- */

struct result {
	long status; /* the last hp_merge_next return: 0, or an error */
	uint8_t *rows;
	size_t n;
	size_t batches;
	bool bad_batch; /* a batch larger than batch_rows */
};

/* Open, drain and close; no cmocka calls (used from helper threads too). */
static int run_merge(const struct hp_merge_input *in, unsigned k, const struct hp_merge_opts *o, struct result *res)
{
	hp_merge *m;
	size_t cap = 1024, lim = o->batch_rows ? o->batch_rows : 4096;
	int r = hp_merge_open(in, k, o, &m);

	memset(res, 0, sizeof(*res));
	if (r < 0)
		return r;
	res->rows = malloc(cap * o->row_size);
	for (;;) {
		const void *rows = NULL;
		long n = hp_merge_next(m, &rows);

		if (n <= 0) {
			res->status = n;
			break;
		}
		if ((size_t)n > lim)
			res->bad_batch = true;
		while (res->n + (size_t)n > cap) {
			cap *= 2;
			res->rows = realloc(res->rows, cap * o->row_size);
		}
		memcpy(res->rows + res->n * o->row_size, rows, (size_t)n * o->row_size);
		res->n += (size_t)n;
		res->batches++;
	}
	/* a finished merge keeps saying so */
	if (hp_merge_next(m, &(const void *){ NULL }) != res->status)
		res->status = -EPROTO;
	hp_merge_close(m);
	return 0;
}

/* Merge d as told and compare with the reference; returns 0 or a description in why. */
static int check_one(const struct dataset *d, bool combine, unsigned max_threads, size_t batch_rows,
		     size_t maxbatch, uint64_t seed, char *why, size_t whylen)
{
	struct hp_merge_opts o = {
		.row_size = d->rs,
		.cmp = key_cmp,
		.combine = combine ? sum_combine : NULL,
		.max_threads = max_threads,
		.batch_rows = batch_rows,
		.slice_ns = seed & 1 ? 20000 : 0, /* short slices: many yields */
	};
	struct srcset ss;
	struct result res;
	uint8_t *ref;
	size_t nref = reference(d, combine, &ref);
	int r, bad = 0;

	srcs_make(&ss, d, maxbatch, seed);
	r = run_merge(ss.in, d->k, &o, &res);
	if (r < 0) {
		snprintf(why, whylen, "hp_merge_open: %d", r);
		bad = 1;
	} else if (res.status != 0) {
		snprintf(why, whylen, "hp_merge_next ended with %ld", res.status);
		bad = 1;
	} else if (res.n != nref) {
		snprintf(why, whylen, "%zu rows, reference has %zu", res.n, nref);
		bad = 1;
	} else if (nref && memcmp(res.rows, ref, nref * d->rs)) {
		size_t i = 0;

		while (!memcmp(res.rows + i * d->rs, ref + i * d->rs, d->rs))
			i++;
		snprintf(why, whylen, "row %zu of %zu differs from the reference", i, nref);
		bad = 1;
	} else if (res.bad_batch) {
		snprintf(why, whylen, "a batch had more than batch_rows rows");
		bad = 1;
	} else if (atomic_load(&ss.violations)) {
		snprintf(why, whylen, "%d input contract violations", atomic_load(&ss.violations));
		bad = 1;
	}
	free(res.rows);
	free(ref);
	srcs_free(&ss, d->k);
	return bad;
}

#define CHECK(d, combine, threads, batch_rows, maxbatch, seed)                                          \
	do {                                                                                             \
		char why_[160];                                                                          \
		if (check_one(d, combine, threads, batch_rows, maxbatch, seed, why_, sizeof(why_)))      \
			fail_msg("k=%u rs=%zu combine=%d max_threads=%u batch_rows=%zu: %s", (d)->k,     \
				 (d)->rs, (int)(combine), (unsigned)(threads), (size_t)(batch_rows), why_); \
	} while (0)

/* every combination of combine and serial/parallel over one data set */
static void check_all_modes(const struct dataset *d, size_t batch_rows, size_t maxbatch, uint64_t seed)
{
	for (int combine = 0; combine <= 1; combine++) {
		CHECK(d, combine, 1, batch_rows, maxbatch, seed);
		CHECK(d, combine, 0, batch_rows, maxbatch, seed + 1);
	}
}

/* --- equality with the reference --------------------------------------------------------- */

static void test_k_values(void **state)
{
	static const unsigned ks[] = { 1, 2, 3, 7, 64, 256 };

	(void)state;
	for (size_t i = 0; i < sizeof(ks) / sizeof(ks[0]); i++) {
		unsigned k = ks[i];
		size_t avg = k >= 64 ? 150 : 3000;
		struct dataset d;

		ds_make(&d, k, sizeof(struct row16), SZ_UNIFORM, K_RANDOM, avg, 1u << 20, 100 + k);
		check_all_modes(&d, 0, 0, k);
		ds_free(&d);
		ds_make(&d, k, sizeof(struct row16), SZ_SOME_EMPTY, K_RANDOM, avg, 64, 200 + k);
		check_all_modes(&d, 777, 0, k);
		ds_free(&d);
		ds_make(&d, k, sizeof(struct row64), SZ_UNIFORM, K_RANDOM, avg / 2, 512, 300 + k);
		check_all_modes(&d, 0, 0, k);
		ds_free(&d);
	}
}

static void test_skewed(void **state)
{
	struct dataset d;

	(void)state;
	ds_make(&d, 100, sizeof(struct row16), SZ_SKEWED, K_RANDOM, 300, 1u << 16, 7);
	check_all_modes(&d, 0, 0, 1);
	ds_free(&d);
	ds_make(&d, 33, sizeof(struct row64), SZ_SKEWED, K_RANDOM, 200, 100, 8);
	check_all_modes(&d, 100, 0, 2);
	ds_free(&d);
}

static void test_duplicates(void **state)
{
	static const uint64_t ranges[] = { 1, 2, 16, 1000 };

	(void)state;
	for (size_t i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++) {
		struct dataset d;

		ds_make(&d, 24, sizeof(struct row16), SZ_UNIFORM, K_RANDOM, 1500, ranges[i], 40 + i);
		check_all_modes(&d, 0, 0, i);
		ds_free(&d);
	}
}

static void test_equal_keys(void **state)
{
	struct dataset d;

	(void)state;
	ds_make(&d, 16, sizeof(struct row16), SZ_UNIFORM, K_EQUAL, 2000, 1, 9);
	check_all_modes(&d, 0, 0, 3);
	check_all_modes(&d, 1, 0, 4); /* batch_rows 1 */
	ds_free(&d);
	ds_make(&d, 5, sizeof(struct row64), SZ_UNIFORM, K_EQUAL, 500, 1, 10);
	check_all_modes(&d, 3, 0, 5);
	ds_free(&d);
}

static void test_empty(void **state)
{
	struct dataset d;

	(void)state;
	ds_make(&d, 1, sizeof(struct row16), SZ_ALL_EMPTY, K_RANDOM, 0, 1, 11);
	check_all_modes(&d, 0, 0, 6);
	ds_free(&d);
	ds_make(&d, 40, sizeof(struct row16), SZ_ALL_EMPTY, K_RANDOM, 0, 1, 12);
	check_all_modes(&d, 0, 0, 7);
	ds_free(&d);
}

/* whole inputs and long runs: the gallop path, with big and tiny batches */
static void test_runs(void **state)
{
	struct dataset d;

	(void)state;
	ds_make(&d, 8, sizeof(struct row16), SZ_UNIFORM, K_DISJOINT, 5000, 1u << 20, 13);
	check_all_modes(&d, 0, 0, 8);
	check_all_modes(&d, 0, 1, 9);
	ds_free(&d);
	ds_make(&d, 8, sizeof(struct row16), SZ_UNIFORM, K_DISJOINT, 3000, 4, 14);
	check_all_modes(&d, 100, 0, 10);
	ds_free(&d);
	ds_make(&d, 12, sizeof(struct row16), SZ_UNIFORM, K_BLOCKS, 3000, 0, 15);
	check_all_modes(&d, 0, 0, 11);
	check_all_modes(&d, 64, 7, 12);
	ds_free(&d);
	ds_make(&d, 6, sizeof(struct row64), SZ_UNIFORM, K_BLOCKS, 2000, 0, 16);
	check_all_modes(&d, 0, 0, 13);
	ds_free(&d);
}

/* --- errors, cancellation, close ----------------------------------------------------------- */

static void test_input_fails(void **state)
{
	(void)state;
	for (unsigned threads = 0; threads <= 1; threads++) {
		for (long fail_after = 0; fail_after <= 5; fail_after += 5) {
			struct dataset d;
			struct srcset ss;
			struct result res;
			struct hp_merge_opts o = {
				.row_size = sizeof(struct row16),
				.cmp = key_cmp,
				.combine = fail_after ? sum_combine : NULL,
				.max_threads = threads,
			};

			ds_make(&d, 8, sizeof(struct row16), SZ_UNIFORM, K_RANDOM, 20000, 1u << 30, 17);
			srcs_make(&ss, &d, 64, 18);
			ss.s[5].fail_after = fail_after;
			ss.s[5].fail_err = -ENOSPC;
			assert_int_equal(run_merge(ss.in, d.k, &o, &res), 0);
			if (res.status != -ENOSPC)
				fail_msg("max_threads=%u fail_after=%ld: merge ended with %ld, want -ENOSPC", threads,
					 fail_after, res.status);
			assert_true(res.n < d.total);
			assert_int_equal(atomic_load(&ss.violations), 0);
			free(res.rows);
			srcs_free(&ss, d.k);
			ds_free(&d);
		}
	}
}

/* an input that says it has rows but gives no pointer: -EINVAL, not a crash */
static long bad_next(void *ctx, const void **ret_rows)
{
	(void)ctx;
	(void)ret_rows;
	return 3;
}

static void test_bad_args(void **state)
{
	struct hp_merge_input in[4] = { { bad_next, NULL }, { bad_next, NULL }, { bad_next, NULL }, { bad_next, NULL } };
	struct hp_merge_opts o = { .row_size = 16, .cmp = key_cmp };
	struct hp_merge_opts nocmp = { .row_size = 16 };
	struct hp_merge_opts norow = { .cmp = key_cmp };
	struct hp_merge_input nonext[1] = { { NULL, NULL } };
	hp_merge *m = (hp_merge *)(uintptr_t)1;
	const void *rows;

	(void)state;
	assert_int_equal(hp_merge_open(in, 0, &o, &m), -EINVAL);
	assert_null(m);
	assert_int_equal(hp_merge_open(in, 65537, &o, &m), -EINVAL);
	assert_int_equal(hp_merge_open(NULL, 1, &o, &m), -EINVAL);
	assert_int_equal(hp_merge_open(in, 1, NULL, &m), -EINVAL);
	assert_int_equal(hp_merge_open(in, 1, &nocmp, &m), -EINVAL);
	assert_int_equal(hp_merge_open(in, 1, &norow, &m), -EINVAL);
	assert_int_equal(hp_merge_open(nonext, 1, &o, &m), -EINVAL);
	assert_int_equal(hp_merge_open(in, 1, &o, NULL), -EINVAL);
	assert_int_equal(hp_merge_next(NULL, &rows), -EINVAL);
	hp_merge_close(NULL);
	hp_merge_cancel(NULL);
	for (unsigned threads = 0; threads <= 1; threads++) {
		o.max_threads = threads;
		assert_int_equal(hp_merge_open(in, 4, &o, &m), 0);
		assert_int_equal(hp_merge_next(m, &rows), -EINVAL);
		assert_int_equal(hp_merge_next(m, &rows), -EINVAL);
		hp_merge_close(m);
	}
	o.batch_rows = SIZE_MAX / 2;
	assert_int_equal(hp_merge_open(in, 1, &o, &m), -EINVAL);
}

/* lock guards go (cond signals it); m is set before the thread starts */
struct canceller {
	hp_merge *m;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool go;
};

static void *cancel_main(void *arg)
{
	struct canceller *c = arg;

	pthread_mutex_lock(&c->lock);
	while (!c->go)
		pthread_cond_wait(&c->cond, &c->lock);
	pthread_mutex_unlock(&c->lock);
	hp_merge_cancel(c->m);
	return NULL;
}

/*
 * Cancel from another thread once the first batch arrived: later calls give -ECANCELED (the
 * inputs are slow, so the consumer is often asleep waiting for a worker when it comes).
 */
static void test_cancel(void **state)
{
	(void)state;
	for (unsigned threads = 0; threads <= 1; threads++) {
		struct dataset d;
		struct srcset ss;
		struct hp_merge_opts o = {
			.row_size = sizeof(struct row16),
			.cmp = key_cmp,
			.max_threads = threads,
			.batch_rows = 64,
		};
		struct canceller c = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };
		pthread_t th;
		long n;
		size_t got = 0;
		const void *rows;

		ds_make(&d, 16, sizeof(struct row16), SZ_UNIFORM, K_RANDOM, 5000, 1u << 30, 19);
		srcs_make(&ss, &d, 8, 20);
		for (unsigned i = 0; i < d.k; i++)
			ss.s[i].delay_us = 200;
		assert_int_equal(hp_merge_open(ss.in, d.k, &o, &c.m), 0);
		assert_int_equal(pthread_create(&th, NULL, cancel_main, &c), 0);
		while ((n = hp_merge_next(c.m, &rows)) > 0) {
			if (!got) {
				pthread_mutex_lock(&c.lock);
				c.go = true;
				pthread_cond_signal(&c.cond);
				pthread_mutex_unlock(&c.lock);
			}
			got += (size_t)n;
		}
		assert_int_equal(n, -ECANCELED);
		assert_true(got > 0 && got < d.total);
		assert_int_equal(hp_merge_next(c.m, &rows), -ECANCELED);
		pthread_join(th, NULL);
		hp_merge_close(c.m);
		assert_int_equal(atomic_load(&ss.violations), 0);
		srcs_free(&ss, d.k);
		ds_free(&d);
	}
}

/* cancel before the first call; cancel after the end (the end stays); close mid-merge */
static void test_cancel_and_close(void **state)
{
	struct dataset d;

	(void)state;
	ds_make(&d, 32, sizeof(struct row16), SZ_UNIFORM, K_RANDOM, 4000, 1u << 30, 21);
	for (unsigned threads = 0; threads <= 1; threads++) {
		struct hp_merge_opts o = { .row_size = 16, .cmp = key_cmp, .max_threads = threads };
		struct srcset ss;
		hp_merge *m;
		const void *rows;
		long n;

		/* cancelled before it started */
		srcs_make(&ss, &d, 0, 22);
		assert_int_equal(hp_merge_open(ss.in, d.k, &o, &m), 0);
		hp_merge_cancel(m);
		assert_int_equal(hp_merge_next(m, &rows), -ECANCELED);
		hp_merge_close(m);
		srcs_free(&ss, d.k);

		/* closed right after open, tasks in flight */
		srcs_make(&ss, &d, 0, 23);
		assert_int_equal(hp_merge_open(ss.in, d.k, &o, &m), 0);
		hp_merge_close(m);
		assert_int_equal(atomic_load(&ss.violations), 0);
		srcs_free(&ss, d.k);

		/* closed after one batch, cancelled or not */
		for (int cancel = 0; cancel <= 1; cancel++) {
			srcs_make(&ss, &d, 0, 24);
			assert_int_equal(hp_merge_open(ss.in, d.k, &o, &m), 0);
			assert_true(hp_merge_next(m, &rows) > 0);
			if (cancel)
				hp_merge_cancel(m);
			hp_merge_close(m);
			assert_int_equal(atomic_load(&ss.violations), 0);
			srcs_free(&ss, d.k);
		}

		/* cancel after completion: the merge stays complete */
		srcs_make(&ss, &d, 0, 25);
		assert_int_equal(hp_merge_open(ss.in, d.k, &o, &m), 0);
		while ((n = hp_merge_next(m, &rows)) > 0)
			;
		assert_int_equal(n, 0);
		hp_merge_cancel(m);
		assert_int_equal(hp_merge_next(m, &rows), 0);
		hp_merge_close(m);
		srcs_free(&ss, d.k);
	}
	ds_free(&d);
}

/* --- concurrency ----------------------------------------------------------------------------- */

/* one merge on its own thread: written by it, read by the main thread after pthread_join */
struct job {
	struct dataset d;
	bool combine;
	unsigned threads;
	int bad;
	char why[160];
};

static void *job_main(void *arg)
{
	struct job *j = arg;

	j->bad = check_one(&j->d, j->combine, j->threads, 0, 0, j->d.k, j->why, sizeof(j->why));
	return NULL;
}

static void test_concurrent(void **state)
{
	struct job jobs[8];
	pthread_t th[8];

	(void)state;
	for (unsigned i = 0; i < 8; i++) {
		ds_make(&jobs[i].d, 8 + 8 * i, sizeof(struct row16), SZ_UNIFORM, K_RANDOM, 600, i % 2 ? 50 : 1u << 20,
			500 + i);
		jobs[i].combine = i % 2;
		jobs[i].threads = i == 7 ? 1 : 0;
	}
	for (unsigned i = 0; i < 8; i++)
		assert_int_equal(pthread_create(&th[i], NULL, job_main, &jobs[i]), 0);
	for (unsigned i = 0; i < 8; i++) {
		pthread_join(th[i], NULL);
		if (jobs[i].bad)
			fail_msg("merge %u of 8 (k=%u): %s", i, jobs[i].d.k, jobs[i].why);
		ds_free(&jobs[i].d);
	}
}

/* the blocking merge of test_busy_pool: same protocol as struct job */
struct blocker {
	struct dataset d;
	struct srcset ss;
	struct hp_merge_opts o;
	struct result res;
	int r;
};

static void *blocker_main(void *arg)
{
	struct blocker *b = arg;

	b->r = run_merge(b->ss.in, b->d.k, &b->o, &b->res);
	return NULL;
}

/*
 * Every worker of the pool sits in an input of another merge, blocked on a gate: a merge
 * started now must still complete. The blocker uses one slot (max_threads 2) and splits its 64
 * inputs into several groups, so the workers are all stuck in its tasks while slots remain:
 * the new merge goes parallel, its tasks wait in the run queue behind the blocker's, and its
 * consumer runs them itself. A second merge with max_threads 1 and one with 3 follow.
 */
static void test_busy_pool(void **state)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	struct gate g = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };
	struct blocker b;
	pthread_t th;
	struct dataset d;
	struct timespec until;
	uint8_t *ref;
	size_t nref;

	(void)state;
	ds_make(&b.d, 64, sizeof(struct row16), SZ_UNIFORM, K_RANDOM, 100, 1u << 20, 600);
	srcs_make(&b.ss, &b.d, 0, 610);
	for (unsigned j = 0; j < b.d.k; j++)
		b.ss.s[j].gate = &g;
	b.o = (struct hp_merge_opts){ .row_size = 16, .cmp = key_cmp, .max_threads = 2 };
	assert_int_equal(pthread_create(&th, NULL, blocker_main, &b), 0);
	/* wait until the workers are stuck in the gate (or 5 s passed) */
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 5;
	pthread_mutex_lock(&g.lock);
	while (g.blocked < (unsigned)cpus)
		if (pthread_cond_timedwait(&g.cond, &g.lock, &until))
			break;
	if (g.blocked < (unsigned)cpus)
		print_message("busy pool: %u threads blocked in inputs, wanted %ld\n", g.blocked, cpus);
	pthread_mutex_unlock(&g.lock);

	ds_make(&d, 48, sizeof(struct row16), SZ_UNIFORM, K_RANDOM, 400, 1000, 620);
	CHECK(&d, true, 0, 0, 0, 621);
	CHECK(&d, false, 0, 0, 0, 622);
	CHECK(&d, true, 1, 0, 0, 623);
	CHECK(&d, false, 3, 0, 0, 624);
	ds_free(&d);

	pthread_mutex_lock(&g.lock);
	g.open = true;
	pthread_cond_broadcast(&g.cond);
	pthread_mutex_unlock(&g.lock);
	pthread_join(th, NULL);
	assert_int_equal(b.r, 0);
	assert_int_equal(b.res.status, 0);
	nref = reference(&b.d, false, &ref);
	assert_int_equal(b.res.n, nref);
	assert_memory_equal(b.res.rows, ref, nref * 16);
	assert_int_equal(atomic_load(&b.ss.violations), 0);
	free(ref);
	free(b.res.rows);
	srcs_free(&b.ss, b.d.k);
	ds_free(&b.d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_k_values),
		cmocka_unit_test(test_skewed),
		cmocka_unit_test(test_duplicates),
		cmocka_unit_test(test_equal_keys),
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_runs),
		cmocka_unit_test(test_input_fails),
		cmocka_unit_test(test_bad_args),
		cmocka_unit_test(test_cancel),
		cmocka_unit_test(test_cancel_and_close),
		cmocka_unit_test(test_concurrent),
		cmocka_unit_test(test_busy_pool),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
