/* SPDX-License-Identifier: MIT */
/*
 * bench_merge.c - "Merging sorted result streams": hp_merge against the seed's serial design.
 * k = 8, 32, 64 inputs x 75,000 rows of {u64 key, u64 value} (Druid's numServers x
 * rowsPerSegment), keys random and sorted per input; no combine (keys from 2^40) and combine
 * (keys from 75,000: each about k times, values summed); array cursors with 4,096-row batches.
 * In the same run, best of 3: a binary-heap merge one row at a time (the seed's serial
 * MergeSequence design, same callbacks), hp_merge with max_threads 1 and with 0. Prints input
 * rows/s (and the process's CPU time: all threads), parallel/heap, serial/heap, parallel/serial;
 * checks each output against the heap's (rows, checksum); counts comparator calls per row.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "benchutil.h"
#include "hugepool.h"

#define ROWS_PER_INPUT 75000
#define INPUT_BATCH 4096
#define OUT_BATCH 4096
#define KEYS_PLAIN (UINT64_C(1) << 40)
#define KEYS_COMBINE 75000

struct row {
	uint64_t key, value;
};

struct cursor {
	const struct row *rows;
	size_t n, pos;
};

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static int row_cmp(const void *a, const void *b, void *ud)
{
	const struct row *x = a, *y = b;

	(void)ud;
	return x->key < y->key ? -1 : x->key > y->key;
}

/* the same ordering, counting its calls in *ud (an untimed pass: the count is atomic) */
static int row_cmp_counted(const void *a, const void *b, void *ud)
{
	atomic_fetch_add_explicit((atomic_ulong *)ud, 1, memory_order_relaxed);
	return row_cmp(a, b, NULL);
}

static void row_combine(void *acc, const void *row, void *ud)
{
	(void)ud;
	((struct row *)acc)->value += ((const struct row *)row)->value;
}

static int key_sort(const void *a, const void *b)
{
	return row_cmp(a, b, NULL);
}

/* the input callback: batches of INPUT_BATCH rows straight from the array */
static long cursor_next(void *ctx, const void **ret_rows)
{
	struct cursor *c = ctx;
	size_t n = c->n - c->pos;

	if (!n)
		return 0;
	if (n > INPUT_BATCH)
		n = INPUT_BATCH;
	*ret_rows = c->rows + c->pos;
	c->pos += n;
	return (long)n;
}

struct outcome {
	uint64_t rows, sum; /* output rows and the sum of key ^ value over them */
};

static void consume(struct outcome *o, const struct row *rows, size_t n)
{
	for (size_t i = 0; i < n; i++)
		o->sum += rows[i].key ^ rows[i].value;
	o->rows += n;
}

/* --- the baseline: a binary heap of cursors, one row at a time ---------------------------- */

struct hcur {
	const struct hp_merge_input *in;
	const struct row *p, *end;
};

static int hcur_fill(struct hcur *h)
{
	const void *rows;
	long n = h->in->next(h->in->ctx, &rows);

	if (n <= 0)
		return (int)n;
	h->p = rows;
	h->end = h->p + n;
	return 1;
}

static void sift_down(struct hcur *heap, size_t n, size_t i, const struct hp_merge_opts *o)
{
	struct hcur x = heap[i];

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= n)
			break;
		if (c + 1 < n && o->cmp(heap[c + 1].p, heap[c].p, o->ud) < 0)
			c++;
		if (o->cmp(heap[c].p, x.p, o->ud) >= 0)
			break;
		heap[i] = heap[c];
		i = c;
	}
	heap[i] = x;
}

static int heap_merge(const struct hp_merge_input *in, unsigned k, const struct hp_merge_opts *o,
		      struct outcome *out)
{
	struct hcur *heap = calloc(k, sizeof(*heap));
	struct row *buf = malloc(OUT_BATCH * sizeof(*buf));
	size_t n = 0, nb = 0;

	if (!heap || !buf) {
		free(heap);
		free(buf);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < k; i++) {
		heap[n].in = &in[i];
		if (hcur_fill(&heap[n]) > 0)
			n++;
	}
	for (size_t i = n / 2; i-- > 0;)
		sift_down(heap, n, i, o);
	while (n) {
		const struct row *r = heap[0].p;

		if (o->combine && nb && o->cmp(&buf[nb - 1], r, o->ud) == 0) {
			o->combine(&buf[nb - 1], r, o->ud);
		} else {
			if (nb == OUT_BATCH) {
				consume(out, buf, nb);
				nb = 0;
			}
			buf[nb++] = *r;
		}
		if (++heap[0].p == heap[0].end && hcur_fill(&heap[0]) <= 0)
			heap[0] = heap[--n];
		if (n)
			sift_down(heap, n, 0, o);
	}
	consume(out, buf, nb);
	free(heap);
	free(buf);
	return 0;
}

static int ours(const struct hp_merge_input *in, unsigned k, const struct hp_merge_opts *o, struct outcome *out)
{
	hp_merge *m;
	const void *rows;
	long n;
	int r = hp_merge_open(in, k, o, &m);

	if (r < 0)
		return r;
	while ((n = hp_merge_next(m, &rows)) > 0)
		consume(out, rows, (size_t)n);
	hp_merge_close(m);
	return (int)n;
}

/* --- the runs --------------------------------------------------------------------------------- */

enum method { M_HEAP, M_SERIAL, M_PARALLEL, M_N };
static const char *const method_name[M_N] = { "binary heap (baseline)", "hp_merge serial", "hp_merge parallel" };

/* CPU time of the whole process (every thread, the pool's workers too) */
static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static double mrows(uint64_t rows, uint64_t ns)
{
	return ns ? (double)rows * 1e3 / (double)ns : 0;
}

static void run_case(unsigned k, bool combine)
{
	struct row **data = calloc(k, sizeof(*data));
	struct cursor *cur = calloc(k, sizeof(*cur));
	struct hp_merge_input *in = calloc(k, sizeof(*in));
	struct bench_series s[M_N] = { 0 };
	struct outcome first[M_N] = { 0 };
	uint64_t seed = k * 2 + combine, total = (uint64_t)k * ROWS_PER_INPUT, best[M_N], cpu[M_N] = { 0 };
	bool ok = true;
	char buf[64];

	if (!data || !cur || !in) {
		bench_note("out of memory");
		goto out;
	}
	for (unsigned i = 0; i < k; i++) {
		data[i] = malloc(ROWS_PER_INPUT * sizeof(struct row));
		if (!data[i]) {
			bench_note("out of memory");
			goto out;
		}
		for (size_t j = 0; j < ROWS_PER_INPUT; j++) {
			data[i][j].key = rng_next(&seed) % (combine ? KEYS_COMBINE : KEYS_PLAIN);
			data[i][j].value = rng_next(&seed) % 1000;
		}
		qsort(data[i], ROWS_PER_INPUT, sizeof(struct row), key_sort);
		in[i] = (struct hp_merge_input){ cursor_next, &cur[i] };
	}
	bench_title("k = %u inputs x %d rows, %s", k, ROWS_PER_INPUT,
		    combine ? "combine (keys from 75,000: each about k times, values summed)" : "no combine");
	/* rotate the order of the methods from one round to the next */
	for (unsigned rep = 0; rep < BENCH_REPS; rep++) {
		for (unsigned j = 0; j < M_N; j++) {
			enum method meth = (enum method)((rep + j) % M_N);
			struct hp_merge_opts o = {
				.row_size = sizeof(struct row),
				.cmp = row_cmp,
				.combine = combine ? row_combine : NULL,
				.max_threads = meth == M_SERIAL ? 1 : 0,
				.batch_rows = OUT_BATCH,
			};
			struct outcome res = { 0, 0 };
			uint64_t t0, t1, c0, c1;
			int r;

			for (unsigned i = 0; i < k; i++)
				cur[i] = (struct cursor){ data[i], ROWS_PER_INPUT, 0 };
			c0 = cpu_ns();
			t0 = bench_now_ns();
			r = meth == M_HEAP ? heap_merge(in, k, &o, &res) : ours(in, k, &o, &res);
			t1 = bench_now_ns();
			c1 = cpu_ns();
			if (r < 0) {
				bench_note("%s failed: %d", method_name[meth], r);
				ok = false;
				continue;
			}
			if (!s[meth].n || t1 - t0 < bench_series_best(&s[meth]))
				cpu[meth] = c1 - c0;
			bench_series_add(&s[meth], t1 - t0);
			if (!rep)
				first[meth] = res;
			else if (res.rows != first[meth].rows || res.sum != first[meth].sum)
				ok = false;
		}
	}
	for (unsigned j = 1; j < M_N; j++)
		if (first[j].rows != first[M_HEAP].rows || first[j].sum != first[M_HEAP].sum) {
			bench_note("MISMATCH: %s gave %" PRIu64 " rows (sum %" PRIu64 "), the heap %" PRIu64
				   " (sum %" PRIu64 ")",
				   method_name[j], first[j].rows, first[j].sum, first[M_HEAP].rows, first[M_HEAP].sum);
			ok = false;
		}
	for (unsigned j = 0; j < M_N; j++) {
		best[j] = bench_series_best(&s[j]);
		printf("   %-24s %8.2f Mrows/s  %7.1f ms, %7.1f ms CPU  (runs: %s ms)\n", method_name[j],
		       mrows(total, best[j]), (double)best[j] / 1e6, (double)cpu[j] / 1e6,
		       bench_series_str(&s[j], true, buf, sizeof(buf)));
	}
	if (best[M_HEAP] && best[M_SERIAL] && best[M_PARALLEL])
		printf("   ratios: parallel/heap %.2fx, serial/heap %.2fx, parallel/serial %.2fx   (%" PRIu64
		       " rows out%s)\n",
		       (double)best[M_HEAP] / (double)best[M_PARALLEL], (double)best[M_HEAP] / (double)best[M_SERIAL],
		       (double)best[M_SERIAL] / (double)best[M_PARALLEL], first[M_HEAP].rows,
		       ok ? ", outputs identical" : ", OUTPUTS DIFFER");
	/* one untimed pass per method with a counting comparator */
	printf("   comparisons per input row:");
	for (unsigned j = 0; j < M_N; j++) {
		atomic_ulong calls;
		struct hp_merge_opts o = {
			.row_size = sizeof(struct row),
			.cmp = row_cmp_counted,
			.combine = combine ? row_combine : NULL,
			.ud = &calls,
			.max_threads = j == M_SERIAL ? 1 : 0,
			.batch_rows = OUT_BATCH,
		};
		struct outcome res = { 0, 0 };
		int r;

		atomic_init(&calls, 0);
		for (unsigned i = 0; i < k; i++)
			cur[i] = (struct cursor){ data[i], ROWS_PER_INPUT, 0 };
		r = j == M_HEAP ? heap_merge(in, k, &o, &res) : ours(in, k, &o, &res);
		printf("%s %s %.2f", j ? "," : "", j == M_HEAP ? "heap" : j == M_SERIAL ? "serial" : "parallel",
		       r < 0 ? -1.0 : (double)atomic_load(&calls) / (double)total);
	}
	printf("\n");
	fflush(stdout);
out:
	for (unsigned i = 0; data && i < k; i++)
		free(data[i]);
	free(data);
	free(cur);
	free(in);
}

int main(void)
{
	static const unsigned ks[] = { 8, 32, 64 };

	char load[64] = "?";
	FILE *f = fopen("/proc/loadavg", "r");

	if (f) {
		char *sp;

		if (!fgets(load, sizeof(load), f))
			snprintf(load, sizeof(load), "?");
		/* keep the three averages */
		sp = strchr(load, ' ');
		if (sp && (sp = strchr(sp + 1, ' ')) && (sp = strchr(sp + 1, ' ')))
			*sp = '\0';
		fclose(f);
	}
	printf("bench_merge: merge k sorted inputs of %d rows of 16 bytes (u64 key, u64 value), best of %d;\n"
	       "rows/s counts input rows; the pool has one worker per online CPU (%u here), the final merge\n"
	       "runs on the calling thread; load average at start: %s (parallel figures need idle cores)\n",
	       ROWS_PER_INPUT, BENCH_REPS, bench_cpus(), load);
	for (int combine = 0; combine <= 1; combine++)
		for (size_t i = 0; i < sizeof(ks) / sizeof(ks[0]); i++)
			run_case(ks[i], combine);
	return 0;
}
